import Glibc
import RoamCore
import RoamSystem
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

    /// Reads the file at `path`; `displayName` names it in diagnostics (default: `path`). Only
    /// a regular file of at most ``ScenarioLimits/maximumFileSize`` bytes is read.
    ///
    /// - Parameters:
    ///   - path: The scenario file; a trace it names is read relative to its directory, and
    ///     only if the file's owner owns it too (or it is the caller's).
    ///   - displayName: How diagnostics name the file.
    /// - Returns: The scenario when it has no errors, and every diagnostic with its line and
    ///   column; a file that cannot be read is one error.
    public static func read(contentsOf path: String, displayName: String? = nil) -> Outcome {
        let name = displayName ?? path
        do throws(SafePathError) {
            let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
            // The file's owner, from the descriptor read: the traces it names are read as theirs.
            let (bytes, owner) = try readRegularFileAndOwner(atPath: path, maximumBytes: ScenarioLimits.maximumFileSize)
            return parse(String(decoding: bytes, as: UTF8.self), file: name, baseDirectory: directory.isEmpty ? "/" : directory, scenarioOwner: owner)
        } catch {
            return Outcome(scenario: nil, diagnostics: [ScenarioDiagnostic(.error, file: name, line: 0, column: 0,
                                                                           message: "cannot read the file: \(error.reason)")])
        }
    }

    /// Reads scenario text; `file` names it in diagnostics, and relative paths in it (traces)
    /// start at `baseDirectory`.
    ///
    /// - Parameters:
    ///   - text: The scenario's YAML.
    ///   - file: How diagnostics name it.
    ///   - baseDirectory: Where relative paths in it start.
    /// - Returns: The scenario when it has no errors, and every diagnostic with its line and
    ///   column.
    public static func parse(_ text: String, file: String, baseDirectory: String = ".") -> Outcome {
        parse(text, file: file, baseDirectory: baseDirectory, scenarioOwner: nil)
    }

    /// Reads scenario text whose file `scenarioOwner` owns (nil: the caller's own text): a trace
    /// it names is read only if that user owns it too, unless it is the caller.
    static func parse(_ text: String, file: String, baseDirectory: String, scenarioOwner: uid_t?) -> Outcome {
        // A byte-order mark starts many files saved on Windows; YAML readers ignore it.
        let source = text.hasPrefix("\u{FEFF}") ? String(text.unicodeScalars.dropFirst()) : text
        let collector = DiagnosticCollector(file: file, source: source)
        guard let root = compose(source, collector: collector, empty: "the file is empty; a scenario needs at least name, duration and nodes") else {
            return Outcome(scenario: nil, diagnostics: collector.diagnostics)
        }
        let scenario = ScenarioDecoder(collector, baseDirectory: baseDirectory, scenarioOwner: scenarioOwner).scenario(root)
        return Outcome(scenario: collector.hasErrors ? nil : scenario, diagnostics: collector.sortedDiagnostics)
    }

    /// The YAML tree of `source`, or nil after reporting why not: control characters, syntax,
    /// aliases that expand past the budget, tags; `empty` says what an empty text lacks.
    static func compose(_ source: String, collector: DiagnosticCollector, empty: String) -> Node? {
        if let (line, column, scalar) = firstUnprintable(in: source) {
            let name = scalar.value == 0 ? "a NUL byte" : "the control character U+\(String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4))"
            collector.error("\(name) is not allowed in YAML; remove it (write it as an escape such as \"\\t\" inside a double-quoted string)",
                            line: line, column: column)
            return nil
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: source, .basic)
        } catch let error as YamlError {
            report(error, to: collector)
            return nil
        } catch {
            collector.error("cannot parse YAML: \(error)", line: 1, column: 1)
            return nil
        }
        guard let root else {
            collector.error(empty, line: 1, column: 1)
            return nil
        }
        // Aliases share what they name, so a small file can stand for a huge tree (an anchored
        // mapping aliased a thousand times, aliases of aliases): refused before it is walked.
        let budget = maximumValues(forBytes: source.utf8.count)
        let (count, tagged) = walk(root, upTo: budget)
        guard count <= budget else {
            collector.error("the file's aliases (*name) expand to more than \(budget) values; Roam reads at most 4 per byte of the file "
                + "(plus 1024): write the repeated parts out, or alias less", line: 1, column: 1)
            return nil
        }
        // A tag (`!secret 5`) would be ignored by a reader that reads every value as text: say so.
        if let tagged {
            collector.error("YAML tag '\(escapedForMessage(tagged.tag.rawValue))' is not one Roam reads (a scenario's values are plain "
                + "text, numbers with units and lists); remove it", line: tagged.line, column: tagged.column)
            return nil
        }
        return root
    }

    /// The most values (scalars, mappings, lists, with aliases expanded) a file of `bytes` may
    /// stand for: a file without aliases has fewer than one per byte.
    static func maximumValues(forBytes bytes: Int) -> Int { 4 * bytes + 1024 }

    /// The values in the tree at `root`, aliases expanded, counted up to just past `limit`.
    static func valueCount(_ root: Node, upTo limit: Int) -> Int { walk(root, upTo: limit).count }

    /// The values in the tree at `root` (aliases expanded, counted up to just past `limit`),
    /// and the first value with a tag of its own (`!name`; YAML's standard tags are left alone).
    static func walk(_ root: Node, upTo limit: Int) -> (count: Int, tagged: Node?) {
        // Counted as they are found, so that what waits to be walked never exceeds the limit.
        var count = 1
        var pending = [root]
        var tagged: Node?
        while let node = pending.popLast() {
            if tagged == nil {
                let tag = node.tag.rawValue
                if !(tag.isEmpty || tag == "!" || tag == "?" || tag.hasPrefix("tag:yaml.org,2002:")) { tagged = node }
            }
            switch node {
            case .mapping(let mapping):
                count += 2 * mapping.count
                if count > limit { return (count, tagged) }
                for (key, value) in mapping {
                    pending.append(key)
                    pending.append(value)
                }
            case .sequence(let sequence):
                count += sequence.count
                if count > limit { return (count, tagged) }
                pending.append(contentsOf: sequence)
            case .scalar, .alias:
                break
            }
        }
        return (count, tagged)
    }

    private static func report(_ error: YamlError, to collector: DiagnosticCollector) {
        switch error {
        case let .scanner(context, problem, mark, _), let .parser(context, problem, mark, _), let .composer(context, problem, mark, _):
            let text = [context?.text, problem].compactMap { $0 }.joined(separator: " ")
            collector.error("YAML syntax: \(text)", line: mark.line, column: mark.column)
        case let .reader(problem, _, _, _):
            // Control characters, the usual cause, are found before Yams reads the text.
            collector.error("YAML: \(problem)", line: 1, column: 1)
        case let .duplicatedKeysInMapping(duplicates, context):
            collector.error("duplicate key\(duplicates.count > 1 ? "s" : "") \(duplicates.map { "'\($0)'" }.joined(separator: ", ")) in one mapping",
                            line: context.mark.line, column: context.mark.column)
        default:
            collector.error("YAML: \(error)", line: 1, column: 1)
        }
    }
}

extension ScenarioReader {
    /// Whether `name` is valid as a profile a scenario defines (`profiles:`).
    ///
    /// - Parameter name: A name.
    /// - Returns: True for an ASCII letter followed by letters, digits, `_` and `-`, 64 at most.
    public static func isProfileName(_ name: String) -> Bool { isIdentifier(name, maxLength: 64) }

    /// The place (1-based line and column, in Unicode scalars as Yams counts them) and the
    /// scalar of the first character YAML does not allow in a stream: C0 and C1 controls other
    /// than tab, line feed, carriage return and NEL, DEL, and U+FFFE/U+FFFF.
    static func firstUnprintable(in source: String) -> (line: Int, column: Int, scalar: Unicode.Scalar)? {
        var line = 1, column = 1
        var previousWasCR = false
        for scalar in source.unicodeScalars {
            let value = scalar.value
            switch value {
            case 0x0A:
                if !previousWasCR { line += 1 }
                column = 1
                previousWasCR = false
                continue
            case 0x0D, 0x85, 0x2028, 0x2029:
                line += 1
                column = 1
                previousWasCR = value == 0x0D
                continue
            case 0x09, 0x20...0x7E, 0xA0...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF:
                break
            default:
                return (line, column, scalar)
            }
            previousWasCR = false
            column += 1
        }
        return nil
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
