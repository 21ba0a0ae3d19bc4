import CRoamLinux
import Glibc
import RoamDecisions
import SystemPackage

/// What the kernel says of a TCP connection (`TCP_INFO`), read once for each of the decisions'
/// inputs that need it: the decisions themselves (RoamDecisions) make no system calls.
enum TCPInfo {
    static func read(_ descriptor: Int32) -> tcp_info? {
        var info = tcp_info()
        var length = socklen_t(MemoryLayout<tcp_info>.size)
        guard descriptor >= 0, getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return nil }
        return info
    }

    static func smoothedRTT(_ info: tcp_info) -> Duration? {
        info.tcpi_rtt > 0 ? .microseconds(Int64(info.tcpi_rtt)) : nil
    }
}

extension HandoverSession.TransportSample {
    /// The sample of the TCP (or MPTCP subflow) connection on `socket`, if the kernel says.
    public static func of(_ socket: FileDescriptor) -> HandoverSession.TransportSample? { of(socket.rawValue) }

    package static func of(_ descriptor: Int32) -> HandoverSession.TransportSample? {
        TCPInfo.read(descriptor).map { HandoverSession.TransportSample(smoothedRTT: TCPInfo.smoothedRTT($0), unacknowledged: Int($0.tcpi_unacked)) }
    }
}

extension StalledPaths {
    /// The kernel's smoothed round-trip time of the TCP connection on `socket` (`TCP_INFO`), if
    /// known.
    public static func smoothedRTT(of socket: FileDescriptor) -> Duration? { smoothedRTT(of: socket.rawValue) }

    package static func smoothedRTT(of descriptor: Int32) -> Duration? {
        TCPInfo.read(descriptor).flatMap(TCPInfo.smoothedRTT)
    }
}
