#if canImport(Testing)
import Testing

extension ScenarioRun {
    /// Records an issue in the current Swift Testing test unless `check` holds; the message
    /// carries the measurement and the seed that replays the run.
    ///
    /// - Parameters:
    ///   - check: What must hold.
    ///   - sourceLocation: Where the issue is recorded (the caller's line).
    /// - Returns: Whether it held.
    @discardableResult
    public func expect(_ check: RunCheck, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let outcome = report.check(check)
        if !outcome.passed {
            Issue.record(Comment(rawValue: report.failureMessage(check, outcome)), sourceLocation: sourceLocation)
        }
        return outcome.passed
    }

    /// A comment for `#expect` on anything else about the run: the seed and the report.
    public var comment: Comment { Comment(rawValue: replayHint) }
}
#endif
