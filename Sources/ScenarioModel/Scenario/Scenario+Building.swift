import RoamCore
import RoamSystem

// Scenarios built in Swift, as in a test: the same values `ScenarioReader` makes from YAML.
// ``Scenario/problems`` checks what the reader checks about references and ranges.

extension Scenario {
    /// The longest scenario name (it names the report directory).
    public static let maximumNameLength = 64
    /// The longest node name: a node's namespace is `roam-RUNID-NODE`.
    public static let maximumNodeNameLength = 32

    /// What makes this scenario unplayable, one sentence each (empty when it is sound): an
    /// unsafe name, unknown nodes and links, duplicate names, events and workloads outside the
    /// duration, a timeline that expands beyond ``ScenarioLimits/maximumChanges``.
    public var problems: [String] {
        var problems: [String] = []
        if !isIdentifier(name, maxLength: Self.maximumNameLength) {
            problems.append("scenario name '\(escapedForMessage(name))': start with a letter and use letters, digits, '-', '_' (at most \(Self.maximumNameLength)); it names the report directory")
        }
        if duration <= .zero { problems.append("the duration must be more than zero") }
        if duration > ScenarioLimits.maximumDuration { problems.append("the duration must be at most \(ScenarioLimits.maximumDuration.roamDescription)") }
        let nodeNames = Set(nodes.map(\.name))
        if nodeNames.count != nodes.count { problems.append("node names must be unique") }
        if nodes.isEmpty { problems.append("a scenario needs at least one node") }
        for node in nodes where !ScenarioNode.isValidName(node.name) {
            problems.append("node name '\(node.name)': start with a letter and use letters, digits, '-', '_' (at most 32)")
        }
        var linkNames = Set<String>()
        for link in links {
            if !linkNames.insert(link.name).inserted { problems.append("link '\(link.name)' is defined twice") }
            for end in 0...1 where link.interfaceName(end).isEmpty || link.interfaceName(end).utf8.count > 15 {
                problems.append("link '\(link.name)': its interface name '\(link.interfaceName(end))' must be 1 to 15 characters")
            }
            for node in [link.endpoints.0, link.endpoints.1] where !nodeNames.contains(node) {
                problems.append("link '\(link.name)' is between unknown node '\(node)'")
            }
            if link.endpoints.0 == link.endpoints.1 { problems.append("link '\(link.name)' needs two different nodes") }
            if Self.reservedLinkNames.contains(link.name) { problems.append("link name '\(link.name)' is Linux's own (lo, all, default); choose another") }
            for direction in TrafficDirection.allCases where link.flows.filter({ $0.applies(to: direction) }).count > ScenarioLimits.maximumFlows {
                problems.append("link '\(link.name)' has more than \(ScenarioLimits.maximumFlows) flows \(direction.rawValue)")
            }
        }
        for match in links.flatMap({ $0.flows.map(\.match) }) + timeline.compactMap(\.match) {
            if match.isEmpty { problems.append("a flow's match names no packets") }
            for server in match.servers where !nodeNames.contains(server) { problems.append("a flow's match names unknown node '\(server)'") }
        }
        for (first, second, variable) in Self.environmentCollisions(nodes: nodes.map(\.name), links: links.map { ($0.name, $0.endpoints) }) {
            problems.append("\(second) and \(first) both give commands \(variable); rename one")
        }
        for network in networks {
            if !nodeNames.contains(network.gateway) {
                problems.append("network '\(network.name)' has no gateway node '\(network.gateway)': add networks with addNetwork(_:radio:)")
            }
            for member in network.members where !linkNames.contains(NetworkSpec.accessLinkName(network: network.name, node: member)) {
                problems.append("network '\(network.name)': member '\(member)' has no access link; add the node before the network")
            }
        }
        for node in nodes {
            guard case .server = node.role else { continue }
            if !linkNames.contains(NetworkSpec.attachmentName(server: node.name)) {
                problems.append("server node '\(node.name)' has no link to the internet: add it before the networks (addNetwork(_:radio:))")
            }
        }
        for event in timeline {
            if !linkNames.contains(event.link) { problems.append("timeline event at \(event.at.roamDescription) names unknown link '\(event.link)'") }
            if event.at < .zero || event.at > duration {
                problems.append("timeline event at \(event.at.roamDescription) is outside the scenario (0 to \(duration.roamDescription))")
            }
            if case .profile(let name) = event.action, profile(named: name) == nil { problems.append("no profile named '\(name)'") }
            if case .flap(let period, _, _) = event.action, period < ScenarioLimits.minimumFlapPeriod {
                problems.append("timeline flap at \(event.at.roamDescription): the period must be at least \(ScenarioLimits.minimumFlapPeriod.roamDescription)")
            }
        }
        let changes = timeline.reduce(0) { $0 + TimelineSchedule.changeCount(of: $1) }
        if changes > ScenarioLimits.maximumChanges {
            problems.append("the timeline makes \(changes) link changes; at most \(ScenarioLimits.maximumChanges)")
        }
        var workloadNames = Set<String>()
        for workload in workloads {
            if !workloadNames.insert(workload.name).inserted { problems.append("workload '\(workload.name)' is defined twice") }
            for node in [workload.from] + (workload.to.map { [$0] } ?? []) where !nodeNames.contains(node) {
                problems.append("workload '\(workload.name)' names unknown node '\(node)'")
            }
            if case .command = workload.kind {} else if workload.to == nil {
                problems.append("workload '\(workload.name)' needs `to`: the receiving node")
            }
            switch workload.kind {
            case let .requests(requestSize, responseSize, interval, _):
                if !(ScenarioLimits.minimumRequestSize...ScenarioLimits.maximumRequestSize).contains(requestSize) {
                    problems.append("workload '\(workload.name)': requestSize must be between \(ScenarioLimits.minimumRequestSize) and \(ScenarioLimits.maximumRequestSize) bytes")
                }
                if !(1...ScenarioLimits.maximumSize).contains(responseSize) {
                    problems.append("workload '\(workload.name)': the response size must be between 1 and \(ScenarioLimits.maximumSize) bytes")
                }
                if interval < ScenarioLimits.minimumInterval {
                    problems.append("workload '\(workload.name)': the interval must be at least \(ScenarioLimits.minimumInterval.roamDescription)")
                }
            case .bulk(let size?) where !(1...ScenarioLimits.maximumSize).contains(size):
                problems.append("workload '\(workload.name)': size must be between 1 and \(ScenarioLimits.maximumSize) bytes")
            case .stream(let bitrate, let buffer):
                if !(ScenarioLimits.minimumRate...ScenarioLimits.maximumRate).contains(bitrate) {
                    problems.append("workload '\(workload.name)': bitrate must be between \(ScenarioLimits.minimumRate) and \(ScenarioLimits.maximumRate)")
                }
                if buffer <= .zero || buffer > ScenarioLimits.maximumBuffer {
                    problems.append("workload '\(workload.name)': buffer must be more than zero and at most \(ScenarioLimits.maximumBuffer.roamDescription)")
                }
            case .command(let run, let environment):
                if !workload.prohibits.isEmpty { problems.append("workload '\(workload.name)': prohibit applies to bulk, requests and stream workloads") }
                if run.first?.isEmpty ?? true { problems.append("workload '\(workload.name)': run needs a program") }
                if run.contains(where: { $0.utf8.contains(0) }) || environment.contains(where: { $0.key.isEmpty || $0.key.contains("=") || ($0.key + $0.value).utf8.contains(0) }) {
                    problems.append("workload '\(workload.name)': run and env cannot hold NUL, and a variable name cannot be empty or hold '='")
                }
            default:
                break
            }
        }
        for expectation in expectations {
            switch expectation.check {
            case .path(_, _, let link, _):
                if !nodeNames.contains(expectation.subject) { problems.append("path expectation names unknown node '\(expectation.subject)'") }
                if !linkNames.contains(link) { problems.append("path expectation names unknown link '\(link)'") }
            case .maxBytesOver(let link, let bytes):
                if !workloadNames.contains(expectation.subject) { problems.append("expectation names unknown workload '\(expectation.subject)'") }
                if !linkNames.contains(link) { problems.append("maxBytesOver names unknown link '\(link)'") }
                if bytes < 0 { problems.append("maxBytesOver: bytes cannot be negative") }
            case .connectivity(let wanted):
                if !nodeNames.contains(expectation.subject) { problems.append("path expectation names unknown node '\(expectation.subject)'") }
                switch wanted.timing {
                case .at(let time):
                    if time < .zero || time > duration { problems.append("path expectation at \(time.roamDescription) is outside the scenario") }
                case .after(let link, _, let within):
                    if !linkNames.contains(link) { problems.append("path expectation names unknown link '\(link)'") }
                    if within <= .zero { problems.append("path expectation: within must be more than zero") }
                }
            case .maxBytesWhilePortal(let network, let bytes):
                if !workloadNames.contains(expectation.subject) { problems.append("expectation names unknown workload '\(expectation.subject)'") }
                if !networks.contains(where: { $0.name == network && $0.portal != nil }) {
                    problems.append("maxBytesWhilePortal names '\(network)', which is no network with a captive portal")
                }
                if bytes < 0 { problems.append("maxBytesWhilePortal: bytes cannot be negative") }
            default:
                if !workloadNames.contains(expectation.subject) { problems.append("expectation names unknown workload '\(expectation.subject)'") }
            }
        }
        return problems
    }
}

extension ScenarioNode {
    public init(_ name: String, description: String? = nil) {
        self.name = name
        self.description = description
    }

    package static func isValidName(_ name: String) -> Bool { isIdentifier(name, maxLength: Scenario.maximumNodeNameLength) }
}

extension Scenario {
    /// Adds `network` as `networks:` does in a scenario file: its gateway node (`NAME-gw`), the
    /// internet (with the first network) and a link to it from every server node (a node whose
    /// role is ``NodeRole/server(names:families:)``, added before), an access link per member
    /// (`NAME.MEMBER`: the radio, with `radio`'s type, profile and impairments; its interface in
    /// the member is named after the network, `p0`, `p1`... in the gateway), and the gateway's
    /// uplink (`NAME.uplink`). Add the nodes first; ``problems`` says what is missing.
    public mutating func addNetwork(_ network: NetworkSpec, radio: LinkSpec? = nil) {
        var radio = radio ?? LinkSpec(network.name, between: ("", ""), type: network.type)
        radio.families = network.families
        if !nodes.contains(where: { $0.role == .internet }) {
            nodes.append(ScenarioNode(name: NetworkSpec.internetNode, description: "the internet (added for networks)", role: .internet))
            let servers = nodes.filter { if case .server = $0.role { true } else { false } }
            for (index, server) in servers.enumerated() {
                var attachment = LinkSpec(NetworkSpec.attachmentName(server: server.name), between: (NetworkSpec.internetNode, server.name))
                attachment.interfaceNames = ["srv\(index)", "internet"]
                attachment.role = .attachment(server: server.name)
                if case .server(_, let families) = server.role { attachment.families = families }
                links.append(attachment)
            }
        }
        let index = nodes.filter { if case .gateway = $0.role { true } else { false } }.count
        nodes.append(ScenarioNode(name: network.gateway, description: "the gateway of network '\(network.name)'", role: .gateway(network: network.name)))
        var added: [LinkSpec] = []
        for (position, member) in network.members.enumerated() {
            var access = radio
            access.name = NetworkSpec.accessLinkName(network: network.name, node: member)
            access.endpoints = (member, network.gateway)
            access.interfaceNames = [network.name, "p\(position)"]
            access.role = .access(network: network.name, node: member, index: position)
            added.append(access)
        }
        var uplink = LinkSpec(NetworkSpec.uplinkName(network: network.name), between: (network.gateway, NetworkSpec.internetNode))
        uplink.interfaceNames = ["uplink", "gw\(index)"]
        uplink.role = .uplink(network: network.name)
        uplink.line = network.line
        added.append(uplink)
        // The networks' links come before the servers' attachments, in the order added.
        let attachments = links.firstIndex { if case .attachment = $0.role { true } else { false } } ?? links.endIndex
        links.insert(contentsOf: added, at: attachments)
        networks.append(network)
    }
}

extension LinkSpec {
    /// A link between `endpoints` (`up` is from the first to the second). A `profile` is the
    /// base: `type`, `expensive`, `constrained`, `ultraConstrained` and the impairments given here
    /// override it. Ultra-constrained is also constrained unless `isConstrained` says otherwise.
    public init(_ name: String, between endpoints: (String, String), profile: String? = nil, type: InterfaceType? = nil,
                isExpensive: Bool? = nil, isConstrained: Bool? = nil, isUltraConstrained: Bool? = nil, both: Impairment = Impairment(),
                up: Impairment = Impairment(), down: Impairment = Impairment(), capture: Bool = false) {
        let preset = profile.flatMap(LinkProfile.named)
        let resolvedType = type ?? preset?.type ?? .wiredEthernet
        self.name = name
        self.endpoints = endpoints
        self.type = resolvedType
        self.isExpensive = isExpensive ?? preset?.isExpensive ?? (resolvedType == .cellular)
        self.isUltraConstrained = isUltraConstrained ?? preset?.isUltraConstrained ?? false
        self.isConstrained = isConstrained ?? preset?.isConstrained ?? self.isUltraConstrained
        self.profile = preset?.name
        self.up = (preset?.up ?? Impairment()).overridden(by: both).overridden(by: up)
        self.down = (preset?.down ?? Impairment()).overridden(by: both).overridden(by: down)
        self.capture = capture
    }
}

extension TimelineEvent {
    public init(at: Duration, link: String, direction: LinkDirection = .both, _ action: Action) {
        self.init(at: at, link: link, direction: direction, action, match: nil)
    }

    /// An event on `link`; with `match`, a `set`, `ramp`, `blackhole` or `reset` acts only on
    /// the packets it selects.
    public init(at: Duration, link: String, direction: LinkDirection = .both, _ action: Action, match: FlowMatch?) {
        self.at = at
        self.link = link
        self.direction = direction
        self.action = action
        self.line = 0
        self.match = match
    }
}

extension Expectation {
    /// An expectation on a workload (or, for `.path`, on a node).
    public init(_ subject: String, _ check: Check) {
        self.subject = subject
        self.check = check
        self.line = 0
    }
}

extension Scenario {
    /// Link names Linux keeps for itself: `lo` is every namespace's loopback, and `all` and
    /// `default` are the per-interface sysctl directories (`net.ipv4.conf.all`), which an
    /// interface of that name could not be configured through.
    public static let reservedLinkNames: Set<String> = ["lo", "all", "default"]

    /// `name` as part of an environment variable a command gets (`ROAM_<KEY>_ADDR`): upper case,
    /// with anything but ASCII letters and digits as `_`.
    public static func environmentKey(_ name: String) -> String {
        String(name.uppercased().unicodeScalars.map { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) ? Character($0) : "_" })
    }

    /// Every environment variable the nodes and links give commands (`ROAM_NODE_ADDR`,
    /// `ROAM_NODE_LINK_ADDR`, and their `ADDR6`), with what each stands for; two names that give
    /// one variable (`phone` and `Phone`, `a-b` and `a_b`, node `a` with link `b` and node `a_b`)
    /// would lose one address silently, so the second is reported with the first.
    static func environmentCollisions(nodes: [String], links: [(name: String, endpoints: (String, String))])
        -> [(first: EnvironmentOwner, second: EnvironmentOwner, variable: String)] {
        var owners: [String: EnvironmentOwner] = [:]
        var collisions: [(EnvironmentOwner, EnvironmentOwner, String)] = []
        func claim(_ variable: String, _ owner: EnvironmentOwner) {
            if let first = owners[variable] {
                if first != owner { collisions.append((first, owner, variable)) }
            } else {
                owners[variable] = owner
            }
        }
        for node in nodes { claim("ROAM_\(environmentKey(node))_ADDR", .node(node)) }
        for link in links {
            for node in [link.endpoints.0, link.endpoints.1] {
                claim("ROAM_\(environmentKey(node))_\(environmentKey(link.name))_ADDR", .link(link.name, node: node))
            }
        }
        return collisions
    }

    /// What gives a command an environment variable.
    enum EnvironmentOwner: Hashable, CustomStringConvertible {
        case node(String)
        case link(String, node: String)

        var description: String {
            switch self {
            case .node(let name): "node '\(name)'"
            case let .link(name, node): "link '\(name)' of node '\(node)'"
            }
        }
    }
}
