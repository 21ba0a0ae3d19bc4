import Glibc
import Netlink
@testable import Simulator

/// A ``NetworkControl`` that keeps, per namespace, what a real kernel would hold after the
/// calls: links with their state, addresses, routes, rules and qdiscs. Topology and backend
/// plans are checked against it without root. It refuses what the kernel would refuse (a
/// namespace made twice, an interface index that does not exist, a link name taken) and fails
/// the call that ``failure`` names, so that recovery paths run too.
final class RecordingNetwork: NetworkControl, @unchecked Sendable {
    final class Namespace {
        var links: [Link] = [Link(index: 1, name: "lo", flags: .loopback)]
        var addresses: [(prefix: IPPrefix, index: Int32)] = []
        var routes: [Route] = []
        var rules: [RoutingRule] = []
        var sysctls: [String: String] = [:]
        /// Qdiscs by interface index and handle: "netem" or "tbf", with what they were given.
        var netem: [Int32: NetemConfiguration] = [:]
        var tokenBuckets: [Int32: TokenBucketConfiguration] = [:]
        /// What is in tbf's class: a CoDel or FQ-CoDel qdisc, or (nil) a byte FIFO.
        var managedQueues: [Int32: CoDelConfiguration?] = [:]
        /// Interfaces with a prio root (flows), and their filters in order.
        var prio: Set<Int32> = []
        var filters: [Int32: [U32Filter]] = [:]
        /// The filters an interface had after each change to them, in order: a packet sent
        /// between two calls meets one of these sets.
        var filterHistory: [Int32: [[U32Filter]]] = [:]
        var operations = 0
        /// Every qdisc and link-state call, in order, by interface name: what a kernel would be
        /// asked to do to shape the links (``RecordingNetwork/shaping(in:)``).
        var shaping: [String] = []

        func link(_ name: String) -> Link? { links.first { $0.name == name } }
        func name(_ index: Int32) -> String { links.first { $0.index == index }?.name ?? "#\(index)" }
    }

    /// A call to fail: the operation's name (`addRoute`, `replaceNetem`, ...), and which call of
    /// it across every namespace (1 for the first).
    struct Failure {
        var operation: String
        var call: Int
        var errno: Int32
    }

    private(set) var namespaces: [String: Namespace] = [:]
    private(set) var registeredRuns: Set<String> = []
    private(set) var deletedNamespaces: [String] = []
    /// Calls made outside any namespace this recorder made (the host's, for instance).
    private(set) var strayCalls: [String] = []
    var failure: Failure?
    private var calls: [String: Int] = [:]
    private var nextIndex: Int32 = 2

    func namespace(_ name: String) -> Namespace? { namespaces[name] }

    fileprivate func check(_ operation: String) throws(NetlinkError) {
        calls[operation, default: 0] += 1
        if let failure, failure.operation == operation, failure.call == calls[operation] {
            throw NetlinkError(.errno(failure.errno), operation: "\(operation) (injected)")
        }
    }

    fileprivate func newIndex() -> Int32 {
        defer { nextIndex += 1 }
        return nextIndex
    }

    func createNamespace(named name: String) throws(NetlinkError) -> NetworkNamespace {
        try check("createNamespace")
        guard namespaces[name] == nil else { throw NetlinkError(.errno(EEXIST), operation: "create \(name)") }
        namespaces[name] = Namespace()
        return try NetworkNamespace.named(name)
    }

    func deleteNamespace(named name: String) {
        if namespaces.removeValue(forKey: name) != nil { deletedNamespaces.append(name) }
    }

    func setSysctls(_ values: KeyValuePairs<String, String>, in namespace: NetworkNamespace) throws(NetlinkError) {
        try check("setSysctls")
        guard let state = namespace.name.flatMap({ namespaces[$0] }) else {
            strayCalls.append("setSysctls in \(namespace)")
            throw NetlinkError(.errno(ENOENT), operation: "setSysctls")
        }
        for (key, value) in values { state.sysctls[key] = value }
    }

    func routeSocket(in namespace: NetworkNamespace) throws(NetlinkError) -> any RouteSocket {
        try check("routeSocket")
        guard let name = namespace.name, namespaces[name] != nil else {
            strayCalls.append("routeSocket in \(namespace)")
            throw NetlinkError(.errno(ENOENT), operation: "open a route socket in \(namespace)")
        }
        return Socket(network: self, namespace: name)
    }

    func register(run runID: String) throws(SimulatorError) {
        registeredRuns.insert(runID)
    }

    func unregister(run runID: String) {
        registeredRuns.remove(runID)
    }

    /// A route socket bound to one recorded namespace; calls on a deleted one are stray.
    final class Socket: RouteSocket {
        let network: RecordingNetwork
        let namespaceName: String

        init(network: RecordingNetwork, namespace: String) {
            self.network = network
            self.namespaceName = namespace
        }

        private func state(_ operation: String) throws(NetlinkError) -> Namespace {
            try network.check(operation)
            guard let state = network.namespaces[namespaceName] else {
                network.strayCalls.append("\(operation) in deleted \(namespaceName)")
                throw NetlinkError(.errno(EBADF), operation: operation)
            }
            state.operations += 1
            return state
        }

        private func linkPosition(_ index: Int32, in state: Namespace, _ operation: String) throws(NetlinkError) -> Int {
            guard let position = state.links.firstIndex(where: { $0.index == index }) else {
                throw NetlinkError(.errno(ENODEV), operation: "\(operation): no interface \(index) in \(namespaceName)")
            }
            return position
        }

        func link(named name: String) throws(NetlinkError) -> Link? {
            try state("link").link(name)
        }

        func setLink(index: Int32, up: Bool?, alias: String?, mtu: UInt32?, name: String?) throws(NetlinkError) {
            let state = try state("setLink")
            let position = try linkPosition(index, in: state, "setLink")
            if let up {
                if up { state.links[position].flags.insert(.up) } else { state.links[position].flags.remove(.up) }
                state.shaping.append("\(state.links[position].name) \(up ? "up" : "down")")
            }
            if let alias { state.links[position].alias = alias }
            if let mtu { state.links[position].mtu = mtu }
            if let name { state.links[position].name = name }
        }

        func addAddress(_ prefix: IPPrefix, interfaceIndex: Int32, skipDAD: Bool) throws(NetlinkError) {
            let state = try state("addAddress")
            _ = try linkPosition(interfaceIndex, in: state, "addAddress")
            guard !state.addresses.contains(where: { $0.prefix == prefix && $0.index == interfaceIndex }) else {
                throw NetlinkError(.errno(EEXIST), operation: "add address \(prefix)")
            }
            state.addresses.append((prefix, interfaceIndex))
        }

        func addRoute(_ route: Route, replace: Bool) throws(NetlinkError) {
            let state = try state("addRoute")
            for hop in route.nextHops {
                if let index = hop.interfaceIndex { _ = try linkPosition(index, in: state, "addRoute") }
            }
            let same = state.routes.firstIndex { $0.table == route.table && $0.destination == route.destination && $0.metric == route.metric && $0.family == route.family }
            if let same {
                guard replace else { throw NetlinkError(.errno(EEXIST), operation: "add route \(route.destination)") }
                state.routes[same] = route
            } else {
                state.routes.append(route)
            }
        }

        func addRule(_ rule: RoutingRule) throws(NetlinkError) {
            try state("addRule").rules.append(rule)
        }

        func deleteRule(_ rule: RoutingRule) throws(NetlinkError) {
            let state = try state("deleteRule")
            guard let position = state.rules.firstIndex(of: rule) else { throw NetlinkError(.errno(ENOENT), operation: "delete rule") }
            state.rules.remove(at: position)
        }

        func deleteRoute(_ route: Route) throws(NetlinkError) {
            let state = try state("deleteRoute")
            guard let position = state.routes.firstIndex(where: { $0.table == route.table && $0.destination == route.destination && $0.type == route.type
                && $0.nextHops.map(\.interfaceIndex) == route.nextHops.map(\.interfaceIndex) }) else {
                throw NetlinkError(.errno(ESRCH), operation: "delete route")
            }
            state.routes.remove(at: position)
        }

        func deleteAddress(_ prefix: IPPrefix, interfaceIndex: Int32) throws(NetlinkError) {
            let state = try state("deleteAddress")
            guard let position = state.addresses.firstIndex(where: { $0.prefix == prefix && $0.index == interfaceIndex }) else {
                throw NetlinkError(.errno(EADDRNOTAVAIL), operation: "delete address \(prefix)")
            }
            state.addresses.remove(at: position)
        }

        func createVethPair(_ name: String, peer peerName: String, peerNamespace: NetworkNamespace?) throws(NetlinkError) {
            let state = try state("createVethPair")
            let peerState: Namespace
            if let peerNamespace {
                guard let found = peerNamespace.name.flatMap({ network.namespaces[$0] }) else {
                    network.strayCalls.append("veth peer \(peerName) in \(peerNamespace)")
                    throw NetlinkError(.errno(ENOENT), operation: "create veth \(name)")
                }
                peerState = found
            } else {
                peerState = state
            }
            guard state.link(name) == nil, peerState.link(peerName) == nil else {
                throw NetlinkError(.errno(EEXIST), operation: "create veth \(name) <-> \(peerName)")
            }
            state.links.append(Link(index: network.newIndex(), name: name, flags: [], kind: "veth"))
            peerState.links.append(Link(index: network.newIndex(), name: peerName, flags: [], kind: "veth"))
        }

        func replaceNetem(_ configuration: NetemConfiguration, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError) {
            let state = try state("replaceNetem")
            _ = try linkPosition(interfaceIndex, in: state, "replaceNetem")
            state.netem[interfaceIndex] = configuration
            state.shaping.append("\(state.name(interfaceIndex)) netem \(handle) \(parent) \(configuration)")
        }

        func replaceTokenBucket(_ configuration: TokenBucketConfiguration, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError) {
            let state = try state("replaceTokenBucket")
            guard state.netem[interfaceIndex] != nil else {
                throw NetlinkError(.errno(ENOENT), operation: "tbf under a netem qdisc that does not exist")
            }
            state.tokenBuckets[interfaceIndex] = configuration
            state.shaping.append("\(state.name(interfaceIndex)) tbf \(handle) \(parent) \(configuration)")
        }

        func replaceCoDel(_ configuration: CoDelConfiguration, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError) {
            let state = try state("replaceCoDel")
            guard state.tokenBuckets[interfaceIndex] != nil else {
                throw NetlinkError(.errno(ENOENT), operation: "\(configuration.kind) under a tbf that does not exist")
            }
            state.managedQueues[interfaceIndex] = .some(configuration)
            state.shaping.append("\(state.name(interfaceIndex)) codel \(handle) \(parent) \(configuration)")
        }

        func replaceByteFIFO(limit: UInt32, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError) {
            let state = try state("replaceByteFIFO")
            guard state.tokenBuckets[interfaceIndex] != nil else {
                throw NetlinkError(.errno(ENOENT), operation: "bfifo under a tbf that does not exist")
            }
            state.managedQueues[interfaceIndex] = .some(nil)
            state.shaping.append("\(state.name(interfaceIndex)) bfifo \(handle) \(parent) limit \(limit)")
        }

        func deleteQdisc(interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError) {
            let state = try state("deleteQdisc")
            state.shaping.append("\(state.name(interfaceIndex)) delete \(handle) \(parent)")
            if parent == .root {
                // The root goes with everything under it.
                state.filters[interfaceIndex] = nil
                if state.prio.remove(interfaceIndex) != nil {
                    state.netem[interfaceIndex] = nil
                    state.tokenBuckets[interfaceIndex] = nil
                    state.managedQueues[interfaceIndex] = nil
                    return
                }
                guard state.netem.removeValue(forKey: interfaceIndex) != nil else {
                    throw NetlinkError(.errno(ENOENT), operation: "delete a root qdisc that does not exist")
                }
                state.tokenBuckets[interfaceIndex] = nil
                state.managedQueues[interfaceIndex] = nil
                return
            }
            state.managedQueues[interfaceIndex] = nil
            guard state.tokenBuckets.removeValue(forKey: interfaceIndex) != nil else {
                throw NetlinkError(.errno(ENOENT), operation: "delete a qdisc that does not exist")
            }
        }

        func replacePrio(bands: Int, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError) {
            let state = try state("replacePrio")
            _ = try linkPosition(interfaceIndex, in: state, "replacePrio")
            guard state.netem[interfaceIndex] == nil else {
                throw NetlinkError(.errno(EEXIST), operation: "prio at a root that holds a netem qdisc")
            }
            state.prio.insert(interfaceIndex)
            state.shaping.append("\(state.name(interfaceIndex)) prio \(handle) \(parent) bands \(bands)")
        }

        func addU32Filter(_ filter: U32Filter, interfaceIndex: Int32, parent: QdiscHandle) throws(NetlinkError) {
            let state = try state("addU32Filter")
            guard state.prio.contains(interfaceIndex) else {
                throw NetlinkError(.errno(EINVAL), operation: "a filter under a prio qdisc that does not exist")
            }
            // The kernel keeps one protocol to a priority.
            if state.filters[interfaceIndex, default: []].contains(where: { $0.priority == filter.priority && $0.protocolNumber != filter.protocolNumber }) {
                throw NetlinkError(.errno(EINVAL), operation: "a filter of another protocol at priority \(filter.priority)")
            }
            state.filters[interfaceIndex, default: []].append(filter)
            state.filterHistory[interfaceIndex, default: []].append(state.filters[interfaceIndex] ?? [])
            state.shaping.append("\(state.name(interfaceIndex)) filter \(parent) \(filter)")
        }

        func deleteFilters(interfaceIndex: Int32, parent: QdiscHandle, priority: UInt16) throws(NetlinkError) {
            let state = try state("deleteFilters")
            if priority == 0 {
                state.filters[interfaceIndex] = nil
                state.shaping.append("\(state.name(interfaceIndex)) delete filters \(parent)")
            } else {
                state.filters[interfaceIndex]?.removeAll { $0.priority == priority }
                state.shaping.append("\(state.name(interfaceIndex)) delete filters \(parent) prio \(priority)")
            }
            state.filterHistory[interfaceIndex, default: []].append(state.filters[interfaceIndex] ?? [])
        }

        /// The qdiscs the recording holds, with no counters (nothing passes a recording).
        func qdiscs() throws(NetlinkError) -> [Qdisc] {
            let state = try state("qdiscs")
            return state.netem.keys.sorted().map { Qdisc(interfaceIndex: $0, handle: NetemBackend.netemHandle, parent: .root, kind: .netem) }
                + state.tokenBuckets.keys.sorted().map {
                    Qdisc(interfaceIndex: $0, handle: NetemBackend.tokenBucketHandle, parent: QdiscHandle(major: 1, minor: 1), kind: .tokenBucket)
                }
        }
    }
}
