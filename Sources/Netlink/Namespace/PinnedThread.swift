import CRoamLinux
import Glibc
import Synchronization

/// An operating-system thread that belongs to one piece of work.
///
/// Network namespaces are a property of a thread, not of a process: a thread that calls
/// `setns(2)` moves alone. Roam therefore never switches the namespace of a shared thread
/// (the main thread, a Dispatch worker or the Swift concurrency pool); namespace work runs on
/// a `PinnedThread` that is created for it and ends with it.
public final class PinnedThread: Sendable {
    private final class Context: @unchecked Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    private static let running = Mutex<[String: Int]>([:])

    /// How many pinned threads are running now, in this process (for leak checks).
    public static var runningCount: Int { running.withLock { $0.values.reduce(0, +) } }

    /// How many pinned threads named `name` are running now (for leak checks that other work
    /// in the process must not disturb).
    public static func runningCount(named name: String) -> Int { running.withLock { $0[name, default: 0] } }

    private static func count(_ name: String, _ delta: Int) {
        running.withLock { $0[name, default: 0] += delta }
    }

    private let handle: pthread_t
    /// The name given to the thread (visible in `/proc/PID/task/TID/comm`, truncated to 15 bytes).
    public let name: String

    /// Starts a thread that runs `body` and then ends.
    public init(name: String, _ body: @escaping @Sendable () -> Void) throws(NetlinkError) {
        self.name = name
        let context = Unmanaged.passRetained(Context(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        PinnedThread.count(name, 1)
        let result = pthread_create(&thread, nil, { argument in
            let context = Unmanaged<Context>.fromOpaque(argument!).takeRetainedValue()
            context.body()
            PinnedThread.count(context.name, -1)
            return nil
        }, context)
        if result != 0 {
            PinnedThread.count(name, -1)
            Unmanaged<Context>.fromOpaque(context).release()
            throw NetlinkError.posix("pthread_create(\(name))", errno: result)
        }
        _ = pthread_setname_np(thread, String(name.utf8.prefix(15))!)
        self.handle = thread
    }

    /// Waits until the thread has ended. Call at most once, and not after ``detach()``.
    public func join() {
        pthread_join(handle, nil)
    }

    /// Lets the thread's resources go when it ends, for a thread nobody will join (one that
    /// ends itself). Call at most once, and not after ``join()``.
    public func detach() {
        pthread_detach(handle)
    }
}
