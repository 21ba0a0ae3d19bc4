import Glibc
import Synchronization

/// A thread that runs closures one after another, in the order posted, in the namespaces of
/// the thread that created it: where a ``PinnedThread`` hands results to the rest of the process.
///
/// A thread inherits its network and mount namespaces from the thread that creates it, and
/// Dispatch on Linux starts its worker threads from whichever thread enqueues work when none is
/// idle: resuming a continuation, yielding to an `AsyncStream` or calling `DispatchQueue.async`
/// on a thread pinned to another namespace can therefore start a pool thread inside that
/// namespace, and every task later scheduled there runs in the wrong namespace. Pinned threads
/// post such work here instead.
public final class DeliveryThread: Sendable {
    /// The queue the thread and its owner share; it lives as long as either.
    private final class Mailbox: @unchecked Sendable {
        struct State {
            var work: [@Sendable () -> Void] = []
            var stopping = false
            var threadID: pthread_t?
        }

        let state = Mutex(State())
        private let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

        init() { sem_init(semaphore, 0, 0) }

        deinit {
            sem_destroy(semaphore)
            semaphore.deallocate()
        }

        func signal() { sem_post(semaphore) }

        func run() {
            state.withLock { $0.threadID = pthread_self() }
            while true {
                while sem_wait(semaphore) != 0 && errno == EINTR {}
                let (next, stop) = state.withLock { state -> ((@Sendable () -> Void)?, Bool) in
                    if state.work.isEmpty { return (nil, state.stopping) }
                    return (state.work.removeFirst(), false)
                }
                if let next { next() } else if stop { return }
            }
        }
    }

    private let mailbox = Mailbox()
    private let thread: Mutex<PinnedThread?>

    /// Starts the thread, named `name`.
    public init(name: String) throws(NetlinkError) {
        let mailbox = self.mailbox
        thread = Mutex(try PinnedThread(name: name) { mailbox.run() })
    }

    deinit {
        finish(discardingPending: true)
    }

    /// Runs `work` on the thread after everything posted before it. Ignored once finishing.
    public func post(_ work: @escaping @Sendable () -> Void) {
        let accepted = mailbox.state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.work.append(work)
            return true
        }
        if accepted { mailbox.signal() }
    }

    /// True on the thread itself.
    public var isCurrent: Bool {
        mailbox.state.withLock { $0.threadID.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Ends the thread: after the work posted so far, or at once with `discardingPending`.
    /// Waits for it unless called on the thread itself (from work it runs), which then ends
    /// after the current work. Idempotent.
    public func finish(discardingPending: Bool = false) {
        mailbox.state.withLock { state in
            state.stopping = true
            if discardingPending { state.work.removeAll() }
        }
        mailbox.signal()
        guard let thread = thread.withLock({ value -> PinnedThread? in defer { value = nil }; return value }) else { return }
        if isCurrent { thread.detach() } else { thread.join() }
    }
}
