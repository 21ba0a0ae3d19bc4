import CRoamLinux
import Glibc
import RoamSystem

/// A Linux network namespace, named under `/run/netns` (as `ip netns` names them) or given
/// by any path to a namespace file such as `/proc/PID/ns/net`.
///
/// `NetworkNamespace` is a value: it refers to a namespace but opens nothing until used.
/// Work inside another namespace runs on a dedicated thread (``perform(_:)``,
/// ``spawnThread(name:_:)``); netlink sockets opened there stay bound to the
/// namespace and can then be used from any thread.
public struct NetworkNamespace: Sendable, Hashable, CustomStringConvertible {
    /// The directory where named namespaces live, as with `ip netns`.
    public static let runDirectory = "/run/netns"

    /// The namespace's name when it lives under ``runDirectory``.
    public let name: String?
    /// The namespace file; nil for ``current``.
    public let path: String?

    private init(name: String?, path: String?) {
        self.name = name
        self.path = path
    }

    /// The namespace of the thread that uses this value (for most programs, the process's).
    public static let current = NetworkNamespace(name: nil, path: nil)

    /// The namespace named `name` under `/run/netns`.
    ///
    /// - Throws: ``NetlinkError`` with `EINVAL` when the name is empty, `.` or `..`, or holds a `/`.
    public static func named(_ name: String) throws(NetlinkError) -> NetworkNamespace {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), name.utf8.count < 256 else {
            throw NetlinkError(.errno(EINVAL), operation: "network namespace name '\(name)'",
                               hint: "a name is 1 to 255 characters without '/'")
        }
        return NetworkNamespace(name: name, path: "\(runDirectory)/\(name)")
    }

    /// The namespace at `path`, for example `/proc/1234/ns/net`.
    public static func atPath(_ path: String) -> NetworkNamespace {
        NetworkNamespace(name: nil, path: path)
    }

    /// True for ``current``.
    public var isCurrent: Bool { path == nil }

    public var description: String {
        if let name { return name }
        return path ?? "current network namespace"
    }

    /// Opens the namespace file. For ``current``, opens the calling thread's namespace.
    public func open() throws(NetlinkError) -> OwnedFileDescriptor {
        let target = path ?? "/proc/thread-self/ns/net"
        do throws(NetlinkError) {
            let fd = try systemCall("open(\(target))") { Glibc.open(target, O_RDONLY | O_CLOEXEC) }
            return OwnedFileDescriptor(owning: fd)
        } catch {
            if error.errno == ENOENT {
                if let name {
                    throw error.withHint("no network namespace named '\(name)' (`ip netns list` shows those that exist)")
                }
                throw error.withHint("no namespace file at \(target)")
            }
            if error.isPermissionDenied {
                throw error.withHint("opening another network namespace requires root (CAP_SYS_ADMIN)")
            }
            throw error
        }
    }

    /// True when the namespace file exists.
    public var exists: Bool {
        guard let path else { return true }
        return access(path, F_OK) == 0
    }

    /// Runs `body` on a new thread inside this namespace and returns its result.
    ///
    /// The calling thread waits; its own namespace never changes.
    public func perform<T>(_ body: () throws -> T) throws -> T {
        let fd = try open()
        return try withoutActuallyEscaping(body) { body in
            let box = UncheckedBox<Result<T, any Error>?>(nil)
            let work = UncheckedBox(body)
            let thread = try PinnedThread(name: "roam-netns") {
                do {
                    try NetworkNamespace.enter(fd)
                    box.value = .success(try work.value())
                } catch {
                    box.value = .failure(error)
                }
            }
            thread.join()
            return try box.value!.get()
        }
    }

    /// Starts a thread that enters this namespace and runs `body` there. `body` receives the
    /// error, if entering failed, so that it can report it.
    ///
    /// Such a thread must not hand work to the rest of the process: a thread inherits its
    /// network and mount namespaces from the thread that creates it, and Dispatch on Linux
    /// starts its worker threads from whichever thread enqueues work when none is idle. Resuming
    /// a continuation, yielding to an `AsyncStream` or calling `DispatchQueue.async` here can
    /// start a pool thread inside this namespace, and every task later scheduled there runs in
    /// the wrong namespace. Hand results back from a thread outside it, or open what the work
    /// needs here (sockets keep their namespace) and use it from elsewhere.
    public func spawnThread(
        name: String,
        _ body: @escaping @Sendable (Result<Void, NetlinkError>) -> Void
    ) throws(NetlinkError) -> PinnedThread {
        let fd = try open()
        return try PinnedThread(name: name) {
            do throws(NetlinkError) {
                try NetworkNamespace.enter(fd)
                body(.success(()))
            } catch {
                body(.failure(error))
            }
        }
    }

    /// True when the calling thread is in the same network namespace as the process's main
    /// thread (so that the process's `/sys` shows the thread's interfaces, as a rule).
    public static func threadSharesProcessNamespace() -> Bool {
        var mine = stat(), process = stat()
        guard stat("/proc/thread-self/ns/net", &mine) == 0, stat("/proc/self/ns/net", &process) == 0 else { return true }
        return mine.st_ino == process.st_ino && mine.st_dev == process.st_dev
    }

    /// Moves the calling thread into the namespace open at `fd`. Only for threads owned by the caller.
    static func enter(_ fd: OwnedFileDescriptor) throws(NetlinkError) {
        do throws(NetlinkError) {
            try systemCall("setns(CLONE_NEWNET)") { setns(fd.rawValue, CLONE_NEWNET) }
        } catch {
            if error.isPermissionDenied {
                throw error.withHint("entering another network namespace requires root (CAP_SYS_ADMIN)")
            }
            if error.errno == EINVAL {
                throw error.withHint("the file is not a network namespace")
            }
            throw error
        }
    }

    /// Gives the calling thread its own mount namespace with a fresh `/sys`, so that
    /// `/sys/class/net` lists the interfaces of the thread's network namespace (sysfs shows the
    /// network namespace of whoever mounted it). Mount changes stay private to the thread.
    ///
    /// Call it only on a thread you own, such as the one ``spawnThread(name:_:)`` starts.
    public static func mountPrivateSysfsOnCurrentThread() throws(NetlinkError) {
        try systemCall("unshare(CLONE_NEWNS)") { unshare(CLONE_NEWNS) }
        // Keep every mount change of this thread away from the host's mount namespace.
        try systemCall("mount(/, MS_SLAVE|MS_REC)") { mount("", "/", nil, UInt(MS_SLAVE | MS_REC), nil) }
        _ = umount2("/sys", Int32(MNT_DETACH))
        try systemCall("mount(sysfs, /sys)") { mount("sysfs", "/sys", "sysfs", 0, nil) }
    }
}

extension NetworkNamespace {
    /// Opens a sysfs that lists this namespace's interfaces, as a directory any thread can read
    /// below (`/proc/self/fd/N/class/net`), whatever namespaces the reading thread is in.
    ///
    /// sysfs shows the network namespace of whoever mounted it: for another namespace than the
    /// process's, a short-lived thread enters it, mounts a private sysfs (see
    /// ``mountPrivateSysfsOnCurrentThread()``) and opens it; the mount lives as long as the
    /// descriptor, detached from every mount namespace, so nothing is left behind.
    public func openSysfs() throws(NetlinkError) -> OwnedFileDescriptor {
        func openRoot() throws(NetlinkError) -> OwnedFileDescriptor {
            OwnedFileDescriptor(owning: try systemCall("open(/sys)") { Glibc.open("/sys", O_RDONLY | O_DIRECTORY | O_CLOEXEC) })
        }
        if isCurrent && NetworkNamespace.threadSharesProcessNamespace() { return try openRoot() }
        do {
            return try perform { () throws(NetlinkError) in
                try NetworkNamespace.mountPrivateSysfsOnCurrentThread()
                return try openRoot()
            }
        } catch let error as NetlinkError {
            throw error
        } catch {
            throw NetlinkError(.errno(EIO), operation: "mount sysfs for \(self)", hint: "\(error)")
        }
    }
}

/// A box for values that cross to a thread the caller waits for.
final class UncheckedBox<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}
