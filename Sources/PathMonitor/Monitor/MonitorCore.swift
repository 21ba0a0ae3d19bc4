import Dispatch
import Glibc
import Netlink
import Synchronization

/// The state a monitor shares with its thread. Kept apart from ``NetworkPathMonitor`` so that
/// the thread does not keep the monitor alive: releasing the monitor cancels it.
final class MonitorCore: Sendable {
    enum Subscriber {
        case stream(AsyncStream<NetworkPath>.Continuation)
        case callback(DispatchQueue?, @Sendable (NetworkPath) -> Void)
    }

    enum Phase {
        case idle
        case starting(Wakeup)
        case running(PinnedThread, Wakeup)
        case cancelled
    }

    struct State {
        var phase = Phase.idle
        var currentPath: NetworkPath?
        var subscribers: [UInt64: Subscriber] = [:]
        var nextSubscriber: UInt64 = 0
        var statistics = NetworkPathMonitor.Statistics()
        var threadID: pthread_t?
        var failure: PathMonitorError?
    }

    private let state = Mutex(State())

    var currentPath: NetworkPath? { state.withLock { $0.currentPath } }
    var statistics: NetworkPathMonitor.Statistics { state.withLock { $0.statistics } }
    var failure: PathMonitorError? { state.withLock { $0.failure } }

    /// Ends the monitor from its own thread because the kernel refused something it accepted at start.
    func fail(_ error: PathMonitorError) {
        state.withLock { $0.failure = error }
        cancel()
    }

    var isCancelled: Bool { state.withLock { if case .cancelled = $0.phase { true } else { false } } }

    func updateStatistics(_ body: (inout NetworkPathMonitor.Statistics) -> Void) {
        state.withLock { body(&$0.statistics) }
    }

    func start(namespace: NetworkNamespace, configuration: NetworkPathMonitor.Configuration) throws(PathMonitorError) {
        let wakeup: Wakeup
        do throws(NetlinkError) {
            wakeup = try Wakeup()
        } catch {
            throw PathMonitorError(.netlink, "cannot start a path monitor: \(error)", underlying: error)
        }
        try state.withLock { state throws(PathMonitorError) in
            guard case .idle = state.phase else {
                throw PathMonitorError(.invalidState, "a path monitor can be started once; create a new one to watch again")
            }
            state.phase = .starting(wakeup)
        }

        let started = StartSignal()
        let thread: PinnedThread
        do throws(NetlinkError) {
            thread = try namespace.spawnThread(name: "roam-pathmon") { [self] entered in
                self.state.withLock { $0.threadID = pthread_self() }
                switch entered {
                case .failure(let error):
                    started.finish(.failure(PathMonitorError(starting: namespace, error)))
                case .success:
                    MonitorLoop(core: self, namespace: namespace, configuration: configuration, wakeup: wakeup).run(started: started)
                }
            }
        } catch {
            state.withLock { $0.phase = .idle }
            throw PathMonitorError(starting: namespace, error)
        }

        let result = started.wait()
        let cancelledMeanwhile = state.withLock { state -> Bool in
            if case .cancelled = state.phase { return true }
            if case .failure = result {
                state.phase = .idle
            } else {
                state.phase = .running(thread, wakeup)
            }
            return false
        }
        if case .failure(let error) = result {
            thread.join()
            throw error
        }
        if cancelledMeanwhile {
            wakeup.signal()
            thread.join()
        }
    }

    func cancel() {
        let (thread, wakeup, subscribers, onOwnThread) = state.withLock { state -> (PinnedThread?, Wakeup?, [Subscriber], Bool) in
            let subscribers = Array(state.subscribers.values)
            state.subscribers = [:]
            let onOwnThread = state.threadID.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            let previous = state.phase
            state.phase = .cancelled
            switch previous {
            case .running(let thread, let wakeup): return (thread, wakeup, subscribers, onOwnThread)
            case .starting(let wakeup): return (nil, wakeup, subscribers, onOwnThread)
            case .idle, .cancelled: return (nil, nil, subscribers, onOwnThread)
            }
        }
        wakeup?.signal()
        if let thread {
            // A handler that cancels runs on the monitor's thread, which cannot wait for itself.
            if onOwnThread { thread.detach() } else { thread.join() }
        }
        for case .stream(let continuation) in subscribers { continuation.finish() }
    }

    /// Publishes `path` if it differs from the last one. Called only by the monitor's thread.
    func publish(_ path: NetworkPath) {
        let subscribers = state.withLock { state -> [Subscriber]? in
            if case .cancelled = state.phase { return nil }
            guard state.currentPath != path else { return nil }
            state.currentPath = path
            state.statistics.pathsPublished += 1
            return state.subscribers.sorted { $0.key < $1.key }.map(\.value)
        }
        guard let subscribers else { return }
        for subscriber in subscribers { deliver(path, to: subscriber) }
    }

    private func deliver(_ path: NetworkPath, to subscriber: Subscriber) {
        switch subscriber {
        case .stream(let continuation):
            continuation.yield(path)
        case .callback(let queue, let handler):
            if let queue { queue.async { handler(path) } } else { handler(path) }
        }
    }

    func makeStream() -> AsyncStream<NetworkPath> {
        let (stream, continuation) = AsyncStream.makeStream(of: NetworkPath.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> UInt64? in
            if case .cancelled = state.phase { return nil }
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[id] = .stream(continuation)
            if let current = state.currentPath { continuation.yield(current) }
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func subscribe(queue: DispatchQueue?, _ handler: @escaping @Sendable (NetworkPath) -> Void) -> PathUpdateSubscription {
        let (id, current) = state.withLock { state -> (UInt64, NetworkPath?) in
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[id] = .callback(queue, handler)
            return (id, state.currentPath)
        }
        if let current { deliver(current, to: .callback(queue, handler)) }
        return PathUpdateSubscription { [weak self] in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
    }
}

/// A one-shot handshake between ``MonitorCore/start(namespace:configuration:)`` and the thread.
final class StartSignal: Sendable {
    private let result = Mutex<Result<Void, PathMonitorError>?>(nil)
    private let semaphore = DispatchSemaphore(value: 0)

    func finish(_ value: Result<Void, PathMonitorError>) {
        let first = result.withLock { current -> Bool in
            guard current == nil else { return false }
            current = value
            return true
        }
        if first { semaphore.signal() }
    }

    func wait() -> Result<Void, PathMonitorError> {
        semaphore.wait()
        return result.withLock { $0! }
    }
}
