import Foundation
import Glibc
import Multipath
import Netlink
import RoamSystem

/// Whether this kernel's userspace MPTCP path manager can do what a handover through it needs,
/// checked by doing it: in a node's namespace, over its loopback, one MPTCP connection under
/// `net.mptcp.pm_type = 1` gets a second subflow (`SUBFLOW_CREATE`), its first subflow made a
/// backup (`SET_FLAGS` with the connection's token) and the first subflow's address withdrawn
/// (`REMOVE` of address 0). A kernel whose userspace path manager lacks any of these is told
/// apart from one that has them all by the kernel's own answers, not by its version number
/// (Debian 12's 6.1 and 6.18 both pass). The namespace's `pm_type` is put back as it was.
enum SubflowControlCheck {
    /// Nil when everything worked, else what did not, in words for the report.
    static func run(in namespace: NetworkNamespace) -> String? {
        let previous: String
        do throws(NetlinkError) {
            previous = try namespace.sysctl("net.mptcp.pm_type").trimmingCharacters(in: .whitespacesAndNewlines)
            try namespace.setSysctls(["net.mptcp.pm_type": "1"])
        } catch {
            return "this kernel has no userspace MPTCP path manager (net.mptcp.pm_type: \(error))"
        }
        defer { try? namespace.setSysctls(["net.mptcp.pm_type": previous]) }
        return exercise(in: namespace)
    }

    private static let first = IPAddress("127.0.0.1")!
    private static let second = IPAddress("127.0.0.2")!

    private static func exercise(in namespace: NetworkNamespace) -> String? {
        let stop: EventSignal
        do { stop = try EventSignal() } catch { return "\(error)" }
        let deadline = MonotonicInstant.now + .seconds(2)
        let listener: TCPSocket
        do {
            listener = try TCPSocket.listen(in: namespace, address: first, port: 0, mptcp: true)
        } catch {
            return "listen on the loopback: \(error)"
        }
        guard let port = listener.localPort else { return "listen on the loopback: no port" }
        let client: TCPSocket
        switch TCPSocket.connect(in: namespace, to: first, port: port, deadline: deadline, stop: stop, mptcp: true) {
        case .success(let connected): client = connected
        case .failure(let outcome): return "connect over the loopback: \(outcome)"
        }
        let server: TCPSocket
        switch listener.accept(stop: stop, deadline: deadline) {
        case .success(let accepted): server = accepted
        case .failure(let outcome): return "accept over the loopback: \(outcome)"
        }
        // Data both ways: the kernel opens subflows only on a fully established connection.
        var byte: UInt8 = 1
        for (from, to) in [(client, server), (server, client)] {
            guard withUnsafeBytes(of: &byte, { from.send($0, stop: stop, deadline: deadline) }) == .done,
                  withUnsafeMutableBytes(of: &byte, { to.receiveAll(into: $0, stop: stop, deadline: deadline) }) == .done else {
                return "exchange data over the loopback"
            }
        }
        guard MPTCP.mode(of: client.descriptor) == .multipath, let token = MPTCP.token(of: client.descriptor) else {
            return "the loopback connection fell back to TCP"
        }
        let netlink: NetlinkSocket
        do throws(NetlinkError) {
            netlink = try NetlinkSocket(.generic, in: namespace)
        } catch {
            return "open the MPTCP path manager's netlink family: \(error)"
        }
        let loopback = (try? NetlinkSocket(.route, in: namespace).link(named: "lo"))??.index ?? 1
        // The first requests may come before the connection is fully established: retried.
        while true {
            do throws(NetlinkError) {
                try netlink.createMPTCPSubflow(token: token, from: MPTCPEndpoint(id: 1, address: second, interfaceIndex: loopback, flags: .backup),
                                               to: first, port: port)
                break
            } catch {
                guard MonotonicInstant.now < deadline else { return "open a subflow (SUBFLOW_CREATE): \(error)" }
                _ = stop.wait(for: .milliseconds(5))
            }
        }
        do throws(NetlinkError) {
            try netlink.setMPTCPSubflowBackup(token: token, local: first, remote: first, remotePort: port, backup: true)
        } catch {
            return "switch a subflow to backup (SET_FLAGS with a token): \(error)"
        }
        do throws(NetlinkError) {
            try netlink.removeMPTCPAddress(token: token, localID: 0)
        } catch {
            return "withdraw the first subflow's address (REMOVE of address 0): \(error)"
        }
        client.abort()
        server.abort()
        return nil
    }
}
