import RoamCore

/// A mobility scenario: nodes, the links between them, what happens to the links over time,
/// the traffic that runs, and what must hold. Read from YAML by ``ScenarioReader``; the format is
/// documented in `docs/scenario-format.md`.
public struct Scenario: Sendable, Hashable {
    public var name: String
    public var description: String?
    /// The seed of every random decision (loss, jitter) where the backend can replay them.
    public var seed: UInt64
    public var duration: Duration
    public var nodes: [ScenarioNode]
    public var links: [LinkSpec]
    public var timeline: [TimelineEvent]
    public var workloads: [Workload]
    public var expectations: [Expectation]
    /// Link profiles the scenario defines (`profiles:`), usable as the built-in ones are.
    public var profiles: [LinkProfile] = []
    /// The access networks phones join (`networks:`). Their gateways, the internet and the
    /// links to them are in ``nodes`` and ``links`` too, with their ``NodeRole`` and ``LinkRole``,
    /// so that every event, impairment and report applies to them as to any link.
    public var networks: [NetworkSpec] = []
    /// Where the phones move among access points and cell sites (`mobility:`); the events it
    /// derives are in ``timeline`` already, on each phone's access links.
    public var mobility: Mobility?
    /// The TCP proxies the run starts, with toxiproxy's toxics (`proxies:`).
    public var proxies: [ProxySpec] = []
    /// What the timeline does to the proxies (`proxy:` events), in time order.
    public var proxyEvents: [ProxyEvent] = []

    public init(name: String, description: String? = nil, seed: UInt64 = 1, duration: Duration, nodes: [ScenarioNode] = [],
                links: [LinkSpec] = [], timeline: [TimelineEvent] = [], workloads: [Workload] = [], expectations: [Expectation] = [],
                profiles: [LinkProfile] = []) {
        self.profiles = profiles
        self.name = name
        self.description = description
        self.seed = seed
        self.duration = duration
        self.nodes = nodes
        self.links = links
        self.timeline = timeline
        self.workloads = workloads
        self.expectations = expectations
    }

    /// The profile `name` names: one the scenario defines, else a built-in one.
    public func profile(named name: String) -> LinkProfile? {
        let key = LinkProfile.normalized(name)
        return profiles.first { LinkProfile.normalized($0.name) == key } ?? LinkProfile.named(name)
    }
}

/// A host of the scenario: one network namespace.
public struct ScenarioNode: Sendable, Hashable {
    public var name: String
    public var description: String?
    /// What the node is: a host of the scenario's own, a server on the internet, or a network's
    /// gateway or the internet itself (added for `networks:`).
    public var role: NodeRole = .host
}

/// How packets are delayed, limited, lost and mangled in one direction. Every field is
/// optional: a timeline `set` changes only what it names.
public struct Impairment: Sendable, Hashable {
    public var delay: Duration?
    public var jitter: Duration?
    /// How much each delay depends on the previous one (0...1).
    public var delayCorrelation: Double?
    public var distribution: DelayDistribution?
    public var rate: Rate?
    public var loss: LossModel?
    /// Fraction of packets sent twice (0...1).
    public var duplicate: Double?
    /// Fraction of packets sent at once, ahead of delayed ones (0...1); needs a delay.
    public var reorder: Double?
    /// Fraction of packets with a flipped bit (0...1).
    public var corrupt: Double?
    /// Queue limit in packets.
    public var limit: Int?
    /// Queue limit in bytes (`limit: 256kb`); a direction has one limit or the other.
    public var limitBytes: Int?
    /// How the bottleneck queue drops (`queue:`); nil: as before (drop-tail by default).
    public var queue: QueueDiscipline?
    /// Capacity from a mahimahi trace instead of a fixed `rate`: each delivery opportunity on the
    /// userspace backend, the rate stepped every 100 ms on netem
    /// (``TimelineSchedule/steppingTraces(until:)``).
    public var trace: LinkTrace?

    public init(delay: Duration? = nil, jitter: Duration? = nil, delayCorrelation: Double? = nil, distribution: DelayDistribution? = nil,
                rate: Rate? = nil, loss: LossModel? = nil, duplicate: Double? = nil, reorder: Double? = nil, corrupt: Double? = nil, limit: Int? = nil,
                trace: LinkTrace? = nil) {
        self.delay = delay
        self.jitter = jitter
        self.delayCorrelation = delayCorrelation
        self.distribution = distribution
        self.rate = rate
        self.loss = loss
        self.duplicate = duplicate
        self.reorder = reorder
        self.corrupt = corrupt
        self.limit = limit
        self.trace = trace
    }

    /// These settings with every field that `other` sets taken from `other`.
    public func overridden(by other: Impairment) -> Impairment {
        Impairment(delay: other.delay ?? delay, jitter: other.jitter ?? jitter, delayCorrelation: other.delayCorrelation ?? delayCorrelation,
                   distribution: other.distribution ?? distribution, rate: other.rate ?? rate, loss: other.loss ?? loss,
                   duplicate: other.duplicate ?? duplicate, reorder: other.reorder ?? reorder, corrupt: other.corrupt ?? corrupt,
                   limit: other.limit ?? limit, trace: other.trace ?? trace)
            .with(limitBytes: other.limit == nil ? (other.limitBytes ?? limitBytes) : other.limitBytes, queue: other.queue ?? queue)
    }

    /// These settings with a byte limit and a queue discipline.
    func with(limitBytes: Int?, queue: QueueDiscipline?) -> Impairment {
        var result = self
        result.limitBytes = limitBytes
        result.queue = queue
        // A limit in bytes replaces one in packets, and the other way round.
        if limitBytes != nil { result.limit = nil }
        return result
    }

    public var isEmpty: Bool { self == Impairment() }
}

/// A delivery trace named in a scenario: the path as written and the opportunities it holds.
public struct LinkTrace: Sendable, Hashable {
    public var path: String
    public var trace: DeliveryTrace

    public init(path: String, trace: DeliveryTrace) {
        self.path = path
        self.trace = trace
    }
}

/// The distribution of delay jitter, as netem names its tables.
public enum DelayDistribution: String, Sendable, Hashable, CaseIterable {
    case uniform, normal, pareto, paretonormal
}

/// How packets are lost.
public enum LossModel: Sendable, Hashable {
    /// Each packet is lost with probability `rate`; `correlation` (0...1) ties a decision to the previous one.
    case random(rate: Double, correlation: Double)
    /// Gilbert-Elliott: a good and a bad state; `p` is the chance to go from good to bad, `r`
    /// from bad to good, and packets are lost with `lossInBad` in the bad state and `lossInGood`
    /// in the good one (netem's `gemodel p r 1-h 1-k`).
    case gilbertElliott(p: Double, r: Double, lossInBad: Double, lossInGood: Double)

    /// The long-run fraction of packets lost.
    public var meanLoss: Double {
        switch self {
        case .random(let rate, _): return rate
        case let .gilbertElliott(p, r, bad, good):
            guard p + r > 0 else { return good }
            return (r * good + p * bad) / (p + r)
        }
    }
}

/// A link's direction: `up` from the first node of `between` to the second, `down` back.
public enum LinkDirection: String, Sendable, Hashable, CaseIterable {
    case up, down, both
}

/// A link between two nodes: a pair of interfaces, one in each.
public struct LinkSpec: Sendable, Hashable {
    public var name: String
    /// The two nodes; `up` is from the first to the second.
    public var endpoints: (String, String)
    /// The type the interfaces are tagged with, for PathMonitor.
    public var type: InterfaceType
    public var isExpensive: Bool
    public var isConstrained: Bool
    /// A carrier's satellite network (NWPath's `isUltraConstrained`).
    public var isUltraConstrained: Bool = false
    /// The preset the link starts from, if any.
    public var profile: String?
    /// The impairment from the first node to the second, and back, at the start.
    public var up: Impairment
    public var down: Impairment
    /// Write a pcap per direction to the report.
    public var capture: Bool
    /// The address families the link carries (`families:`; both by default): an IPv4-only home
    /// Wi-Fi, an IPv6-only cellular network.
    public var families: Set<IPFamily> = [.ipv4, .ipv6]
    /// The line of the scenario file that defines it (0: not read from a file), for messages.
    public var line = 0
    /// What the link is: written under `links:`, or part of a network.
    public var role: LinkRole = .direct
    /// The interface names in each node, where they are not the link's name (a network's links).
    public var interfaceNames: [String]?
    /// The cellular radio's RRC states (`radio:`), played by the userspace emulator; the phone is
    /// the first node of ``endpoints``, so `up` is what it sends.
    public var radio: RadioStates?
    /// Flows with conditions of their own from the start (`flows:`), each over the link's.
    public var flows: [FlowSetting] = []

    /// The name of the link's interface in its first (`0`) or second (`1`) node.
    public func interfaceName(_ end: Int) -> String { interfaceNames?[end] ?? name }

    public static func == (lhs: LinkSpec, rhs: LinkSpec) -> Bool {
        lhs.name == rhs.name && lhs.endpoints == rhs.endpoints && lhs.type == rhs.type && lhs.isExpensive == rhs.isExpensive
            && lhs.role == rhs.role && lhs.interfaceNames == rhs.interfaceNames
            && lhs.isConstrained == rhs.isConstrained && lhs.isUltraConstrained == rhs.isUltraConstrained && lhs.profile == rhs.profile && lhs.up == rhs.up && lhs.down == rhs.down
            && lhs.capture == rhs.capture && lhs.families == rhs.families && lhs.radio == rhs.radio && lhs.flows == rhs.flows
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(endpoints.0)
        hasher.combine(endpoints.1)
    }
}

/// Something that happens to a link at a point in the scenario.
public struct TimelineEvent: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        /// Change the named settings at once.
        case set(Impairment)
        /// Move the named settings linearly to their targets over a span, in steps of at most 100 ms.
        case ramp(to: Impairment, over: Duration)
        /// Carrier loss: the interfaces go down; a path monitor sees it.
        case down
        /// Carrier back.
        case up
        /// The link stays up and passes nothing (`true`), or passes traffic again (`false`).
        case blackhole(Bool)
        /// Down and up repeatedly: `duty` is the fraction of each period spent up.
        case flap(period: Duration, duty: Double, until: Duration)
        /// Switch to a preset.
        case profile(String)
        /// The link's phone joins its network (`true`: the interface comes up with an address
        /// from the network) or leaves it (`false`: the interface goes down, its addresses gone).
        case membership(Bool)
        /// The network hands the link's phone new addresses (a DHCP lease changed, a new PDP
        /// context): connections bound to the old ones break.
        case renumber
        /// The network's NAT forgets its mappings (on its uplink): the next packet of every flow
        /// gets a new source port, as carrier NATs rebind.
        case rebind
        /// The network's resolver starts failing (on its uplink), or recovers (`nil`): whatever
        /// fault or delay is on ends.
        case dns(DNSFault?)
        /// The network's resolver answers every query from its phones this much late (on its
        /// uplink), until a `dns(nil)`.
        case dnsDelay(Duration)
        /// The link's phone logs into its network's captive portal (`true`), as a user who
        /// accepted the terms, or out of it (`false`).
        case portal(login: Bool)
        /// The flow the event's ``TimelineEvent/match`` selects gets the link's own conditions
        /// again (`reset: true`).
        case reset
    }

    public var at: Duration
    public var link: String
    public var direction: LinkDirection
    public var action: Action
    /// Where the event stands in its file (for reports).
    public var line: Int
    /// The packets a `set`, `ramp`, `blackhole` or `reset` acts on (`match:`); nil: all of them.
    public var match: FlowMatch? = nil
}

/// How a network's resolver fails (`dns:` on the timeline).
public enum DNSFault: String, Sendable, Hashable, CaseIterable {
    /// Queries go unanswered (the resolver's port is closed to the network).
    case timeout
    /// Every name is answered as not existing.
    case nxdomain
    /// Every query is refused (stub resolvers treat it as a server failure and give up).
    case refused
    /// Every query from the network's phones is answered with SERVFAIL (the resolver cannot
    /// reach the names' servers); a stub resolver asks its next server, if it has one.
    case servfail
}

/// A multipath service type, as URLSession's `multipathServiceType`.
public enum MultipathMode: String, Sendable, Hashable, CaseIterable {
    case none, handover, interactive, aggregate
}

/// An IP address family, as scenarios name it.
public enum IPFamily: String, Sendable, Hashable, CaseIterable, Comparable {
    case ipv4, ipv6

    public static func < (lhs: IPFamily, rhs: IPFamily) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Which address families a workload's client connects over (`family:`).
public enum FamilyChoice: String, Sendable, Hashable, CaseIterable {
    /// The server's IPv4 address only (the default).
    case ipv4
    /// The server's IPv6 address only.
    case ipv6
    /// Both, as an app given a host name with A and AAAA records: Happy Eyeballs (RFC 8305)
    /// interleaves the families across the permitted interfaces, IPv6 first.
    case any

    /// The families it allows.
    public var families: [IPFamily] {
        switch self {
        case .ipv4: [.ipv4]
        case .ipv6: [.ipv6]
        case .any: [.ipv6, .ipv4]
        }
    }
}

/// Traffic that runs during the scenario.
public struct Workload: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// One long TCP transfer of `size` bytes (nil: until the scenario ends).
        case bulk(size: Int64?)
        /// Requests of `requestSize` bytes answered by `responseSize` bytes, one every `interval`.
        case requests(requestSize: Int64, responseSize: Int64, interval: Duration, count: Int?)
        /// Constant bitrate into a playout buffer that starts playing once `buffer` is filled.
        case stream(bitrate: Rate, buffer: Duration)
        /// A program run inside a node.
        case command(run: [String], environment: [String: String])

        public var name: String {
            switch self {
            case .bulk: "bulk"
            case .requests: "requests"
            case .stream: "stream"
            case .command: "command"
            }
        }
    }

    public var name: String
    public var kind: Kind
    /// The sending node (server side) and the receiving node; for `command`, `from` is the node it runs in.
    public var from: String
    public var to: String?
    public var mode: MultipathMode
    public var start: Duration
    public var stop: Duration?
    /// How long the client waits without progress (no connection, no byte of a response or
    /// stream) before it gives the connection up and connects again, as an app's timeout would.
    public var timeout: Duration

    /// Kinds of path the client may not use (`prohibit:`), as URLSession's
    /// `allowsExpensiveNetworkAccess`, `allowsConstrainedNetworkAccess` and
    /// `allowsUltraConstrainedNetworkAccess` set to false with `waitsForConnectivity`: the client
    /// connects only over a permitted interface and waits while there is none.
    public var prohibits: Set<PathRestriction> = []
    /// A `command` runs under `mptcpize run` (Debian's `mptcpize` package), which makes the
    /// program's TCP sockets MPTCP ones: for programs that cannot ask for MPTCP themselves.
    public var mptcpize = false
    /// The address families the client connects over.
    public var family: FamilyChoice = .ipv4
    /// The host name the client looks up, through its node's resolver, before each connection
    /// (a server on the internet, by one of its `names`); nil: it connects to the server's
    /// address as is.
    public var host: String?

    /// The `timeout` when a scenario names none.
    public static let defaultTimeout = Duration.seconds(5)

    public init(name: String, kind: Kind, from: String, to: String?, mode: MultipathMode = .none, start: Duration = .zero,
                stop: Duration? = nil, timeout: Duration = Workload.defaultTimeout) {
        self.name = name
        self.kind = kind
        self.from = from
        self.to = to
        self.mode = mode
        self.start = start
        self.stop = stop
        self.timeout = timeout
    }
}

/// A kind of path a workload's client may be told not to use.
public enum PathRestriction: String, Sendable, Hashable, CaseIterable {
    case expensive, constrained, ultraConstrained
}

/// Something that must hold for the scenario to pass.
public struct Expectation: Sendable, Hashable {
    public enum Check: Sendable, Hashable {
        case maxStall(Duration)
        case minThroughput(Rate)
        case maxTimeToFirstByte(Duration)
        case completes(Bool)
        case exitCode(Int)
        /// The workload's client received at most `bytes` over the interface of `link`.
        case maxBytesOver(link: String, bytes: Int64)
        /// The node's path reaches `condition` within `within` of `after` (a link event).
        case path(condition: PathCondition, within: Duration, afterLink: String, afterEvent: String)
        /// The node's connectivity (its path's, or one interface's) is as expected at a time, or
        /// becomes so within a time of a link event.
        case connectivity(ConnectivityExpectation)
        /// The workload's client sent and received at most `bytes` over `network` while that
        /// network's captive portal held it, as the gateway counted them.
        case maxBytesWhilePortal(network: String, bytes: Int64)
    }

    /// The workload checked, or the node for a path expectation.
    public var subject: String
    public var check: Check
    public var line: Int
}

/// What a node's connectivity must be (`path: {connectivity: portal, interface: hotel}`), and when.
public struct ConnectivityExpectation: Sendable, Hashable {
    /// The states of `InterfaceConnectivity`.
    public enum State: String, Sendable, Hashable, CaseIterable {
        case unknown, validated, portal, limited
    }

    /// When it must hold.
    public enum Timing: Sendable, Hashable {
        /// At this time of the run: the node's path then (the last it published by then).
        case at(Duration)
        /// Within `within` of the first `event` on `link` (as a path expectation's `after`).
        case after(link: String, event: String, within: Duration)
    }

    public var state: State
    /// The interface whose connectivity it is (nil: the path's, its primary interface's).
    public var interface: String?
    public var timing: Timing

    public init(state: State, interface: String? = nil, timing: Timing) {
        self.state = state
        self.interface = interface
        self.timing = timing
    }
}

/// A property of a node's network path.
public enum PathCondition: String, Sendable, Hashable, CaseIterable {
    case satisfied, unsatisfied, expensive, notExpensive, constrained, notConstrained, wifi, cellular, wiredEthernet
    /// The path is satisfied over a carrier's satellite network, or over anything else.
    case ultraConstrained, notUltraConstrained
    /// The path is satisfied and its `LinkQuality` is this grade.
    case qualityMinimal, qualityModerate, qualityGood
    /// The path is satisfied over one address family only (NWPath's `supportsIPv4` and
    /// `supportsIPv6`): an IPv6-only cellular network, an IPv4-only Wi-Fi.
    case ipv4Only, ipv6Only
}
