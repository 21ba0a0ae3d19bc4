import CRoamLinux
import Glibc
import RoamCore
import RoamSystem
import SystemPackage

/// Where a run's control API listens, bound before the run starts (a rootless run binds them on
/// the host, before it enters a user namespace of its own, so that the host reaches them):
///
/// - always a Unix socket, `RUNID.sock`, in a directory only the run's user can enter
///   (``directory(rootless:creating:)``), mode 0600; each connection's peer must be that user
///   too (`SO_PEERCRED`);
/// - with a port, TCP on 127.0.0.1, where every request must carry `Authorization: Bearer
///   TOKEN`: a token of 32 random bytes, printed once and written to `RUNID.token` (0600)
///   beside the socket.
package final class ControlListeners: Sendable {
    /// The directory the socket and the token are in.
    package let directory: SecureDirectory
    package let runID: String
    /// The Unix socket's listening descriptor (handed to the server).
    package let unixDescriptor: Int32
    /// The loopback port's listening descriptor, the port and the token.
    package let tcp: (descriptor: Int32, port: Int, token: String)?
    /// Toxiproxy's API port on 127.0.0.1 (`--toxiproxy-port`): its descriptor and port, who may
    /// connect (the run's user, as the host sees it, and root) and how that is checked.
    package let toxiproxy: (descriptor: Int32, port: Int, user: uid_t, peers: LoopbackPeers)?

    package var socketPath: String { directory.child(Self.socketName(runID)) }
    package var tokenPath: String? { tcp == nil ? nil : directory.child(Self.tokenName(runID)) }

    package static func socketName(_ runID: String) -> String { "\(runID).sock" }
    package static func tokenName(_ runID: String) -> String { "\(runID).token" }

    /// A failure to set up the control API, said for the user.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// The directory of a run's control sockets: for a run as root in the host's namespaces,
    /// `/run/roam/control` (root's, mode 0700); for a rootless run, the user's registry of
    /// rootless runs (`RunRegistry/rootlessDirectory`, private to the user).
    package static func directory(rootless: Bool, creating: Bool) throws(SafePathError) -> SecureDirectory {
        if rootless { return try RunRegistry.rootless(creating: creating).directory }
        let roam = try SecureDirectory.open("/run/roam", creating: creating ? 0o755 : nil, requirement: .ownedBy(0))
        return try roam.directory(named: "control", creating: creating ? 0o700 : nil, requirement: .privateToCaller)
    }

    /// Binds and listens: the Unix socket, and TCP on 127.0.0.1:`port` when given (0: any free port).
    package init(directory: SecureDirectory, runID: String, port: Int?, toxiproxyPort: Int? = nil) throws(Failure) {
        guard RunRegistry.isRunID(runID) else { throw Failure(description: "'\(escapedForMessage(runID))' is not a run id") }
        self.directory = directory
        self.runID = runID
        let name = Self.socketName(runID)
        // A socket left by a run of the same id that died is replaced; anything else is not Roam's.
        if let status = directory.status(of: name) {
            guard status.mode & S_IFMT == S_IFSOCK, status.owner == geteuid() else {
                throw Failure(description: "\(directory.child(name)) exists and is not a socket of this user's; remove it")
            }
            try? directory.removeFile(named: name)
        }
        unixDescriptor = try Self.bindUnix(in: directory, name: name)
        if let toxiproxyPort {
            do throws(Failure) {
                let peers: LoopbackPeers
                do throws(Errno) {
                    peers = try LoopbackPeers()
                } catch {
                    throw Failure(description: "cannot open a sock_diag socket to check who connects to toxiproxy's API: \(error)")
                }
                let (descriptor, bound) = try Self.bindLoopback(port: toxiproxyPort, what: "toxiproxy's API")
                toxiproxy = (descriptor, bound, geteuid(), peers)
            } catch {
                close(unixDescriptor)
                try? directory.removeFile(named: name)
                throw error
            }
        } else {
            toxiproxy = nil
        }
        guard let port else {
            tcp = nil
            return
        }
        do throws(Failure) {
            let (descriptor, bound) = try Self.bindLoopback(port: port)
            let token = Self.newToken()
            do throws(SafePathError) {
                try directory.replaceFile(named: Self.tokenName(runID), contents: Array((token + "\n").utf8), mode: 0o600)
            } catch {
                close(descriptor)
                throw Failure(description: "cannot write the control token: \(error.message)")
            }
            tcp = (descriptor, bound, token)
        } catch {
            close(unixDescriptor)
            if let toxiproxy { close(toxiproxy.descriptor) }
            try? directory.removeFile(named: name)
            throw error
        }
    }

    /// Removes the socket and the token (through the directory's descriptor).
    package func removeFiles() {
        try? directory.removeFile(named: Self.socketName(runID))
        if tcp != nil { try? directory.removeFile(named: Self.tokenName(runID)) }
    }

    /// Removes the sockets and tokens of runs that are not live (`isLive(runID)` false) from
    /// `directory`: only `RUNID.sock` sockets and `RUNID.token` regular files of the caller's,
    /// through the directory's descriptor. Returns the names removed.
    package static func removeStale(in directory: SecureDirectory, isLive: (String) -> Bool) -> [String] {
        var removed: [String] = []
        for name in (try? directory.entries()) ?? [] {
            let parts = name.split(separator: ".", maxSplits: 1)
            guard parts.count == 2, RunRegistry.isRunID(parts[0]), parts[1] == "sock" || parts[1] == "token" else { continue }
            guard let status = directory.status(of: name), status.owner == geteuid(),
                  status.mode & S_IFMT == (parts[1] == "sock" ? S_IFSOCK : S_IFREG), !isLive(String(parts[0])) else { continue }
            if (try? directory.removeFile(named: name)) != nil { removed.append(name) }
        }
        return removed
    }

    /// Binds a Unix socket `name` in `directory` (through its descriptor), makes it `mode`, and
    /// listens: `what` names it in errors.
    package static func bindUnix(in directory: SecureDirectory, name: String, mode: mode_t = 0o600,
                                 what: String = "the control socket") throws(Failure) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "cannot make \(what): \(Errno.current)") }
        // Bound through the directory's descriptor: no component of its path is looked up again.
        let path = "/proc/self/fd/\(directory.rawDescriptor)/\(name)"
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            close(fd)
            throw Failure(description: "the path of \(what) is too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: path.utf8)
            buffer[path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            let error = Errno.current
            close(fd)
            throw Failure(description: "cannot bind \(what) \(directory.child(name)): \(error)")
        }
        // Made `mode` (0600: only its owner and root may connect) through the directory's
        // descriptor. (Not with the process's umask around the bind: other threads' files would
        // share it.) Until then the umask's mode gives no one else write, which connecting needs.
        guard fchmodat(directory.rawDescriptor, name, mode, 0) == 0 else {
            let error = Errno.current
            close(fd)
            try? directory.removeFile(named: name)
            throw Failure(description: "cannot set the mode of \(what) \(directory.child(name)): \(error)")
        }
        guard listen(fd, 64) == 0 else {
            let error = Errno.current
            close(fd)
            try? directory.removeFile(named: name)
            throw Failure(description: "cannot listen on \(what): \(error)")
        }
        return fd
    }

    private static func bindLoopback(port: Int, what: String = "the control API") throws(Failure) -> (Int32, Int) {
        guard (0...65_535).contains(port) else { throw Failure(description: "\(port) is not a port for \(what) (0-65535)") }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "cannot make the TCP socket of \(what): \(Errno.current)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let error = Errno.current
            close(fd)
            throw Failure(description: "cannot listen on 127.0.0.1:\(port) for \(what): \(error)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: actual.sin_port)))
    }

    /// 32 random bytes from the kernel, in hex.
    private static func newToken() -> String {
        var bytes = [UInt8](repeating: 0, count: 32)
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { getrandom($0.baseAddress! + filled, $0.count - filled, 0) }
            if count > 0 { filled += count }
        }
        return bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Whether `presented` (an `Authorization` header) carries `token`, compared in constant time.
    package static func authorizes(_ presented: String?, token: String) -> Bool {
        guard let presented, presented.hasPrefix("Bearer ") else { return false }
        let given = Array(presented.utf8.dropFirst(7))
        let expected = Array(token.utf8)
        guard given.count == expected.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(given, expected) { difference |= a ^ b }
        return difference == 0
    }
}
