import Glibc
import Netlink
import PathMonitor
import RoamReport
import RoamCore
import RoamSystem
import ScenarioModel
import Synchronization

/// What carries out the timeline's network events, joining, leaving, renumbering, rebinding
/// and resolver faults (the run's ``NetworkServices``).
package protocol NetworkEventHandler: AnyObject {
    func setMembership(_ joined: Bool, link: String) throws(SimulatorError)
    func apply(_ action: TimelineEvent.Action, link: String) throws(SimulatorError)
    /// A link's carrier is about to go down, or came back: a phone's resolver follows the
    /// networks it can reach.
    func carrierChanged(_ up: Bool, link: String) throws(SimulatorError)
}

/// Plays a ``TimelineSchedule`` on its own thread: waits for each change's planned time on the
/// monotonic clock (with `ppoll`, whose nanosecond timeout keeps lateness at the scheduler's
/// wake-up latency), applies it through the backend, and logs planned and actual time. When a
/// change moves a link to another ``LinkQuality`` grade, it retags the link's interfaces through
/// the tagger, so that path monitors publish the new quality.
package final class TimelinePlayer: Sendable {
    private let schedule: TimelineSchedule
    private let log: RunLog
    private let stop: EventSignal
    private let states: Mutex<[String: LinkState]>
    /// The player's thread, and the signal that wakes it when a live change comes: both go at
    /// ``join()``, so that a player kept after its run (by a `RunningNetwork`) holds no descriptor.
    private let running = Mutex<(thread: PinnedThread?, live: EventSignal?)>((nil, nil))
    private nonisolated(unsafe) let backend: any LinkBackend
    private nonisolated(unsafe) let tagger: LinkTagger?
    private nonisolated(unsafe) let membership: (any NetworkEventHandler)?
    /// Changes sent while the run plays (``applyLive(_:scenario:)``) that are still to come (a
    /// live ramp's later steps, a live flap), latest first: the next is taken from the end.
    private let live: Mutex<LiveQueue>

    /// Live changes still to come, and how many more a run may take.
    private struct LiveQueue {
        /// Latest first, by time then arrival: `popLast()` is the next due.
        var pending: [(order: Int, change: ScheduledChange)] = []
        var arrived = 0
        /// The link changes the run may still take live: the timeline's bound
        /// (``ScenarioLimits/maximumChanges``) less what the timeline and earlier live changes
        /// took. A change that replaces live changes not yet played gets their share back.
        var budget = 0
    }
    /// Held while a change is applied: the player's thread and live controllers take turns.
    private let applying = Mutex<Void>(())
    /// Whether the player's thread asks for the real-time class (`roam run --emulator-priority realtime`).
    private let realtime: Bool
    /// When the last change finished applying (``AppliedChange/scheduleLateness``).
    private let lastFinished = Mutex<Duration>(.zero)

    /// What a link is doing now, for progress lines.
    package struct LinkState: Sendable {
        package var carrier = true
        package var up = LinkConditions()
        package var down = LinkConditions()

        /// The grade of the link's conditions (see ``LinkQuality/init(grading:_:)``).
        package var quality: LinkQuality { LinkQuality(grading: up, down) }

        package var summary: String {
            guard carrier else { return "down" }
            if up == down { return up.summary }
            return "↑\(up.summary) ↓\(down.summary)"
        }
    }

    /// A player of `schedule` through `backend`, timed from `log`'s start; `stop` ends it early.
    /// `tagger` retags links whose quality changes (none: tags stay as the topology set them).
    /// Whether changes may come while the run plays (``applyLive(_:scenario:)``): the player
    /// then waits for them after its last change, until the stop signal; otherwise it ends there.
    private let acceptsLiveChanges: Bool

    package init(schedule: TimelineSchedule, backend: any LinkBackend, tagger: LinkTagger? = nil, membership: (any NetworkEventHandler)? = nil,
                 log: RunLog, stop: EventSignal, acceptsLiveChanges: Bool = false, realtime: Bool = false) {
        self.acceptsLiveChanges = acceptsLiveChanges
        self.realtime = realtime
        self.schedule = schedule
        self.backend = backend
        self.tagger = tagger
        self.membership = membership
        self.log = log
        self.stop = stop
        self.states = Mutex(Self.initialStates(of: schedule))
        var queue = LiveQueue()
        queue.budget = max(ScenarioLimits.maximumChanges - schedule.changes.count, 0)
        self.live = Mutex(queue)
    }

    /// What each link is doing at the start of `schedule`.
    package static func initialStates(of schedule: TimelineSchedule) -> [String: LinkState] {
        var states: [String: LinkState] = [:]
        for initial in schedule.initial {
            if initial.direction == .up { states[initial.link, default: LinkState()].up = initial.conditions }
            else { states[initial.link, default: LinkState()].down = initial.conditions }
        }
        return states
    }

    /// The current state of each link.
    package var linkStates: [String: LinkState] { states.withLock { $0 } }

    /// Starts the player's thread.
    package func start() throws(SimulatorError) {
        let live: EventSignal
        do {
            live = try EventSignal()
        } catch {
            throw SimulatorError(.environment, "make the timeline's wake-up signal: eventfd: \(error)")
        }
        do throws(NetlinkError) {
            let player = try PinnedThread(name: "roam-timeline") { [self] in
                // Beside the emulator's threads, in the real-time class's lowest priority where
                // the process may use it: otherwise, with the cores busy (the emulator's own
                // real-time threads among them), the player wakes for a change milliseconds late.
                if realtime { ThreadScheduling.enterRealtimeClass() }
                play(waking: live)
            }
            running.withLock { $0 = (player, live) }
        } catch {
            throw SimulatorError("start the timeline thread", error)
        }
    }

    /// Waits for the thread to end (after the last change, or once the stop signal fires).
    package func join() {
        let (player, live) = running.withLock { running -> (PinnedThread?, EventSignal?) in
            defer { running = (nil, nil) }
            return running
        }
        player?.join()
        _ = live
    }

    /// Applies `events` (a change sent while the run plays, ``LiveChange``) now: resolved from
    /// each link's current conditions, what is due now applied before this returns, the rest (a
    /// ramp's later steps, a flap) played by the player's thread in time. A live change to a link
    /// replaces what is left of an earlier live change to it; the timeline's own later changes
    /// still play as written. Live changes and the timeline's take turns, one change at a time.
    /// Returns what was applied now. A run takes at most the timeline's bound of link changes
    /// (``ScenarioLimits/maximumChanges``), its timeline's and its live changes' together, so
    /// that what it plays and records stays bounded however many changes are sent: past it, a
    /// change is refused whole (``LiveChangeRefused``) and nothing of it is applied.
    package func applyLive(_ events: [TimelineEvent], scenario: Scenario) throws(LiveChangeRefused) -> [AppliedChange] {
        guard let first = events.map(\.at).min() else { return [] }
        return try applying.withLock { _ throws(LiveChangeRefused) -> [AppliedChange] in
            let current = states.withLock { states in
                states.mapValues { [TrafficDirection.up: $0.up, TrafficDirection.down: $0.down] }
            }
            for event in events {
                guard let match = event.match, event.action != .reset else { continue }
                for direction in TrafficDirection.allCases where event.direction == .both || event.direction.rawValue == direction.rawValue {
                    guard let conditions = current[event.link]?[direction], conditions.flow(match) == nil,
                          conditions.flows.count >= ScenarioLimits.maximumFlows else { continue }
                    throw LiveChangeRefused(message: "link '\(event.link)' (\(direction.rawValue)) has \(conditions.flows.count) flows with "
                        + "conditions of their own, the most a link direction holds; reset one first ({\"match\": ..., \"reset\": true})")
                }
            }
            let changes = TimelineSchedule.liveChanges(events, scenario: scenario, from: current)
            let links = Set(changes.map(\.link))
            let now = changes.filter { $0.at <= first }
            let later = changes.filter { $0.at > first }
            try live.withLock { queue throws(LiveChangeRefused) in
                let replaced = queue.pending.reduce(0) { $0 + (links.contains($1.change.link) ? 1 : 0) }
                guard changes.count <= queue.budget + replaced else {
                    throw LiveChangeRefused(message: "this change makes \(changes.count) link changes, and the run may take only "
                        + "\(queue.budget + replaced) more: a run plays at most \(ScenarioLimits.maximumChanges) link changes, its timeline's "
                        + "and live ones together; send a slower flap or a shorter one")
                }
                queue.budget += replaced - changes.count
                guard !later.isEmpty || replaced > 0 else { return }
                queue.pending.removeAll { links.contains($0.change.link) }
                for change in later {
                    queue.pending.append((queue.arrived, change))
                    queue.arrived += 1
                }
                queue.pending.sort { ($0.change.at, $0.order) > ($1.change.at, $1.order) }
            }
            if !later.isEmpty { running.withLock { $0.live }?.signal() }
            return now.map { perform($0) }
        }
    }

    /// The link changes a run may still take live (``applyLive(_:scenario:)``).
    package var liveBudget: Int { live.withLock { $0.budget } }

    private func play(waking liveSignal: EventSignal) {
        var next = 0
        let changes = schedule.changes
        while true {
            liveSignal.reset()
            let dueLive = live.withLock { $0.pending.last?.change.at }
            let dueStatic = next < changes.count ? changes[next].at : nil
            let due = [dueLive, dueStatic].compactMap { $0 }.min()
            // A player that takes no live changes ends after its last change, as it always did.
            if due == nil, !acceptsLiveChanges { return }
            // Nothing planned: wait for a live change (or the end of the run).
            let deadline = due.map { log.start + $0 } ?? .now + .seconds(3600)
            guard stop.wait(until: deadline, wakingOn: [liveSignal.pollEntry]) else { return }
            guard let due, log.elapsed >= due else { continue }
            // The timeline's change first when both are due at once.
            if let dueStatic, dueStatic <= due {
                let change = changes[next]
                next += 1
                applying.withLock { _ in _ = perform(change) }
            } else {
                applying.withLock { _ in
                    let change = live.withLock { queue -> ScheduledChange? in
                        guard let next = queue.pending.last, next.change.at <= due else { return nil }
                        return queue.pending.removeLast().change
                    }
                    if let change { _ = perform(change) }
                }
            }
        }
    }

    /// Applies one change through the backend (or the network's gateway), records it, and
    /// retags the link when its quality grade changed. Called with ``applying`` held.
    private func perform(_ change: ScheduledChange) -> AppliedChange {
        let started = log.elapsed
        let scheduleLateness = lastFinished.withLock { finished in max(.zero, started - max(change.at, finished)) }
        var failure: String?
        do throws(SimulatorError) {
            switch change.change {
            case .carrier(let up):
                // A phone's resolver moves off a network before its carrier goes, and back
                // after it returns.
                if !up { try membership?.carrierChanged(false, link: change.link) }
                try backend.setCarrier(up, link: change.link)
                if up { try membership?.carrierChanged(true, link: change.link) }
            case .membership(let joins):
                guard let membership else { throw SimulatorError(.invalidScenario, "'\(change.link)' joins no network in this run") }
                try membership.setMembership(joins, link: change.link)
            case .network(let action):
                guard let membership else { throw SimulatorError(.invalidScenario, "'\(change.link)' is part of no network in this run") }
                try membership.apply(action, link: change.link)
            case .conditions(let direction, let conditions):
                try backend.apply(conditions, link: change.link, direction: direction)
            }
        } catch {
            failure = error.message
        }
        let actual = log.elapsed
        var regraded: LinkQuality?
        if failure == nil {
            regraded = states.withLock { states -> LinkQuality? in
                guard let before = states[change.link]?.quality else { return nil }
                switch change.change {
                case .carrier(let up), .membership(let up): states[change.link]?.carrier = up
                case .network: break
                case .conditions(.up, let conditions): states[change.link]?.up = conditions
                case .conditions(.down, let conditions): states[change.link]?.down = conditions
                }
                let after = states[change.link]?.quality
                return after == before ? nil : after
            }
        }
        log.applied(change, actual: actual, failure: failure, scheduleLateness: scheduleLateness)
        if let regraded, let tagger {
            var failure: String?
            do throws(SimulatorError) {
                try tagger.tag(change.link, quality: regraded)
            } catch {
                failure = error.message
            }
            log.record(.quality(link: change.link, quality: regraded.rawValue, error: failure))
        }
        // Retagging and recording are part of the change: the next one's wait starts after them.
        let finished = log.elapsed
        lastFinished.withLock { $0 = finished }
        var applied = AppliedChange(change: change, actual: actual, failure: failure)
        applied.scheduleLateness = scheduleLateness
        return applied
    }
}

/// A live change the run refused whole: what it would take passes the run's bound.
package struct LiveChangeRefused: Error, Sendable {
    package var message: String
}
