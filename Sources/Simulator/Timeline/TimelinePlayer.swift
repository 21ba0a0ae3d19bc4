import Netlink
import Synchronization

/// Plays a ``TimelineSchedule`` on its own thread: waits for each change's planned time on the
/// monotonic clock (with `ppoll`, whose nanosecond timeout keeps lateness at the scheduler's
/// wake-up latency), applies it through the backend, and logs planned and actual time.
public final class TimelinePlayer: Sendable {
    private let schedule: TimelineSchedule
    private let log: RunLog
    private let stop: StopSignal
    private let states: Mutex<[String: LinkState]>
    private let thread: Mutex<PinnedThread?> = Mutex(nil)
    private nonisolated(unsafe) let backend: any LinkBackend

    /// What a link is doing now, for progress lines.
    public struct LinkState: Sendable {
        public var carrier = true
        public var up = LinkConditions()
        public var down = LinkConditions()

        public var summary: String {
            guard carrier else { return "down" }
            if up == down { return up.summary }
            return "↑\(up.summary) ↓\(down.summary)"
        }
    }

    /// A player of `schedule` through `backend`, timed from `log`'s start; `stop` ends it early.
    public init(schedule: TimelineSchedule, backend: any LinkBackend, log: RunLog, stop: StopSignal) {
        self.schedule = schedule
        self.backend = backend
        self.log = log
        self.stop = stop
        var states: [String: LinkState] = [:]
        for initial in schedule.initial {
            if initial.direction == .up { states[initial.link, default: LinkState()].up = initial.conditions }
            else { states[initial.link, default: LinkState()].down = initial.conditions }
        }
        self.states = Mutex(states)
    }

    /// The current state of each link.
    public var linkStates: [String: LinkState] { states.withLock { $0 } }

    /// Starts the player's thread.
    public func start() throws(SimulatorError) {
        do throws(NetlinkError) {
            let player = try PinnedThread(name: "roam-timeline") { [self] in play() }
            thread.withLock { $0 = player }
        } catch {
            throw SimulatorError("start the timeline thread", error)
        }
    }

    /// Waits for the thread to end (after the last change, or once the stop signal fires).
    public func join() {
        let player = thread.withLock { thread -> PinnedThread? in
            defer { thread = nil }
            return thread
        }
        player?.join()
    }

    private func play() {
        for change in schedule.changes {
            guard stop.wait(until: log.start + change.at) else { return }
            var failure: String?
            do throws(SimulatorError) {
                switch change.change {
                case .carrier(let up):
                    try backend.setCarrier(up, link: change.link)
                case .conditions(let direction, let conditions):
                    try backend.apply(conditions, link: change.link, direction: direction)
                }
            } catch {
                failure = error.message
            }
            let actual = log.elapsed
            if failure == nil {
                states.withLock { states in
                    switch change.change {
                    case .carrier(let up): states[change.link]?.carrier = up
                    case .conditions(.up, let conditions): states[change.link]?.up = conditions
                    case .conditions(.down, let conditions): states[change.link]?.down = conditions
                    }
                }
            }
            log.applied(change, actual: actual, failure: failure)
        }
    }
}
