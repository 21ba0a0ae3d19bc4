import RoamCore

/// Multipath TCP (RFC 8684): here, a subflow as the decisions see it (``Subflow``). Multipath
/// extends this namespace with what the kernel offers: sockets made with `IPPROTO_MPTCP` (which
/// speak plain TCP to a peer that does not speak MPTCP), whether one fell back, and a
/// connection's subflows read from the kernel.
public enum MPTCP {
    /// One subflow of a connection: its addresses and what TCP counted on it.
    public struct Subflow: Sendable, Hashable, CustomStringConvertible {
        public var local: IPAddress
        public var localPort: UInt16
        public var remote: IPAddress
        public var remotePort: UInt16
        /// Bytes the peer acknowledged and bytes received on this subflow.
        public var bytesAcked: UInt64
        public var bytesReceived: UInt64
        /// The subflow's smoothed round-trip time, zero when unknown.
        public var smoothedRTT: Duration
        /// Whether its handshake is done (TCP's state is established): a subflow being opened
        /// is listed from its SYN on.
        public var isEstablished = true
        /// Whether it is not closed (TCP's state is not `CLOSE`): a connection's first subflow
        /// stays listed after it closed, as long as the connection lives. One closing (its FIN
        /// sent or received) still counts: it goes by itself.
        public var isOpen = true

        public var description: String { "\(local):\(localPort) → \(remote):\(remotePort)" }

        /// An established, open subflow.
        ///
        /// - Parameters:
        ///   - local: The subflow's local address.
        ///   - localPort: Its local port.
        ///   - remote: Its remote address.
        ///   - remotePort: Its remote port.
        ///   - bytesAcked: Bytes the peer acknowledged on it.
        ///   - bytesReceived: Bytes received on it.
        ///   - smoothedRTT: Its smoothed round-trip time, zero when unknown.
        public init(local: IPAddress, localPort: UInt16, remote: IPAddress, remotePort: UInt16, bytesAcked: UInt64, bytesReceived: UInt64,
                    smoothedRTT: Duration) {
            self.local = local
            self.localPort = localPort
            self.remote = remote
            self.remotePort = remotePort
            self.bytesAcked = bytesAcked
            self.bytesReceived = bytesReceived
            self.smoothedRTT = smoothedRTT
        }

        /// A subflow in any state.
        ///
        /// - Parameters:
        ///   - local: The subflow's local address.
        ///   - localPort: Its local port.
        ///   - remote: Its remote address.
        ///   - remotePort: Its remote port.
        ///   - bytesAcked: Bytes the peer acknowledged on it.
        ///   - bytesReceived: Bytes received on it.
        ///   - smoothedRTT: Its smoothed round-trip time, zero when unknown.
        ///   - isEstablished: Whether its handshake is done.
        ///   - isOpen: Whether it is not closed.
        public init(local: IPAddress, localPort: UInt16, remote: IPAddress, remotePort: UInt16, bytesAcked: UInt64, bytesReceived: UInt64,
                    smoothedRTT: Duration, isEstablished: Bool, isOpen: Bool) {
            self.init(local: local, localPort: localPort, remote: remote, remotePort: remotePort, bytesAcked: bytesAcked,
                      bytesReceived: bytesReceived, smoothedRTT: smoothedRTT)
            self.isEstablished = isEstablished
            self.isOpen = isOpen
        }
    }
}
