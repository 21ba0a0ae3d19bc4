import Netlink
import RoamDecisions
import RoamSystem
import Synchronization

/// Demotes an interface whose MPTCP subflows stall, for every MPTCP connection of a namespace,
/// whichever program opened it: what Roam's own handover clients do for their connections,
/// done from the outside for programs run under `mptcpize run`.
///
/// A few times a second it reads the namespace's subflows from the kernel (sock_diag: each
/// subflow's `tcp_info` and MPTCP flags, only while the namespace has MPTCP connections) and
/// hands them to `SubflowStallJudge`. An interface judged stalled has its endpoints withdrawn
/// in ``MPTCPPathManager`` (``MPTCPPathManager/withdrawStalled(_:)``: the kernel closes its
/// subflows and sends what they held over the others; one that is the only interface left
/// stays, least preferred) and is held down as `StalledPaths` holds a flow's interface: one
/// second the first time, doubling with each stall up to thirty. When the hold ends it gets its
/// endpoints back (``MPTCPPathManager/clearStalled(_:)``: new subflows join over it); one that
/// stalls again is held down twice as long.
///
/// What it cannot see: a connection that only receives, whose peer sends into a path that loses,
/// is judged from the silence after a stream and the subflow's losses on the way in (the rule in
/// `SubflowStallJudge`); a peer that stops sending on a clean path is idle, not stalled, and is
/// left alone.
public final class MPTCPStallDemotion: Sendable {
    /// What it did.
    public enum Event: Sendable, CustomStringConvertible {
        /// An interface judged stalled, its endpoints withdrawn for `holdDown`.
        case demoted(SubflowStallJudge.Stall, holdDown: Duration, changes: [MPTCPPathManager.Change])
        /// Its hold-down passed: its place given back.
        case restored(interface: String, changes: [MPTCPPathManager.Change])
        /// Reading the subflows or changing the endpoints failed (it goes on at the next sample).
        case failed(String)

        public var description: String {
            switch self {
            case let .demoted(stall, hold, changes):
                "\(stall); held down for \(Int(hold / .milliseconds(1))) ms" + (changes.isEmpty ? "" : ": " + changes.map(\.description).joined(separator: "; "))
            case let .restored(interface, changes):
                "\(interface) restored after its hold-down" + (changes.isEmpty ? "" : ": " + changes.map(\.description).joined(separator: "; "))
            case let .failed(reason): reason
            }
        }
    }

    private struct State {
        var judge: SubflowStallJudge
        var held: StalledPaths
        var demoted: Set<String> = []
    }

    /// A value only the watcher's thread touches once it has started.
    private final class ThreadOwned<Value>: @unchecked Sendable {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    private let manager: MPTCPPathManager
    private let stopping: EventSignal
    private let thread: Mutex<PinnedThread?>

    /// Starts watching the subflows of `manager`'s namespace.
    ///
    /// - Parameters:
    ///   - manager: The path manager whose endpoints it demotes and restores.
    ///   - interval: How often the subflows are read.
    ///   - judge: The stall rules' parameters.
    ///   - initialHold: An interface's hold-down after its first stall, doubling with each
    ///     further one.
    ///   - maximumHold: The most a hold-down grows to.
    ///   - onEvent: Hears each demotion, restoration or failure, on the watcher's thread.
    /// - Throws: ``MultipathError/system(operation:_:)`` when the namespace's socket diagnostics
    ///   cannot be opened.
    public init(manager: MPTCPPathManager, interval: Duration = .milliseconds(100),
                judge: SubflowStallJudge.Configuration = SubflowStallJudge.Configuration(),
                initialHold: Duration = .seconds(1), maximumHold: Duration = .seconds(30),
                onEvent: @escaping @Sendable (Event) -> Void) throws(MultipathError) {
        self.manager = manager
        let diagnostics: MPTCPSubflowDiagnostics
        // Whether the kernel counts MPTCP connections (mptcp_diag, a module of its own): without
        // it every sample reads the TCP sockets, the subflows among them.
        let countsConnections: Bool
        do throws(NetlinkError) {
            diagnostics = try MPTCPSubflowDiagnostics(namespace: manager.namespace)
            _ = try diagnostics.subflows()
            countsConnections = (try? diagnostics.connectionCount()) != nil
        } catch {
            throw .system(operation: "read the MPTCP subflows of \(manager.namespace)", error)
        }
        do {
            stopping = try EventSignal()
        } catch {
            throw .system(operation: "make the stall watcher's wake-up", NetlinkError.posix("eventfd", errno: error.rawValue))
        }
        // Both used on the watcher's thread only.
        let state = ThreadOwned(State(judge: SubflowStallJudge(configuration: judge),
                                      held: StalledPaths(initialHold: initialHold, maximumHold: maximumHold)))
        let reader = ThreadOwned(diagnostics)
        let clock = ContinuousClock()
        let start = clock.now
        let stopping = self.stopping
        let made: PinnedThread
        do {
            made = try PinnedThread(name: "roam-mptcp-stalls") {
                while stopping.wait(for: interval) {
                    Self.sample(reader.value, countsConnections: countsConnections, manager: manager, state: &state.value,
                                now: clock.now - start, onEvent: onEvent)
                }
            }
        } catch {
            throw .system(operation: "start the stall watcher", error)
        }
        thread = Mutex(made)
    }

    /// Stops watching; the endpoints stay as they are (``MPTCPPathManager/stop()`` removes them).
    public func stop() {
        stopping.signal()
        thread.withLock { thread in
            thread?.join()
            thread = nil
        }
    }

    deinit { stop() }

    private static func sample(_ diagnostics: MPTCPSubflowDiagnostics, countsConnections: Bool, manager: MPTCPPathManager,
                               state: inout State, now: Duration,
                               onEvent: @Sendable (Event) -> Void) {
        // Hold-downs that passed: their interfaces get their place back.
        for interface in state.demoted.sorted() where !state.held.isHeldDown(interface, at: now) {
            state.demoted.remove(interface)
            do throws(MultipathError) {
                onEvent(.restored(interface: interface, changes: try manager.clearStalled(interface)))
            } catch {
                onEvent(.failed("restore \(interface): \(error)"))
            }
        }
        let subflows: [MPTCPSubflowInfo]
        do throws(NetlinkError) {
            // The namespace's TCP sockets are read only while it has MPTCP connections.
            let any = countsConnections ? try diagnostics.connectionCount() > 0 : true
            subflows = any ? try diagnostics.subflows() : []
        } catch {
            onEvent(.failed("read the subflows: \(error)"))
            return
        }
        let samples = subflows.compactMap { subflow -> SubflowStallJudge.Sample? in
            guard let interface = manager.interface(owning: subflow.local) else { return nil }
            return SubflowStallJudge.Sample(
                interface: interface, connection: subflow.token, subflow: subflow.cookie, isBackup: subflow.isBackup,
                unacknowledged: Int(subflow.unacknowledged), sinceDataReceived: subflow.sinceDataReceived,
                sinceAcknowledgementReceived: subflow.sinceAcknowledgementReceived, smoothedRTT: subflow.smoothedRTT,
                dataSegmentsReceived: subflow.dataSegmentsReceived, outOfOrderPacketsReceived: subflow.outOfOrderPacketsReceived,
                retransmissions: subflow.totalRetransmissions)
        }
        for stall in state.judge.observe(samples, at: now) where !state.held.isHeldDown(stall.interface, at: now) {
            let hold = state.held.markStalled(stall.interface, at: now)
            state.demoted.insert(stall.interface)
            do throws(MultipathError) {
                onEvent(.demoted(stall, holdDown: hold, changes: try manager.withdrawStalled(stall.interface)))
            } catch {
                onEvent(.failed("demote \(stall.interface): \(error)"))
            }
        }
    }
}
