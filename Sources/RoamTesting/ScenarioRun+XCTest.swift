#if canImport(XCTest)
import XCTest

extension ScenarioRun {
    /// Fails the current XCTest test unless `check` holds; the message carries the measurement
    /// and the seed that replays the run.
    ///
    /// - Parameters:
    ///   - check: What must hold.
    ///   - file: The file the failure is reported in (the caller's).
    ///   - line: The line the failure is reported at (the caller's).
    /// - Returns: Whether it held.
    @discardableResult
    public func assert(_ check: RunCheck, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let outcome = report.check(check)
        if !outcome.passed {
            XCTFail(report.failureMessage(check, outcome), file: file, line: line)
        }
        return outcome.passed
    }
}
#endif
