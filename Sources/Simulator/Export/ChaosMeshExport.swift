import PathMonitor

/// A scenario's links and timeline as Chaos Mesh manifests (`chaos-mesh.org/v1alpha1`), for
/// teams that run network chaos on Kubernetes: each node is a set of pods (a label selector),
/// each link direction a `NetworkChaos` between the two nodes' pods. A scenario without a
/// timeline becomes one `NetworkChaos` per link (or per direction when they differ); one with
/// a timeline becomes a `Workflow` whose entry runs, in parallel, a `Serial` track per link
/// direction: a `NetworkChaos` step with a `deadline` for each span of constant conditions, a
/// `Suspend` step for spans without any.
///
/// What Chaos Mesh cannot express is exported as closely as it allows, and each such case is
/// listed in ``Result/notes``: trace-driven capacity (its mean rate), Gilbert-Elliott loss (its
/// long-run rate), delay distributions and queue limits (dropped), carrier loss (a partition,
/// which pods do not see as a carrier change), several links between one pair of nodes
/// without `devices` (they would shape the same traffic).
public enum ChaosMeshExport {
    public struct Options: Sendable {
        /// The Kubernetes namespace of the manifests and of the pods.
        public var namespace = "default"
        /// Each node's pods, as labels; a node without an entry is `app: NODE`.
        public var selectors: [String: [String: String]] = [:]
        /// A link's network device inside the pods (e.g. a Multus interface), by link name.
        public var devices: [String: String] = [:]
        /// Changes closer together than this (ramp steps) are merged: the later one wins.
        /// Carrier and blackhole changes are always kept.
        public var resolution: Duration = .seconds(1)

        public init() {}
    }

    public struct Result: Sendable {
        /// The manifests, one YAML document each, separated by `---`.
        public var yaml: String
        /// What did not map exactly, one sentence each.
        public var notes: [String]
        /// How many manifests and, for a workflow, how many steps.
        public var manifests: Int
        public var steps: Int
    }

    public static func export(_ scenario: Scenario, options: Options = Options()) -> Result {
        var notes = Notes()
        let tracks = Track.build(scenario, options: options, notes: &notes)
        for node in scenario.nodes.map(\.name) where options.selectors[node] == nil
            && scenario.links.contains(where: { $0.endpoints.0 == node || $0.endpoints.1 == node }) {
            notes.add("node '\(node)' has no selector; its pods are those labelled app=\(node) (roam export --select \(node)=KEY=VALUE)")
        }
        var pairs: [String: [String]] = [:]
        for link in scenario.links {
            let key = [link.endpoints.0, link.endpoints.1].sorted().joined(separator: "|")
            pairs[key, default: []].append(link.name)
        }
        for (_, links) in pairs.sorted(by: { $0.key < $1.key }) where links.count > 1 && links.contains(where: { options.devices[$0] == nil }) {
            notes.add("links \(links.joined(separator: ", ")) join the same two nodes; without --device LINK=DEVICE for each, their chaos shapes the same pod traffic")
        }

        var documents: [JSONValue] = []
        var steps = 0
        let base = dnsName(scenario.name)
        if scenario.timeline.isEmpty {
            for track in tracks {
                guard let span = track.spans.first, let spec = span.state.spec(track: track, scenario: scenario, options: options, notes: &notes) else { continue }
                documents.append(.object([
                    ("apiVersion", "chaos-mesh.org/v1alpha1"), ("kind", "NetworkChaos"),
                    ("metadata", metadata("\(base)-\(track.name)", scenario, options)), ("spec", spec),
                ]))
            }
        } else {
            var templates: [JSONValue] = []
            var children: [JSONValue] = []
            for track in tracks {
                var stepNames: [JSONValue] = []
                for (index, span) in track.spans.enumerated() {
                    let name = "\(track.name)-\(index)"
                    let deadline = JSONValue.string(goDuration(span.end - span.start))
                    if let spec = span.state.spec(track: track, scenario: scenario, options: options, notes: &notes) {
                        templates.append(.object([("name", .string(name)), ("templateType", "NetworkChaos"), ("deadline", deadline), ("networkChaos", spec)]))
                    } else {
                        templates.append(.object([("name", .string(name)), ("templateType", "Suspend"), ("deadline", deadline)]))
                    }
                    stepNames.append(.string(name))
                    steps += 1
                }
                templates.append(.object([("name", .string(track.name)), ("templateType", "Serial"), ("children", .array(stepNames))]))
                children.append(.string(track.name))
            }
            templates.insert(.object([("name", "scenario"), ("templateType", "Parallel"), ("deadline", .string(goDuration(scenario.duration))),
                                      ("children", .array(children))]), at: 0)
            documents.append(.object([
                ("apiVersion", "chaos-mesh.org/v1alpha1"), ("kind", "Workflow"),
                ("metadata", metadata(base, scenario, options)),
                ("spec", .object([("entry", "scenario"), ("templates", .array(templates))])),
            ]))
            notes.add("each track's steps start when the previous one ends, so controller latency adds up along a track; Roam plays changes on the clock")
        }
        var yaml = "# Chaos Mesh manifests for the Roam scenario '\(scenario.name)' (roam export --format chaos-mesh).\n"
        for note in notes.items { yaml += "# note: \(note)\n" }
        yaml += documents.map { "---\n" + YAMLEmitter.document($0) }.joined()
        return Result(yaml: yaml, notes: notes.items, manifests: documents.count, steps: steps)
    }

    static func metadata(_ name: String, _ scenario: Scenario, _ options: Options) -> JSONValue {
        .object([("name", .string(String(name.prefix(63)))), ("namespace", .string(options.namespace)),
                 ("labels", .object([("app.kubernetes.io/managed-by", "roam"), ("roam/scenario", .string(String(dnsName(scenario.name).prefix(63))))]))])
    }

    static func selector(_ node: String, _ options: Options) -> JSONValue {
        let labels = options.selectors[node] ?? ["app": node]
        return .object([("namespaces", .array([.string(options.namespace)])),
                        ("labelSelectors", .object(labels.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))])
    }

    /// A lower-case DNS label: letters, digits and `-`.
    static func dnsName(_ text: String) -> String {
        var name = String(text.lowercased().map { ($0.isASCII && ($0.isLetter || $0.isNumber)) ? $0 : "-" })
        while name.hasPrefix("-") { name.removeFirst() }
        while name.hasSuffix("-") { name.removeLast() }
        return name.isEmpty ? "roam" : name
    }

    /// A Go duration, as Chaos Mesh reads `deadline`, `latency` and `jitter`.
    static func goDuration(_ duration: Duration) -> String {
        let nanoseconds = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        if nanoseconds % 1_000_000_000 == 0 { return "\(nanoseconds / 1_000_000_000)s" }
        if nanoseconds % 1_000_000 == 0 { return "\(nanoseconds / 1_000_000)ms" }
        if nanoseconds % 1000 == 0 { return "\(nanoseconds / 1000)us" }
        return "\(nanoseconds)ns"
    }

    /// A percentage as Chaos Mesh's FloatStr: `0.1` for 0.001.
    static func percent(_ fraction: Double) -> String {
        let value = (fraction * 100 * 10_000).rounded() / 10_000
        return value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// A rate in whole units, as Chaos Mesh's webhook requires (`1500kbit`, not `1.5mbit`).
    static func rate(_ rate: Rate) -> String {
        let bits = UInt64(min(max(1, rate.bitsPerSecond.rounded()), 1e15)) // validation bounds rates far below this
        if bits % 1_000_000_000 == 0 { return "\(bits / 1_000_000_000)gbit" }
        if bits % 1_000_000 == 0 { return "\(bits / 1_000_000)mbit" }
        if bits % 1000 == 0 { return "\(bits / 1000)kbit" }
        return "\(bits)bit"
    }
}

/// Notes, each once, in order.
struct Notes {
    private(set) var items: [String] = []
    mutating func add(_ note: String) { if !items.contains(note) { items.append(note) } }
}

/// One direction of a link (or both, when they never differ) over the scenario.
struct Track {
    struct State: Equatable {
        var carrier = true
        var conditions = LinkConditions()

        /// The NetworkChaos spec for this state, nil when the link is clear.
        func spec(track: Track, scenario: Scenario, options: ChaosMeshExport.Options, notes: inout Notes) -> JSONValue? {
            let impairment = conditions.impairment
            var fields: [(String, JSONValue)] = []
            let partitioned = !carrier || conditions.isBlackholed
            if partitioned {
                fields.append(("action", "partition"))
                if !carrier { notes.add("carrier loss (down, flap) on \(track.link) is a partition: pods see their traffic stop, not their interface go down") }
            } else {
                if let delay = impairment.delay {
                    var members: [(String, JSONValue)] = [("latency", .string(ChaosMeshExport.goDuration(delay)))]
                    if let jitter = impairment.jitter { members.append(("jitter", .string(ChaosMeshExport.goDuration(jitter)))) }
                    if let correlation = impairment.delayCorrelation { members.append(("correlation", .string(ChaosMeshExport.percent(correlation)))) }
                    if let reorder = impairment.reorder, reorder > 0 {
                        members.append(("reorder", .object([("reorder", .string(ChaosMeshExport.percent(reorder))), ("gap", .int(1))])))
                    }
                    fields.append(("delay", .object(members)))
                    if impairment.distribution != nil { notes.add("delay distributions (\(track.link)) have no Chaos Mesh field; dropped") }
                } else if impairment.jitter != nil {
                    fields.append(("delay", .object([("latency", "0ms"), ("jitter", .string(ChaosMeshExport.goDuration(impairment.jitter!)))])))
                }
                switch impairment.loss {
                case .random(let rate, let correlation)? where rate > 0:
                    var members: [(String, JSONValue)] = [("loss", .string(ChaosMeshExport.percent(rate)))]
                    if correlation > 0 { members.append(("correlation", .string(ChaosMeshExport.percent(correlation)))) }
                    fields.append(("loss", .object(members)))
                case .gilbertElliott? :
                    let mean = impairment.loss!.meanLoss
                    if mean > 0 { fields.append(("loss", .object([("loss", .string(ChaosMeshExport.percent(mean)))]))) }
                    notes.add("Gilbert-Elliott loss (\(track.link)) has no Chaos Mesh form; exported as random loss at its long-run rate")
                default: break
                }
                if let duplicate = impairment.duplicate, duplicate > 0 {
                    fields.append(("duplicate", .object([("duplicate", .string(ChaosMeshExport.percent(duplicate)))])))
                }
                if let corrupt = impairment.corrupt, corrupt > 0 {
                    fields.append(("corrupt", .object([("corrupt", .string(ChaosMeshExport.percent(corrupt)))])))
                }
                if let rate = impairment.rate {
                    fields.append(("rate", .object([("rate", .string(ChaosMeshExport.rate(rate)))])))
                } else if let trace = impairment.trace {
                    let mean = Rate(bitsPerSecond: trace.trace.meanRate)
                    fields.append(("rate", .object([("rate", .string(ChaosMeshExport.rate(mean)))])))
                    notes.add("trace-driven capacity (\(track.link): \(trace.path)) has no Chaos Mesh form; exported as its mean rate, \(ChaosMeshExport.rate(mean))")
                }
                if impairment.limit != nil { notes.add("queue limits (\(track.link)) have no field in Chaos Mesh's netem action; dropped") }
                if fields.isEmpty { return nil }
                fields.insert(("action", "netem"), at: 0)
            }
            guard let link = scenario.links.first(where: { $0.name == track.link }) else { return nil }
            var spec: [(String, JSONValue)] = fields
            spec.append(("mode", "all"))
            spec.append(("selector", ChaosMeshExport.selector(link.endpoints.0, options)))
            spec.append(("direction", .string(track.chaosDirection)))
            spec.append(("target", .object([("mode", "all"), ("selector", ChaosMeshExport.selector(link.endpoints.1, options))])))
            if let device = options.devices[link.name] {
                spec.append(("device", .string(device)))
                spec.append(("targetDevice", .string(device)))
            }
            return .object(spec)
        }
    }

    struct Span: Equatable {
        var start: Duration
        var end: Duration
        var state: State
    }

    var link: String
    /// `up`, `down`, or nil for both.
    var direction: TrafficDirection?
    var spans: [Span]

    var name: String { ChaosMeshExport.dnsName(link) + (direction.map { "-\($0.rawValue)" } ?? "") }

    /// Up is from the link's first node (the selector) to its second (the target).
    var chaosDirection: String {
        switch direction {
        case .up?: "to"
        case .down?: "from"
        case nil: "both"
        }
    }

    static func build(_ scenario: Scenario, options: ChaosMeshExport.Options, notes: inout Notes) -> [Track] {
        let schedule = TimelineSchedule(scenario: scenario)
        var tracks: [Track] = []
        for link in scenario.links {
            var perDirection: [TrafficDirection: [Span]] = [:]
            for direction in TrafficDirection.allCases {
                var state = State()
                state.conditions = schedule.initial.first { $0.link == link.name && $0.direction == direction }?.conditions ?? LinkConditions()
                var points: [(at: Duration, state: State, structural: Bool)] = [(.zero, state, true)]
                for change in schedule.changes where change.link == link.name {
                    var structural = false
                    switch change.change {
                    case .carrier(let up):
                        state.carrier = up
                        structural = true
                    case .conditions(let changed, let conditions):
                        guard changed == direction else { continue }
                        structural = conditions.isBlackholed != state.conditions.isBlackholed || change.action != "ramp"
                        state.conditions = conditions
                    }
                    if let last = points.last, last.at == change.at {
                        points[points.count - 1].state = state
                        points[points.count - 1].structural = last.structural || structural
                    } else if !structural, let last = points.last, !last.structural, change.at - last.at < options.resolution {
                        // Ramp steps closer than the resolution: the later one's state wins.
                        points[points.count - 1].state = state
                    } else {
                        points.append((change.at, state, structural))
                    }
                }
                var spans: [Span] = []
                for (index, point) in points.enumerated() {
                    let end = index + 1 < points.count ? points[index + 1].at : scenario.duration
                    guard end > point.at else { continue }
                    if let last = spans.last, last.state == point.state {
                        spans[spans.count - 1].end = end
                    } else {
                        spans.append(Span(start: point.at, end: end, state: point.state))
                    }
                }
                perDirection[direction] = spans
            }
            if perDirection[.up] == perDirection[.down] {
                tracks.append(Track(link: link.name, direction: nil, spans: perDirection[.up] ?? []))
            } else {
                tracks.append(Track(link: link.name, direction: .up, spans: perDirection[.up] ?? []))
                tracks.append(Track(link: link.name, direction: .down, spans: perDirection[.down] ?? []))
            }
        }
        return tracks
    }
}
