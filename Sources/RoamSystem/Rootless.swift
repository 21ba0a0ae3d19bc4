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
public enum Rootless {
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

    /// Where rootless runs of this user note their process, seen from the host, so that
    /// `roam exec` finds a run's namespaces from another shell: `$XDG_RUNTIME_DIR/roam/runs` when
    /// that directory is the user's, else `/tmp/roam-UID/runs`. The same inside the user
    /// namespace as outside.
    public static var registryDirectory: String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") {
            var status = stat()
            // geteuid(): the user's own files show as root's inside its user namespace.
            if stat(runtime, &status) == 0, status.st_uid == geteuid(), status.st_mode & S_IFMT == S_IFDIR {
                return "\(runtime)/roam/runs"
            }
        }
        return "/tmp/roam-\(hostUID)/runs"
    }
}
