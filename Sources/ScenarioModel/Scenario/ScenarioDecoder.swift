import Glibc
import RoamCore
import RoamSystem
import Yams

/// The fields of one YAML mapping being read: remembers which keys were used, so that the rest
/// can be reported as unknown (with a suggestion).
struct Fields {
    let node: Node
    let context: String
    let pairs: [(key: String, keyNode: Node, value: Node)]
    /// For a large mapping (the nodes of a big scenario), the position of each key; small ones
    /// are searched, which is faster than hashing for a handful of keys.
    private let index: [String: Int]?
    /// The keys alone: searching them copies no nodes.
    private let keys: [String]
    private var taken: [Bool]

    init(node: Node, context: String, pairs: [(key: String, keyNode: Node, value: Node)]) {
        self.node = node
        self.context = context
        self.pairs = pairs
        self.keys = pairs.map(\.key)
        self.taken = Array(repeating: false, count: pairs.count)
        if pairs.count > 16 {
            var index: [String: Int] = [:]
            for (position, pair) in pairs.enumerated() where index[pair.key] == nil { index[pair.key] = position }
            self.index = index
        } else {
            self.index = nil
        }
    }

    /// The same fields, with the keys taken so far, under another name in messages.
    init(_ other: Fields, context: String) {
        self.init(node: other.node, context: context, pairs: other.pairs, index: other.index, keys: other.keys, taken: other.taken)
    }

    private init(node: Node, context: String, pairs: [(key: String, keyNode: Node, value: Node)], index: [String: Int]?, keys: [String],
                 taken: [Bool]) {
        self.node = node
        self.context = context
        self.pairs = pairs
        self.index = index
        self.keys = keys
        self.taken = taken
    }

    private func position(_ key: String) -> Int? {
        if let index { return index[key] }
        return keys.firstIndex(of: key)
    }

    mutating func take(_ key: String) -> Node? {
        guard let position = position(key) else { return nil }
        taken[position] = true
        return pairs[position].value
    }

    func has(_ key: String) -> Bool { position(key) != nil }

    func keyNode(_ key: String) -> Node? { position(key).map { pairs[$0].keyNode } }

    /// The pairs no `take` asked for.
    var untaken: [(key: String, keyNode: Node, value: Node)] { pairs.indices.filter { !taken[$0] }.map { pairs[$0] } }
}

extension Node.Scalar {
    /// Empty, or YAML's null (`~`, `null`) written plain. The reader composes with Yams's basic
    /// resolver, which resolves no tags (every value is read as text here, and resolving tags by
    /// regular expression for every key made validation of large files slow), so null is
    /// recognised here.
    var isNull: Bool {
        string.isEmpty || (style == .plain && ["~", "null", "Null", "NULL"].contains(string))
    }
}

extension Node {
    var line: Int { mark?.line ?? 0 }
    var column: Int { mark?.column ?? 0 }
    var kindName: String {
        switch self {
        case .scalar: "a single value"
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .alias: "an alias"
        }
    }
}

/// Turns a composed YAML tree into a ``Scenario``, reporting problems to a collector.
final class ScenarioDecoder {
    let diagnostics: DiagnosticCollector
    /// Names declared in the file, valid or not, so that a reference to a broken definition is
    /// not reported a second time.
    var declaredWorkloads: Set<String> = []
    /// Profiles the file defines (`profiles:`), looked up before the built-in ones.
    var definedProfiles: [LinkProfile] = []
    /// The same by name, for links that name them.
    var definedProfileIndex: [String: LinkProfile] = [:]

    /// Where relative paths in the scenario (traces) start.
    let baseDirectory: String
    /// The owner of the scenario file, when it was read from one: a trace it names is read
    /// only if that user owns it too, unless it is the caller's own scenario.
    let scenarioOwner: uid_t?
    /// Where each node and link is defined, for problems found once all are read.
    var nodePlaces: [String: Node] = [:]
    var linkPlaces: [String: Node] = [:]
    /// The nodes a `match:` may name as a server, where they are not the ones read (a live change).
    var knownNodes: Set<String>?
    /// The scenario's proxies, for the timeline's `proxy:` events, and those events as read.
    var declaredProxies: [String: ProxySpec] = [:]
    var proxyEvents: [ProxyEvent] = []
    /// Traces read so far, by the path the scenario gives.
    var traces: [String: Result<DeliveryTrace, TraceReadError>] = [:]

    init(_ diagnostics: DiagnosticCollector, baseDirectory: String = ".", scenarioOwner: uid_t? = nil) {
        self.diagnostics = diagnostics
        self.baseDirectory = baseDirectory
        self.scenarioOwner = scenarioOwner
    }

    func error(_ message: String, at node: Node) {
        diagnostics.error(message, line: node.line, column: node.column)
    }

    // MARK: - Structure

    /// The mapping at `node`, or nil after reporting that it is something else.
    func fields(_ node: Node, _ context: String) -> Fields? {
        guard case .mapping(let mapping) = node else {
            if case .scalar(let scalar) = node, scalar.isNull {
                return Fields(node: node, context: context, pairs: [])
            }
            error("\(context) must be a mapping of keys to values, not \(node.kindName)", at: node)
            return nil
        }
        var pairs: [(String, Node, Node)] = []
        pairs.reserveCapacity(mapping.count)
        for (key, value) in mapping {
            guard case .scalar(let scalar) = key else {
                error("keys in \(context) must be plain words", at: key)
                continue
            }
            pairs.append((scalar.string, key, value))
        }
        return Fields(node: node, context: context, pairs: pairs)
    }

    /// Reports the keys of `fields` that were not read, suggesting the closest known one.
    func finish(_ fields: Fields, known: [String]) {
        for (key, keyNode, _) in fields.untaken {
            // Past the diagnostics kept, only the count matters: no suggestion is worked out.
            if diagnostics.isFull {
                error("", at: keyNode)
                continue
            }
            var message = "unknown key '\(escapedForMessage(key))' in \(fields.context)"
            if let guess = suggestion(for: key, among: known) {
                message += " (did you mean '\(guess)'?)"
            } else {
                message += "; known keys: \(known.joined(separator: ", "))"
            }
            error(message, at: keyNode)
        }
    }

    func list(_ node: Node, _ context: String) -> [Node]? {
        if case .sequence(let sequence) = node { return Array(sequence) }
        if case .scalar(let scalar) = node, scalar.isNull { return [] }
        error("\(context) must be a list (lines starting with '- '), not \(node.kindName)", at: node)
        return nil
    }

    // MARK: - Scalars

    func string(_ node: Node, _ what: String) -> String? {
        guard case .scalar(let scalar) = node else {
            error("\(what) must be \(Node.scalar(.init("")).kindName), not \(node.kindName)", at: node)
            return nil
        }
        return scalar.string
    }

    func identifier(_ node: Node, _ what: String, maxLength: Int) -> String? {
        guard let text = string(node, what) else { return nil }
        guard isIdentifier(text, maxLength: maxLength) else {
            error("\(what) '\(escapedForMessage(text))' must start with a letter and use only letters, digits, '-' and '_', at most \(maxLength) characters", at: node)
            return nil
        }
        return text
    }

    func bool(_ node: Node, _ what: String) -> Bool? {
        guard let text = string(node, what) else { return nil }
        switch text.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default:
            error("\(what) must be true or false, not '\(escapedForMessage(text))'", at: node)
            return nil
        }
    }

    func integer(_ node: Node, _ what: String, range: ClosedRange<Int>) -> Int? {
        guard let text = string(node, what) else { return nil }
        guard let value = Int(text) else {
            // Digits that do not fit in an Int are a whole number out of range, not a typo.
            let digits = text.first == "-" || text.first == "+" ? text.dropFirst() : Substring(text)
            if !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) {
                error("\(what) must be between \(range.lowerBound) and \(range.upperBound), not \(escapedForMessage(text))", at: node)
            } else {
                error("\(what) must be a whole number, not '\(escapedForMessage(text))'", at: node)
            }
            return nil
        }
        guard range.contains(value) else {
            error("\(what) must be between \(range.lowerBound) and \(range.upperBound), not \(value)", at: node)
            return nil
        }
        return value
    }

    /// Reads a value in a unit with `parse`, then checks it with `check`, which returns the
    /// problem with an acceptable value (given the text as written), or nil.
    private func measured<T>(_ node: Node, _ what: String, _ parse: (String) -> Result<T, UnitError>,
                             check: (T, String) -> String?) -> T? {
        guard let raw = string(node, what) else { return nil }
        let text = escapedForMessage(raw)
        switch parse(raw) {
        case .failure(let problem):
            error("\(what): \(problem.message)", at: node)
            return nil
        case .success(let value):
            if let problem = check(value, text) {
                error("\(what) \(problem)", at: node)
                return nil
            }
            return value
        }
    }

    /// A duration of at least zero (more than zero unless `allowZero`), at least `minimum` and
    /// at most `maximum`.
    func duration(_ node: Node, _ what: String, allowZero: Bool = true, minimum: Duration? = nil,
                  maximum: Duration = ScenarioLimits.maximumDuration) -> Duration? {
        measured(node, what, Units.duration) { value, text in
            if value < .zero || (!allowZero && value == .zero) { return "must be \(allowZero ? "zero or more" : "more than zero"), not \(text)" }
            if let minimum, value < minimum { return "must be at least \(minimum.roamDescription), not \(text)" }
            if value > maximum { return "must be at most \(maximum.roamDescription), not \(text)" }
            return nil
        }
    }

    func fraction(_ node: Node, _ what: String) -> Double? {
        measured(node, what, Units.percentage) { value, text in
            (0...1).contains(value) ? nil : "must be between 0% and 100%, not \(text)"
        }
    }

    func rate(_ node: Node, _ what: String) -> Rate? {
        measured(node, what, Units.rate) { value, text in
            (ScenarioLimits.minimumRate...ScenarioLimits.maximumRate).contains(value)
                ? nil : "must be between \(ScenarioLimits.minimumRate) and \(ScenarioLimits.maximumRate), not \(text)"
        }
    }

    func size(_ node: Node, _ what: String, range: ClosedRange<Int64> = 1...ScenarioLimits.maximumSize) -> Int64? {
        measured(node, what, Units.size) { value, text in
            range.contains(value) ? nil : "must be between \(sizeDescription(range.lowerBound)) and \(sizeDescription(range.upperBound)), not \(text)"
        }
    }

    func choice<T: RawRepresentable & CaseIterable>(_ node: Node, _ what: String, _ type: T.Type) -> T? where T.RawValue == String {
        guard let text = string(node, what) else { return nil }
        if let value = T(rawValue: text) { return value }
        let names = T.allCases.map(\.rawValue)
        let guess = suggestion(for: text, among: names).map { " (did you mean '\($0)'?)" } ?? ""
        error("\(what) must be one of \(names.joined(separator: ", ")), not '\(escapedForMessage(text))'\(guess)", at: node)
        return nil
    }
}

/// Whether `text` is a name Roam accepts for a scenario, node, link, workload or profile: an
/// ASCII letter, then ASCII letters, digits, `-` and `_`, at most `maxLength` characters. Such
/// a name is safe as a path component and as part of an interface or namespace name.
func isIdentifier(_ text: String, maxLength: Int) -> Bool {
    func isLetter(_ scalar: Unicode.Scalar) -> Bool { ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) }
    guard let first = text.unicodeScalars.first, isLetter(first), text.unicodeScalars.count <= maxLength else { return false }
    return text.unicodeScalars.allSatisfy { isLetter($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" }
}

/// `1tib`, `64mib`, `16b`: a size as the scenario format writes it.
func sizeDescription(_ bytes: Int64) -> String {
    for (unit, scale) in [("tib", Int64(1) << 40), ("gib", Int64(1) << 30), ("mib", Int64(1) << 20), ("kib", Int64(1) << 10)]
    where bytes >= scale && bytes % scale == 0 {
        return "\(bytes / scale)\(unit)"
    }
    return "\(bytes)b"
}
