import Netlink
import RoamDecisions
import Synchronization

/// Carries out a `HandoverSession`'s subflow plans for an app that owns an MPTCP connection
/// on a node whose path manager is the kernel's userspace one (`net.mptcp.pm_type = 1`): opens
/// a subflow from each interface, makes one carry the data and the others backups, and
/// withdraws an interface's address when the session leaves it. Through the generic-netlink
/// `mptcp_pm` family, from the connection's namespace.
///
/// ```swift
/// for request in session.handle(.subflowsSampled(MPTCP.subflows(of: socket), at: now)) {
///     if case .subflow(let plan) = request { try controller.perform(plan) }
/// }
/// ```
///
/// Safe to use from any thread.
public final class MPTCPSubflowController: Sendable {
    public let namespace: NetworkNamespace
    private let socket = Mutex<NetlinkSocketBox?>(nil)

    /// A netlink socket, kept for the controller's life once the first request needs it.
    private final class NetlinkSocketBox: @unchecked Sendable {
        let socket: NetlinkSocket
        init(_ socket: NetlinkSocket) { self.socket = socket }
    }

    /// A controller for the connections of one namespace; its netlink socket opens with the
    /// first request.
    ///
    /// - Parameter namespace: The namespace the connections are in.
    public init(namespace: NetworkNamespace) {
        self.namespace = namespace
    }

    /// Performs `request`. Opening a subflow is refused by the kernel until the connection is
    /// fully established (data went both ways): the session asks again later.
    ///
    /// - Parameter request: A subflow to open, mark as a backup or not, or withdraw.
    /// - Throws: ``MultipathError/system(operation:_:)`` with the kernel's answer when the
    ///   netlink socket cannot be opened or the kernel refuses the request.
    public func perform(_ request: HandoverSession.SubflowRequest) throws(MultipathError) {
        do throws(NetlinkError) {
            try socket.withLock { box throws(NetlinkError) in
                if box == nil { box = NetlinkSocketBox(try NetlinkSocket(.generic, in: namespace)) }
                let netlink = box!.socket
                switch request {
                case let .open(token, local, _, interfaceIndex, id, backup, remote, port):
                    try netlink.createMPTCPSubflow(token: token, from: MPTCPEndpoint(id: id, address: local, interfaceIndex: interfaceIndex,
                                                                                     flags: backup ? .backup : []),
                                                   to: remote, port: port)
                case let .setBackup(token, local, backup, remote, port):
                    try netlink.setMPTCPSubflowBackup(token: token, local: local, remote: remote, remotePort: port, backup: backup)
                case let .withdraw(token, localID, _):
                    try netlink.removeMPTCPAddress(token: token, localID: localID)
                }
            }
        } catch {
            throw .system(operation: "MPTCP path manager", error)
        }
    }
}
