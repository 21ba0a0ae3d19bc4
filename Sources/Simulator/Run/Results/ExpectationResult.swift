import Glibc
import PathMonitor
import RoamReport
import ScenarioModel

/// One expectation checked against a run: what was measured and whether it held.
public struct ExpectationResult: Sendable {
    public var expectation: Expectation
    public var passed: Bool
    /// The measured value, in the expectation's unit (`3.2s`, `4.1mbit`, `true`, `0`).
    public var measured: String
    /// What the check was, in words: `longest stall ≤ 2s`.
    public var requirement: String
    /// More about the measurement (how many stalls, failed requests, ...).
    public var detail: String?

    /// The expectation's entry in `summary.json`.
    public var summary: RunSummary.Expectation {
        RunSummary.Expectation(subject: expectation.subject, check: expectation.check.key, requirement: requirement, measured: measured,
                               passed: passed, line: expectation.line, detail: detail)
    }

    /// The expectation's entry in `summary.json`, as JSON.
    public var json: JSONValue { summary.json }
}

extension Expectation.Check {
    /// The scenario key of the check.
    public var key: String {
        switch self {
        case .maxStall: "maxStall"
        case .minThroughput: "minThroughput"
        case .maxTimeToFirstByte: "maxTimeToFirstByte"
        case .completes: "completes"
        case .exitCode: "exitCode"
        case .maxBytesOver: "maxBytesOver"
        case .path, .connectivity: "path"
        case .maxBytesWhilePortal: "maxBytesWhilePortal"
        }
    }
}

extension PathCondition {
    /// Whether `path` is in this condition.
    public func holds(for path: NetworkPath) -> Bool {
        switch self {
        case .satisfied: path.status == .satisfied
        case .unsatisfied: path.status != .satisfied
        case .expensive: path.status == .satisfied && path.isExpensive
        case .notExpensive: path.status == .satisfied && !path.isExpensive
        case .constrained: path.status == .satisfied && path.isConstrained
        case .notConstrained: path.status == .satisfied && !path.isConstrained
        case .wifi: path.primaryInterface?.type == .wifi
        case .cellular: path.primaryInterface?.type == .cellular
        case .wiredEthernet: path.primaryInterface?.type == .wiredEthernet
        case .ultraConstrained: path.status == .satisfied && path.isUltraConstrained
        case .notUltraConstrained: path.status == .satisfied && !path.isUltraConstrained
        case .qualityMinimal: path.status == .satisfied && path.linkQuality == .minimal
        case .qualityModerate: path.status == .satisfied && path.linkQuality == .moderate
        case .qualityGood: path.status == .satisfied && path.linkQuality == .good
        case .ipv4Only: path.status == .satisfied && path.supportsIPv4 && !path.supportsIPv6
        case .ipv6Only: path.status == .satisfied && path.supportsIPv6 && !path.supportsIPv4
        }
    }
}

/// Checks expectations against what a run measured. Pure: tests feed it results and records.
public enum ExpectationEvaluator {
    public static func evaluate(_ expectations: [Expectation], workloads: [WorkloadResult], changes: [AppliedChange],
                                paths: [PathRecord]) -> [ExpectationResult] {
        expectations.map { expectation in
            switch expectation.check {
            case let .path(condition, within, link, event):
                return path(expectation, condition: condition, within: within, link: link, event: event, changes: changes, paths: paths)
            case .connectivity(let wanted):
                return connectivity(expectation, wanted, changes: changes, paths: paths)
            default:
                guard let result = workloads.first(where: { $0.name == expectation.subject }) else {
                    return ExpectationResult(expectation: expectation, passed: false, measured: "nothing",
                                             requirement: expectation.check.key, detail: "the workload did not run")
                }
                return workload(expectation, result)
            }
        }
    }

    static func workload(_ expectation: Expectation, _ result: WorkloadResult) -> ExpectationResult {
        switch expectation.check {
        case .maxStall(let limit):
            let stream = result.stream ?? StreamStatistics()
            let longest = stream.longestStall
            let ongoing = stream.stalls.contains { $0.ongoing } ? ", the last one still going at the end" : ""
            return ExpectationResult(expectation: expectation, passed: longest <= limit, measured: longest.roamDescription,
                                     requirement: "longest stall ≤ \(limit.roamDescription)",
                                     detail: "\(stream.stalls.count) stalls, \(stream.totalStall.roamDescription) in all\(ongoing)")
        case .minThroughput(let minimum):
            let throughput = result.throughput ?? Rate(bitsPerSecond: 0)
            return ExpectationResult(expectation: expectation, passed: throughput >= minimum, measured: throughput.roundedDescription,
                                     requirement: "mean throughput ≥ \(minimum)",
                                     detail: "\(result.bytesReceived) bytes in \(result.activeTime.roamDescription)")
        case .maxTimeToFirstByte(let limit):
            let requests = result.requests ?? RequestStatistics()
            let worst = requests.timeToFirstByte.maximum
            let passed = requests.failed == 0 && requests.succeeded > 0 && (worst ?? .zero) <= limit
            let measured = requests.failed > 0 ? "\(requests.failed) failed" : worst?.roamDescription ?? "no response"
            var detail = "\(requests.succeeded) of \(requests.sent) requests answered"
            if let worst { detail += ", slowest first byte \(worst.roamDescription)" }
            if let p50 = requests.timeToFirstByte.percentile(0.5) { detail += ", median \(p50.roamDescription)" }
            return ExpectationResult(expectation: expectation, passed: passed, measured: measured,
                                     requirement: "every request's first byte within \(limit.roamDescription)", detail: detail)
        case .completes(let wanted):
            return ExpectationResult(expectation: expectation, passed: result.completed == wanted, measured: String(result.completed),
                                     requirement: "completes: \(wanted)", detail: result.incompleteReason)
        case .exitCode(let wanted):
            let command = result.command
            let measured = command?.exitCode.map(String.init) ?? command?.signal.map { "signal \($0)" } ?? "did not run"
            return ExpectationResult(expectation: expectation, passed: command?.exitCode == wanted, measured: measured,
                                     requirement: "exit code \(wanted)", detail: result.incompleteReason)
        case let .maxBytesOver(link, bytes):
            let over = result.bytesByInterface[link] ?? 0
            let others = result.bytesByInterface.filter { $0.key != link && $0.value > 0 }.sorted { $0.key < $1.key }
            return ExpectationResult(expectation: expectation, passed: over <= bytes, measured: "\(over) bytes",
                                     requirement: "at most \(bytes) bytes over \(link)",
                                     detail: others.isEmpty ? "no bytes over other links" : "over other links: "
                                        + others.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        case let .maxBytesWhilePortal(network, bytes):
            let requirement = "at most \(bytes) bytes over \(network) while its portal held the phone"
            guard let counted = result.bytesWhilePortal[network] else {
                return ExpectationResult(expectation: expectation, passed: false, measured: "nothing", requirement: requirement,
                                         detail: "the gateway of \(network) counted nothing for this workload (its portal did not run)")
            }
            return ExpectationResult(expectation: expectation, passed: counted.bytes <= bytes, measured: "\(counted.bytes) bytes",
                                     requirement: requirement,
                                     detail: "\(counted.packets) packets the portal stopped or redirected, counted by the gateway")
        case .path, .connectivity:
            return ExpectationResult(expectation: expectation, passed: false, measured: "", requirement: "path")
        }
    }

    /// The first change of `link` that `event` names.
    static func trigger(link: String, event: String, in changes: [AppliedChange]) -> AppliedChange? {
        changes.first { applied in
            guard applied.change.link == link, applied.failure == nil else { return false }
            switch (event, applied.change.change) {
            case ("down", .carrier(false)): return applied.change.action == "down"
            case ("up", .carrier(true)): return applied.change.action == "up"
            case ("flap", .carrier(false)): return applied.change.action == "flap"
            case ("blackhole", .conditions(_, let conditions)): return applied.change.action == "blackhole" && conditions.isBlackholed
            default: return applied.change.action == event
            }
        }
    }

    static func path(_ expectation: Expectation, condition: PathCondition, within: Duration, link: String, event: String,
                     changes: [AppliedChange], paths: [PathRecord]) -> ExpectationResult {
        let requirement = "\(expectation.subject)'s path \(condition.rawValue) within \(within.roamDescription) after \(link) \(event)"
        guard let trigger = trigger(link: link, event: event, in: changes) else {
            return ExpectationResult(expectation: expectation, passed: false, measured: "never", requirement: requirement,
                                     detail: "\(link) \(event) never happened in this run")
        }
        let t = trigger.actual
        let nodePaths = paths.filter { $0.node == expectation.subject }
        let inForce = nodePaths.last { $0.at <= t }
        if let inForce, condition.holds(for: inForce.path) {
            return ExpectationResult(expectation: expectation, passed: true, measured: "0ms", requirement: requirement,
                                     detail: "already \(condition.rawValue) when \(link) \(event) happened at \(t.roamDescription)")
        }
        guard let first = nodePaths.first(where: { $0.at > t && condition.holds(for: $0.path) }) else {
            return ExpectationResult(expectation: expectation, passed: false, measured: "never", requirement: requirement,
                                     detail: "no path update made it \(condition.rawValue) after \(t.roamDescription)")
        }
        let delay = first.at - t
        return ExpectationResult(expectation: expectation, passed: delay <= within, measured: delay.roamDescription,
                                 requirement: requirement, detail: "\(link) \(event) at \(t.roamDescription), path: \(first.path.summary)")
    }
}

extension ExpectationEvaluator {
    /// The connectivity `wanted` names in `path`: one interface's, or the path's.
    static func state(of wanted: ConnectivityExpectation, in path: NetworkPath) -> String? {
        guard let name = wanted.interface else { return path.connectivity.rawValue }
        return path.availableInterfaces.first { $0.name == name }?.connectivity.state.rawValue
    }

    static func connectivity(_ expectation: Expectation, _ wanted: ConnectivityExpectation, changes: [AppliedChange],
                             paths: [PathRecord]) -> ExpectationResult {
        let subject = wanted.interface.map { "\(expectation.subject)'s \($0)" } ?? "\(expectation.subject)'s path"
        let nodePaths = paths.filter { $0.node == expectation.subject }
        func described(_ record: PathRecord?) -> String {
            guard let record else { return "no path yet" }
            return state(of: wanted, in: record.path).map { "\($0)" } ?? "no interface \(wanted.interface ?? "")"
        }
        switch wanted.timing {
        case .at(let time):
            let requirement = "\(subject) \(wanted.state.rawValue) at \(time.roamDescription)"
            let inForce = nodePaths.last { $0.at <= time }
            let found = inForce.flatMap { state(of: wanted, in: $0.path) }
            var detail = inForce.map { "the path since \($0.at.roamDescription): \($0.path.summary)" } ?? "the node published no path by then"
            if let reason = inForce.flatMap({ record in
                record.path.availableInterfaces.first { $0.name == (wanted.interface ?? record.path.primaryInterface?.name) }?.connectivity.reason
            }) {
                detail += " (\(escapedForMessage(reason, maximumLength: 200)))"
            }
            return ExpectationResult(expectation: expectation, passed: found == wanted.state.rawValue, measured: described(inForce),
                                     requirement: requirement, detail: detail)
        case let .after(link, event, within):
            let requirement = "\(subject) \(wanted.state.rawValue) within \(within.roamDescription) after \(link) \(event)"
            guard let trigger = trigger(link: link, event: event, in: changes) else {
                return ExpectationResult(expectation: expectation, passed: false, measured: "never", requirement: requirement,
                                         detail: "\(link) \(event) never happened in this run")
            }
            let t = trigger.actual
            if let inForce = nodePaths.last(where: { $0.at <= t }), state(of: wanted, in: inForce.path) == wanted.state.rawValue {
                return ExpectationResult(expectation: expectation, passed: true, measured: "0ms", requirement: requirement,
                                         detail: "already \(wanted.state.rawValue) when \(link) \(event) happened at \(t.roamDescription)")
            }
            guard let first = nodePaths.first(where: { $0.at > t && state(of: wanted, in: $0.path) == wanted.state.rawValue }) else {
                return ExpectationResult(expectation: expectation, passed: false, measured: "never", requirement: requirement,
                                         detail: "no path update made it \(wanted.state.rawValue) after \(t.roamDescription); last: \(described(nodePaths.last))")
            }
            let delay = first.at - t
            return ExpectationResult(expectation: expectation, passed: delay <= within, measured: delay.roamDescription,
                                     requirement: requirement, detail: "\(link) \(event) at \(t.roamDescription), path: \(first.path.summary)")
        }
    }
}

extension Rate {
    /// Three significant figures in the largest unit that fits: `4.12mbit`, `980kbit`.
    public var roundedDescription: String {
        for (unit, scale) in [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)] where bitsPerSecond >= scale || scale == 1 {
            let scaled = bitsPerSecond / scale
            guard scaled > 0 else { return "0bit" }
            let decimals = max(0, 2 - Int(log10(scaled).rounded(.down)))
            let factor = pow(10, Double(decimals))
            let value = (scaled * factor).rounded() / factor
            return (value == value.rounded() ? String(Int64(value)) : String(value)) + unit
        }
        return "0bit"
    }
}
