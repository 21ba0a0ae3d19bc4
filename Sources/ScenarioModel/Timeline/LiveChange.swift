import RoamCore
import Yams

/// A change to a scenario's network sent while it runs (`roam run --control`): one timeline
/// event in the timeline's own vocabulary (`set`, `ramp`, `down`, `up`, `blackhole`, `flap`,
/// `profile`, `direction`; for a network, `join`, `leave`, `renumber`, `rebind`, `dns`,
/// `portal` and `node`), as a JSON object or YAML mapping, without `at` (it happens when it is
/// sent) and without `link` or `network` (the request names them).
///
/// It is read by the scenario reader's own code, so that it is refused with the same messages
/// as in a file (placed by line and column in the body), and it may not name a `trace`: a trace
/// is a file, and the run would read it with its own privileges.
public enum LiveChange {
    /// What the change acts on.
    public enum Target: Sendable, Hashable {
        case link(String)
        case network(String)
    }

    /// The most a change's text may hold.
    public static let maximumSize = 64 * 1024

    /// What reading a change gave: its events (nil when it has errors) and every diagnostic.
    public struct Outcome: Sendable {
        public var events: [TimelineEvent]?
        public var diagnostics: [ScenarioDiagnostic]
        public var errors: [ScenarioDiagnostic] { diagnostics.filter { $0.severity == .error } }

        public init(events: [TimelineEvent]?, diagnostics: [ScenarioDiagnostic]) {
            self.events = events
            self.diagnostics = diagnostics
        }
    }

    /// Reads `text` as a change to `target` of `scenario`'s network at `at` (time since time
    /// zero). `open`: the run goes on past the scenario's duration (`roam run --hold`), so a
    /// flap must say when it ends. `source` names the text in diagnostics.
    public static func read(_ text: String, target: Target, scenario: Scenario, at: Duration, open: Bool,
                            source: String = "request body") -> Outcome {
        let collector = DiagnosticCollector(file: source, source: text)
        func refused(_ message: String) -> Outcome {
            collector.error(message, line: 0, column: 0)
            return Outcome(events: nil, diagnostics: collector.diagnostics)
        }
        guard text.utf8.count <= maximumSize else {
            return refused("a change may hold at most \(maximumSize) bytes; this one holds \(text.utf8.count)")
        }
        switch target {
        case .link(let name) where !scenario.links.contains(where: { $0.name == name }):
            return refused("no link named '\(escapedForMessage(name))'; links: \(scenario.links.map(\.name).joined(separator: ", "))")
        case .network(let name) where !scenario.networks.contains(where: { $0.name == name }):
            let names = scenario.networks.map(\.name)
            return refused("no network named '\(escapedForMessage(name))'" + (names.isEmpty ? " (this scenario has none)" : "; networks: \(names.joined(separator: ", "))"))
        default: break
        }
        guard let root = ScenarioReader.compose(text, collector: collector,
                                                empty: "the change is empty; name one action, e.g. {\"down\": true} or {\"set\": {\"delay\": \"80ms\"}}") else {
            return Outcome(events: nil, diagnostics: collector.sortedDiagnostics)
        }
        guard case .mapping(let mapping) = root else {
            collector.error("a change is a JSON object (or YAML mapping) of one timeline action, not \(root.kindName)", line: root.line, column: root.column)
            return Outcome(events: nil, diagnostics: collector.sortedDiagnostics)
        }
        var pairs: [(Node, Node)] = []
        var refusedKey = false
        for (key, value) in mapping {
            switch key.scalar?.string {
            case "link", "network":
                collector.error("the request's path names the \(key.scalar?.string ?? "target"); remove \(key.scalar?.string ?? "it") from the body",
                                line: key.line, column: key.column)
                refusedKey = true
            default:
                pairs.append((key, value))
            }
        }
        if let trace = firstKey("trace", in: root) {
            collector.error("a live change cannot name a trace (a file the run would read); put the trace in the scenario's timeline",
                            line: trace.line, column: trace.column)
            refusedKey = true
        }
        guard !refusedKey else { return Outcome(events: nil, diagnostics: collector.sortedDiagnostics) }
        switch target {
        case .link(let name): pairs.append((Node("link"), Node(name)))
        case .network(let name): pairs.append((Node("network"), Node(name)))
        }
        let decoder = ScenarioDecoder(collector)
        decoder.definedProfiles = scenario.profiles
        decoder.knownNodes = Set(scenario.nodes.map(\.name))
        decoder.definedProfileIndex = Dictionary(scenario.profiles.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let events = decoder.timelineEvents(.mapping(Node.Mapping(pairs)), linkNames: Set(scenario.links.map(\.name)),
                                            networksByName: Dictionary(scenario.networks.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first }),
                                            duration: open ? nil : scenario.duration, liveAt: at)
        decoder.checkExpansion(events)
        return Outcome(events: collector.hasErrors ? nil : events.map(\.event), diagnostics: collector.sortedDiagnostics)
    }

    /// The first key named `name` anywhere in the tree at `root`.
    private static func firstKey(_ name: String, in root: Node) -> Node? {
        var pending = [root]
        while let node = pending.popLast() {
            switch node {
            case .mapping(let mapping):
                for (key, value) in mapping {
                    if key.scalar?.string == name { return key }
                    pending.append(value)
                }
            case .sequence(let sequence):
                pending.append(contentsOf: sequence)
            case .scalar, .alias:
                break
            }
        }
        return nil
    }
}
