import CRoamLinux
import Glibc
import RoamCore
import RoamSystem
import SystemPackage

/// Where `roam daemon` serves its ``PathService``: a Unix socket, bound through its directory's
/// descriptor (no component of the path is looked up again, and a link planted in the
/// directory is never followed).
///
/// - As root, by default `/run/roam/path.sock` (`/run/roam` root's, 0755), mode 0666: every
///   local user may read the path; what changes anything is checked per request (the peer's
///   credentials).
/// - As another user, by default `$XDG_RUNTIME_DIR/roam/path.sock` (the directory the user's
///   own, 0700).
/// - `--socket PATH`: its directory must exist and be the caller's (or root's), writable by no
///   one else, so that no other user can put something in the socket's place.
///
/// A socket already at the name is replaced only when it is the caller's and nothing answers
/// on it (a daemon that died); one that answers is another daemon's, and is left alone.
package final class DaemonSocket: Sendable {
    package typealias Failure = ControlListeners.Failure

    package let directory: SecureDirectory
    package let name: String
    /// The listening descriptor (handed to the server).
    package let descriptor: Int32

    package var path: String { directory.child(name) }

    /// The socket a daemon of this user serves on by default, or why there is none.
    package static func defaultPath() throws(Failure) -> String {
        if geteuid() == 0 { return "/run/roam/path.sock" }
        guard let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") else {
            throw Failure(description: "XDG_RUNTIME_DIR is not set (no login session): name the socket with --socket PATH, in a directory of yours")
        }
        return runtime + "/roam/path.sock"
    }

    /// The socket a reader of the path tries by default: this user's daemon's, when there is
    /// one, else the system's.
    package static func readerDefaultPath() -> String {
        if geteuid() != 0, let own = try? defaultPath(), access(own, F_OK) == 0 { return own }
        return "/run/roam/path.sock"
    }

    /// Binds and listens at `path`: mode 0666 when `shared` (every local user may connect),
    /// 0600 otherwise.
    package init(path: String, shared: Bool) throws(Failure) {
        guard path.hasPrefix("/"), !path.hasSuffix("/") else {
            throw Failure(description: "--socket \(escapedForMessage(path, maximumLength: 256)) is not an absolute path of a file")
        }
        let parent = String(path[..<path.lastIndex(of: "/")!])
        name = String(path[path.index(after: path.lastIndex(of: "/")!)...])
        guard !name.isEmpty, name != ".", name != "..", name.utf8.count <= 100 else {
            throw Failure(description: "--socket \(escapedForMessage(path, maximumLength: 256)) does not end in a file name (at most 100 bytes)")
        }
        do throws(SafePathError) {
            if parent == "/run/roam", geteuid() == 0 {
                directory = try SecureDirectory.open(parent, creating: 0o755, requirement: .ownedBy(0))
            } else if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), geteuid() != 0, parent == runtime + "/roam" {
                let base = try SecureDirectory.open(runtime, requirement: .privateToCaller)
                directory = try base.directory(named: "roam", creating: 0o700, requirement: .privateToCaller)
            } else {
                directory = try SecureDirectory.open(parent.isEmpty ? "/" : parent, requirement: .ownedByCaller)
            }
        } catch {
            throw Failure(description: "cannot use \(escapedForMessage(parent, maximumLength: 256)) for the daemon's socket: \(error.message)")
        }
        if let status = directory.status(of: name) {
            guard status.mode & S_IFMT == S_IFSOCK, status.owner == geteuid() else {
                throw Failure(description: "\(directory.child(name)) exists and is not a socket of this user's; remove it or name another with --socket")
            }
            guard !Self.answers(in: directory, name: name) else {
                throw Failure(description: "another daemon serves \(directory.child(name)); stop it first, or name another socket with --socket")
            }
            try? directory.removeFile(named: name)
        }
        descriptor = try ControlListeners.bindUnix(in: directory, name: name, mode: shared ? 0o666 : 0o600, what: "the daemon's socket")
    }

    /// Removes the socket (through the directory's descriptor), if it is still a socket.
    package func remove() {
        if let status = directory.status(of: name), status.mode & S_IFMT == S_IFSOCK { try? directory.removeFile(named: name) }
    }

    /// Whether something accepts connections on the socket `name` in `directory`.
    private static func answers(in directory: SecureDirectory, name: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let target = "/proc/self/fd/\(directory.rawDescriptor)/\(name)"
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard target.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: target.utf8)
            buffer[target.utf8.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
    }
}
