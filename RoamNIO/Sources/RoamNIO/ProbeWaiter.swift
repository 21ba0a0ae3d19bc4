import Glibc
import Multipath
import NIOCore
import NIOPosix
import Netlink
import PathMonitor
import RoamSystem
import Synchronization

/// Runs the probes of a bootstrap's channels: one thread opens each probe (a connection attempt
/// over one interface, in the namespace) and waits for all of them with one `poll`, woken when a
/// probe is asked for or abandoned. Probes never occupy the pool the races run on, and a probe
/// into a blackhole costs no thread while it waits.
final class ProbeWaiter: Sendable {
    private struct Request: Sendable {
        var id: Int
        var interface: NetworkInterface
        var peer: IPAddress
        var port: UInt16
        var deadline: MonotonicInstant
        var completion: @Sendable (_ id: Int, _ connected: Bool) -> Void
    }

    private struct State {
        var requests: [Request] = []
        var abandoned: Set<Int> = []
        var nextID = 0
        var stopped = false
    }

    private let state = Mutex(State())
    /// Signalled to wake the thread; nil when no eventfd could be made (every probe then fails).
    private let wake: EventSignal?
    private let pool: NIOThreadPool

    init(namespace: NetworkNamespace) {
        wake = try? EventSignal()
        pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        // The thread holds the waiter until stop() ends it.
        pool.submit { _ in self.run(namespace: namespace) }
    }

    /// Starts a probe over `interface` to `peer`; `completion` gets its number and whether it
    /// connected before `deadline` (on the waiter's thread). Returns its number, for ``abandon(_:)``.
    func probe(_ interface: NetworkInterface, to peer: IPAddress, port: UInt16, deadline: NIODeadline,
               completion: @escaping @Sendable (_ id: Int, _ connected: Bool) -> Void) -> Int {
        let id = state.withLock { state -> Int? in
            guard !state.stopped, wake != nil else { return nil }
            state.nextID += 1
            // In the waiter's clock: what remains of NIO's deadline, from now.
            let remaining = Duration.nanoseconds(max(0, (deadline - .now()).nanoseconds))
            state.requests.append(Request(id: state.nextID, interface: interface, peer: peer, port: port, deadline: .now + remaining,
                                          completion: completion))
            return state.nextID
        }
        guard let id else {
            completion(0, false)
            return 0
        }
        signal()
        return id
    }

    /// Resets and closes probe `id` without calling its completion.
    func abandon(_ id: Int) {
        state.withLock { _ = $0.abandoned.insert(id) }
        signal()
    }

    /// Ends the thread, abandoning every probe (the signal closes with the waiter).
    func stop() {
        state.withLock { $0.stopped = true }
        signal()
        pool.shutdownGracefully { _ in }
    }

    private func signal() {
        wake?.signal()
    }

    private func run(namespace: NetworkNamespace) {
        guard let wake else { return }
        var active: [Int: (probe: PathProbe, deadline: MonotonicInstant, completion: @Sendable (Int, Bool) -> Void)] = [:]
        while true {
            let (requests, abandoned, stopped) = state.withLock { state in
                defer {
                    state.requests = []
                    state.abandoned = []
                }
                return (state.requests, state.abandoned, state.stopped)
            }
            if stopped {
                for entry in active.values { entry.probe.abandon() }
                for request in requests where !abandoned.contains(request.id) { request.completion(request.id, false) }
                return
            }
            for request in requests where !abandoned.contains(request.id) {
                guard let probe = PathProbe(request.interface, to: request.peer, port: request.port, in: namespace) else {
                    request.completion(request.id, false)
                    continue
                }
                active[request.id] = (probe, request.deadline, request.completion)
            }
            for id in abandoned { active.removeValue(forKey: id)?.probe.abandon() }

            let ids = Array(active.keys)
            var entries = [wake.pollEntry]
            entries += ids.map { pollfd(fd: active[$0]!.probe.connectingSocket?.rawValue ?? -1, events: Int16(POLLOUT), revents: 0) }
            // To the nanosecond (ppoll), waking on the earliest deadline or a new request.
            _ = try? waitForEvents(&entries, until: active.values.map(\.deadline).min())
            if entries[0].revents != 0 { _ = wake.reset() }
            let after = MonotonicInstant.now
            for (slot, id) in ids.enumerated() {
                guard let entry = active[id] else { continue }
                if entries[slot + 1].revents != 0 {
                    active[id] = nil
                    entry.completion(id, entry.probe.poll() ?? false)
                } else if after >= entry.deadline {
                    active[id] = nil
                    entry.probe.abandon()
                    entry.completion(id, false)
                }
            }
        }
    }
}
