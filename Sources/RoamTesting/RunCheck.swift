import PathMonitor
import ScenarioModel
import Simulator

/// Something a run's report must show: a workload's stalls, throughput or completion, a
/// node's path updates. Checked with ``ScenarioRun/expect(_:sourceLocation:)`` (Swift
/// Testing), ``ScenarioRun/assert(_:file:line:)`` (XCTest) or `RunReport/check(_:)`.
public struct RunCheck: Sendable, CustomStringConvertible {
    /// What must hold, as a failure message says it.
    public let description: String
    let evaluate: @Sendable (RunReport) -> CheckOutcome

    /// A check of your own.
    ///
    /// - Parameters:
    ///   - description: What must hold, as a failure message says it.
    ///   - evaluate: Looks at a run's report and says whether it holds, and what it measured.
    public init(_ description: String, _ evaluate: @escaping @Sendable (RunReport) -> CheckOutcome) {
        self.description = description
        self.evaluate = evaluate
    }

    /// The same checks a scenario's `expect:` makes, on one workload or node.
    static func expectation(_ subject: String, _ check: Expectation.Check, _ description: String) -> RunCheck {
        RunCheck(description) { report in
            let expectation = Expectation(subject, check)
            guard let result = ExpectationEvaluator.evaluate([expectation], workloads: report.workloads, changes: report.changes,
                                                             paths: report.paths).first else {
                return CheckOutcome(passed: false, measured: "not evaluated")
            }
            return CheckOutcome(passed: result.passed, measured: [result.measured, result.detail].compactMap { $0 }.joined(separator: "; "))
        }
    }

    /// No playout stall of stream `workload` lasts longer than `limit`.
    ///
    /// - Parameters:
    ///   - limit: The longest stall allowed.
    ///   - workload: A `stream` workload of the scenario.
    /// - Returns: The check.
    public static func maxStall(_ limit: Duration, in workload: String) -> RunCheck {
        expectation(workload, .maxStall(limit), "no stall of '\(workload)' longer than \(limit.roamDescription)")
    }

    /// Workload `workload` averaged at least `rate`.
    ///
    /// - Parameters:
    ///   - rate: The least average throughput.
    ///   - workload: A workload of the scenario.
    /// - Returns: The check.
    public static func minThroughput(_ rate: Rate, of workload: String) -> RunCheck {
        expectation(workload, .minThroughput(rate), "'\(workload)' at \(rate.description) or more")
    }

    /// Every response of `workload` started within `limit`.
    ///
    /// - Parameters:
    ///   - limit: The longest time to the first byte allowed.
    ///   - workload: A `requests` workload of the scenario.
    /// - Returns: The check.
    public static func maxTimeToFirstByte(_ limit: Duration, of workload: String) -> RunCheck {
        expectation(workload, .maxTimeToFirstByte(limit), "every response of '\(workload)' within \(limit.roamDescription)")
    }

    /// Workload `workload` did all it set out to.
    ///
    /// - Parameter workload: A workload of the scenario.
    /// - Returns: The check.
    public static func completes(_ workload: String) -> RunCheck {
        expectation(workload, .completes(true), "'\(workload)' completes")
    }

    /// Workload `workload`'s client received at most `bytes` over `link` (0: it never used it,
    /// as a workload that prohibits the link's kind of path should not).
    ///
    /// - Parameters:
    ///   - bytes: The most bytes allowed.
    ///   - link: A link of the scenario.
    ///   - workload: A workload of the scenario.
    /// - Returns: The check.
    public static func maxBytes(_ bytes: Int64, over link: String, in workload: String) -> RunCheck {
        expectation(workload, .maxBytesOver(link: link, bytes: bytes), "'\(workload)' receives at most \(bytes) bytes over \(link)")
    }

    /// `node`'s path reached `condition` within `limit` of `link`'s first `event` (`down`,
    /// `up`, `blackhole`, `set`, `ramp`, `flap`, `profile`).
    ///
    /// - Parameters:
    ///   - node: A node of the scenario.
    ///   - condition: What its path must come to.
    ///   - limit: How long after the event it may take.
    ///   - link: The link whose event starts the clock.
    ///   - event: The kind of event.
    /// - Returns: The check.
    public static func path(of node: String, reaches condition: PathCondition, within limit: Duration,
                            after link: String, event: String) -> RunCheck {
        expectation(node, .path(condition: condition, within: limit, afterLink: link, afterEvent: event),
                    "'\(node)' \(condition.rawValue) within \(limit.roamDescription) of \(link) \(event)")
    }

    /// `node`'s monitor published at least `count` path updates (the first path included).
    ///
    /// - Parameters:
    ///   - node: A node of the scenario.
    ///   - count: The fewest updates.
    /// - Returns: The check.
    public static func pathUpdates(of node: String, atLeast count: Int) -> RunCheck {
        RunCheck("'\(node)' sees at least \(count) path update\(count == 1 ? "" : "s")") { report in
            let seen = report.paths.filter { $0.node == node }.count
            return CheckOutcome(passed: seen >= count, measured: "\(seen) path update\(seen == 1 ? "" : "s")")
        }
    }

    /// Every expectation of the scenario's `expect:` held, and every timeline change was applied.
    public static var scenarioExpectations: RunCheck {
        RunCheck("the scenario's expectations hold") { report in
            let failed = report.expectations.filter { !$0.passed }
            var measured = failed.map { "\($0.expectation.subject): \($0.requirement), measured \($0.measured)" }
            measured += report.failedChanges.map { "change to \($0.change.link) failed: \($0.failure ?? "")" }
            if report.cancelled { measured.append("the run was cancelled") }
            return CheckOutcome(passed: report.passed, measured: measured.isEmpty
                ? "\(report.expectations.count) expectation\(report.expectations.count == 1 ? "" : "s") held" : measured.joined(separator: "; "))
        }
    }
}

/// What a check found.
public struct CheckOutcome: Sendable, Hashable {
    public var passed: Bool
    /// What the report shows, in words.
    public var measured: String

    /// An outcome.
    ///
    /// - Parameters:
    ///   - passed: Whether the check held.
    ///   - measured: What the report shows, in words.
    public init(passed: Bool, measured: String) {
        self.passed = passed
        self.measured = measured
    }
}

extension RunReport {
    /// Checks `check` against this report.
    ///
    /// - Parameter check: What must hold.
    /// - Returns: Whether it held, and what was measured.
    public func check(_ check: RunCheck) -> CheckOutcome { check.evaluate(self) }

    /// The message of a failed check: what was expected, what was measured, how to replay it.
    ///
    /// - Parameters:
    ///   - check: The check that failed.
    ///   - outcome: What it found.
    /// - Returns: The message.
    public func failureMessage(_ check: RunCheck, _ outcome: CheckOutcome) -> String {
        "expected \(check.description), measured \(outcome.measured) [\(replayHint)]"
    }
}

extension ScenarioRun {
    /// Checks `check` against the report.
    ///
    /// - Parameter check: What must hold.
    /// - Returns: Whether it held, and what was measured.
    public func check(_ check: RunCheck) -> CheckOutcome { report.check(check) }
}
