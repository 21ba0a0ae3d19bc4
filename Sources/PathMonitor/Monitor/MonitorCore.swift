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
        case starting(Wakeup, DeliveryThread)
        /// Watching (thread and wakeup are nil only in tests of delivery).
        case running(PinnedThread?, Wakeup?, DeliveryThread)
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
        let delivery: DeliveryThread
        do throws(NetlinkError) {
            wakeup = try Wakeup()
            // Paths reach subscribers from a thread in the caller's namespaces, never from the
            // thread pinned to the watched namespace (see DeliveryThread).
            delivery = try DeliveryThread(name: "roam-pathmon-d")
        } catch {
            throw PathMonitorError(.netlink, "cannot start a path monitor: \(error)", underlying: error)
        }
        do throws(PathMonitorError) {
            try state.withLock { state throws(PathMonitorError) in
                guard case .idle = state.phase else {
                    throw PathMonitorError(.invalidState, "a path monitor can be started once; create a new one to watch again")
                }
                state.phase = .starting(wakeup, delivery)
            }
        } catch {
            delivery.finish(discardingPending: true)
            throw error
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
            delivery.finish(discardingPending: true)
            throw PathMonitorError(starting: namespace, error)
        }

        let result = started.wait()
        let firstDelivered = DispatchSemaphore(value: 0)
        let cancelledMeanwhile = state.withLock { state -> Bool in
            if case .cancelled = state.phase { return true }
            if case .failure = result {
                state.phase = .idle
            } else {
                state.phase = .running(thread, wakeup, delivery)
                // Those who subscribed before the start get the first path now.
                let subscribers = state.subscribers.sorted { $0.key < $1.key }
                let current = state.currentPath
                delivery.post { [self] in
                    if let current {
                        for (id, subscriber) in subscribers { self.deliver(current, to: subscriber, id: id) }
                    }
                    firstDelivered.signal()
                }
            }
            return false
        }
        if case .failure(let error) = result {
            thread.join()
            delivery.finish(discardingPending: true)
            throw error
        }
        if cancelledMeanwhile {
            wakeup.signal()
            thread.join()
            delivery.finish(discardingPending: true)
            return
        }
        // Handlers that subscribed before the start (on no queue) have the first path when
        // start returns, as currentPath does.
        firstDelivered.wait()
    }

    func cancel() {
        let (thread, wakeup, delivery, streams, onOwnThread) = state.withLock { state -> (PinnedThread?, Wakeup?, DeliveryThread?, [AsyncStream<NetworkPath>.Continuation], Bool) in
            let streams = state.subscribers.values.compactMap { subscriber -> AsyncStream<NetworkPath>.Continuation? in
                if case .stream(let continuation) = subscriber { continuation } else { nil }
            }
            state.subscribers = [:]
            let onOwnThread = state.threadID.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            let previous = state.phase
            state.phase = .cancelled
            switch previous {
            case .running(let thread, let wakeup, let delivery): return (thread, wakeup, delivery, streams, onOwnThread)
            case .starting(let wakeup, let delivery): return (nil, wakeup, delivery, streams, onOwnThread)
            case .idle, .cancelled: return (nil, nil, nil, streams, onOwnThread)
            }
        }
        wakeup?.signal()
        if let thread {
            // The monitor's thread cancels itself when netlink fails; it cannot wait for itself.
            if onOwnThread { thread.detach() } else { thread.join() }
        }
        guard let delivery else {
            for stream in streams { stream.finish() }
            return
        }
        // Streams still get the paths handed over before the cancel (the newest is what a
        // consumer sees), then end; callbacks get nothing more (see deliver). The streams end
        // on the delivery thread, after those paths.
        delivery.post {
            for stream in streams { stream.finish() }
        }
        delivery.finish()
    }

    /// Publishes `path` if it differs from the last one. Called only by the monitor's thread,
    /// which hands the deliveries to the delivery thread, in order.
    func publish(_ path: NetworkPath) {
        state.withLock { state in
            guard state.currentPath != path else { return }
            switch state.phase {
            case .idle, .cancelled:
                return
            case .starting:
                // The first path, published before anyone can be told; start() delivers it.
                state.currentPath = path
                state.statistics.pathsPublished += 1
            case .running(_, _, let delivery):
                state.currentPath = path
                state.statistics.pathsPublished += 1
                let subscribers = state.subscribers.sorted { $0.key < $1.key }
                guard !subscribers.isEmpty else { return }
                delivery.post { [self] in
                    for (id, subscriber) in subscribers { self.deliver(path, to: subscriber, id: id) }
                }
            }
        }
    }

    /// Hands `path` to one subscriber, on the delivery thread. A callback whose subscription
    /// ended, or whose monitor was cancelled, since the path was published gets nothing.
    private func deliver(_ path: NetworkPath, to subscriber: Subscriber, id: UInt64) {
        switch subscriber {
        case .stream(let continuation):
            continuation.yield(path)
        case .callback(let queue, let handler):
            guard state.withLock({ $0.subscribers[id] != nil }) else { return }
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
        let id = state.withLock { state -> UInt64 in
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            let subscriber = Subscriber.callback(queue, handler)
            state.subscribers[id] = subscriber
            // The current path goes first, through the delivery thread as the changes do, so
            // that the handler sees the paths in order and never two at once.
            if let current = state.currentPath, case .running(_, _, let delivery) = state.phase {
                delivery.post { [self] in self.deliver(current, to: subscriber, id: id) }
            }
            return id
        }
        return PathUpdateSubscription { [weak self] in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
    }

    /// Delivers what ``publish(_:)`` is given without watching a namespace: for tests of delivery.
    func startDeliveringWithoutWatching() throws(NetlinkError) {
        let delivery = try DeliveryThread(name: "roam-pathmon-d")
        state.withLock { $0.phase = .running(nil, nil, delivery) }
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
