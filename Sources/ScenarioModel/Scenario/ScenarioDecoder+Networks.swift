import RoamCore
import RoamSystem
import Yams

// Networks: `networks:` and the servers of `nodes:` that live on the internet. A network is read
// as a template for its access links; once the timeline is read (it tells which members join
// later), ``expandNetworks`` adds the gateways, the internet and their links to the scenario.
extension ScenarioDecoder {
    /// A network as written: what it is, and the access link its members get.
    struct NetworkTemplate {
        var spec: NetworkSpec
        var radio: LinkSpec
    }

    /// `internet: true` or `internet: {names: [...], families: [...]}` on a node: a server.
    func serverRole(_ value: Node, node name: String) -> NodeRole? {
        let defaultNames = name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") } ? ["\(name.lowercased()).roam.test"] : []
        if case .scalar = value {
            guard let flag = bool(value, "internet") else { return nil }
            return flag ? .server(names: defaultNames, families: [.ipv4, .ipv6]) : NodeRole.host
        }
        guard var fields = fields(value, "internet of node '\(name)'") else { return nil }
        let names = take(&fields, "names") { self.hostNames($0) }
        let families = take(&fields, "families") { self.families($0) }
        finish(fields, known: ["names", "families"])
        return .server(names: names ?? defaultNames, families: families ?? [.ipv4, .ipv6])
    }

    /// Host names: DNS names of letters, digits and hyphens, at most 253 characters.
    func hostNames(_ node: Node) -> [String]? {
        guard let items = list(node, "names") else { return nil }
        var names: [String] = []
        for item in items {
            guard let text = string(item, "a host name") else { continue }
            let name = text.hasSuffix(".") ? String(text.dropLast()) : text
            let labels = name.split(separator: ".", omittingEmptySubsequences: false)
            let valid = !name.isEmpty && name.utf8.count <= 253 && labels.count >= 2 && labels.allSatisfy { label in
                !label.isEmpty && label.utf8.count <= 63 && label.first != "-" && label.last != "-"
                    && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            }
            guard valid else {
                error("'\(escapedForMessage(text))' is not a host name: labels of letters, digits and '-', joined by dots "
                    + "(api.example.test), at most 253 characters", at: item)
                continue
            }
            names.append(name.lowercased())
        }
        guard names.count == items.count else { return nil }
        return names
    }

    func networks(_ node: Node, nodes: [ScenarioNode], links: [LinkSpec]) -> [NetworkTemplate]? {
        guard let items = list(node, "networks") else { return nil }
        let nodeNames = Set(nodes.map(\.name))
        let servers = Set(nodes.filter { if case .server = $0.role { true } else { false } }.map(\.name))
        var templates: [NetworkTemplate] = []
        var names: Set<String> = []
        for item in items {
            guard var network = fields(item, "a network") else { continue }
            let name = take(&network, "name", required: true) { self.identifier($0, "network name", maxLength: NetworkSpec.maximumNameLength) }
            network = Fields(network, context: name.map { "network '\($0)'" } ?? "this network")
            if let name, !names.insert(name).inserted { error("a network named '\(name)' is defined already", at: network.keyNode("name")!) }
            if let name, Scenario.reservedLinkNames.contains(name) || ["uplink", "internet"].contains(name) {
                error("network name '\(name)' is taken (lo, all, default are Linux's own; uplink and internet name gateway interfaces); "
                    + "choose another", at: network.keyNode("name")!)
            }
            let type = take(&network, "type") { self.interfaceType($0) }
            let expensive = take(&network, "expensive") { self.bool($0, "expensive") }
            let constrained = take(&network, "constrained") { self.bool($0, "constrained") }
            let ultraConstrained = take(&network, "ultraConstrained") { self.bool($0, "ultraConstrained") }
            let capture = take(&network, "capture") { self.bool($0, "capture") }
            let profile = take(&network, "profile") { self.profile($0) }
            let radioContext = "radio of " + network.context
            let radioStates = take(&network, "radio") { self.radioStates($0, radioContext) }
            let ipv4 = take(&network, "ipv4") { self.choice($0, "ipv4", NetworkSpec.IPv4Service.self) }
            let ipv6 = take(&network, "ipv6") { self.bool($0, "ipv6") }
            let nat64 = take(&network, "nat64") { self.bool($0, "nat64") }
            let portal = take(&network, "portal") { self.captivePortal($0) }
            let members = take(&network, "members", required: true) { value -> [String]? in
                guard let items = self.list(value, "members") else { return nil }
                var members: [String] = []
                for item in items {
                    guard let member = self.string(item, "a member") else { continue }
                    guard nodeNames.contains(member) else {
                        let guess = suggestion(for: member, among: nodeNames).map { " (did you mean '\($0)'?)" } ?? ""
                        self.error("no node named '\(escapedForMessage(member))' is defined in nodes\(guess)", at: item)
                        continue
                    }
                    if servers.contains(member) {
                        self.error("node '\(member)' is on the internet (internet: true); a network's members are phones", at: item)
                        continue
                    }
                    if members.contains(member) { self.error("'\(member)' is a member already", at: item); continue }
                    members.append(member)
                }
                if items.isEmpty { self.error("members names the nodes that join the network: [phone]", at: value) }
                if items.count > NetworkSpec.maximumMembers {
                    self.error("a network has at most \(NetworkSpec.maximumMembers) members (its /24 gives each a few addresses to renumber to); "
                        + "this one has \(items.count)", at: value)
                    return nil
                }
                return members.count == items.count ? members : nil
            }
            let both = impairment(from: &network)
            let context = network.context
            let up = take(&network, "up") { self.impairmentBlock($0, "the up direction of \(context)") } ?? Impairment()
            let down = take(&network, "down") { self.impairmentBlock($0, "the down direction of \(context)") } ?? Impairment()
            let flows = take(&network, "flows") { self.flowSettings($0, context) }
            finish(network, known: ["name", "type", "expensive", "constrained", "ultraConstrained", "capture", "profile", "ipv4", "ipv6",
                                    "nat64", "portal", "members", "radio", "up", "down", "flows"] + Self.impairmentKeys)
            guard let name, let members else { continue }
            let resolvedType = type ?? profile?.type ?? .wifi
            var spec = NetworkSpec(name: name, type: resolvedType, ipv4: ipv4 ?? (resolvedType == .cellular ? .cgnat : .nat44),
                                   ipv6: ipv6 ?? true, nat64: nat64 ?? false, members: members)
            if case .some(.some(let portal)) = portal { spec.portal = portal }
            if spec.nat64 && !spec.ipv6 {
                error("network '\(name)' translates IPv6 to IPv4 (nat64: true) but gives no IPv6 (ipv6: false); NAT64 needs IPv6",
                      at: network.keyNode("nat64")!)
            }
            if spec.families.isEmpty {
                error("network '\(name)' gives no address family (ipv4: none and ipv6: false); give one", at: item)
            }
            let resolvedUltra = ultraConstrained ?? profile?.isUltraConstrained ?? false
            var radio = LinkSpec(
                name: name, endpoints: ("", ""), type: resolvedType,
                isExpensive: expensive ?? profile?.isExpensive ?? (resolvedType == .cellular),
                isConstrained: constrained ?? profile?.isConstrained ?? resolvedUltra, isUltraConstrained: resolvedUltra, profile: profile?.name,
                up: (profile?.up ?? Impairment()).overridden(by: both).overridden(by: up),
                down: (profile?.down ?? Impairment()).overridden(by: both).overridden(by: down),
                capture: capture ?? false)
            radio.families = spec.families
            radio.flows = flows ?? []
            radio.line = item.line
            if let radioStates {
                radio.radio = radioStates
                if resolvedType != .cellular, let place = network.keyNode("radio") {
                    error("network '\(name)' is \(resolvedType.rawValue), but RRC radio states (radio:) are a cellular radio's: "
                        + "give the network type: cellular (or a cellular profile), or remove radio", at: place)
                }
            }
            for (impairment, which) in [(radio.up, "up"), (radio.down, "down")] where impairment.rate != nil && impairment.trace != nil {
                error("network '\(name)' (\(which)) gets both a rate and a trace; a trace is the capacity: keep one", at: item)
            }
            checkConsistency(radio.up, at: item, "network '\(name)' (up)")
            if radio.down != radio.up { checkConsistency(radio.down, at: item, "network '\(name)' (down)") }
            for member in members {
                if let clash = links.first(where: { $0.endpoints.0 == member && $0.interfaceName(0) == name || $0.endpoints.1 == member && $0.interfaceName(1) == name }) {
                    error("node '\(member)' has a link named '\(clash.name)' already; the network's interface in it takes the network's "
                        + "name: rename one", at: item)
                }
            }
            var infrastructure = Set([NetworkSpec.gatewayName(of: name), NetworkSpec.internetNode])
            infrastructure.formIntersection(nodeNames)
            for clash in infrastructure.sorted() {
                error("node '\(clash)' is defined in nodes, but a scenario with networks names its \(clash == NetworkSpec.internetNode ? "internet" : "gateway of '\(name)'") so; rename the node",
                      at: nodePlaces[clash] ?? item)
            }
            spec.line = item.line
            templates.append(NetworkTemplate(spec: spec, radio: radio))
        }
        return templates
    }

    /// `portal: true`, `portal: false`, or `portal: {dns: hijack, others: reset, expires: 10m, api: false}`:
    /// `.some(nil)` for `false`, nil for a mistake (reported).
    func captivePortal(_ value: Node) -> CaptivePortal?? {
        if case .scalar = value {
            guard let flag = bool(value, "portal") else { return nil }
            return .some(flag ? CaptivePortal() : nil)
        }
        guard var fields = fields(value, "portal") else { return nil }
        var portal = CaptivePortal()
        if let dns = take(&fields, "dns", { self.choice($0, "dns", CaptivePortal.DNS.self) }) { portal.dns = dns }
        if let others = take(&fields, "others", { self.choice($0, "others", CaptivePortal.Blocking.self) }) { portal.others = others }
        portal.expires = take(&fields, "expires") { self.duration($0, "expires", minimum: CaptivePortal.minimumExpiry) }
        if let api = take(&fields, "api", { self.bool($0, "api") }) { portal.announcesAPI = api }
        finish(fields, known: ["dns", "others", "expires", "api"])
        return .some(portal)
    }

    /// The scenario's nodes and links with every network's gateway, the internet, and their
    /// links added (``Scenario/addNetwork(_:radio:)``, as a scenario built in Swift adds them).
    static func expandNetworks(_ templates: [NetworkTemplate], nodes: inout [ScenarioNode], links: inout [LinkSpec]) {
        var scenario = Scenario(name: "expansion", duration: .seconds(1), nodes: nodes, links: links)
        for template in templates { scenario.addNetwork(template.spec, radio: template.radio) }
        nodes = scenario.nodes
        links = scenario.links
    }
}
