import Yams

extension ScenarioDecoder {
    static let impairmentKeys = ["delay", "jitter", "delayCorrelation", "distribution", "rate", "loss", "duplicate", "reorder", "corrupt", "limit", "queue", "trace"]

    func scenario(_ root: Node) -> Scenario? {
        guard var top = fields(root, "the scenario") else { return nil }
        let name = take(&top, "name", required: true) { self.identifier($0, "scenario name", maxLength: Scenario.maximumNameLength) }
        let description = take(&top, "description") { self.string($0, "description") }
        let seed = take(&top, "seed") { self.integer($0, "seed", range: 0...Int.max) }
        let duration = take(&top, "duration", required: true) { self.duration($0, "duration", allowZero: false) }
        var nodes = take(&top, "nodes", required: true) { self.nodes($0) } ?? []
        var nodeNames = Set(nodes.map(\.name))
        definedProfiles = take(&top, "profiles") { self.profileDefinitions($0) } ?? []
        definedProfileIndex = Dictionary(definedProfiles.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var links = take(&top, "links") { self.links($0, nodes: nodeNames) } ?? []
        let hostNodes = nodes
        let networkTemplates = take(&top, "networks") { self.networks($0, nodes: nodes, links: links) } ?? []
        if networkTemplates.isEmpty, let server = nodes.first(where: { if case .server = $0.role { true } else { false } }) {
            error("node '\(server.name)' is on the internet, but the scenario has no networks to reach it from; add networks:, "
                + "or remove internet:", at: nodePlaces[server.name] ?? root)
        }
        Self.expandNetworks(networkTemplates, nodes: &nodes, links: &links)
        nodeNames = Set(nodes.map(\.name))
        // Each colliding pair once: links of two colliding nodes collide too, which says nothing
        // more, and a pair of links between the same two nodes collides on both.
        var reported: Set<[String]> = []
        for (first, second, variable) in Scenario.environmentCollisions(nodes: hostNodes.map(\.name), links: links.filter { $0.role == .direct }.map { ($0.name, $0.endpoints) }) {
            let place: Node?
            switch (first, second) {
            case (.node, .node(let name)):
                place = nodePlaces[name]
            case let (.link(firstLink, firstNode), .link(secondLink, secondNode)):
                guard firstNode == secondNode, reported.insert([firstLink, secondLink]).inserted else { continue }
                place = linkPlaces[secondLink]
            case (_, .link(let name, _)):
                place = linkPlaces[name]
            case (_, .node(let name)):
                place = nodePlaces[name]
            }
            if let place { error("\(second) and \(first) both give commands \(variable), one address would be lost; rename one", at: place) }
        }
        let proxies = take(&top, "proxies") { self.proxies($0, nodes: nodeNames) } ?? []
        declaredProxies = Dictionary(proxies.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var timeline = take(&top, "timeline") { self.timeline($0, links: links, networks: networkTemplates.map(\.spec), duration: duration) } ?? []
        var networks = networkTemplates.map(\.spec)
        var mobility: Mobility?
        if let value = top.take("mobility") {
            mobility = self.mobility(value, nodes: Set(hostNodes.map(\.name)), networks: networks)
            if let mobility, let duration {
                timeline = derive(mobility, at: value, timeline: timeline, networks: networks, duration: duration, seed: UInt64(seed ?? 1))
            }
        }
        for index in networks.indices {
            // A member whose first membership event is a join starts outside the network.
            var first: [String: Bool] = [:]
            for event in timeline {
                guard case .membership(let joins) = event.action else { continue }
                for member in networks[index].members where event.link == NetworkSpec.accessLinkName(network: networks[index].name, node: member) {
                    if first[member] == nil { first[member] = joins }
                }
            }
            networks[index].joinedAtStart = networks[index].members.filter { first[$0] != true }
        }
        let workloads = take(&top, "workloads") { self.workloads($0, nodes: nodes, links: links, duration: duration) } ?? []
        let expectations = take(&top, "expect") {
            self.expectations($0, workloads: workloads, nodes: nodeNames, links: links, timeline: timeline, networks: networks)
        } ?? []
        finish(top, known: ["name", "description", "seed", "duration", "nodes", "profiles", "links", "networks", "mobility", "timeline", "proxies",
                            "workloads", "expect"])
        if nodes.isEmpty, top.has("nodes") { error("a scenario needs at least one node", at: top.keyNode("nodes")!) }
        guard let name, let duration else { return nil }
        var scenario = Scenario(name: name, description: description, seed: UInt64(seed ?? 1), duration: duration, nodes: nodes, links: links,
                                timeline: timeline, workloads: workloads, expectations: expectations, profiles: definedProfiles)
        scenario.networks = networks
        scenario.mobility = mobility
        scenario.proxies = proxies
        scenario.proxyEvents = proxyEvents
        return scenario
    }

    /// `timeline` with the events `mobility` derives, in time order (the file's own first at
    /// the same time), within the bounds of every expansion.
    private func derive(_ mobility: Mobility, at node: Node, timeline: [TimelineEvent], networks: [NetworkSpec], duration: Duration,
                        seed: UInt64) -> [TimelineEvent] {
        let derivation = MobilityDerivation(
            mobility: mobility, duration: duration, seed: seed,
            networks: networks.map { MobilityDerivation.Network(name: $0.name, isCellular: $0.type == .cellular, members: $0.members) },
            line: node.line)
        guard derivation.sampleCount <= MobilityDerivation.maximumSamples else {
            error("mobility samples \(derivation.sampleCount) positions (phones × networks × steps of \(mobility.step.roamDescription)); "
                + "Roam derives at most \(MobilityDerivation.maximumSamples): use a longer step, or fewer phones", at: node)
            return timeline
        }
        let work = derivation.workUnits
        guard work <= MobilityDerivation.maximumWork else {
            error("mobility would take \(work == .max ? "too many" : String(work)) units of work (samples × (transmitters heard + obstacles)); "
                + "Roam derives at most \(MobilityDerivation.maximumWork): use a longer step, fewer phones, obstacles or transmitters, "
                + "or a shorter scenario", at: node)
            return timeline
        }
        let written = timeline.reduce(0) { $0 + TimelineSchedule.changeCount(of: $1) }
        let room = max(ScenarioLimits.maximumChanges - written, 0)
        let derivedResult = derivation.derive(samples: false, maximumEvents: room)
        let derived = derivedResult.events
        guard !derivedResult.truncated, written + derived.count <= ScenarioLimits.maximumChanges else {
            error("mobility derives more than \(room) link changes, and the timeline has \(written); Roam plays at most "
                + "\(ScenarioLimits.maximumChanges) in a scenario: use a longer step, or a shorter scenario", at: node)
            return timeline
        }
        var merged = timeline.enumerated().map { (order: $0.offset, event: $0.element) }
        merged += derived.enumerated().map { (order: timeline.count + $0.offset, event: $0.element) }
        merged.sort { ($0.event.at, $0.order) < ($1.event.at, $1.order) }
        return merged.map(\.event)
    }

    /// Reads `key` with `read`; reports a missing required key at the mapping.
    func take<T>(_ fields: inout Fields, _ key: String, required: Bool = false, _ read: (Node) -> T?) -> T? {
        guard let node = fields.take(key) else {
            if required { error("\(fields.context) needs '\(key)'", at: fields.node) }
            return nil
        }
        return read(node)
    }

}

extension Duration {
    /// `250ms`, `1.5s`, `2m30s`-free short form used in messages.
    public var roamDescription: String {
        let (seconds, attoseconds) = components
        let milliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        if milliseconds.magnitude >= 1000 { return "\(trim(milliseconds.rounded() / 1000))s" }
        return "\(trim((milliseconds * 1000).rounded() / 1000))ms"
    }
}

