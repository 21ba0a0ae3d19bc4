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
    /// How late the player began applying it, beyond its planned time and the time the change
    /// before it took to apply: its thread's wake-up, what a starved machine stretches (the
    /// timeline part of ``RunReport/fidelity``).
    public var scheduleLateness: Duration = .zero
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
    /// The instant the scenario's time zero corresponds to (for a log made with
    /// ``init(beginningLater:holdingEvents:)``, fixed by ``begin(in:)``).
    package var start: MonotonicInstant { MonotonicInstant(nanoseconds: startNanoseconds.load(ordering: .acquiring)) }
    private let startNanoseconds: Atomic<Int64>
    /// Whether time zero is fixed; until it is, events wait in `State.pending` with the
    /// instants they happened at.
    private let hasBegun: Atomic<Bool>

    private struct State {
        var file: FileDescriptor?
        /// Applied changes and published paths, kept compact for runs that last a day: a
        /// flapping link applies the same two changes and publishes the same few paths over and
        /// over, so each distinct change (its time and step aside) and each distinct path is
        /// held once, and each record is a few words that point at them (40 and 24 bytes,
        /// where a whole change took about 360 and a path record about 150), and spilled to
        /// an unnamed file in the report directory as they come (``RecordSpill``), so that
        /// they take no more memory at the end of a day than at its start.
        var changes: RecordSpill<CompactChange>
        var paths: RecordSpill<CompactPath>
        var failures: [Int: String] = [:]
        var distinctChanges = Interned<ScheduledChange>()
        var distinctPaths = Interned<NetworkPath>()
        var nodes = Interned<String>()
        var lines = 0
        /// Bytes written to `timeline.jsonl`.
        var bytes = 0
        /// The latest events' lines, for readers of the run while it plays (its control API's
        /// event stream): event `lines - recent.count + i` is `recent[i]`. Bounded by
        /// ``heldEvents`` and ``heldBytes``; older ones are in `timeline.jsonl`.
        var recent: [String] = []
        var recentStart = 0
        var recentBytes = 0
        var holding = false
        var subscribers: [Int: @Sendable () -> Void] = [:]
        var nextSubscriber = 0
        /// Events recorded before time zero was fixed (nil once it is).
        var pending: [Pending]?
    }
    /// An event recorded before time zero was fixed: its time then, as given (relative to time
    /// zero, whenever that is) or as the instant it was recorded at.
    private enum Pending {
        case event(Untimed, at: Duration?, recorded: MonotonicInstant)
        case path(NetworkPath, node: String, at: MonotonicInstant, Untimed)
    }
    /// An event's line made when it was recorded, with a time to be put in when time zero is
    /// fixed (so that fixing it costs no serializing: in a slow VM that took most of the lead).
    private struct Untimed {
        /// The line from after `{"t":0.0` on.
        var rest: Substring
        init(_ event: RunEvent) {
            let line = RecordedEvent(time: .zero, event: event).json.serialized
            let prefix = "{\"t\":" + JSONValue.seconds(.zero).serialized
            precondition(line.hasPrefix(prefix), "an event's line starts with its time")
            rest = line.dropFirst(prefix.count)
        }
        func line(at time: Duration) -> String { "{\"t\":" + JSONValue.seconds(time).serialized + rest }
    }
    private let state: Mutex<State>
    /// Where the timeline is written (nil: in memory only), and the run's records spilled.
    private let directory: SecureDirectory?
    /// The one file every record spill of the run shares (``SpillFile``).
    private let spillFile: SpillFile?

    /// The most recent events held in memory for live readers, by count and by bytes.
    package static let heldEvents = 65_536
    package static let heldBytes = 32 << 20

    /// Logs to `timeline.jsonl` in `directory` (a new file); nil logs to memory only.
    /// `holdingEvents`: the latest events are held for ``events(from:limit:)`` from the first.
    package init(start: MonotonicInstant, directory: SecureDirectory?, holdingEvents: Bool = false) throws(SimulatorError) {
        startNanoseconds = Atomic(start.nanoseconds)
        hasBegun = Atomic(true)
        self.directory = directory
        let spillFile = directory.map { SpillFile(directory: $0) }
        self.spillFile = spillFile
        state = Mutex(try Self.initialState(directory: directory, spillFile: spillFile, holdingEvents: holdingEvents))
    }

    /// Logs to `timeline.jsonl` in `directory` (a new file) with time zero fixed later, by
    /// ``begin(in:)``, once everything before it is set up (however long that takes: a slow
    /// report directory, a slow machine). Events recorded until then are written when it is
    /// fixed, at their times relative to it (negative: before time zero).
    package init(beginningLater directory: SecureDirectory?, holdingEvents: Bool = false) throws(SimulatorError) {
        startNanoseconds = Atomic(MonotonicInstant.now.nanoseconds)
        hasBegun = Atomic(false)
        self.directory = directory
        let spillFile = directory.map { SpillFile(directory: $0) }
        self.spillFile = spillFile
        var initial = try Self.initialState(directory: directory, spillFile: spillFile, holdingEvents: holdingEvents)
        initial.pending = []
        state = Mutex(initial)
    }

    private static func initialState(directory: SecureDirectory?, spillFile: SpillFile?, holdingEvents: Bool) throws(SimulatorError) -> State {
        var file: FileDescriptor?
        if let directory {
            do {
                file = try directory.createFile(named: "timeline.jsonl", mode: RunReportFiles.mode)
            } catch {
                throw SimulatorError(error)
            }
        }
        var initial = State(file: file, changes: RecordSpill(file: spillFile), paths: RecordSpill(file: spillFile))
        initial.holding = holdingEvents
        return initial
    }

    deinit {
        state.withLock { try? $0.file?.close() }
    }

    /// Fixes time zero `lead` from now and writes the events recorded so far. Once only: later
    /// calls (and calls on a log made with a start) do nothing.
    package func begin(in lead: Duration) {
        guard !hasBegun.load(ordering: .acquiring) else { return }
        let subscribers = state.withLock { state -> [@Sendable () -> Void] in
            guard let pending = state.pending else { return [] }
            let start = MonotonicInstant.now + lead
            startNanoseconds.store(start.nanoseconds, ordering: .releasing)
            state.pending = nil
            let texts = pending.map { event in
                switch event {
                case let .event(untimed, time, recorded):
                    return untimed.line(at: time ?? recorded - start)
                case let .path(path, node, instant, untimed):
                    Self.keep(path, node: node, at: instant - start, in: &state)
                    return untimed.line(at: instant - start)
                }
            }
            // One write for them all: on a slow file system (a VM's shared directory, NFS) each
            // write is milliseconds of the lead.
            Self.write(texts, to: &state)
            hasBegun.store(true, ordering: .releasing)
            return Array(state.subscribers.values)
        }
        for wake in subscribers { wake() }
    }

    /// Time since ``start`` (negative before it).
    package var elapsed: Duration { MonotonicInstant.now - start }

    /// Holds an event (made with the instant it was recorded at) until time zero is fixed;
    /// false once it is (the caller writes it). Costs one atomic load once it is fixed.
    private func deferred(_ event: (MonotonicInstant) -> Pending) -> Bool {
        guard !hasBegun.load(ordering: .acquiring) else { return false }
        let pending = event(.now)
        return state.withLock { state in
            guard state.pending != nil else { return false }
            state.pending!.append(pending)
            return true
        }
    }

    /// Writes one event at `time` since time zero (now when nil).
    package func record(_ event: RunEvent, at time: Duration? = nil) {
        if deferred({ .event(Untimed(event), at: time, recorded: $0) }) { return }
        let text = RecordedEvent(time: time ?? elapsed, event: event).json.serialized
        let subscribers = state.withLock { state -> [@Sendable () -> Void] in
            Self.write([text], to: &state)
            return state.holding || !state.subscribers.isEmpty ? Array(state.subscribers.values) : []
        }
        for wake in subscribers { wake() }
    }

    /// Appends events' lines to the file (in one write) and to what is held for live readers.
    private static func write(_ texts: [String], to state: inout State) {
        guard !texts.isEmpty else { return }
        state.lines += texts.count
        if let file = state.file {
            let text = texts.reduce(into: "") { $0 += $1 + "\n" }
            if (try? writeAll(text.utf8, to: file)) != nil { state.bytes += text.utf8.count }
        }
        guard state.holding || !state.subscribers.isEmpty else { return }
        state.recent.append(contentsOf: texts)
        state.recentBytes += texts.reduce(0) { $0 + $1.utf8.count }
        // Dropped from the front in batches, so that each event costs O(1) on average.
        if state.recent.count > Self.heldEvents || state.recentBytes > Self.heldBytes {
            let drop = max(state.recent.count / 4, 1)
            state.recentBytes -= state.recent[..<drop].reduce(0) { $0 + $1.utf8.count }
            state.recent.removeFirst(drop)
            state.recentStart += drop
        }
    }

    /// Events from sequence number `first` on (the first event of a run is 0), at most `limit`:
    /// their lines (JSON, no newline), the number of the first one returned, and the number
    /// the next event will have. When `first` is older than what is held, the held ones are
    /// returned from the oldest, and the caller sees the gap in the numbers.
    package func events(from first: Int, limit: Int) -> (lines: [String], first: Int, next: Int) {
        state.withLock { state in
            let start = max(first, state.recentStart)
            guard start < state.lines else { return ([], start, state.lines) }
            let offset = start - state.recentStart
            let end = min(state.recent.count, offset + limit)
            return (Array(state.recent[offset..<end]), start, state.lines)
        }
    }

    /// Calls `wake` (on the recording thread: it must return at once) after every event from
    /// now on, until ``unsubscribe(_:)``. Events are held for ``events(from:limit:)`` from the
    /// first subscription on.
    package func subscribe(_ wake: @escaping @Sendable () -> Void) -> Int {
        state.withLock { state in
            if !state.holding && state.subscribers.isEmpty && state.recent.isEmpty { state.recentStart = state.lines }
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = wake
            return state.nextSubscriber
        }
    }

    package func unsubscribe(_ token: Int) {
        state.withLock { _ = $0.subscribers.removeValue(forKey: token) }
    }

    /// Records a link change that was applied (or failed) at `actual`.
    package func applied(_ change: ScheduledChange, actual: Duration, failure: String?, scheduleLateness: Duration = .zero) {
        state.withLock { state in
            var prototype = change
            prototype.at = .zero
            prototype.step = nil
            if let failure { state.failures[state.changes.count] = failure }
            state.changes.append(CompactChange(planned: change.at, actual: actual, change: state.distinctChanges.index(of: prototype),
                                               step: change.step.map { Int32(clamping: $0) } ?? -1, scheduleLateness: scheduleLateness))
        }
        let kind: RunEvent.LinkChange.Kind = switch change.change {
        case .carrier(let up), .membership(let up): .carrier(up: up)
        case .network(let action): .network(Self.describe(action, change: change))
        case let .conditions(direction, conditions): .conditions(direction: direction.rawValue, conditions: conditions.json)
        }
        let step = change.step.flatMap { step in change.stepCount.map { "\(step)/\($0)" } }
        var event = RunEvent.LinkChange(link: change.link, action: change.action, kind: kind, planned: change.at, actual: actual, step: step,
                                        line: change.live ? nil : change.line, error: failure)
        event.live = change.live
        record(.link(event), at: actual)
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
        if deferred({ .path(path, node: node, at: instant ?? $0, Untimed(.path(node: node, summary: path.summary, path: path.json))) }) { return }
        let at = instant.map { $0 - start } ?? elapsed
        state.withLock { Self.keep(path, node: node, at: at, in: &$0) }
        record(.path(node: node, summary: path.summary, path: path.json), at: at)
    }

    private static func keep(_ path: NetworkPath, node: String, at: Duration, in state: inout State) {
        state.paths.append(CompactPath(at: at, node: state.nodes.index(of: node), path: state.distinctPaths.index(of: path)))
    }

    /// Records of a run that grow with it (gaps, addresses, stalls), spilled beside the log's
    /// own (in memory when the log is).
    func spill<Element: BitwiseCopyable>(of type: Element.Type) -> RecordSpill<Element> {
        RecordSpill(file: spillFile)
    }

    /// How many records the log has written out of memory (applied changes, paths).
    package var spilledCounts: (changes: Int, paths: Int) {
        state.withLock { ($0.changes.spilled, $0.paths.spilled) }
    }

    /// How many distinct changes (time and step aside) and paths the log holds.
    package var distinctCounts: (changes: Int, paths: Int) {
        state.withLock { ($0.distinctChanges.values.count, $0.distinctPaths.values.count) }
    }

    /// Every applied change, in the order they were applied (made whole from the compact record).
    package var appliedChanges: [AppliedChange] {
        state.withLock { state in
            state.changes.all().enumerated().map { index, compact in
                var change = state.distinctChanges.values[Int(compact.change)]
                change.at = compact.planned
                change.step = compact.step < 0 ? nil : Int(compact.step)
                var applied = AppliedChange(change: change, actual: compact.actual, failure: state.failures[index])
                applied.scheduleLateness = compact.scheduleLateness
                return applied
            }
        }
    }

    /// Every published path, in order; records of one path share its storage.
    package var paths: [PathRecord] {
        state.withLock { state in
            state.paths.all().map { PathRecord(at: $0.at, node: state.nodes.values[Int($0.node)], path: state.distinctPaths.values[Int($0.path)]) }
        }
    }
    /// How many events were recorded.
    package var eventCount: Int { state.withLock { $0.lines } }
    /// How many bytes `timeline.jsonl` holds.
    package var timelineBytes: Int { state.withLock { $0.bytes } }

    /// Why `report.html` cannot be drawn from this timeline, when it holds more than `limit`
    /// bytes (the most of a timeline ``RoamReport/HTMLReport/write(to:)`` reads): a note for
    /// the report, nil when it can be.
    package func undrawable(limit: Int = HTMLReport.maximumTimelineSize) -> String? {
        let bytes = timelineBytes
        guard bytes > limit else { return nil }
        return "report.html was not written: timeline.jsonl holds \(byteCountDescription(bytes)), more than the "
            + "\(byteCountDescription(limit)) it is drawn from; summary.json has the verdicts and timeline.jsonl every event"
    }
}

/// An applied change as ``RunLog`` keeps it: its planned and actual times, the index of the
/// change (time and step left out) among the distinct ones, and its ramp step (-1: none).
private struct CompactChange {
    var planned: Duration
    var actual: Duration
    var change: Int32
    var step: Int32
    var scheduleLateness: Duration
}

/// A published path as ``RunLog`` keeps it.
private struct CompactPath {
    var at: Duration
    var node: Int32
    var path: Int32
}

/// Values held once each, numbered in the order they were first seen. Found by hash, so that a
/// value is held once (in `values`), not again as a dictionary's key: a ramp's steps are all
/// distinct.
struct Interned<Value: Hashable> {
    private(set) var values: [Value] = []
    private var byHash: [Int: [Int32]] = [:]

    /// The number of `value`, added if it is new.
    mutating func index(of value: Value) -> Int32 {
        let hash = value.hashValue
        if let known = byHash[hash]?.first(where: { values[Int($0)] == value }) { return known }
        let index = Int32(values.count)
        values.append(value)
        byHash[hash, default: []].append(index)
        return index
    }
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
        if !flows.isEmpty {
            // Each flow with what it sets (the rest is the link's).
            members.append(("flows", .array(flows.map { flow in
                var fields: [(String, JSONValue)] = [("match", .string(flow.match.description))]
                fields += flow.impairment.jsonMembers
                if flow.isBlackholed { fields.append(("blackhole", true)) }
                return .object(fields)
            })))
        }
        return .object(members)
    }

    /// `60ms ±2ms 1mbit loss 40%`, `blackhole`, or `clear`; each flow after it
    /// (`; {protocol: udp, port: 53} 2000ms`).
    package var summary: String {
        let own = isBlackholed ? "blackhole" : impairment.summary
        return ([own] + flows.map { "\($0.match) " + ($0.isBlackholed ? "blackhole" : $0.impairment.summary) }).joined(separator: "; ")
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
        if let limitBytes { members.append(("limitBytes", .int(Int64(limitBytes)))) }
        if let queue {
            var fields: [(String, JSONValue)] = [("discipline", .string(queue.name))]
            if let codel = queue.codel {
                fields += [("targetMs", .milliseconds(codel.target)), ("intervalMs", .milliseconds(codel.interval))]
            }
            if case let .fqCodel(_, flows, quantum) = queue { fields += [("flows", .int(Int64(flows))), ("quantum", .int(Int64(quantum)))] }
            members.append(("queue", .object(fields)))
        }
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
        if let queue, queue != .dropTail { words.append(queue.name) }
        return words.isEmpty ? "clear" : words.joined(separator: " ")
    }
}
