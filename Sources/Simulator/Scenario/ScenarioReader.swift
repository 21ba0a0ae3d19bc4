import Netlink
import Yams

/// Reads scenario files: YAML syntax, keys, types, units, ranges and references, every problem
/// reported with its place in one pass.
public enum ScenarioReader {
    /// The result of reading one file: the scenario when it has no errors, and every diagnostic.
    public struct Outcome: Sendable {
        public var scenario: Scenario?
        public var diagnostics: [ScenarioDiagnostic]
        public var errors: [ScenarioDiagnostic] { diagnostics.filter { $0.severity == .error } }
    }

    /// Reads the file at `path`; `displayName` names it in diagnostics (default: `path`).
    public static func read(contentsOf path: String, displayName: String? = nil) -> Outcome {
        let name = displayName ?? path
        do throws(NetlinkError) {
            let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
            return parse(try readTextFile(atPath: path), file: name, baseDirectory: directory.isEmpty ? "/" : directory)
        } catch {
            return Outcome(scenario: nil, diagnostics: [ScenarioDiagnostic(.error, file: name, line: 0, column: 0,
                                                                           message: "cannot read the file: \(error.reason)")])
        }
    }

    /// Reads scenario text; `file` names it in diagnostics, and relative paths in it (traces)
    /// start at `baseDirectory`.
    public static func parse(_ source: String, file: String, baseDirectory: String = ".") -> Outcome {
        let collector = DiagnosticCollector(file: file, source: source)
        let root: Node?
        do {
            root = try Yams.compose(yaml: source)
        } catch let error as YamlError {
            report(error, to: collector)
            return Outcome(scenario: nil, diagnostics: collector.diagnostics)
        } catch {
            collector.error("cannot parse YAML: \(error)", line: 1, column: 1)
            return Outcome(scenario: nil, diagnostics: collector.diagnostics)
        }
        guard let root else {
            collector.error("the file is empty; a scenario needs at least name, duration and nodes", line: 1, column: 1)
            return Outcome(scenario: nil, diagnostics: collector.diagnostics)
        }
        let scenario = ScenarioDecoder(collector, baseDirectory: baseDirectory).scenario(root)
        let sorted = collector.diagnostics.enumerated().sorted { lhs, rhs in
            (lhs.element.line, lhs.element.column, lhs.offset) < (rhs.element.line, rhs.element.column, rhs.offset)
        }.map(\.element)
        return Outcome(scenario: collector.hasErrors ? nil : scenario, diagnostics: sorted)
    }

    private static func report(_ error: YamlError, to collector: DiagnosticCollector) {
        switch error {
        case let .scanner(context, problem, mark, _), let .parser(context, problem, mark, _), let .composer(context, problem, mark, _):
            let text = [context?.text, problem].compactMap { $0 }.joined(separator: " ")
            collector.error("YAML syntax: \(text)", line: mark.line, column: mark.column)
        case let .reader(problem, _, _, _):
            collector.error("YAML: \(problem)", line: 1, column: 1)
        case let .duplicatedKeysInMapping(duplicates, context):
            collector.error("duplicate key\(duplicates.count > 1 ? "s" : "") \(duplicates.map { "'\($0)'" }.joined(separator: ", ")) in one mapping",
                            line: context.mark.line, column: context.mark.column)
        default:
            collector.error("YAML: \(error)", line: 1, column: 1)
        }
    }
}
