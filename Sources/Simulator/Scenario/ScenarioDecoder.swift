import PathMonitor
import Yams

/// The fields of one YAML mapping being read: remembers which keys were used, so that the rest
/// can be reported as unknown (with a suggestion).
struct Fields {
    let node: Node
    let context: String
    let pairs: [(key: String, keyNode: Node, value: Node)]
    private(set) var used: Set<String> = []

    init(node: Node, context: String, pairs: [(key: String, keyNode: Node, value: Node)]) {
        self.node = node
        self.context = context
        self.pairs = pairs
    }

    mutating func take(_ key: String) -> Node? {
        used.insert(key)
        return pairs.first { $0.key == key }?.value
    }

    func has(_ key: String) -> Bool { pairs.contains { $0.key == key } }

    func keyNode(_ key: String) -> Node? { pairs.first { $0.key == key }?.keyNode }
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

    /// Where relative paths in the scenario (traces) start.
    let baseDirectory: String

    init(_ diagnostics: DiagnosticCollector, baseDirectory: String = ".") {
        self.diagnostics = diagnostics
        self.baseDirectory = baseDirectory
    }

    func error(_ message: String, at node: Node) {
        diagnostics.error(message, line: node.line, column: node.column)
    }

    // MARK: - Structure

    /// The mapping at `node`, or nil after reporting that it is something else.
    func fields(_ node: Node, _ context: String) -> Fields? {
        guard case .mapping(let mapping) = node else {
            if case .scalar(let scalar) = node, scalar.string.isEmpty || scalar.tag == .init(.null) {
                return Fields(node: node, context: context, pairs: [])
            }
            error("\(context) must be a mapping of keys to values, not \(node.kindName)", at: node)
            return nil
        }
        var pairs: [(String, Node, Node)] = []
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
        for (key, keyNode, _) in fields.pairs where !fields.used.contains(key) {
            var message = "unknown key '\(key)' in \(fields.context)"
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
        if case .scalar(let scalar) = node, scalar.tag == .init(.null) || scalar.string.isEmpty { return [] }
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
        let valid = !text.isEmpty && text.count <= maxLength && text.first!.isLetter
            && text.allSatisfy { ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") && $0.isASCII }
        if !valid {
            error("\(what) '\(text)' must start with a letter and use only letters, digits, '-' and '_', at most \(maxLength) characters", at: node)
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
            error("\(what) must be true or false, not '\(text)'", at: node)
            return nil
        }
    }

    func integer(_ node: Node, _ what: String, range: ClosedRange<Int>) -> Int? {
        guard let text = string(node, what) else { return nil }
        guard let value = Int(text) else {
            error("\(what) must be a whole number, not '\(text)'", at: node)
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
        guard let text = string(node, what) else { return nil }
        switch parse(text) {
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

    func duration(_ node: Node, _ what: String, allowZero: Bool = true) -> Duration? {
        measured(node, what, Units.duration) { value, text in
            value < .zero || (!allowZero && value == .zero) ? "must be \(allowZero ? "zero or more" : "more than zero"), not \(text)" : nil
        }
    }

    func fraction(_ node: Node, _ what: String) -> Double? {
        measured(node, what, Units.percentage) { value, text in
            (0...1).contains(value) ? nil : "must be between 0% and 100%, not \(text)"
        }
    }

    func rate(_ node: Node, _ what: String) -> Rate? {
        measured(node, what, Units.rate) { value, text in
            value.bitsPerSecond >= 8 ? nil : "must be at least 8bit, not \(text)"
        }
    }

    func size(_ node: Node, _ what: String) -> Int64? {
        measured(node, what, Units.size) { value, text in
            value > 0 ? nil : "must be more than zero, not \(text)"
        }
    }

    func choice<T: RawRepresentable & CaseIterable>(_ node: Node, _ what: String, _ type: T.Type) -> T? where T.RawValue == String {
        guard let text = string(node, what) else { return nil }
        if let value = T(rawValue: text) { return value }
        let names = T.allCases.map(\.rawValue)
        let guess = suggestion(for: text, among: names).map { " (did you mean '\($0)'?)" } ?? ""
        error("\(what) must be one of \(names.joined(separator: ", ")), not '\(text)'\(guess)", at: node)
        return nil
    }
}
