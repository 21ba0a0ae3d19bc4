import Netlink
import RoamSystem

/// What a topology and the netem backend do through one node's route socket: the seam that
/// lets their plans be checked without root (``Topology/build(_:backend:control:)`` with a
/// recording ``NetworkControl``). `NetlinkSocket` is the real one.
package protocol RouteSocket: AnyObject {
    func link(named name: String) throws(NetlinkError) -> Link?
    func setLink(index: Int32, up: Bool?, alias: String?, mtu: UInt32?, name: String?) throws(NetlinkError)
    func addAddress(_ prefix: IPPrefix, interfaceIndex: Int32, skipDAD: Bool) throws(NetlinkError)
    func addRoute(_ route: Route, replace: Bool) throws(NetlinkError)
    func addRule(_ rule: RoutingRule) throws(NetlinkError)
    func deleteRule(_ rule: RoutingRule) throws(NetlinkError)
    func deleteRoute(_ route: Route) throws(NetlinkError)
    func deleteAddress(_ prefix: IPPrefix, interfaceIndex: Int32) throws(NetlinkError)
    func createVethPair(_ name: String, peer peerName: String, peerNamespace: NetworkNamespace?) throws(NetlinkError)
    func replaceNetem(_ configuration: NetemConfiguration, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError)
    func replaceTokenBucket(_ configuration: TokenBucketConfiguration, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError)
    func replaceCoDel(_ configuration: CoDelConfiguration, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError)
    func replaceByteFIFO(limit: UInt32, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError)
    func deleteQdisc(interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError)
    /// Every qdisc of the namespace, with its counters.
    func qdiscs() throws(NetlinkError) -> [Qdisc]
    func replacePrio(bands: Int, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError)
    func addU32Filter(_ filter: U32Filter, interfaceIndex: Int32, parent: QdiscHandle) throws(NetlinkError)
    /// The filters at `priority` (0: every filter) under `parent`.
    func deleteFilters(interfaceIndex: Int32, parent: QdiscHandle, priority: UInt16) throws(NetlinkError)
}

extension NetlinkSocket: RouteSocket {}

/// What building a scenario's network asks of the kernel beyond route sockets: namespaces,
/// their sysctls, and the run's registration for `roam cleanup`.
package protocol NetworkControl {
    /// Creates the namespace `name` (it must not exist).
    func createNamespace(named name: String) throws(NetlinkError) -> NetworkNamespace
    /// Removes the namespace `name` if it exists, and with it its interfaces.
    func deleteNamespace(named name: String)
    func setSysctls(_ values: KeyValuePairs<String, String>, in namespace: NetworkNamespace) throws(NetlinkError)
    /// A route socket bound to `namespace`.
    func routeSocket(in namespace: NetworkNamespace) throws(NetlinkError) -> any RouteSocket
    func register(run runID: String) throws(SimulatorError)
    func unregister(run runID: String)
}

/// The real kernel: named namespaces under `/run/netns`, libnl route sockets, `/run/roam/runs`.
package struct KernelNetworkControl: NetworkControl {
    package init() {}

    package func createNamespace(named name: String) throws(NetlinkError) -> NetworkNamespace {
        try NetworkNamespace.create(named: name)
    }

    package func deleteNamespace(named name: String) {
        if let namespace = try? NetworkNamespace.named(name), namespace.exists {
            try? namespace.delete()
        }
    }

    package func setSysctls(_ values: KeyValuePairs<String, String>, in namespace: NetworkNamespace) throws(NetlinkError) {
        try namespace.setSysctls(values)
    }

    package func routeSocket(in namespace: NetworkNamespace) throws(NetlinkError) -> any RouteSocket {
        try NetlinkSocket(.route, in: namespace)
    }

    package func register(run runID: String) throws(SimulatorError) {
        do throws(SafePathError) {
            try RunRegistry.root(creating: true).register(runID)
        } catch {
            throw SimulatorError(.environment, "cannot note run \(runID) for roam cleanup: \(error.message)")
        }
    }

    package func unregister(run runID: String) {
        (try? RunRegistry.root(creating: false))?.unregister(runID)
    }
}
