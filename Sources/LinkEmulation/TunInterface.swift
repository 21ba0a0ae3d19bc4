import CRoamLinux
import Glibc
import Netlink
import RoamSystem
import SystemPackage

/// A TUN interface (layer 3, no packet-information header) created in a namespace: what the
/// node's kernel sends out of it is read from ``descriptor``, and what is written there arrives
/// on it. It lives as long as the descriptor: closing it (or the process dying) removes the
/// interface, so a crashed emulator leaves none behind.
///
/// With `offloads`, every packet read or written carries a ``VirtioNetHeader`` first
/// (`IFF_VNET_HDR`), and the kernel is told it may hand over unfinished checksums and TCP (and,
/// where it can, UDP) packets of up to 64 KB to be cut later (`TUNSETOFFLOAD`), as it does to a
/// virtio NIC: one read and one write move what would otherwise be dozens of wire packets.
package final class TunInterface: @unchecked Sendable {
    package let name: String
    package let descriptor: Int32
    /// Bytes before each packet read or written: ``VirtioNetHeader/size`` with offloads, else 0.
    package let headerLength: Int
    /// Whether the kernel hands over UDP packets to be cut (USO, Linux 6.2 and later).
    package let segmentsUDP: Bool
    private var isClosed = false

    /// Creates the interface `name` in `namespace`.
    package init(name: String, in namespace: NetworkNamespace, offloads: Bool = false) throws(LinkEmulationError) {
        self.name = name
        let result: (Int32, Int32, Bool)
        do {
            result = try namespace.perform { () -> (Int32, Int32, Bool) in
                let fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC)
                guard fd >= 0 else { return (-1, errno, false) }
                // struct ifreq: the name (16 bytes), then the flags (a short) in the union.
                var request = [UInt8](repeating: 0, count: 40)
                for (index, byte) in name.utf8.prefix(15).enumerated() { request[index] = byte }
                let flags = ROAM_IFF_TUN | ROAM_IFF_NO_PI | (offloads ? ROAM_IFF_VNET_HDR : 0)
                request[16] = UInt8(truncatingIfNeeded: flags)
                request[17] = UInt8(truncatingIfNeeded: flags >> 8)
                let status = request.withUnsafeMutableBytes { ioctl(fd, ROAM_TUNSETIFF, $0.baseAddress!) }
                if status < 0 {
                    let code = errno
                    Glibc.close(fd)
                    return (-1, code, false)
                }
                guard offloads else { return (fd, 0, false) }
                let tcp = ROAM_TUN_F_CSUM | ROAM_TUN_F_TSO4 | ROAM_TUN_F_TSO6 | ROAM_TUN_F_TSO_ECN
                // USO where the kernel knows it (EINVAL before 6.2), TCP alone otherwise.
                if roam_ioctl_value(fd, ROAM_TUNSETOFFLOAD, UInt(tcp | ROAM_TUN_F_USO4 | ROAM_TUN_F_USO6)) == 0 { return (fd, 0, true) }
                if roam_ioctl_value(fd, ROAM_TUNSETOFFLOAD, UInt(tcp)) == 0 { return (fd, 0, false) }
                let code = errno
                Glibc.close(fd)
                return (-1, code, false)
            }
        } catch {
            throw LinkEmulationError("create TUN interface \(name) in \(namespace): \(error)")
        }
        guard result.0 >= 0 else {
            let hint = result.1 == ENOENT || result.1 == ENODEV ? " (is the tun module loaded? /dev/net/tun is needed)" : ""
            throw LinkEmulationError("create TUN interface \(name) in \(namespace): \(Errno(rawValue: result.1).description)\(hint)")
        }
        descriptor = result.0
        headerLength = offloads ? VirtioNetHeader.size : 0
        segmentsUDP = result.2
    }

    /// Writes one complete wire packet (with a header saying so when the interface has
    /// offloads). Returns what `write` returns.
    package func write(packet: UnsafeRawBufferPointer) -> Int {
        guard headerLength > 0 else { return Glibc.write(descriptor, packet.baseAddress, packet.count) }
        return withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { vectors in
            withUnsafeBytes(of: Self.plainHeader) { header in
                vectors[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count)
                vectors[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: packet.baseAddress), iov_len: packet.count)
                return Glibc.writev(descriptor, vectors.baseAddress, 2)
            }
        }
    }

    /// Writes a packet with its own header (a merged segment): only with offloads.
    package func write(header: VirtioNetHeader, packet: UnsafeRawBufferPointer) -> Int {
        precondition(headerLength == VirtioNetHeader.size)
        return withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { vectors in
            header.withBytes { header in
                vectors[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count)
                vectors[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: packet.baseAddress), iov_len: packet.count)
                return Glibc.writev(descriptor, vectors.baseAddress, 2)
            }
        }
    }

    /// A header for a packet that is complete: no segmentation, checksums in place.
    private static let plainHeader: (UInt64, UInt16) = (0, 0)

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
