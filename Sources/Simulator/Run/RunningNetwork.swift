import Netlink
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel

/// A scenario's network while it runs: each node's namespace, addresses and path, for code that
/// runs alongside the scenario's own workloads (``ScenarioRunner/run(progress:started:)``).
public struct RunningNetwork: Sendable {
    public let runID: String
    /// The seed the run uses (the scenario's, or the one ``RunOptions/seed`` gave).
    public let seed: UInt64
    public let backend: BackendKind
    public let reportDirectory: String
    /// Time zero of the scenario.
    public let start: MonotonicInstant
    package let plan: TopologyPlan
    let namespaces: [String: NetworkNamespace]
    let monitors: [String: NetworkPathMonitor]
    package let log: RunLog
    /// The scenario as it plays (time-scaled when the run is).
    package let scenario: Scenario
    package let player: TimelinePlayer
    /// The run goes on past the scenario's duration until it is stopped (``RunOptions/hold``).
    package let isOpen: Bool
    /// The run's TCP proxies (nil in a run without proxies or a control API).
    package var proxies: ProxyHub?

    /// The namespace of `node`, nil when the scenario has no such node.
    public func namespace(of node: String) -> NetworkNamespace? { namespaces[node] }

    /// The path `node`'s monitor sees now.
    public func currentPath(of node: String) -> NetworkPath? { monitors[node]?.currentPath }

    /// The path monitor running in `node` (the one whose updates go into the report).
    public func monitor(of node: String) -> NetworkPathMonitor? { monitors[node] }

    /// The topology in environment variables, as a `command` workload gets it (`ROAM_RUN_ID`,
    /// `ROAM_NODES`, `ROAM_<NODE>_ADDR`, `ROAM_<NODE>_<LINK>_ADDR`, their `_ADDR6`, `ROAM_REPORT_DIR`).
    public var environment: [String: String] {
        ScenarioRunner.environment(plan: plan, runID: runID, reportDirectory: reportDirectory)
    }

    /// Time since time zero.
    public var elapsed: Duration { log.elapsed }

    /// Writes a `mark` event into the run's timeline (and the HTML report): something the code
    /// under test wants to see next to the links' changes.
    public func mark(_ text: String, node: String? = nil) {
        log.record(.mark(text: text, node: node))
    }

    /// Reads `text` as a live change to `target` (``LiveChange``) and applies it now: what is
    /// due now before this returns (``AppliedChange/failure`` says what the backend refused),
    /// the rest in time. Nil changes when the text was refused (the outcome's diagnostics say why).
    package func applyLive(_ text: String, to target: LiveChange.Target) -> (outcome: LiveChange.Outcome, applied: [AppliedChange]) {
        let outcome = LiveChange.read(text, target: target, scenario: scenario, at: max(log.elapsed, .zero), open: isOpen)
        guard let events = outcome.events else { return (outcome, []) }
        // (The run's player takes live changes only in a run with a control API, RunOptions.holdsEvents.)
        do throws(LiveChangeRefused) {
            return (outcome, try player.applyLive(events, scenario: scenario))
        } catch {
            let refusal = ScenarioDiagnostic(.error, file: "request body", line: 0, column: 0, message: error.message)
            return (LiveChange.Outcome(events: nil, diagnostics: outcome.diagnostics + [refusal]), [])
        }
    }

    /// What each link is doing now: carrier and each direction's conditions.
    package var linkStates: [String: TimelinePlayer.LinkState] { player.linkStates }
}
