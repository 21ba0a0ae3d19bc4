import RoamCore
import RoamSystem
import Yams

// The timeline: its events, their order, carrier and blackhole pairs, and the expansion of flaps and traces.
extension ScenarioDecoder {
    func timeline(_ node: Node, links: [LinkSpec], networks: [NetworkSpec] = [], duration: Duration?) -> [TimelineEvent]? {
        guard let items = list(node, "timeline") else { return nil }
        let linkNames = Set(links.map(\.name))
        let networksByName = Dictionary(networks.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var events: [(event: TimelineEvent, node: Node)] = []
        var proxyItems: [(event: ProxyEvent, node: Node)] = []
        for item in items {
            // A proxy's event is toxiproxy's vocabulary, not a link's.
            if case .mapping(let mapping) = item, mapping.keys.contains(where: { $0.scalar?.string == "proxy" }) {
                proxyItems += proxyEvents(item, duration: duration)
                continue
            }
            events += timelineEvents(item, linkNames: linkNames, networksByName: networksByName, duration: duration)
        }
        checkProxyEvents(proxyItems)
        checkOrder(events)
        // Time order; events at the same time keep file order (the sort is made stable by index).
        let sorted = events.enumerated().sorted { ($0.element.event.at, $0.offset) < ($1.element.event.at, $1.offset) }.map(\.element)
        checkCarrierAndBlackholes(sorted)
        checkExpansion(sorted)
        checkFlowCount(sorted, links: links)
        return sorted.map(\.event)
    }

    /// The events of one timeline item (a `for:` span adds the event that ends it). `liveAt`:
    /// a change sent while a run plays (the control API), which happens then and names no `at`.
    func timelineEvents(_ item: Node, linkNames: Set<String>, networksByName: [String: NetworkSpec], duration: Duration?,
                        liveAt: Duration? = nil) -> [(event: TimelineEvent, node: Node)] {
        let linkActions = ["set", "ramp", "down", "up", "blackhole", "flap", "profile", "reset"]
        var events: [(event: TimelineEvent, node: Node)] = []
        guard var event = fields(item, "a timeline event") else { return [] }
        let at: Duration?
        if let liveAt {
            if let atNode = event.keyNode("at") {
                error("a live change happens when it is sent: remove at", at: atNode)
                _ = event.take("at")
            }
            at = liveAt
        } else {
            at = take(&event, "at", required: true) { self.duration($0, "at") }
        }
        // An event names a link, or a network (all its members' radios, or one member's with `node`).
        var targets: [String]?
        var network: NetworkSpec?
        if event.has("network") {
            network = take(&event, "network") { value -> NetworkSpec? in
                guard let name = self.string(value, "network") else { return nil }
                guard let network = networksByName[name] else {
                    let guess = suggestion(for: name, among: networksByName.keys).map { " (did you mean '\($0)'?)" } ?? ""
                    self.error("no network named '\(escapedForMessage(name))' is defined in networks\(guess)", at: value)
                    return nil
                }
                return network
            }
            if event.has("link") { error("a timeline event names a link or a network, not both", at: event.keyNode("link")!) }
            let member = take(&event, "node") { value -> String? in
                guard let name = self.string(value, "node"), let network else { return nil }
                guard network.members.contains(name) else {
                    self.error("node '\(escapedForMessage(name))' is not a member of network '\(network.name)' (members: "
                        + "\(network.members.joined(separator: ", ")))", at: value)
                    return nil
                }
                return name
            }
            if let network {
                targets = (member.map { [$0] } ?? network.members).map { NetworkSpec.accessLinkName(network: network.name, node: $0) }
            }
        } else {
            if event.has("node") { error("node names a member of a network: write network: NAME with it", at: event.keyNode("node")!) }
            targets = take(&event, "link", required: true) { self.linkReference($0, among: linkNames) }.map { [$0] }
        }
        let networkActions = ["join", "leave", "renumber", "rebind", "dns", "portal"]
        let actions = network == nil && !event.has("network") ? linkActions : linkActions + networkActions
        let direction = take(&event, "direction") { self.choice($0, "direction", LinkDirection.self) } ?? .both
        let matchNode = event.keyNode("match")
        let match = take(&event, "match") { self.flowMatch($0) }
        let present = (linkActions + networkActions).filter { event.has($0) }
        var misplacedMatch = false
        if let matchNode, let name = present.first, present.count == 1, !["set", "ramp", "blackhole", "reset"].contains(name) {
            misplacedMatch = true
            error("match acts on set, ramp, blackhole and reset; \(name) acts on the whole \(networkActions.contains(name) ? "network" : "link"): "
                + "remove match", at: matchNode)
        }
        var extra: [(at: Duration, action: TimelineEvent.Action)] = []
        var action: TimelineEvent.Action?
        if present.count != 1 {
            error(present.isEmpty ? "a timeline event needs one action: \(actions.joined(separator: ", "))"
                                  : "a timeline event takes one action, not \(present.joined(separator: " and "))", at: item)
        }
        for name in present {
            let value = event.take(name)!
            switch name {
            case "set":
                action = impairmentBlock(value, "set").map { .set($0) }
                if fields(value, "set")?.pairs.isEmpty == true {
                    error("set changes nothing here: name what it sets (\(Self.impairmentKeys.joined(separator: ", ")))", at: value)
                    action = nil
                }
            case "ramp":
                action = ramp(value)
            case "reset":
                guard let flag = bool(value, "reset") else { break }
                guard flag else { error("write reset: true (it gives a flow the link's own conditions again)", at: value); break }
                guard matchNode != nil else {
                    error("reset gives the packets a match selects the link's own conditions again: add match", at: value)
                    break
                }
                action = .reset
            case "down", "up":
                if let flag = bool(value, name) {
                    if flag { action = name == "down" ? .down : .up } else { error("write \(name == "down" ? "up" : "down"): true instead of \(name): false", at: value) }
                }
            case "blackhole":
                action = bool(value, "blackhole").map { .blackhole($0) }
            case "flap":
                action = flap(value, at: at, duration: duration)
            case "profile":
                action = profile(value).map { .profile($0.name) }
            case "rebind", "dns":
                guard actions.contains(name) else {
                    error("\(name) is what a network does: write network: NAME with it", at: value)
                    break
                }
                guard let network else { break }
                if event.has("node") { error("\(name) acts on the whole network; remove node", at: event.keyNode("node")!) }
                if name == "rebind" {
                    guard let flag = bool(value, "rebind") else { break }
                    guard flag else { error("write rebind: true (a NAT's mappings cannot be given back)", at: value); break }
                    guard network.ipv4 != .none || network.nat64 else {
                        error("network '\(network.name)' translates no IPv4 (ipv4: none, no nat64): it has no NAT to rebind", at: value)
                        break
                    }
                    action = .rebind
                } else {
                    guard let (dnsAction, span) = dnsFault(value) else { break }
                    action = dnsAction
                    if let span, let at { extra.append((at + span, .dns(nil))) }
                }
                targets = [NetworkSpec.uplinkName(network: network.name)]
            case "portal":
                guard actions.contains(name) else {
                    error("portal is what a phone does at a network's captive portal: write network: NAME (and node: PHONE) with it", at: value)
                    break
                }
                guard let network else { break }
                guard network.portal != nil else {
                    error("network '\(network.name)' has no captive portal; give it one (portal: true) or remove this event", at: value)
                    break
                }
                guard let text = string(value, "portal"), text == "login" || text == "logout" else {
                    error("portal must be login or logout", at: value)
                    break
                }
                action = .portal(login: text == "login")
            case "join", "leave", "renumber":
                guard actions.contains(name) else {
                    error("\(name) is what a phone does to a network: write network: NAME with it", at: value)
                    break
                }
                guard let member = string(value, name), let network else { break }
                guard network.members.contains(member) else {
                    error("node '\(escapedForMessage(member))' is not a member of network '\(network.name)'; list it in the network's members "
                        + "(a member whose first event is a join starts outside the network)", at: value)
                    break
                }
                if event.has("node") { error("\(name) names its node itself; remove node", at: event.keyNode("node")!) }
                targets = [NetworkSpec.accessLinkName(network: network.name, node: member)]
                action = name == "renumber" ? .renumber : .membership(name == "join")
            default: break
            }
        }
        finish(event, known: ["at", "link", "network", "node", "direction", "match"] + actions)
        if present.count != 1 { action = nil }
        if matchNode != nil, match == nil || misplacedMatch { action = nil }
        // A carrier has no direction: both ends lose it at once.
        if direction != .both, let name = present.first, ["down", "up", "flap"].contains(name), present.count == 1 {
            error("direction does not apply to '\(name)': a carrier goes \(name == "up" ? "up" : "down") both ways at once; "
                + "for one direction only, use blackhole with direction", at: event.keyNode("direction")!)
            action = nil
        }
        if let at, let duration, at > duration, let atNode = event.keyNode("at") {
            error("this event is at \(at.roamDescription), after the scenario ends (duration \(duration.roamDescription))",
                  at: event.pairs.first { $0.keyNode == atNode }!.value)
        }
        if case .ramp(_, let over)? = action, let at, let duration, at + over > duration {
            diagnostics.warning("the ramp ends at \((at + over).roamDescription), after the scenario ends; it is cut there",
                                line: item.line, column: item.column)
        }
        if direction != .both, let name = present.first, networkActions.contains(name) {
            error("direction does not apply to \(name): it happens to the network both ways at once", at: event.keyNode("direction")!)
            action = nil
        }
        if let at, let targets, let action {
            for link in targets {
                var added = TimelineEvent(at: at, link: link, direction: direction, action: action, line: item.line)
                added.match = match
                events.append((added, item))
                for (later, action) in extra {
                    if let duration, later > duration { continue }
                    events.append((TimelineEvent(at: later, link: link, direction: direction, action: action, line: item.line), item))
                }
            }
        }
        return events
    }

    /// Events listed out of time order play in time order; say so once, where it first happens.
    /// An item is placed by its `at` (the end of a `for:` span it implies is not listed).
    private func checkOrder(_ events: [(event: TimelineEvent, node: Node)]) {
        var latest: TimelineEvent?
        for (event, node) in events {
            if let latest, event.line == latest.line { continue }
            if let latest, event.at < latest.at {
                diagnostics.warning("this event at \(event.at.roamDescription) is listed after one at \(latest.at.roamDescription) "
                    + "(line \(latest.line)); events play in time order, not in file order", line: node.line, column: node.column)
                return
            }
            latest = event
        }
    }

    /// Refuses what cannot mean anything: a carrier brought up that is not down, cut when it is
    /// cut already, and a blackhole lifted that is not on. A flap leaves the carrier up at its end.
    private func checkCarrierAndBlackholes(_ events: [(event: TimelineEvent, node: Node)]) {
        var downSince: [String: Duration] = [:]
        var flapping: [String: Duration] = [:]
        var blackholed: [String: Set<TrafficDirection>] = [:]
        var joined: [String: Bool] = [:]
        var dnsFailing: Set<String> = []
        for (event, node) in events {
            let link = event.link
            // A flow's blackhole is its own.
            let blackholeKey = event.match.map { "\(link) \($0)" } ?? link
            if let until = flapping[link], event.at >= until {
                flapping[link] = nil
                downSince[link] = nil
            }
            let inFlap = flapping[link] != nil
            let directions: Set<TrafficDirection> = switch event.direction {
            case .both: [.up, .down]
            case .up: [.up]
            case .down: [.down]
            }
            switch event.action {
            case .down:
                if let since = downSince[link], !inFlap {
                    error("link '\(link)' is down already (since \(since.roamDescription)); remove this down, or add an up before it", at: node)
                }
                downSince[link] = downSince[link] ?? event.at
            case .up:
                if downSince[link] == nil, !inFlap {
                    error("link '\(link)' is up at \(event.at.roamDescription): no down comes before this up; remove it, or add a down before it",
                          at: node)
                }
                downSince[link] = nil
            case .flap(_, _, let until):
                if let current = flapping[link] {
                    error("link '\(link)' is flapping already, until \(current.roamDescription); a flap starts after the one before ends",
                          at: node)
                }
                flapping[link] = until
            case .blackhole(true):
                blackholed[blackholeKey, default: []].formUnion(directions)
            case .dns(let fault):
                if fault == nil, !dnsFailing.contains(link) {
                    error("the resolver of '\(link)' is not failing at \(event.at.roamDescription); dns: ok ends a dns: {fail: ...} or {delay: ...}",
                          at: node)
                }
                if fault == nil { dnsFailing.remove(link) } else { dnsFailing.insert(link) }
            case .dnsDelay:
                dnsFailing.insert(link)
            case .membership(let joins):
                // The first membership event of a member tells whether it starts inside.
                if let current = joined[link], current == joins {
                    error("the phone of '\(link)' has \(joins ? "joined" : "left") already by \(event.at.roamDescription); "
                        + "\(joins ? "a join follows a leave" : "a leave follows a join")", at: node)
                }
                joined[link] = joins
            case .blackhole(false):
                if blackholed[blackholeKey, default: []].isDisjoint(with: directions) {
                    let which = event.direction == .both ? "" : " (\(event.direction.rawValue))"
                    let flow = event.match.map { " for \($0)" } ?? ""
                    error("no blackhole is on\(flow) for link '\(link)'\(which) at \(event.at.roamDescription); blackhole: false lifts one that "
                        + "an earlier blackhole: true set", at: node)
                }
                blackholed[blackholeKey, default: []].subtract(directions)
            default:
                break
            }
        }
    }

    /// Refuses a timeline whose events give a link direction more flows with conditions of their
    /// own than ``ScenarioLimits/maximumFlows``, counting the link's `flows:` (a `reset` frees
    /// its flow's place).
    private func checkFlowCount(_ events: [(event: TimelineEvent, node: Node)], links: [LinkSpec]) {
        var flows: [String: [TrafficDirection: [FlowMatch]]] = [:]
        for link in links where !link.flows.isEmpty {
            for direction in TrafficDirection.allCases {
                flows[link.name, default: [:]][direction] = link.flows.filter { $0.applies(to: direction) }.map(\.match)
            }
        }
        for (event, node) in events {
            guard let match = event.match else { continue }
            let directions: [TrafficDirection] = event.direction == .both ? [.up, .down] : event.direction == .up ? [.up] : [.down]
            for direction in directions {
                var current = flows[event.link, default: [:]][direction, default: []]
                if case .reset = event.action {
                    current.removeAll { $0 == match }
                } else if !current.contains(match) {
                    current.append(match)
                    if current.count > ScenarioLimits.maximumFlows {
                        error("link '\(event.link)' (\(direction.rawValue)) would have more than \(ScenarioLimits.maximumFlows) flows with conditions "
                            + "of their own by this event; reset one first (reset: true with its match)", at: node)
                        return
                    }
                }
                flows[event.link, default: [:]][direction] = current
            }
        }
    }

    /// Refuses a timeline that expands to more link changes than ``ScenarioLimits/maximumChanges``
    /// (a ramp makes one per step, a flap two per period), at the event that crosses the bound.
    func checkExpansion(_ events: [(event: TimelineEvent, node: Node)]) {
        var total = 0
        for (event, node) in events {
            let count = TimelineSchedule.changeCount(of: event)
            total += count
            if total > ScenarioLimits.maximumChanges {
                var detail = ""
                if case let .flap(period, _, until) = event.action {
                    detail = " (this flap alone makes \(count): two every \(period.roamDescription) until \(until.roamDescription); use a longer period or end it sooner)"
                }
                error("the timeline makes more than \(ScenarioLimits.maximumChanges) link changes by this event\(detail); "
                    + "Roam plays at most \(ScenarioLimits.maximumChanges) in a scenario", at: node)
                return
            }
        }
    }

    /// `dns: {fail: timeout|nxdomain|refused|servfail, for: DURATION}`, `dns: {delay: DURATION,
    /// for: DURATION}`, or `dns: ok` (the resolver recovers). A new one replaces the one on.
    func dnsFault(_ node: Node) -> (TimelineEvent.Action, Duration?)? {
        let forms = "{fail: timeout|nxdomain|refused|servfail, for: DURATION}, {delay: DURATION, for: DURATION} or ok"
        if case .scalar = node {
            guard let text = string(node, "dns") else { return nil }
            guard text == "ok" else {
                error("dns is \(forms), not '\(escapedForMessage(text))'", at: node)
                return nil
            }
            return (.dns(nil), nil)
        }
        guard var fields = fields(node, "dns") else { return nil }
        guard fields.has("fail") != fields.has("delay") else {
            error("dns is \(forms): one of fail and delay", at: node)
            return nil
        }
        let fault = take(&fields, "fail") { self.choice($0, "fail", DNSFault.self) }
        let delay = take(&fields, "delay") {
            self.duration($0, "delay", allowZero: false, minimum: .milliseconds(1), maximum: ScenarioLimits.maximumDNSDelay)
        }
        let span = take(&fields, "for") { self.duration($0, "for", allowZero: false) }
        finish(fields, known: ["fail", "delay", "for"])
        if let fault { return (.dns(fault), span) }
        if let delay { return (.dnsDelay(delay), span) }
        return nil
    }

    func ramp(_ node: Node) -> TimelineEvent.Action? {
        guard var ramp = fields(node, "ramp") else { return nil }
        let target = take(&ramp, "to", required: true) { self.impairmentBlock($0, "ramp target") }
        let over = take(&ramp, "over", required: true) { self.duration($0, "over", allowZero: false) }
        finish(ramp, known: ["to", "over"])
        if let target, target.isEmpty { error("a ramp needs at least one setting under 'to'", at: node) }
        guard let target, let over else { return nil }
        return .ramp(to: target, over: over)
    }

    func flap(_ node: Node, at: Duration?, duration: Duration?) -> TimelineEvent.Action? {
        guard var flap = fields(node, "flap") else { return nil }
        let period = take(&flap, "period", required: true) {
            self.duration($0, "period", allowZero: false, minimum: ScenarioLimits.minimumFlapPeriod)
        }
        let duty = take(&flap, "duty") { value -> Double? in
            guard let fraction = self.fraction(value, "duty") else { return nil }
            guard fraction > 0, fraction < 1 else {
                self.error("duty is the share of each period the link is up: more than 0% and less than 100%", at: value)
                return nil
            }
            return fraction
        } ?? 0.5
        var until = take(&flap, "until") { self.duration($0, "until") }
        if let forNode = flap.keyNode("for") {
            let span = take(&flap, "for") { self.duration($0, "for", allowZero: false) }
            if until != nil {
                error("a flap ends at until or after for, not both", at: forNode)
            } else if let span, let at {
                until = at + span
            }
        }
        finish(flap, known: ["period", "duty", "until", "for"])
        let end = until ?? duration
        if end == nil, until == nil, !flap.has("for") {
            error("this flap has no end: the run is open-ended; give it for: DURATION or until: TIME", at: node)
        }
        if let until, let at, until <= at {
            error("until (\(until.roamDescription)) must come after the event's at (\(at.roamDescription))", at: node)
            return nil
        }
        if let until, let duration, until > duration {
            error("until (\(until.roamDescription)) is after the scenario ends (\(duration.roamDescription))", at: node)
            return nil
        }
        guard let period, let end else { return nil }
        return .flap(period: period, duty: duty, until: end)
    }
}
