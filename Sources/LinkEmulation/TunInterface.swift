import CRoamLinux
import Glibc
import Netlink
import RoamSystem
import SystemPackage

/// A TUN interface (layer 3, no packet-information header) created in a namespace: what the
/// node's kernel sends out of it is read from ``descriptor``, and what is written there arrives
/// on it. It lives as long as the descriptor: closing it (or the process dying) removes the
/// interface, so a crashed emulator leaves none behind.
package final class TunInterface: @unchecked Sendable {
    package let name: String
    package let descriptor: Int32
    private var isClosed = false

    /// Creates the interface `name` in `namespace`.
    package init(name: String, in namespace: NetworkNamespace) throws(LinkEmulationError) {
        self.name = name
        let result: (Int32, Int32)
        do {
            result = try namespace.perform { () -> (Int32, Int32) in
                let fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC)
                guard fd >= 0 else { return (-1, errno) }
                // struct ifreq: the name (16 bytes), then the flags (a short) in the union.
                var request = [UInt8](repeating: 0, count: 40)
                for (index, byte) in name.utf8.prefix(15).enumerated() { request[index] = byte }
                let flags = ROAM_IFF_TUN | ROAM_IFF_NO_PI
                request[16] = UInt8(truncatingIfNeeded: flags)
                request[17] = UInt8(truncatingIfNeeded: flags >> 8)
                let status = request.withUnsafeMutableBytes { ioctl(fd, ROAM_TUNSETIFF, $0.baseAddress!) }
                if status < 0 {
                    let code = errno
                    Glibc.close(fd)
                    return (-1, code)
                }
                return (fd, 0)
            }
        } catch {
            throw LinkEmulationError("create TUN interface \(name) in \(namespace): \(error)")
        }
        guard result.0 >= 0 else {
            let hint = result.1 == ENOENT || result.1 == ENODEV ? " (is the tun module loaded? /dev/net/tun is needed)" : ""
            throw LinkEmulationError("create TUN interface \(name) in \(namespace): \(Errno(rawValue: result.1).description)\(hint)")
        }
        descriptor = result.0
    }

    deinit { close() }

    package func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(descriptor)
    }

    /// Raises or drops the interface's carrier (`NO-CARRIER`), as a path monitor sees it.
    package func setCarrier(_ up: Bool) throws(LinkEmulationError) {
        var value: Int32 = up ? 1 : 0
        guard ioctl(descriptor, ROAM_TUNSETCARRIER, &value) == 0 else {
            throw LinkEmulationError("set the carrier of \(name) \(up ? "up" : "down"): \(Errno.current.description)")
        }
    }
}
