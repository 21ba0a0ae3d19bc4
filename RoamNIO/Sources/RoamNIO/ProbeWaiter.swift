import Glibc
import Multipath
import NIOCore
import NIOPosix
import Netlink
import PathMonitor
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
        var deadline: NIODeadline
        var completion: @Sendable (_ id: Int, _ connected: Bool) -> Void
    }

    private struct State {
        var requests: [Request] = []
        var abandoned: Set<Int> = []
        var nextID = 0
        var stopped = false
    }

    private let state = Mutex(State())
    /// Written to wake the thread; read end, write end.
    private let wake: (Int32, Int32)
    private let pool: NIOThreadPool

    init(namespace: NetworkNamespace) {
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends {
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
                _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            }
        }
        wake = (ends[0], ends[1])
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
            guard !state.stopped else { return nil }
            state.nextID += 1
            state.requests.append(Request(id: state.nextID, interface: interface, peer: peer, port: port, deadline: deadline, completion: completion))
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

    /// Ends the thread (abandoning every probe) and closes the wake-up pipe once it has.
    func stop() {
        state.withLock { $0.stopped = true }
        signal()
        let wake = self.wake
        pool.shutdownGracefully { _ in
            close(wake.0)
            close(wake.1)
        }
    }

    private func signal() {
        var byte: UInt8 = 1
        _ = write(wake.1, &byte, 1)
    }

    private func run(namespace: NetworkNamespace) {
        let wake = self.wake.0
        var active: [Int: (probe: PathProbe, deadline: NIODeadline, completion: @Sendable (Int, Bool) -> Void)] = [:]
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
            var entries = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            entries += ids.map { pollfd(fd: active[$0]!.probe.descriptor, events: Int16(POLLOUT), revents: 0) }
            let now = NIODeadline.now()
            let timeout = active.values.map(\.deadline).min().map { deadline -> Int32 in
                deadline <= now ? 0 : Int32(clamping: ((deadline - now).nanoseconds + 999_999) / 1_000_000)
            } ?? -1
            _ = poll(&entries, nfds_t(entries.count), timeout)
            if entries[0].revents != 0 {
                var buffer = [UInt8](repeating: 0, count: 64)
                while read(wake, &buffer, buffer.count) > 0 {}
            }
            let after = NIODeadline.now()
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
