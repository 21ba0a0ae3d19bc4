import CRoamLinux
import Glibc
import Netlink
import RoamCore
import RoamSystem

/// A network namespace that something other than Roam made (a container runtime, a pod, `ip
/// netns add`), opened for `roam attach`: by its namespace file, by a process in it, or as the
/// namespace this process is in.
///
/// What is opened is checked on the descriptor, not on the path: it must be a namespace file
/// (nsfs) of a network namespace, and not the namespace of PID 1 (the host's, which Roam never
/// changes). A path is opened without following a symbolic link at its end; a process is
/// reached through a pidfd, so that a pid that ends and is reused meanwhile names no other
/// process's namespace.
package final class AttachedNamespace: @unchecked Sendable {
    /// The scenario's node it plays.
    package let node: String
    /// How the user named it, for messages: `/run/netns/pod1`, `pid 4242`, `this process's`.
    package let source: String
    private let descriptor: OwnedFileDescriptor
    /// The namespace this process is in: used where it is, with no `setns` (which would need
    /// `CAP_SYS_ADMIN`; a sidecar has only `CAP_NET_ADMIN`).
    private let isCurrent: Bool

    private init(node: String, source: String, descriptor: OwnedFileDescriptor, isCurrent: Bool = false) {
        self.node = node
        self.source = source
        self.descriptor = descriptor
        self.isCurrent = isCurrent
    }

    /// The namespace, for work done inside it (route sockets, threads): its open descriptor
    /// through `/proc/self/fd`, which names exactly the namespace checked, for as long as
    /// this value lives; or the current one.
    package var namespace: NetworkNamespace { isCurrent ? .current : .atPath("/proc/self/fd/\(descriptor.rawValue)") }

    /// The namespace file at `path` (`/run/netns/NAME`, a bind mount of one); a bare name is
    /// one under `/run/netns`, as `ip netns` names them. `/proc/PID/ns/net` is the process's.
    package static func open(node: String, path given: String) throws(SimulatorError) -> AttachedNamespace {
        var path = given
        if !path.contains("/") { path = NetworkNamespace.runDirectory + "/" + path }
        if let pid = processNamespacePid(path) { return try open(node: node, pid: pid, source: path) }
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY)
        guard fd >= 0 else {
            let error = errno
            let what = "--netns \(node)=\(escapedForMessage(given))"
            switch error {
            case ENOENT: throw SimulatorError(.invalidScenario, "\(what): no such file (`ip netns list` shows the named namespaces; for a process's, use --pid \(node)=PID)")
            case ELOOP: throw SimulatorError(.invalidScenario, "\(what) is a symbolic link, which roam attach does not follow: give the namespace file itself, or --pid \(node)=PID for a process's")
            case EACCES, EPERM: throw SimulatorError(.environment, "\(what): permission denied: roam attach needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)")
            default: throw SimulatorError(.environment, "\(what): \(String(cString: strerror(error)))")
            }
        }
        let namespace = AttachedNamespace(node: node, source: escapedForMessage(given), descriptor: OwnedFileDescriptor(owning: fd))
        try namespace.verify(flag: "--netns \(node)=\(escapedForMessage(given))")
        return namespace
    }

    /// The network namespace of process `pid`.
    package static func open(node: String, pid: Int32, source: String? = nil) throws(SimulatorError) -> AttachedNamespace {
        let flag = source.map { "--netns \(node)=\(escapedForMessage($0))" } ?? "--pid \(node)=\(pid)"
        guard pid > 0 else { throw SimulatorError(.invalidScenario, "\(flag): a process id is a positive number") }
        let pidfd = roam_pidfd_open(pid)
        guard pidfd >= 0 else {
            let error = errno
            if error == ESRCH { throw SimulatorError(.invalidScenario, "\(flag): no process \(pid)") }
            throw SimulatorError(.environment, "\(flag): pidfd_open: \(String(cString: strerror(error)))")
        }
        let process = OwnedFileDescriptor(owning: pidfd)
        // setns through the pidfd on a thread of its own, which then opens the namespace it is in.
        let opened = UncheckedOpened()
        do throws(NetlinkError) {
            let thread = try PinnedThread(name: "roam-attach") {
                guard setns(process.rawValue, CLONE_NEWNET) == 0 else {
                    opened.error = errno
                    return
                }
                let fd = Glibc.open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
                if fd < 0 { opened.error = errno } else { opened.fd = fd }
            }
            thread.join()
        } catch {
            throw SimulatorError("\(flag): start a thread to enter the process's namespace", error)
        }
        guard let fd = opened.fd else {
            switch opened.error {
            case ESRCH: throw SimulatorError(.invalidScenario, "\(flag): process \(pid) ended")
            case EPERM, EACCES: throw SimulatorError(.environment, "\(flag): permission denied: roam attach needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)")
            default: throw SimulatorError(.environment, "\(flag): enter the namespace of process \(pid): \(String(cString: strerror(opened.error)))")
            }
        }
        let namespace = AttachedNamespace(node: node, source: source.map { escapedForMessage($0) } ?? "pid \(pid)", descriptor: OwnedFileDescriptor(owning: fd))
        try namespace.verify(flag: flag)
        return namespace
    }

    /// The namespace this process is in (a sidecar in a pod plays its own pod's part).
    package static func current(node: String) throws(SimulatorError) -> AttachedNamespace {
        let fd = Glibc.open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw SimulatorError(.environment, "--node \(node): open this process's network namespace: \(String(cString: strerror(errno)))")
        }
        let namespace = AttachedNamespace(node: node, source: "this process's", descriptor: OwnedFileDescriptor(owning: fd), isCurrent: true)
        try namespace.verify(flag: "--node \(node)")
        return namespace
    }

    /// `/proc/PID/ns/net` (or `/proc/self/...`, `/proc/thread-self/...`: refused as the host's
    /// or accepted as this process's by the checks that follow): the pid, when it is a number.
    static func processNamespacePid(_ path: String) -> Int32? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "proc", parts[3] == "ns", parts[4] == "net",
              parts[2].allSatisfy(\.isASCII), let pid = Int32(parts[2]), pid > 0 else { return nil }
        return pid
    }

    /// A network namespace's file, and not the host's.
    private func verify(flag: String) throws(SimulatorError) {
        guard roam_filesystem_type(descriptor.rawValue) == Self.nsfsMagic else {
            throw SimulatorError(.invalidScenario, "\(flag) is not a namespace file: give /run/netns/NAME, a bind mount of one, or --pid \(node)=PID")
        }
        let type = roam_ioctl_value(descriptor.rawValue, ROAM_NS_GET_NSTYPE, 0)
        guard type == CLONE_NEWNET else {
            throw SimulatorError(.invalidScenario, "\(flag) is a namespace, but not a network namespace")
        }
        var mine = stat()
        guard fstat(descriptor.rawValue, &mine) == 0 else {
            throw SimulatorError(.environment, "\(flag): fstat: \(String(cString: strerror(errno)))")
        }
        if try isHost(mine, flag: flag) {
            throw SimulatorError(.invalidScenario, "\(flag) is the host's network namespace, which roam attach never changes: "
                + "give the namespace of a container, a pod or a VM's tap (its file, or --pid of a process in it); a container or "
                + "pod started with the host's network (`--network host`, `hostNetwork: true`) has no namespace of its own to play")
        }
    }

    /// Whether this namespace is the host's (the initial) network namespace, told three ways,
    /// any of which is decisive:
    /// - from Linux 6.18 it has a fixed inode (`PROC_NET_INIT_INO`);
    /// - on every kernel, its `/proc/sys/net/core` holds the settings that exist only in the
    ///   initial namespace (`devconf_inherit_init_net`, `fb_tunnels_only_for_init_net`, since
    ///   5.1 and 5.2, read from inside it): this tells a container or pod started with the host's
    ///   network (`--network host`, `hostNetwork: true`) on an older kernel, where the container's
    ///   PID 1 is not the host's;
    /// - in the initial PID namespace, it is PID 1's.
    /// When none can be read (no `/proc/sys`, PID 1's namespace hidden, a kernel before 6.18), it
    /// refuses rather than guess.
    func isHost(_ file: stat, flag: String) throws(SimulatorError) -> Bool {
        if file.st_ino == Self.initialNetworkInode { return true }
        switch hasInitialNamespaceSettings() {
        case .some(true): return true
        case .some(false): return false
        case .none: break
        }
        var pid = stat()
        guard stat("/proc/self/ns/pid", &pid) == 0, pid.st_ino == Self.initialPIDInode else {
            if Self.kernelNumbersTheInitialNetworkNamespace { return false }
            throw SimulatorError(.environment, "\(flag): cannot tell whether it is the host's network namespace: /proc/sys/net cannot be "
                + "read in it, this process is not in the host's PID namespace and this kernel, older than 6.18, does not number it")
        }
        var first = stat()
        if stat("/proc/1/ns/net", &first) == 0 { return first.st_ino == file.st_ino && first.st_dev == file.st_dev }
        // PID 1's namespace cannot be read (a sandbox's init): decisive only where the kernel
        // numbers the initial namespace.
        let reason = String(cString: strerror(errno))
        if Self.kernelNumbersTheInitialNetworkNamespace { return false }
        throw SimulatorError(.environment, "\(flag): cannot tell whether it is the host's network namespace: PID 1's cannot be read "
            + "(\(reason)) and this kernel, older than 6.18, does not number it; roam attach needs root with CAP_SYS_PTRACE here")
    }

    /// Whether the namespace's `/proc/sys/net/core` has the initial namespace's own settings, read
    /// from inside it (this thread when it is the current one, else a thread that enters it); nil
    /// when it cannot be read there (no `/proc/sys`, or a kernel before 5.1).
    func hasInitialNamespaceSettings() -> Bool? {
        if isCurrent { return Self.settingsOfTheInitialNamespace() }
        let answer = UncheckedAnswer()
        let descriptor = self.descriptor.rawValue
        guard let thread = try? PinnedThread(name: "roam-attach", {
            guard setns(descriptor, CLONE_NEWNET) == 0 else { return }
            answer.value = Self.settingsOfTheInitialNamespace()
        }) else { return nil }
        thread.join()
        return answer.value
    }

    /// ``hasInitialNamespaceSettings()`` in the calling thread's network namespace.
    static func settingsOfTheInitialNamespace() -> Bool? {
        // somaxconn is every namespace's: without it, /proc/sys/net is not there to read.
        guard access("/proc/sys/net/core/somaxconn", F_OK) == 0 else { return nil }
        if ["devconf_inherit_init_net", "fb_tunnels_only_for_init_net"].contains(where: { access("/proc/sys/net/core/\($0)", F_OK) == 0 }) {
            return true
        }
        return kernelHasInitialOnlySettings ? false : nil
    }

    /// Linux 5.2 or later, where both settings of the initial namespace alone exist.
    static var kernelHasInitialOnlySettings: Bool { kernelRelease >= (5, 2) }

    /// Linux 6.18 or later (`uname -r`).
    static var kernelNumbersTheInitialNetworkNamespace: Bool { kernelRelease >= (6, 18) }

    /// The kernel's major and minor version (`uname -r`); (0, 0) when it cannot be read.
    static var kernelRelease: (Int, Int) {
        var name = utsname()
        guard uname(&name) == 0 else { return (0, 0) }
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let parts = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard parts.count == 2 else { return (0, 0) }
        return (parts[0], parts[1])
    }

    /// `PROC_NET_INIT_INO` and `PROC_PID_INIT_INO` (include/linux/proc_ns.h).
    static let initialNetworkInode: ino_t = 0xEFFF_FFF9
    static let initialPIDInode: ino_t = 0xEFFF_FFFC

    /// `NSFS_MAGIC`, the namespace filesystem's.
    static let nsfsMagic = 0x6e73_6673
}

private final class UncheckedAnswer: @unchecked Sendable {
    var value: Bool?
}

private final class UncheckedOpened: @unchecked Sendable {
    var fd: Int32?
    var error: Int32 = 0
}
