import Glibc
import Netlink
import Synchronization

/// A task executor whose one thread lives in a network namespace.
///
/// Namespaces belong to threads, and Swift's cooperative pool threads stay in the process's
/// namespace; so async code under test that must open its sockets in a node runs with this
/// executor as its preference (``NodeHandle/run(_:)``). Threads that code starts from there
/// (an event loop group, a thread pool) inherit the namespace.
final class NamespaceExecutor: TaskExecutor, Sendable {
    /// What the executor and its thread share; the thread never holds the executor itself.
    private final class Queue: @unchecked Sendable {
        struct State {
            var jobs: [UnownedJob] = []
            var stopping = false
            var executor: UnownedTaskExecutor?
        }
        let state = Mutex(State())
        let wake = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
        init() { sem_init(wake, 0, 0) }
        deinit {
            sem_destroy(wake)
            wake.deallocate()
        }

        func post() { sem_post(wake) }

        func loop() {
            while true {
                while sem_wait(wake) != 0 && errno == EINTR {}
                let (job, executor, stop) = state.withLock { state -> (UnownedJob?, UnownedTaskExecutor?, Bool) in
                    state.jobs.isEmpty ? (nil, nil, state.stopping) : (state.jobs.removeFirst(), state.executor, false)
                }
                if let job, let executor {
                    job.runSynchronously(on: executor)
                } else if stop {
                    return
                }
            }
        }
    }

    private let queue = Queue()
    private let thread: PinnedThread

    init(namespace: NetworkNamespace, name: String) throws(NetlinkError) {
        let queue = self.queue
        let entered = Mutex<Result<Void, NetlinkError>?>(nil)
        let ready = Queue()
        thread = try namespace.spawnThread(name: name) { result in
            entered.withLock { $0 = result }
            ready.post()
            if case .success = result { queue.loop() }
        }
        while sem_wait(ready.wake) != 0 && errno == EINTR {}
        if case .failure(let error) = entered.withLock({ $0 }) {
            thread.join()
            throw error
        }
        queue.state.withLock { $0.executor = asUnownedTaskExecutor() }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        queue.state.withLock { $0.jobs.append(unowned) }
        queue.post()
    }

    /// Ends the thread once every job enqueued so far has run, and waits for it.
    func shutdown() {
        queue.state.withLock { $0.stopping = true }
        queue.post()
        thread.join()
    }
}
