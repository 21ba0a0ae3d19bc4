import CRoamLinux
import CRoamRootless
import Glibc
import SystemPackage

/// Roam without root: the process becomes root of a user namespace of its own, with a private
/// mount namespace (a `/run` of its own holds its named network namespaces). Its capabilities
/// hold only over namespaces that user namespace owns, so the host's network cannot change,
/// and everything it builds ends with the process.
///
/// ``enter()`` must be called while the process has one thread: `roam` calls it first thing,
/// RoamTesting from a constructor before `main`.
package enum Rootless {
    /// Why it failed, with what to do.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var errno: Errno
        public var description: String
    }

    /// Why a user namespace cannot be made here (a disabled setting, named), or nil.
    public static var unavailableReason: String? {
        var message = [CChar](repeating: 0, count: 512)
        guard roam_rootless_check(&message, message.count) != 0 else { return nil }
        return text(of: message)
    }

    /// Whether the process runs in a user namespace other than the host's.
    public static var isInsideUserNamespace: Bool { roam_rootless_is_inside() != 0 }

    /// Checks what ``enter()`` needs, changing nothing: the kernel's settings, and a uid that can
    /// be mapped (not the overflow uid of `unshare -U` without a mapping).
    public static func preflight() throws(Failure) {
        var message = [CChar](repeating: 0, count: 512)
        let error = roam_rootless_preflight(&message, message.count)
        guard error != 0 else { return }
        throw Failure(errno: Errno(rawValue: error), description: text(of: message))
    }

    /// Enters a user namespace of the process's own with the caller as root, and a private mount
    /// namespace with its own `/run/netns` and `/run/roam`.
    public static func enter() throws(Failure) {
        var message = [CChar](repeating: 0, count: 512)
        let error = roam_rootless_enter(&message, message.count)
        guard error != 0 else { return }
        throw Failure(errno: Errno(rawValue: error),
                      description: text(of: message))
    }

    /// The message C wrote into `buffer`, up to its terminating zero.
    private static func text(of buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The caller's uid on the host: its uid before ``enter()``, `getuid()` when it did not enter.
    public static var hostUID: uid_t {
        let uid = roam_rootless_host_uid()
        return uid == uid_t.max ? getuid() : uid
    }

    /// In root's `--rootless` run (root of the host called ``enter()``), the host's uid and gid
    /// that the run's unprivileged identity maps to: the first of root's range in `/etc/subuid`
    /// and `/etc/subgid`, else 65534 (`nobody`). Command workloads run as that identity
    /// (``containedID`` inside the run), so the host's files are as far from them as from a
    /// user's run. Nil in every other process.
    public static var containedIdentity: (uid: uid_t, gid: gid_t)? {
        var uid: uid_t = 0, gid: gid_t = 0
        guard roam_rootless_contained(&uid, &gid) != 0 else { return nil }
        return (uid, gid)
    }

    /// The uid and gid, inside the run's user namespace, of root's `--rootless` run's command
    /// workloads (``containedIdentity`` on the host).
    public static var containedID: uid_t { uid_t(ROAM_CONTAINED_ID) }

    /// Whether this process entered a user namespace of its own through ``enter()``.
    public static var hasEntered: Bool { roam_rootless_host_uid() != uid_t.max }

    /// Whether the process is root of the host: uid 0 in the initial user namespace.
    public static var isHostRoot: Bool { geteuid() == 0 && !isInsideUserNamespace }

    /// Whether the process can build named network namespaces as root does: root of the host,
    /// or root of a user namespace that owns its mount namespace and whose `/run` it may write
    /// (a rootless container, a Roam rootless run, a test process that entered one). Elsewhere
    /// (an ordinary user, `unshare -Ur`, `unshare -Urm`) Roam runs rootless, in a user namespace
    /// of its own nested in the current one.
    public static var canRunAsRoot: Bool { roam_rootless_can_run_as_root() != 0 }

    /// The caller's uid one user namespace up: on the host, its uid; inside a user namespace
    /// (`unshare -Ur`), the uid its own maps to in the parent (`/proc/self/uid_map`), so that
    /// paths named after it (`/tmp/roam-UID`) are the same seen from inside and from the parent.
    public static var outerUID: uid_t {
        if hasEntered { return hostUID }
        let uid = geteuid()
        guard isInsideUserNamespace else { return uid }
        let outer = roam_rootless_outer_uid(uid)
        return outer == uid_t.max ? uid : outer
    }

    /// Enters the user and mount namespaces `process` is in, after checking that they are the
    /// caller's: the user namespace's owner is the caller (`NS_GET_OWNER_UID`), and the mount
    /// namespace belongs to that user namespace (`NS_GET_USERNS`). Root therefore never enters a
    /// user namespace it does not own, whatever a note or a pid said. Must be called while the
    /// process has one thread.
    public static func enterNamespaces(of process: PinnedProcess) throws(Failure) {
        let user: FileDescriptor, mounts: FileDescriptor
        do {
            user = try process.openNamespace("user")
        } catch {
            throw Failure(errno: error, description: "cannot open the user namespace of process \(process.identity.pid): \(error)")
        }
        defer { try? user.close() }
        do {
            mounts = try process.openNamespace("mnt")
        } catch {
            throw Failure(errno: error, description: "cannot open the mount namespace of process \(process.identity.pid): \(error)")
        }
        defer { try? mounts.close() }
        var owner: uid_t = 0
        guard ioctl(user.rawValue, ROAM_NS_GET_OWNER_UID, &owner) == 0 else {
            throw Failure(errno: .current, description: "cannot read the owner of the user namespace of process \(process.identity.pid): \(Errno.current)")
        }
        guard owner == geteuid() else {
            throw Failure(errno: .notPermitted, description: "the user namespace of process \(process.identity.pid) belongs to uid \(owner), "
                + "not to this user (uid \(geteuid())); Roam enters only user namespaces of the user who runs it")
        }
        let mountsOwner = ioctl(mounts.rawValue, ROAM_NS_GET_USERNS)
        guard mountsOwner >= 0 else {
            throw Failure(errno: .current, description: "cannot read the owner of the mount namespace of process \(process.identity.pid): \(Errno.current)")
        }
        var expected = stat(), actual = stat()
        let sameNamespace = fstat(user.rawValue, &expected) == 0 && fstat(mountsOwner, &actual) == 0
            && expected.st_dev == actual.st_dev && expected.st_ino == actual.st_ino
        close(mountsOwner)
        guard sameNamespace else {
            throw Failure(errno: .notPermitted, description: "the mount namespace of process \(process.identity.pid) does not belong to its "
                + "user namespace; it is not a Roam run's")
        }
        guard setns(user.rawValue, CLONE_NEWUSER) == 0 else {
            throw Failure(errno: .current, description: "cannot enter the user namespace of process \(process.identity.pid): \(Errno.current)")
        }
        guard setns(mounts.rawValue, CLONE_NEWNS) == 0 else {
            throw Failure(errno: .current, description: "cannot enter the mount namespace of process \(process.identity.pid): \(Errno.current)")
        }
    }
}
