import Dispatch
import Glibc
import Netlink
import RoamCore
import RoamSystem
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
        case starting(EventSignal)
        /// Watching (thread and wakeup are nil only in tests of delivery, where whoever
        /// publishes delivers).
        case running(PinnedThread?, EventSignal?)
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
        /// Deliveries asked for from other threads (a new subscriber's first path), run by the
        /// monitor's thread before the next path it publishes.
        var posted: [@Sendable () -> Void] = []
        /// Interfaces asked to be validated again (nil: all), taken by the monitor's thread.
        var revalidations: [String?] = []
        /// Rules that replace the configuration's, taken by the monitor's thread at its next
        /// evaluation.
        var interfaceRules: InterfaceRules?
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

    // Paths reach subscribers from the monitor's own thread, which stays in the namespaces of
    // the thread that started it and reaches the watched namespace only through sockets opened
    // there (see MonitorLoop). Dispatch starts pool threads from whichever thread enqueues work,
    // and they inherit its namespaces: a thread that entered the watched namespace must never
    // deliver.
    func start(namespace: NetworkNamespace, configuration: NetworkPathMonitor.Configuration) throws(PathMonitorError) {
        let wakeup: EventSignal
        do {
            wakeup = try EventSignal()
        } catch {
            let failure = NetlinkError.posix("eventfd", errno: error.rawValue)
            throw PathMonitorError(.netlink, "cannot start a path monitor: \(failure)", underlying: failure)
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
            thread = try PinnedThread(name: "roam-pathmon") { [self] in
                self.state.withLock { $0.threadID = pthread_self() }
                MonitorLoop(core: self, namespace: namespace, configuration: configuration, wakeup: wakeup).run(started: started)
                // Whatever was posted and not yet run (a start's first deliveries) runs now;
                // callbacks of a cancelled monitor get nothing (see deliver).
                self.runPosted()
            }
        } catch {
            state.withLock { $0.phase = .idle }
            throw PathMonitorError(starting: namespace, error)
        }

        let result = started.wait()
        let firstDelivered = DispatchSemaphore(value: 0)
        let cancelledMeanwhile = state.withLock { state -> Bool in
            if case .cancelled = state.phase { return true }
            if case .failure = result {
                state.phase = .idle
            } else {
                state.phase = .running(thread, wakeup)
                // Those who subscribed before the start get the first path now.
                let subscribers = state.subscribers.sorted { $0.key < $1.key }
                let current = state.currentPath
                state.posted.append { [self] in
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
            throw error
        }
        if cancelledMeanwhile {
            wakeup.signal()
            thread.join()
            return
        }
        wakeup.signal()
        // Handlers that subscribed before the start (on no queue) have the first path when
        // start returns, as currentPath does.
        firstDelivered.wait()
    }

    func cancel() {
        let (thread, wakeup, streams, onOwnThread) = state.withLock { state -> (PinnedThread?, EventSignal?, [AsyncStream<NetworkPath>.Continuation], Bool) in
            let streams = state.subscribers.values.compactMap { subscriber -> AsyncStream<NetworkPath>.Continuation? in
                if case .stream(let continuation) = subscriber { continuation } else { nil }
            }
            state.subscribers = [:]
            let onOwnThread = state.threadID.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            let previous = state.phase
            state.phase = .cancelled
            switch previous {
            case .running(let thread, let wakeup): return (thread, wakeup, streams, onOwnThread)
            case .starting(let wakeup): return (nil, wakeup, streams, onOwnThread)
            case .idle, .cancelled: return (nil, nil, streams, onOwnThread)
            }
        }
        wakeup?.signal()
        if let thread {
            // The monitor's thread cancels itself when netlink fails, or from a handler it runs;
            // it cannot wait for itself.
            if onOwnThread { thread.detach() } else { thread.join() }
        }
        // Streams keep the paths handed over before the cancel (the newest is what a consumer
        // sees), then end; callbacks get nothing more (see deliver).
        for stream in streams { stream.finish() }
    }

    /// Publishes `path` if it differs from the last one, and hands it to every subscriber, in
    /// order, on the calling thread: the monitor's own. What other threads posted runs first.
    func publish(_ path: NetworkPath) {
        let (posted, subscribers) = state.withLock { state -> ([@Sendable () -> Void], [(key: UInt64, value: Subscriber)]) in
            guard state.currentPath != path else { return ([], []) }
            switch state.phase {
            case .idle, .cancelled:
                return ([], [])
            case .starting:
                // The first path, published before anyone can be told; start() delivers it.
                state.currentPath = path
                state.statistics.pathsPublished += 1
                return ([], [])
            case .running:
                state.currentPath = path
                state.statistics.pathsPublished += 1
                defer { state.posted = [] }
                return (state.posted, state.subscribers.sorted { $0.key < $1.key })
            }
        }
        for work in posted { work() }
        for (id, subscriber) in subscribers { deliver(path, to: subscriber, id: id) }
    }

    /// Asks the monitor's thread to validate `interface` (every one when nil) again now.
    func requestRevalidation(of interface: String?) {
        let wakeup = state.withLock { state -> EventSignal? in
            guard case .running(_, let wakeup) = state.phase else { return nil }
            // Bounded: many asks before the thread takes them become one for every interface.
            if state.revalidations.count >= 64 { state.revalidations = [nil] } else { state.revalidations.append(interface) }
            return wakeup
        }
        wakeup?.signal()
    }

    /// Has the monitor's thread classify interfaces by `rules` from its next evaluation on.
    func requestInterfaceRules(_ rules: InterfaceRules) {
        let wakeup = state.withLock { state -> EventSignal? in
            state.interfaceRules = rules
            guard case .running(_, let wakeup) = state.phase else { return nil }
            return wakeup
        }
        wakeup?.signal()
    }

    /// Whether rules wait for the monitor's thread.
    var hasInterfaceRules: Bool { state.withLock { $0.interfaceRules != nil } }

    /// The rules asked for since the last call, if any.
    func takeInterfaceRules() -> InterfaceRules? {
        state.withLock { state in
            defer { state.interfaceRules = nil }
            return state.interfaceRules
        }
    }

    /// The revalidations asked for since the last call: nil for every interface.
    func takeRevalidations() -> Set<String>?? {
        state.withLock { state -> Set<String>?? in
            defer { state.revalidations = [] }
            guard !state.revalidations.isEmpty else { return .none }
            if state.revalidations.contains(where: { $0 == nil }) { return .some(nil) }
            return .some(Set(state.revalidations.compactMap { $0 }))
        }
    }

    /// Runs what other threads posted for the monitor's thread. Called by that thread when
    /// woken, and when it ends.
    func runPosted() {
        let posted = state.withLock { state -> [@Sendable () -> Void] in
            defer { state.posted = [] }
            return state.posted
        }
        for work in posted { work() }
    }

    /// Has the monitor's thread run `work` before the next path it publishes; in tests of
    /// delivery, with no thread, runs it now. Called with the state locked.
    private func post(_ work: @escaping @Sendable () -> Void, state: inout State) -> (() -> Void)? {
        guard case .running(let thread, let wakeup) = state.phase else { return nil }
        guard thread != nil, let wakeup else { return work }
        state.posted.append(work)
        return { wakeup.signal() }
    }

    /// Hands `path` to one subscriber, on the monitor's thread. A callback whose subscription
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
        let (id, then) = state.withLock { state -> (UInt64, (() -> Void)?) in
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            let subscriber = Subscriber.callback(queue, handler)
            state.subscribers[id] = subscriber
            // The current path goes first, through the monitor's thread as the changes do, so
            // that the handler sees the paths in order and never two at once.
            guard let current = state.currentPath else { return (id, nil) }
            return (id, post({ [self] in self.deliver(current, to: subscriber, id: id) }, state: &state))
        }
        then?()
        return PathUpdateSubscription { [weak self] in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
    }

    /// Delivers what ``publish(_:)`` is given without watching a namespace: for tests of delivery.
    func startDeliveringWithoutWatching() {
        state.withLock { $0.phase = .running(nil, nil) }
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
