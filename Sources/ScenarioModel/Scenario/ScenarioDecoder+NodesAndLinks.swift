import RoamCore
import RoamSystem
import Yams

// Nodes and links: `nodes`, `profiles` and `links`, with their attributes and conditions.
extension ScenarioDecoder {
    func nodes(_ node: Node) -> [ScenarioNode]? {
        guard let all = fields(node, "nodes") else { return nil }
        var nodes: [ScenarioNode] = []
        for (key, keyNode, value) in all.pairs {
            guard let name = identifier(keyNode, "node name", maxLength: Scenario.maximumNodeNameLength) else { continue }
            nodePlaces[name] = keyNode
            guard var attributes = fields(value, "node '\(name)'") else { continue }
            let description = take(&attributes, "description") { self.string($0, "description") }
            let role = take(&attributes, "internet") { self.serverRole($0, node: name) }
            finish(attributes, known: ["description", "internet"])
            _ = key
            nodes.append(ScenarioNode(name: name, description: description, role: role ?? .host))
        }
        return nodes
    }

    func links(_ node: Node, nodes: Set<String>) -> [LinkSpec]? {
        guard let items = list(node, "links") else { return nil }
        var links: [LinkSpec] = []
        var names: Set<String> = []
        for item in items {
            guard var link = fields(item, "a link") else { continue }
            // A link whose name is missing or invalid is still read, so that its other keys are
            // checked (and not all reported as unknown).
            let name = take(&link, "name", required: true, { self.identifier($0, "link name", maxLength: 15) })
            link = Fields(link, context: name.map { "link '\($0)'" } ?? "this link")
            if let name, !names.insert(name).inserted { error("a link named '\(name)' is defined already", at: link.keyNode("name")!) }
            if let name, Scenario.reservedLinkNames.contains(name) {
                error("link name '\(name)' is Linux's own (lo is every node's loopback; all and default name the interface settings of "
                    + "every interface); choose another", at: link.keyNode("name")!)
            }
            if let name { linkPlaces[name] = item }
            let between = take(&link, "between", required: true) { self.endpoints($0, nodes: nodes) }
            let type = take(&link, "type") { self.interfaceType($0) }
            let expensive = take(&link, "expensive") { self.bool($0, "expensive") }
            let constrained = take(&link, "constrained") { self.bool($0, "constrained") }
            let ultraConstrained = take(&link, "ultraConstrained") { self.bool($0, "ultraConstrained") }
            let capture = take(&link, "capture") { self.bool($0, "capture") }
            let families = take(&link, "families") { self.families($0) }
            let radioContext = "radio of " + link.context
            let radio = take(&link, "radio") { self.radioStates($0, radioContext) }
            let profile = take(&link, "profile") { self.profile($0) }
            let both = impairment(from: &link)
            let context = link.context
            let up = take(&link, "up") { self.impairmentBlock($0, "the up direction of \(context)") } ?? Impairment()
            let down = take(&link, "down") { self.impairmentBlock($0, "the down direction of \(context)") } ?? Impairment()
            let flows = take(&link, "flows") { self.flowSettings($0, context) }
            finishLink(link)
            guard let name else { continue }
            // A profile is the base; keys on the link override it, and direction blocks override those.
            let resolvedType = type ?? profile?.type ?? .wiredEthernet
            let resolvedUltra = ultraConstrained ?? profile?.isUltraConstrained ?? false
            links.append(LinkSpec(
                name: name, endpoints: between ?? ("", ""), type: resolvedType,
                isExpensive: expensive ?? profile?.isExpensive ?? (resolvedType == .cellular),
                isConstrained: constrained ?? profile?.isConstrained ?? resolvedUltra, isUltraConstrained: resolvedUltra, profile: profile?.name,
                up: (profile?.up ?? Impairment()).overridden(by: both).overridden(by: up),
                down: (profile?.down ?? Impairment()).overridden(by: both).overridden(by: down),
                capture: capture ?? false))
            if let families { links[links.count - 1].families = families }
            if let flows { links[links.count - 1].flows = flows }
            links[links.count - 1].line = item.line
            if let radio {
                links[links.count - 1].radio = radio
                if resolvedType != .cellular, let place = link.keyNode("radio") {
                    error("link '\(name)' is \(resolvedType.rawValue), but RRC radio states (radio:) are a cellular radio's: "
                        + "give the link type: cellular (or a cellular profile), or remove radio", at: place)
                }
            }
            let added = links.last!
            // Capacity comes from one place: a rate and a trace that meet after the link's keys,
            // its profile and its direction blocks are merged would leave one unused.
            for (impairment, which) in [(added.up, "up"), (added.down, "down")] where impairment.rate != nil && impairment.trace != nil {
                error("link '\(name)' (\(which)) gets both a rate and a trace (from the link, its profile or its \(which) block); "
                    + "a trace is the capacity: keep one", at: item)
            }
            if added.up == added.down {
                checkConsistency(added.up, at: item, "link '\(name)'")
            } else {
                checkConsistency(added.up, at: item, "link '\(name)' (up)")
                checkConsistency(added.down, at: item, "link '\(name)' (down)")
            }
        }
        return links
    }

    private func finishLink(_ link: Fields) {
        finish(link, known: ["name", "between", "type", "expensive", "constrained", "ultraConstrained", "capture", "families", "radio", "profile", "up", "down",
                             "flows"]
            + Self.impairmentKeys)
    }

    /// `radio: lte`, `radio: 5g-nsa`, or a mapping: `{states: lte, promotion: 400ms, tail: 5s,
    /// pagingCycle: 640ms}` (a preset's values, each overridable; without `states`, all three).
    func radioStates(_ node: Node, _ what: String) -> RadioStates? {
        let presetNames = RadioStates.presets.keys.sorted()
        func preset(_ node: Node) -> RadioStates? {
            guard let text = string(node, what) else { return nil }
            if let preset = RadioStates.presets[text] { return preset }
            let guess = suggestion(for: text, among: presetNames).map { " (did you mean '\($0)'?)" } ?? ""
            error("\(what) must be one of \(presetNames.joined(separator: ", ")) or a mapping with promotion, tail and pagingCycle, "
                + "not '\(escapedForMessage(text))'\(guess)", at: node)
            return nil
        }
        if case .scalar = node { return preset(node) }
        guard var fields = fields(node, what) else { return nil }
        let base = take(&fields, "states") { preset($0) }
        let promotion = take(&fields, "promotion") { self.duration($0, "promotion", maximum: RadioStates.maximumPromotion) }
        let tail = take(&fields, "tail") {
            self.duration($0, "tail", minimum: RadioStates.tailRange.lowerBound, maximum: RadioStates.tailRange.upperBound)
        }
        let paging = take(&fields, "pagingCycle") { self.duration($0, "pagingCycle", maximum: RadioStates.maximumPagingCycle) }
        finish(fields, known: ["states", "promotion", "tail", "pagingCycle"])
        if let base {
            return RadioStates(preset: base.preset, promotion: promotion ?? base.promotion, tail: tail ?? base.tail,
                               pagingCycle: paging ?? base.pagingCycle)
        }
        guard fields.keyNode("states") == nil else { return nil }
        let missing = ["promotion", "tail", "pagingCycle"].filter { !fields.has($0) }
        guard missing.isEmpty else {
            error("\(what) without states: (a preset, \(presetNames.joined(separator: " or "))) sets promotion, tail and pagingCycle; "
                + "missing: \(missing.joined(separator: ", "))", at: node)
            return nil
        }
        guard let promotion, let tail, let paging else { return nil }
        return RadioStates(promotion: promotion, tail: tail, pagingCycle: paging)
    }

    /// `families: [ipv4]`, `[ipv6]` or `[ipv4, ipv6]`.
    func families(_ node: Node) -> Set<IPFamily>? {
        guard let items = list(node, "families") else { return nil }
        let families = items.compactMap { self.choice($0, "families", IPFamily.self) }
        guard families.count == items.count else { return nil }
        guard !families.isEmpty else {
            error("families names at least one address family: [ipv4], [ipv6] or [ipv4, ipv6]", at: node)
            return nil
        }
        guard Set(families).count == families.count else {
            error("families names each address family once", at: node)
            return nil
        }
        return Set(families)
    }

    func endpoints(_ node: Node, nodes: Set<String>) -> (String, String)? {
        guard let items = list(node, "between"), items.count == 2 || { error("between must name exactly two nodes: [phone, server]", at: node); return false }() else {
            return nil
        }
        let names = items.compactMap { item -> String? in
            guard let name = string(item, "a node in between") else { return nil }
            guard nodes.contains(name) else {
                let guess = suggestion(for: name, among: nodes).map { " (did you mean '\($0)'?)" } ?? ""
                error("no node named '\(escapedForMessage(name))' is defined in nodes\(guess)", at: item)
                return nil
            }
            return name
        }
        guard names.count == 2 else { return nil }
        if names[0] == names[1] {
            error("a link joins two different nodes; both ends are '\(names[0])'", at: node)
            return nil
        }
        return (names[0], names[1])
    }

    func interfaceType(_ value: Node) -> InterfaceType? {
        guard let text = string(value, "type") else { return nil }
        guard let type = InterfaceType(name: text), type != .loopback else {
            error("type must be one of wifi, cellular, wiredEthernet (or wired), other, not '\(escapedForMessage(text))'", at: value)
            return nil
        }
        return type
    }

    /// `profiles: {NAME: {type, expensive, constrained, ultraConstrained, impairment keys, up: {...}, down: {...}}}`.
    func profileDefinitions(_ node: Node) -> [LinkProfile]? {
        guard let all = fields(node, "profiles") else { return nil }
        var profiles: [LinkProfile] = []
        var names: Set<String> = []
        for (_, keyNode, value) in all.pairs {
            guard let name = identifier(keyNode, "profile name", maxLength: 64) else { continue }
            if LinkProfile.named(name) != nil || !names.insert(LinkProfile.normalized(name)).inserted {
                error("profile '\(name)' is defined already\(LinkProfile.named(name) != nil ? " (a built-in profile)" : "")", at: keyNode)
                continue
            }
            guard var definition = fields(value, "profile '\(name)'") else { continue }
            let summary = take(&definition, "description") { self.string($0, "description") }
            let type = take(&definition, "type") { self.interfaceType($0) }
            let expensive = take(&definition, "expensive") { self.bool($0, "expensive") }
            let constrained = take(&definition, "constrained") { self.bool($0, "constrained") }
            let ultraConstrained = take(&definition, "ultraConstrained") { self.bool($0, "ultraConstrained") }
            let both = impairment(from: &definition)
            let up = take(&definition, "up") { self.impairmentBlock($0, "the up direction of profile '\(name)'") } ?? Impairment()
            let down = take(&definition, "down") { self.impairmentBlock($0, "the down direction of profile '\(name)'") } ?? Impairment()
            finish(definition, known: ["description", "type", "expensive", "constrained", "ultraConstrained", "up", "down"] + Self.impairmentKeys)
            profiles.append(LinkProfile(name: LinkProfile.normalized(name), summary: summary ?? "defined in the scenario", type: type,
                                        isExpensive: expensive, isConstrained: constrained, isUltraConstrained: ultraConstrained,
                                        up: both.overridden(by: up), down: both.overridden(by: down)))
        }
        return profiles
    }

    func profile(_ node: Node) -> LinkProfile? {
        guard let name = string(node, "profile") else { return nil }
        if let profile = definedProfileIndex[LinkProfile.normalized(name)] ?? LinkProfile.named(name) { return profile }
        let names = definedProfiles.map(\.name) + LinkProfile.all.map(\.name)
        let guess = suggestion(for: name, among: names).map { " (did you mean '\($0)'?)" } ?? ""
        let listed = names.count > 40 ? names.prefix(40).joined(separator: ", ") + ", … (\(names.count) in all)" : names.joined(separator: ", ")
        error("no profile named '\(escapedForMessage(name))'\(guess); profiles: \(listed)", at: node)
        return nil
    }
}
