/// The one error type of RoamReport: a report directory, `summary.json` or `timeline.jsonl` that
/// cannot be read as a run, or a page that cannot be written. The message names the file (and
/// the line, for a timeline) and what is wrong, for a user to act on.
public struct ReportError: Error, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
