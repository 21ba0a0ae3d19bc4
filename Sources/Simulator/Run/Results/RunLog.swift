import Glibc
import PathMonitor
import RoamReport
import RoamCore
import RoamSystem
import ScenarioModel
import Synchronization
import SystemPackage

/// A link change as it was applied: when it was planned and when it took effect.
public struct AppliedChange: Sendable, Hashable {
    public var change: ScheduledChange
    /// When the backend call returned, from the start of the run.
    public var actual: Duration
    /// Why it could not be applied, if it could not.
    public var failure: String?
}

/// A path a node's monitor published, and when.
public struct PathRecord: Sendable, Hashable {
    public var at: Duration
    public var node: String
    public var path: NetworkPath
}

/// The record of a run as it happens: every event is written at once as one line of
/// `timeline.jsonl` (so that a run that is killed still leaves its timeline) and what the
/// expectations need is kept in memory. Safe to call from any thread.
package final class RunLog: Sendable {
    /// The instant the scenario's time zero corresponds to.
    package let start: MonotonicInstant

    private struct State {
        var file: FileDescriptor?
        var changes: [AppliedChange] = []
        var paths: [PathRecord] = []
        /// Each distinct path once: a flapping link publishes the same few paths over and over,
        /// and records that share one value share its storage, so that the record of a long
        /// run grows by a few words per path, not by a whole path.
        var distinctPaths: Set<NetworkPath> = []
        var lines = 0
    }
    private let state: Mutex<State>

    /// Logs to `timeline.jsonl` in `directory` (a new file); nil logs to memory only.
    package init(start: MonotonicInstant, directory: SecureDirectory?) throws(SimulatorError) {
        self.start = start
        var file: FileDescriptor?
        if let directory {
            do {
                file = try directory.createFile(named: "timeline.jsonl")
            } catch {
                throw SimulatorError(error)
            }
        }
        state = Mutex(State(file: file))
    }

    deinit {
        state.withLock { try? $0.file?.close() }
    }

    /// Time since ``start`` (negative before it).
    package var elapsed: Duration { MonotonicInstant.now - start }

    /// Writes one event at `time` since time zero (now when nil).
    package func record(_ event: RunEvent, at time: Duration? = nil) {
        let line = RecordedEvent(time: time ?? elapsed, event: event).json.serialized + "\n"
        state.withLock { state in
            state.lines += 1
            guard let file = state.file else { return }
            try? writeAll(line.utf8, to: file)
        }
    }

    /// Records a link change that was applied (or failed) at `actual`.
    package func applied(_ change: ScheduledChange, actual: Duration, failure: String?) {
        let applied = AppliedChange(change: change, actual: actual, failure: failure)
        state.withLock { $0.changes.append(applied) }
        let kind: RunEvent.LinkChange.Kind = switch change.change {
        case .carrier(let up), .membership(let up): .carrier(up: up)
        case .network(let action): .network(Self.describe(action, change: change))
        case let .conditions(direction, conditions): .conditions(direction: direction.rawValue, conditions: conditions.json)
        }
        let step = change.step.flatMap { step in change.stepCount.map { "\(step)/\($0)" } }
        record(.link(RunEvent.LinkChange(link: change.link, action: change.action, kind: kind, planned: change.at, actual: actual, step: step,
                                         line: change.line, error: failure)), at: actual)
    }

    /// How a network event is written in the timeline.
    static func describe(_ action: TimelineEvent.Action, change: ScheduledChange) -> String {
        switch action {
        case .dns(let fault?): "dns \(fault.rawValue)"
        case .dns(nil): "dns ok"
        case .dnsDelay(let delay): "dns delay \(delay.roamDescription)"
        default: change.action
        }
    }

    /// Records a path a node's monitor published at `instant` (now when nil).
    package func path(_ path: NetworkPath, node: String, at instant: MonotonicInstant? = nil) {
        let at = instant.map { $0 - start } ?? elapsed
        state.withLock { state in
            let shared = state.distinctPaths.firstIndex(of: path).map { state.distinctPaths[$0] } ?? state.distinctPaths.insert(path).memberAfterInsert
            state.paths.append(PathRecord(at: at, node: node, path: shared))
        }
        record(.path(node: node, summary: path.summary, path: path.json), at: at)
    }

    package var appliedChanges: [AppliedChange] { state.withLock { $0.changes } }
    package var paths: [PathRecord] { state.withLock { $0.paths } }
    /// How many events were recorded.
    package var eventCount: Int { state.withLock { $0.lines } }
}

/// Takes the paths monitors publish while the run is being set up, before its ``RunLog``
/// (and so its time zero) exists, and hands them over with their times once it does.
final class PathRecorder: Sendable {
    private let state = Mutex<(log: RunLog?, pending: [(MonotonicInstant, String, NetworkPath)])>((nil, []))

    func record(_ path: NetworkPath, node: String) {
        let now = MonotonicInstant.now
        let log = state.withLock { state -> RunLog? in
            if state.log == nil { state.pending.append((now, node, path)) }
            return state.log
        }
        log?.path(path, node: node, at: now)
    }

    func attach(_ log: RunLog) {
        // Under the lock, so that no path overtakes the pending ones.
        state.withLock { state in
            for (instant, node, path) in state.pending { log.path(path, node: node, at: instant) }
            state.pending = []
            state.log = log
        }
    }
}

extension NetworkPath {
    /// The path as a JSON object, without a time.
    package var json: JSONValue {
        guard case .object(let members) = json(time: "") else { return .null }
        return .object(members.filter { $0.0 != "time" })
    }
}

extension LinkConditions {
    /// The conditions as a JSON object: only what is set.
    package var json: JSONValue {
        var members = impairment.jsonMembers
        if isBlackholed { members.append(("blackhole", true)) }
        return .object(members)
    }

    /// `60ms ±2ms 1mbit loss 40%`, `blackhole`, or `clear`.
    package var summary: String {
        if isBlackholed { return "blackhole" }
        return impairment.summary
    }
}

extension Impairment {
    var jsonMembers: [(String, JSONValue)] {
        var members: [(String, JSONValue)] = []
        if let delay { members.append(("delayMs", .milliseconds(delay))) }
        if let jitter { members.append(("jitterMs", .milliseconds(jitter))) }
        if let delayCorrelation { members.append(("delayCorrelation", .number(delayCorrelation, digits: 1e6))) }
        if let distribution { members.append(("distribution", .string(distribution.rawValue))) }
        if let rate { members.append(("rateBps", .int(Int64(rate.bitsPerSecond.rounded())))) }
        switch loss {
        case .random(let rate, let correlation)?:
            members.append(("loss", .number(rate, digits: 1e6)))
            if correlation > 0 { members.append(("lossCorrelation", .number(correlation, digits: 1e6))) }
        case let .gilbertElliott(p, r, bad, good)?:
            members.append(("loss", .object([("model", "gilbert-elliott"), ("p", .number(p, digits: 1e6)), ("r", .number(r, digits: 1e6)),
                                              ("lossInBad", .number(bad, digits: 1e6)), ("lossInGood", .number(good, digits: 1e6))])))
        case nil: break
        }
        if let duplicate { members.append(("duplicate", .number(duplicate, digits: 1e6))) }
        if let reorder { members.append(("reorder", .number(reorder, digits: 1e6))) }
        if let corrupt { members.append(("corrupt", .number(corrupt, digits: 1e6))) }
        if let limit { members.append(("limit", .int(Int64(limit)))) }
        if let trace { members.append(("trace", .string(trace.path))) }
        return members
    }

    /// A short human form for progress lines: `8ms ±2ms 50mbit loss 0.1%`.
    package var summary: String {
        var words: [String] = []
        func percent(_ value: Double) -> String {
            let scaled = value * 100
            return scaled >= 10 ? "\(Int(scaled.rounded()))%" : "\((scaled * 10).rounded() / 10)%"
        }
        if let delay { words.append("\(Int(delay.milliseconds.rounded()))ms") }
        if let jitter, jitter > .zero { words.append("±\(Int(jitter.milliseconds.rounded()))ms") }
        if let trace { words.append("trace \(trace.path.split(separator: "/").last.map(String.init) ?? trace.path)") }
        if let rate {
            let value = rate.bitsPerSecond
            words.append(value >= 1e6 ? "\((value / 1e5).rounded() / 10)mbit" : "\(Int((value / 1e3).rounded()))kbit")
        }
        if let loss, loss.meanLoss > 0 { words.append("loss \(percent(loss.meanLoss))") }
        if let duplicate, duplicate > 0 { words.append("dup \(percent(duplicate))") }
        if let reorder, reorder > 0 { words.append("reorder \(percent(reorder))") }
        if let corrupt, corrupt > 0 { words.append("corrupt \(percent(corrupt))") }
        return words.isEmpty ? "clear" : words.joined(separator: " ")
    }
}
