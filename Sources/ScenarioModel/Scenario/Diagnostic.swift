import RoamCore
import RoamSystem

/// A problem in a scenario file, with the place it stands.
public struct ScenarioDiagnostic: Sendable, Hashable, CustomStringConvertible {
    public enum Severity: String, Sendable, Hashable { case error, warning }

    public var severity: Severity
    /// The file, as the user named it.
    public var file: String
    /// 1-based line and column; 0 when the problem has no place (an unreadable file).
    public var line: Int
    public var column: Int
    public var message: String
    /// The offending line of the file, when known: for a long line, only a window around the
    /// column (``sourceOffset`` scalars were cut from its front, and ``sourceCut`` says whether
    /// its end was cut), so that many diagnostics on one long line do not each hold all of it.
    public var sourceLine: String?
    public var sourceOffset: Int
    public var sourceCut: Bool

    public init(_ severity: Severity, file: String, line: Int, column: Int, message: String, sourceLine: String? = nil,
                sourceOffset: Int = 0, sourceCut: Bool = false) {
        self.severity = severity
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        self.sourceLine = sourceLine
        self.sourceOffset = sourceOffset
        self.sourceCut = sourceCut
    }

    /// `FILE:LINE:COL: error: MESSAGE`, then the offending line and a caret under the column.
    /// The first line always has that form, whatever the file holds: the message carries no
    /// line break, and the quoted source line is cut to a window around the column.
    public var description: String {
        // The file's name is escaped: a name holding a line break (or `f.yaml:9:1: error: x`
        // followed by one) must not forge a diagnostic line of its own.
        let name = escapedForMessage(file, maximumLength: 256).replacingOccurrences(of: ":", with: "\\:")
        var text = line > 0 ? "\(name):\(line):\(column): \(severity.rawValue): \(message)" : "\(name): \(severity.rawValue): \(message)"
        if let sourceLine, line > 0 {
            let scalars = Array(sourceLine.unicodeScalars)
            let caret = max(0, column - 1 - sourceOffset)
            // A minified line can be megabytes long: show at most 120 characters around the column.
            let start = caret > 80 ? caret - 60 : 0
            let end = min(scalars.count, start + 120)
            let shown = start < end ? scalars[start..<end] : []
            let printable = shown.map { $0 == "\t" || $0.value >= 0x20 && $0.value != 0x7F && !(0x80..<0xA0).contains($0.value)
                && $0.value != 0x2028 && $0.value != 0x2029 ? Character($0) : "?" }
            let lead = start > 0 || sourceOffset > 0 ? "…" : "", trail = end < scalars.count || sourceCut ? "…" : ""
            let prefix = (start > 0 ? " " : "") + shown.prefix(max(0, caret - start)).map { $0 == "\t" ? "\t" : " " }.joined()
            text += "\n\(lead)\(String(printable))\(trail)\n\(prefix)^"
        }
        return text
    }
}

/// Collects the diagnostics of one file, so that every problem is reported in one pass.
final class DiagnosticCollector {
    let file: String
    private let source: String
    /// The file's lines, split when the first diagnostic needs its line (a valid file never does).
    private lazy var lines: [Substring] = textLines(source)
    private(set) var diagnostics: [ScenarioDiagnostic] = []
    /// Diagnostics past ``maximumDiagnostics``, counted but not kept.
    private(set) var omitted = 0
    private var omittedErrors = false

    /// The most diagnostics kept for one file: a file of garbage (or an alias of a broken
    /// mapping used a thousand times) has a problem everywhere, and the first hundred say enough.
    static let maximumDiagnostics = 100

    init(file: String, source: String) {
        self.file = file
        self.source = source
    }

    func error(_ message: String, line: Int, column: Int) {
        add(.error, message, line: line, column: column)
    }

    func warning(_ message: String, line: Int, column: Int) {
        add(.warning, message, line: line, column: column)
    }

    private func add(_ severity: ScenarioDiagnostic.Severity, _ message: String, line: Int, column: Int) {
        guard diagnostics.count < Self.maximumDiagnostics else {
            omitted += 1
            if severity == .error { omittedErrors = true }
            return
        }
        // Only a window of the line around the column is kept (what ``ScenarioDiagnostic``
        // shows), so that diagnostics cost no more than a constant each, however long the line.
        var window: String?, offset = 0, cut = false
        if line >= 1 && line <= lines.count {
            let scalars = lines[line - 1].unicodeScalars
            offset = max(0, column - 1 - 100)
            let start = scalars.index(scalars.startIndex, offsetBy: offset, limitedBy: scalars.endIndex) ?? scalars.endIndex
            let end = scalars.index(start, offsetBy: 200, limitedBy: scalars.endIndex) ?? scalars.endIndex
            window = String(scalars[start..<end])
            cut = end != scalars.endIndex
        }
        // Values are quoted escaped where messages are made; this keeps any that slipped through
        // from breaking the one-line `FILE:LINE:COL: error:` form.
        let oneLine = escapedForMessage(message, maximumLength: 4096)
        diagnostics.append(ScenarioDiagnostic(severity, file: file, line: line, column: column, message: oneLine, sourceLine: window,
                                              sourceOffset: offset, sourceCut: cut))
    }

    /// The diagnostic that says how many were left out, when some were.
    var omissionNote: ScenarioDiagnostic? {
        guard omitted > 0 else { return nil }
        return ScenarioDiagnostic(omittedErrors ? .error : .warning, file: file, line: 0, column: 0,
                                  message: "\(omitted) more problem\(omitted == 1 ? "" : "s") not shown (Roam shows the first \(Self.maximumDiagnostics)); fix these and read the file again")
    }

    /// Whether further diagnostics are only counted.
    var isFull: Bool { diagnostics.count >= Self.maximumDiagnostics }

    /// Every diagnostic in the order of the text (the note of those left out last).
    var sortedDiagnostics: [ScenarioDiagnostic] {
        var sorted = diagnostics.enumerated().sorted { lhs, rhs in
            (lhs.element.line, lhs.element.column, lhs.offset) < (rhs.element.line, rhs.element.column, rhs.offset)
        }.map(\.element)
        if let note = omissionNote { sorted.append(note) }
        return sorted
    }

    var hasErrors: Bool { omittedErrors || diagnostics.contains { $0.severity == .error } }
}

/// The closest of `candidates` to `word`, if it is close enough to be a likely typo. Among
/// more than ``maximumSuggestionCandidates`` (a scenario with thousands of nodes), or for a word
/// longer than any name, none is suggested: a file full of bad references must not make
/// validation quadratic.
func suggestion<Candidates: Collection<String>>(for word: String, among candidates: Candidates) -> String? {
    guard candidates.count <= maximumSuggestionCandidates, word.count <= 128 else { return nil }
    // Sorted, so that the same file gets the same suggestion whatever a set's order.
    let candidates = candidates.sorted()
    let lowered = word.lowercased()
    if lowered.count >= 3, let extended = candidates.first(where: { $0.lowercased().hasPrefix(lowered) }) { return extended }
    let scored = candidates.map { ($0, editDistance(lowered, $0.lowercased())) }
    guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
    return best.1 <= max(2, word.count / 3) ? best.0 : nil
}

func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}

let maximumSuggestionCandidates = 256
