import Glibc
import Netlink
import PathMonitor
import RoamDecisions
import Synchronization

/// Keeps a namespace's MPTCP endpoints in step with its network path, through the kernel's
/// `mptcp_pm` generic-netlink family (what `ip mptcp endpoint` does), for one service type:
///
/// - `handover`: every permitted interface gets a subflow endpoint, and all but the preferred
///   one (the path's first permitted interface: Wi-Fi before cellular) are backups, carrying
///   data only when no regular subflow can. When the preferred interface leaves the path its
///   endpoint goes (the kernel closes its subflows) and the next one stops being a backup, so
///   data moves without waiting for retransmission timeouts; when it comes back, it gets its
///   endpoint again and the kernel opens a subflow over it for every open connection.
/// - `interactive` and `aggregate`: every permitted interface is a regular subflow; the kernel's
///   scheduler sends on the subflow with the lowest latency and spills onto the others when it
///   is full, so `aggregate` uses the sum of the paths.
/// - `none`: no endpoints.
///
/// An interface that stalled counts as least preferred (``markStalled(_:)``), or has no
/// endpoints while another can carry (``withdrawStalled(_:)``), until ``clearStalled(_:)``. The manager only touches the endpoints it made; ``stop()`` removes them.
public final class MPTCPPathManager: Sendable {
    public let namespace: NetworkNamespace
    public let serviceType: MultipathServiceType
    public let policy: PathPolicy

    /// What one update changed.
    public enum Change: Sendable, Hashable, CustomStringConvertible {
        case added(MPTCPEndpoint, interface: String)
        case removed(MPTCPEndpoint, interface: String)
        case backup(MPTCPEndpoint, interface: String, isBackup: Bool)

        public var description: String {
            switch self {
            case let .added(endpoint, interface): "added \(endpoint) (\(interface))"
            case let .removed(endpoint, interface): "removed \(endpoint) (\(interface))"
            case let .backup(endpoint, interface, isBackup): "\(endpoint.address) (\(interface)) \(isBackup ? "now a backup" : "no longer a backup")"
            }
        }
    }

    private struct Managed {
        var endpoint: MPTCPEndpoint
        var interface: String
    }

    private struct State {
        var socket: NetlinkSocket
        /// Endpoints this manager added, by address.
        var managed: [IPAddress: Managed] = [:]
        var stalled: Set<String> = []
        /// Stalled interfaces whose endpoints are withdrawn (``withdrawStalled(_:)``).
        var withdrawn: Set<String> = []
        var lastPath: NetworkPath?
        var originalLimits: MPTCPLimits?
        var limits: MPTCPLimits?
    }

    private let state: Mutex<State>

    /// Opens the path manager of `namespace`; fails when the kernel has no MPTCP.
    ///
    /// - Parameters:
    ///   - namespace: The namespace whose endpoints to keep.
    ///   - serviceType: How connections use the paths: backups in `handover`, every path at
    ///     once in `interactive` and `aggregate`.
    ///   - policy: The interfaces that may carry subflows.
    /// - Throws: ``MultipathError/system(operation:_:)`` when the namespace has no MPTCP or its
    ///   netlink socket cannot be opened.
    public init(namespace: NetworkNamespace = .current, serviceType: MultipathServiceType, policy: PathPolicy = PathPolicy()) throws(MultipathError) {
        let socket = try Self.system("open a generic netlink socket in \(namespace)") { () throws(NetlinkError) in try NetlinkSocket(.generic, in: namespace) }
        guard socket.hasMPTCPPathManager() else {
            throw .system(operation: "open the MPTCP path manager in \(namespace)",
                          NetlinkError(.errno(ENOENT), operation: "resolve the mptcp_pm family",
                                       hint: "this kernel has no MPTCP (CONFIG_MPTCP); connections stay single-path TCP"))
        }
        self.namespace = namespace
        self.serviceType = serviceType
        self.policy = policy
        self.state = Mutex(State(socket: socket))
    }

    /// The endpoints a path calls for (pure: what ``update(to:)`` makes the kernel's match).
    ///
    /// - Parameters:
    ///   - path: The path as the monitor gives it.
    ///   - serviceType: How connections use the paths.
    ///   - policy: The interfaces that may carry subflows.
    ///   - stalled: Interfaces made least preferred (``markStalled(_:)``).
    /// - Returns: An endpoint for each permitted interface's addresses, with its interface,
    ///   flagged as a backup where the service type makes it one.
    public static func endpoints(for path: NetworkPath, serviceType: MultipathServiceType, policy: PathPolicy,
                                 stalled: Set<String> = []) -> [(interface: String, endpoint: MPTCPEndpoint)] {
        endpoints(for: path, serviceType: serviceType, policy: policy, stalled: stalled, withdrawn: [])
    }

    /// ``endpoints(for:serviceType:policy:stalled:)`` without the `withdrawn` interfaces' while
    /// another interface can carry (one that is the only one left keeps its endpoints).
    static func endpoints(for path: NetworkPath, serviceType: MultipathServiceType, policy: PathPolicy,
                          stalled: Set<String>, withdrawn: Set<String>) -> [(interface: String, endpoint: MPTCPEndpoint)] {
        guard serviceType != .none, case .success(let permitted) = policy.permittedInterfaces(of: path) else { return [] }
        // The connectivity rule (`PathPolicy/validation`): subflows only over interfaces that
        // carry, none over one standing by (still being checked while one is validated: a
        // portal found a moment later would hold its subflow) or left out.
        let best = ValidationRule.bestRank(among: permitted)
        let usable = permitted.filter { $0.type != .loopback && policy.validation.role(of: $0, bestRank: best) == .carries }
        // Stalled interfaces go last, keeping the path's order otherwise.
        var ordered = usable.filter { !stalled.contains($0.name) } + usable.filter { stalled.contains($0.name) }
        let remaining = ordered.filter { !withdrawn.contains($0.name) }
        if !remaining.isEmpty { ordered = remaining }
        let preferred = ordered.first?.name
        return ordered.flatMap { interface in
            let isBackup = serviceType == .handover && interface.name != preferred
            return interface.addresses.map(\.address).filter { !$0.isLinkLocal && !$0.isLoopback }.map { address in
                (interface.name, MPTCPEndpoint(address: address, interfaceIndex: interface.index, flags: isBackup ? [.subflow, .backup] : [.subflow]))
            }
        }
    }

    /// Brings the kernel's endpoints in step with `path`.
    ///
    /// - Parameter path: The path as the monitor gives it.
    /// - Returns: The endpoints added, removed or changed.
    /// - Throws: ``MultipathError/system(operation:_:)`` with the kernel's answer.
    @discardableResult
    public func update(to path: NetworkPath) throws(MultipathError) -> [Change] {
        try Self.system("update the MPTCP endpoints") { () throws(NetlinkError) in
            try state.withLock { state throws(NetlinkError) -> [Change] in
                state.lastPath = path
                return try Self.reconcile(&state, path: path, serviceType: serviceType, policy: policy)
            }
        }
    }

    /// Runs a netlink step, its failure as ``MultipathError/system(operation:_:)``.
    private static func system<T>(_ operation: String, _ body: () throws(NetlinkError) -> T) throws(MultipathError) -> T {
        do throws(NetlinkError) {
            return try body()
        } catch {
            throw .system(operation: operation, error)
        }
    }

    /// Follows `monitor`: every path it publishes brings the endpoints in step. `onChange` hears
    /// what each update changed, or why it failed; cancel the subscription to stop following.
    ///
    /// - Parameters:
    ///   - monitor: The path monitor of the manager's namespace, started.
    ///   - onChange: Hears each update's changes or error, with the path, on the monitor's
    ///     delivery thread.
    /// - Returns: The subscription to the monitor's updates.
    public func follow(_ monitor: NetworkPathMonitor,
                       onChange: @escaping @Sendable (Result<[Change], MultipathError>, NetworkPath) -> Void = { _, _ in }) -> PathUpdateSubscription {
        monitor.onUpdate { [self] path in
            do throws(MultipathError) {
                let changes = try update(to: path)
                if !changes.isEmpty { onChange(.success(changes), path) }
            } catch {
                onChange(.failure(error), path)
            }
        }
    }

    /// Makes `interface` least preferred (its subflows become backups in `handover`), as when
    /// data stopped moving over it though it is still up.
    ///
    /// - Parameter interface: The interface that stalled.
    /// - Returns: The endpoints changed.
    /// - Throws: ``MultipathError/system(operation:_:)`` with the kernel's answer.
    @discardableResult
    public func markStalled(_ interface: String) throws(MultipathError) -> [Change] {
        try Self.system("demote \(interface)'s MPTCP endpoints") { () throws(NetlinkError) in
            try state.withLock { state throws(NetlinkError) -> [Change] in
                guard state.stalled.insert(interface).inserted, let path = state.lastPath else { return [] }
                return try Self.reconcile(&state, path: path, serviceType: serviceType, policy: policy)
            }
        }
    }

    /// Withdraws the endpoints of `interface`, whose subflows stalled, until ``clearStalled(_:)``:
    /// the kernel closes its subflows and sends what they held over the others, as when the
    /// interface leaves the path. A backup subflow (``markStalled(_:)``) keeps what it holds
    /// until the kernel gives up on it, which is what stalls a connection behind a path that
    /// passes nothing. An interface that is the only one that can carry keeps its endpoints, as
    /// least preferred.
    ///
    /// - Parameter interface: The interface that stalled.
    /// - Returns: The endpoints changed.
    /// - Throws: ``MultipathError/system(operation:_:)`` with the kernel's answer.
    @discardableResult
    public func withdrawStalled(_ interface: String) throws(MultipathError) -> [Change] {
        try Self.system("withdraw \(interface)'s MPTCP endpoints") { () throws(NetlinkError) in
            try state.withLock { state throws(NetlinkError) -> [Change] in
                let stalled = state.stalled.insert(interface).inserted
                let withdrawn = state.withdrawn.insert(interface).inserted
                guard stalled || withdrawn, let path = state.lastPath else { return [] }
                return try Self.reconcile(&state, path: path, serviceType: serviceType, policy: policy)
            }
        }
    }

    /// Gives `interface` its place back (and its endpoints, if they were withdrawn).
    ///
    /// - Parameter interface: An interface ``markStalled(_:)`` demoted or ``withdrawStalled(_:)``
    ///   withdrew.
    /// - Returns: The endpoints changed.
    /// - Throws: ``MultipathError/system(operation:_:)`` with the kernel's answer.
    @discardableResult
    public func clearStalled(_ interface: String) throws(MultipathError) -> [Change] {
        try Self.system("restore \(interface)'s MPTCP endpoints") { () throws(NetlinkError) in
            try state.withLock { state throws(NetlinkError) -> [Change] in
                let stalled = state.stalled.remove(interface) != nil
                let withdrawn = state.withdrawn.remove(interface) != nil
                guard stalled || withdrawn, let path = state.lastPath else { return [] }
                return try Self.reconcile(&state, path: path, serviceType: serviceType, policy: policy)
            }
        }
    }

    /// The interface whose subflows carry the data now: the path's first permitted one that has
    /// not stalled (in `handover`, the only one that is not a backup).
    public var preferredInterface: String? {
        state.withLock { state in
            state.lastPath.flatMap {
                Self.endpoints(for: $0, serviceType: serviceType, policy: policy, stalled: state.stalled, withdrawn: state.withdrawn).first?.interface
            }
        }
    }

    /// The interface of the last path that has `address`.
    func interface(owning address: IPAddress) -> String? {
        state.withLock { state in
            state.lastPath?.availableInterfaces.first { $0.addresses.contains { $0.address == address } }?.name
        }
    }

    /// The endpoints this manager keeps now, with their interfaces.
    public var endpoints: [(interface: String, endpoint: MPTCPEndpoint)] {
        state.withLock { state in state.managed.values.map { ($0.interface, $0.endpoint) }.sorted { $0.endpoint.address < $1.endpoint.address } }
    }

    /// Removes the endpoints this manager added and restores the limits it changed.
    public func stop() {
        state.withLock { state in
            for managed in state.managed.values { try? state.socket.removeMPTCPEndpoint(id: managed.endpoint.id) }
            state.managed = [:]
            if let limits = state.originalLimits { try? state.socket.setMPTCPLimits(limits) }
            state.originalLimits = nil
            state.limits = nil
        }
    }

    /// Raises a namespace's limits so that connections accept as many subflows as the kernel
    /// allows (for servers: the client opens the extra subflows, and the server's limit caps
    /// how many it accepts).
    ///
    /// - Parameter namespace: The namespace whose limits to raise.
    /// - Throws: ``MultipathError/system(operation:_:)`` with the kernel's answer.
    public static func acceptSubflows(in namespace: NetworkNamespace) throws(MultipathError) {
        try system("raise the MPTCP subflow limits in \(namespace)") { () throws(NetlinkError) in
            let socket = try NetlinkSocket(.generic, in: namespace)
            try socket.setMPTCPLimits(MPTCPLimits(subflows: MPTCPLimits.maximum, addAddressAccepted: MPTCPLimits.maximum))
        }
    }

    private static func reconcile(_ state: inout State, path: NetworkPath, serviceType: MultipathServiceType,
                                  policy: PathPolicy) throws(NetlinkError) -> [Change] {
        let wanted = endpoints(for: path, serviceType: serviceType, policy: policy, stalled: state.stalled, withdrawn: state.withdrawn)
        var changes: [Change] = []
        let wantedAddresses = Set(wanted.map(\.endpoint.address))
        // Gone, or moved to another interface: remove (the kernel closes their subflows).
        for (address, managed) in state.managed where !wantedAddresses.contains(address)
            || wanted.first(where: { $0.endpoint.address == address })?.endpoint.interfaceIndex != managed.endpoint.interfaceIndex {
            try state.socket.removeMPTCPEndpoint(id: managed.endpoint.id)
            state.managed[address] = nil
            changes.append(.removed(managed.endpoint, interface: managed.interface))
        }
        if !wanted.isEmpty {
            // Each endpoint may add one subflow to every connection. The limits are read once;
            // after that the manager knows them (it is the one that changes them).
            let limits: MPTCPLimits
            if let known = state.limits { limits = known } else { limits = try state.socket.mptcpLimits() }
            if state.originalLimits == nil { state.originalLimits = limits }
            state.limits = limits
            let needed = min(MPTCPLimits.maximum, UInt32(wanted.count))
            if limits.subflows < needed {
                let raised = MPTCPLimits(subflows: needed, addAddressAccepted: max(limits.addAddressAccepted, needed))
                try state.socket.setMPTCPLimits(raised)
                state.limits = raised
            }
        }
        // Promotions before demotions: a connection always has a regular subflow to send on.
        let ordered = wanted.sorted { ($0.endpoint.flags.contains(.backup) ? 1 : 0) < ($1.endpoint.flags.contains(.backup) ? 1 : 0) }
        for (interface, endpoint) in ordered {
            if let managed = state.managed[endpoint.address] {
                let isBackup = endpoint.flags.contains(.backup)
                guard managed.endpoint.flags.contains(.backup) != isBackup else { continue }
                try state.socket.setMPTCPEndpoint(id: managed.endpoint.id, address: endpoint.address, backup: isBackup)
                state.managed[endpoint.address]?.endpoint.flags = endpoint.flags
                changes.append(.backup(managed.endpoint, interface: interface, isBackup: isBackup))
            } else {
                let added: MPTCPEndpoint
                do {
                    added = try state.socket.addMPTCPEndpoint(endpoint)
                } catch where error.isAlreadyExists {
                    // Someone else's endpoint for this address (ip mptcp, another manager): leave it be.
                    continue
                }
                state.managed[endpoint.address] = Managed(endpoint: added, interface: interface)
                changes.append(.added(added, interface: interface))
            }
        }
        return changes
    }
}
