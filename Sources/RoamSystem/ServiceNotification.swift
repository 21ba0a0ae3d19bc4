import CRoamLinux
import Glibc

/// systemd's service notifications (`sd_notify(3)`), for a service of `Type=notify`: it says
/// when it is ready, what it is doing and when it stops, as datagrams to the socket
/// `NOTIFY_SOCKET` names (a path, or `@name` in the abstract namespace). Without that variable
/// (not started by systemd) nothing is sent.
package enum ServiceNotification {
    /// Sends `state` (`READY=1`, `STATUS=…`, `STOPPING=1`, newline-separated): true when a
    /// service manager was told.
    @discardableResult
    package static func send(_ state: String) -> Bool {
        guard let value = getenv("NOTIFY_SOCKET").map({ String(cString: $0) }), !value.isEmpty else { return false }
        var bytes = Array(value.utf8)
        guard bytes[0] == UInt8(ascii: "/") || bytes[0] == UInt8(ascii: "@") else { return false }
        // `@name`: the abstract namespace, a NUL where the path would start.
        let abstract = bytes[0] == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), target, length) }
            }
        }
        return sent == message.count
    }
}
