import RoamSystem
import RoamCore

/// A scenario's links and timeline as Chaos Mesh manifests (`chaos-mesh.org/v1alpha1`), for
/// teams that take mobility tests to Kubernetes. Each node is a set of pods (a label selector);
/// each link is a network device of its own in the pods of both its nodes (a Multus attachment
/// named after the link, unless `devices` says otherwise), as a Roam link is a veth pair.
///
/// Every object shapes one device's egress on one side, as Roam's netem backend does: a link's
/// `up` direction is the first node's device, `down` the second's. Objects have no `target`
/// (Chaos Mesh filters targets by the pods' primary IP, which traffic on a second device never
/// carries) and `direction: to` (the selected pods' own egress). Each side's objects are
/// `action: netem`: delay, jitter, loss, duplication, corruption, reordering. Carrier loss and
/// blackholes are 100% loss on that device alone, so the other links play on. The rate is
/// shaped one of two ways (``RateShaping``):
///
/// - ``RateShaping/netem`` (the default): netem's own `rate` in the same object, so a side has
///   one object at a time and nothing can reorder it; the queue is netem's 1000 packets, which
///   Chaos Mesh cannot change.
/// - ``RateShaping/tbf``: a second object per side, `action: bandwidth`, a tbf with the queue
///   Roam's netem backend gives it (100 ms at the rate, at least 64 KiB; the scenario's `limit`
///   in packets of 1514 bytes). Chaos Mesh chains a side's objects in the order it applies them,
///   so that queue holds only while netem was applied first (the notes list each span where it may not).
///
/// Without a timeline each becomes one `NetworkChaos`; with one, a `Workflow` whose entry runs,
/// in parallel, a `Serial` track per link, side and kind: a `NetworkChaos` step with a
/// `deadline` for each span of constant conditions, a `Suspend` step for spans without any.
/// Ramp steps closer than the resolution are merged; a merged span holds the conditions of its
/// start, as Roam holds each step's until the next, and a ramp's final values get a span of
/// their own.
///
/// What Chaos Mesh cannot express is exported as closely as it allows and listed in
/// ``Result/notes``. What cannot be played faithfully at all (two links on one device of a
/// pod) is refused.
public enum ChaosMeshExport {
    /// How a side's rate is shaped on Chaos Mesh.
    public enum RateShaping: String, Sendable, CaseIterable {
        /// netem's own `rate`, in the side's one netem object: the qdisc order is fixed because
        /// there is one qdisc, and each step is one object; the queue is netem's 1000 packets.
        case netem
        /// A `bandwidth` object (tbf with Roam's queue) beside the netem object: Roam's queue
        /// where Chaos Mesh applies netem first, netem's 1000 packets in its place where not.
        case tbf
    }

    public struct Options: Sendable {
        /// How the rate is shaped (``RateShaping``).
        public var rateShaping = RateShaping.netem
        /// The Kubernetes namespace of the manifests and of the pods.
        public var namespace = "default"
        /// Each node's pods, as labels; a node without an entry is `app: NODE`.
        public var selectors: [String: [String: String]] = [:]
        /// A link's network device inside the pods of both its nodes, by link name; a link
        /// without an entry is a device named after the link.
        public var devices: [String: String] = [:]
        /// Changes closer together than this (ramp steps) are merged: the earlier one's values
        /// hold. Carrier and blackhole changes, `set`s and a ramp's last step are always kept.
        public var resolution: Duration = .seconds(1)
        /// The Chaos Mesh release the manifests are for (at least ``minimumVersion``).
        public var version = ChaosMeshExport.defaultVersion
        /// The most one Workflow may hold, as YAML: a larger one is split into several that start
        /// together (etcd refuses a request above 1.5 MiB, and client-side `kubectl apply` sends
        /// the object twice, once in its last-applied annotation).
        public var maximumWorkflowBytes = 512 << 10

        public init() {}

        /// The device `link` is in the pods.
        public func device(of link: String) -> String { devices[link] ?? link }
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

    /// Why a scenario cannot be exported faithfully.
    public struct Refusal: Error, Sendable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// The smallest percentage Chaos Mesh's daemon writes into a netem argument (it formats
    /// them with six decimals).
    public static let smallestPercent = 0.000001

    /// The first release whose daemon gives netem the latency and jitter it was given: before
    /// 2.8.0 both reached `tc` 1000 times too small (chaos-mesh/chaos-mesh#4545, fixed by
    /// c4233a2), while the manifests still passed those releases' CRDs.
    public static let minimumVersion = (major: 2, minor: 8, patch: 0)
    /// The release the vendored CRDs and the semantics the export relies on were read from.
    public static let defaultVersion = "2.8.3"

    /// `2.8.3` or `v2.8.3` as numbers, nil when it is not a version.
    public static func parseVersion(_ text: String) -> (major: Int, minor: Int, patch: Int)? {
        let body = text.hasPrefix("v") ? text.dropFirst() : Substring(text)
        let parts = body.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty && $0.count <= 6 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) else { return nil }
        return (Int(parts[0])!, Int(parts[1])!, Int(parts[2])!)
    }

    /// What of a scenario's networks the export leaves to the cluster: its links (radios,
    /// uplinks, the servers' attachments) are exported as any link, between the pods of the
    /// nodes the reader made (`NAME-gw`, `internet`); what the gateways do, and the events that
    /// change addresses, mappings or answers, have no Chaos Mesh form.
    static func networkNotes(_ scenario: Scenario, notes: inout Notes) {
        for network in scenario.networks {
            var roles = ["routing"]
            switch network.ipv4 {
            case .nat44: roles.append("NAT44")
            case .cgnat: roles.append("carrier-grade NAT")
            case .none: break
            }
            if network.nat64 { roles.append("NAT64 with DNS64") }
            if network.portal != nil { roles.append("its captive portal") }
            roles.append("its resolver")
            notes.add("network '\(network.name)': its links are exported as any link, with the pods of node '\(network.gateway)' as its gateway; "
                + "what Roam's gateway does (\(roles.joined(separator: ", "))) and the phones' addresses are the cluster's to provide")
        }
        for proxy in scenario.proxies {
            notes.add("proxy '\(proxy.name)' and its toxics are not exported: Chaos Mesh has no TCP proxy; run toxiproxy in the cluster "
                + "with the same proxies (Roam's proxies: are toxiproxy's fields, docs/from-toxiproxy.md)")
        }
        for link in scenario.links where !link.flows.isEmpty {
            notes.add("the flows of \(link.name) (flows:) are not exported: a NetworkChaos selects pods and addresses, not ports or protocols, "
                + "so their packets get the link's own conditions")
        }
        for event in scenario.timeline {
            let when = "at \(event.at.roamDescription)"
            if let match = event.match {
                notes.add("the change to \(match) on \(event.link) \(when) is not exported: a NetworkChaos cannot select packets by port or protocol")
                continue
            }
            switch event.action {
            case .membership(let joins):
                notes.add("\(joins ? "join" : "leave") on \(event.link) \(when) is exported as the radio's carrier \(joins ? "returning" : "lost") "
                    + "(100% loss on its device): the pod's addresses and routes stay")
            case .renumber:
                notes.add("renumber on \(event.link) \(when) is not exported: Chaos Mesh cannot change a pod's addresses")
            case .rebind:
                notes.add("rebind on \(event.link) \(when) is not exported: Chaos Mesh has no NAT whose mappings it could flush")
            case .portal(let login):
                notes.add("portal \(login ? "login" : "logout") on \(event.link) \(when) is not exported: Chaos Mesh has no captive portal")
            case .dns, .dnsDelay:
                notes.add("the dns faults on \(event.link) are not exported: Chaos Mesh's DNSChaos acts on the cluster's DNS server for chosen pods, "
                    + "not on a network's resolver")
            default:
                break
            }
        }
    }

    /// A tbf queue a rate maps to: bytes per second, and `limit` and `buffer` in bytes.
    static func bandwidth(_ conditions: LinkConditions) -> (rate: Rate, limit: UInt32, buffer: UInt32)? {
        let impairment = conditions.impairment
        guard let rate = impairment.rate ?? impairment.trace.map({ Rate(bitsPerSecond: $0.trace.meanRate) }) else { return nil }
        var shaped = conditions
        shaped.impairment.rate = rate
        guard let bucket = shaped.queuePlan.tokenBucket else { return nil }
        return (rate, bucket.limit, bucket.bucket)
    }

    public static func export(_ scenario: Scenario, options: Options = Options()) throws(Refusal) -> Result {
        guard let version = parseVersion(options.version) else {
            throw Refusal(message: "Chaos Mesh version '\(escapedForMessage(options.version))' is not MAJOR.MINOR.PATCH (such as \(defaultVersion))")
        }
        guard (version.major, version.minor, version.patch) >= (minimumVersion.major, minimumVersion.minor, minimumVersion.patch) else {
            throw Refusal(message: "Chaos Mesh \(options.version) gives netem every latency and jitter 1000 times too small (chaos-mesh/chaos-mesh#4545, "
                + "fixed in 2.8.0), and its CRDs accept the manifests all the same: the export needs Chaos Mesh 2.8.0 or later")
        }
        try checkDevices(scenario, options: options)
        var notes = Notes()
        networkNotes(scenario, notes: &notes)
        let tracks = Track.build(scenario, options: options, notes: &notes)
        for node in scenario.nodes.map(\.name) where scenario.links.contains(where: { $0.endpoints.0 == node || $0.endpoints.1 == node }) {
            let labels = (options.selectors[node] ?? ["app": node]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            if options.selectors[node] == nil {
                notes.add("node '\(node)' has no selector; its pods are those labelled app=\(node) (roam export --select \(node)=KEY=VALUE)")
            }
            notes.add("a selector that matches no pod makes Chaos Mesh do nothing for that node, without an error in the Workflow: check first that "
                + "`kubectl get pods -n \(options.namespace) -l \(labels)` lists node '\(node)'s pods")
        }
        for link in scenario.links where link.radio != nil {
            notes.add("the RRC radio states of \(link.name) (radio:) are not exported: a NetworkChaos delays every packet alike and cannot "
                + "hold the first packet after a silence for a promotion; only Roam's userspace emulator plays them")
        }
        for link in scenario.links where options.devices[link.name] == nil {
            notes.add("link '\(link.name)' is the device '\(link.name)' in the pods of \(link.endpoints.0) and \(link.endpoints.1): attach a network of that name (Multus, see the README), or name the device with --device \(link.name)=DEVICE")
        }

        for rebuild in podUpdates(tracks, scenario: scenario, options: options) where rebuild.updates > 0 && rebuild.others.count > 0 {
            notes.add("node '\(rebuild.node)''s pods: their chaos changes \(rebuild.updates) times in the scenario (an object applied or removed), and on "
                + "each Chaos Mesh's daemon rebuilds every device's qdiscs (SetTcs removes each root qdisc first), so what \(rebuild.others.joined(separator: ", ")) "
                + "had queued is dropped each time a change is made to another of the pod's links; Kubernetes mode (--format kubernetes) changes only the link that changes")
        }
        var documents: [JSONValue] = []
        var steps = 0
        let base = dnsName(scenario.name)
        if scenario.timeline.isEmpty {
            for track in tracks {
                guard let span = track.spans.first, let spec = track.spec(span.state, scenario: scenario, options: options) else { continue }
                documents.append(.object([
                    ("apiVersion", "chaos-mesh.org/v1alpha1"), ("kind", "NetworkChaos"),
                    ("metadata", metadata(name(base, suffix: track.name), scenario, options)), ("spec", spec),
                ]))
            }
        } else {
            // Each track is a Serial of steps; tracks run in parallel. Tracks are packed into
            // Workflows of at most `maximumWorkflowBytes`; a track too long for one is cut in time,
            // its later parts waiting (a Suspend) for their start.
            var parts: [(templates: [JSONValue], name: String, bytes: Int)] = []
            for track in tracks {
                var pending: [JSONValue] = [], stepNames: [JSONValue] = [], bytes = 0, part = 0, partStart = Duration.zero
                func flush() {
                    guard !stepNames.isEmpty else { return }
                    let name = part == 0 ? track.name : "\(track.name)-p\(part)"
                    var templates = pending
                    var children = stepNames
                    if partStart > .zero {
                        templates.insert(.object([("name", .string(name + "-wait")), ("templateType", "Suspend"), ("deadline", .string(goDuration(partStart)))]), at: 0)
                        children.insert(.string(name + "-wait"), at: 0)
                    }
                    templates.append(.object([("name", .string(name)), ("templateType", "Serial"), ("children", .array(children))]))
                    parts.append((templates, name, templates.reduce(0) { $0 + YAMLEmitter.document($1).utf8.count }))
                    pending = []; stepNames = []; bytes = 0; part += 1
                }
                for (index, span) in track.spans.enumerated() {
                    let name = "\(track.name)-\(index)"
                    let deadline = JSONValue.string(goDuration(span.end - span.start))
                    let template: JSONValue
                    if let spec = track.spec(span.state, scenario: scenario, options: options) {
                        template = .object([("name", .string(name)), ("templateType", "NetworkChaos"), ("deadline", deadline), ("networkChaos", spec)])
                    } else {
                        template = .object([("name", .string(name)), ("templateType", "Suspend"), ("deadline", deadline)])
                    }
                    let size = YAMLEmitter.document(template).utf8.count
                    if bytes + size > options.maximumWorkflowBytes / 2 && !stepNames.isEmpty {
                        flush()
                        partStart = span.start
                    }
                    pending.append(template)
                    stepNames.append(.string(name))
                    bytes += size
                    steps += 1
                }
                flush()
            }
            // First fit, in order: the parts of one track stay in order across Workflows.
            var workflows: [(templates: [JSONValue], children: [JSONValue], bytes: Int)] = []
            for part in parts {
                if let index = workflows.indices.last, workflows[index].bytes + part.bytes <= options.maximumWorkflowBytes {
                    workflows[index].templates += part.templates
                    workflows[index].children.append(.string(part.name))
                    workflows[index].bytes += part.bytes
                } else {
                    workflows.append((part.templates, [.string(part.name)], part.bytes))
                }
            }
            for (index, workflow) in workflows.enumerated() {
                var templates = workflow.templates
                templates.insert(.object([("name", "entry"), ("templateType", "Parallel"), ("deadline", .string(goDuration(scenario.duration))),
                                          ("children", .array(workflow.children))]), at: 0)
                let name = workflows.count == 1 ? trimmedName(base) : Self.name(base, suffix: "\(index + 1)")
                documents.append(.object([
                    ("apiVersion", "chaos-mesh.org/v1alpha1"), ("kind", "Workflow"),
                    ("metadata", metadata(name, scenario, options)),
                    ("spec", .object([("entry", "entry"), ("templates", .array(templates))])),
                ]))
            }
            if workflows.count > 1 {
                notes.add("the timeline is \(workflows.count) Workflows of at most \(options.maximumWorkflowBytes >> 10) KiB each (etcd refuses a request above "
                    + "1.5 MiB, and client-side kubectl apply sends an object twice): apply them together; each starts when the controller takes it, "
                    + "so they may start a little apart")
            }
            notes.add("each track's steps start when the previous one ends, so controller latency adds up along a track; Roam plays changes on the clock")
            notes.add("a step's object is removed and the next one applied as two updates of the pod: between them, for the controller's latency, a side "
                + "has either neither object or both stacked (their delays added); Kubernetes mode changes a qdisc in place")
        }
        var yaml = "# Chaos Mesh manifests for the Roam scenario '\(escapedForMessage(scenario.name))' (roam export --format chaos-mesh), "
            + "for Chaos Mesh \(options.version); they need 2.8.0 or later. Rates are shaped by \(options.rateShaping == .netem ? "netem's own rate" : "tbf") "
            + "(--chaos-mesh-rate \(options.rateShaping.rawValue)).\n"
        // Escaped: a line break in a note (a trace's path, say) would end the comment.
        for note in notes.items { yaml += "# note: \(escapedForMessage(note, maximumLength: 4096))\n" }
        yaml += documents.map { "---\n" + YAMLEmitter.document($0) }.joined()
        return Result(yaml: yaml, notes: notes.items, manifests: documents.count, steps: steps)
    }

    /// Per node with links, how many times its pods' objects change (one applied or removed,
    /// strictly inside the scenario: each is an update of the pod's PodNetworkChaos, and so a
    /// rebuild of all its devices), and its devices.
    static func podUpdates(_ tracks: [Track], scenario: Scenario, options: Options) -> [(node: String, updates: Int, others: [String])] {
        var result: [(node: String, updates: Int, others: [String])] = []
        for node in scenario.nodes.map(\.name) {
            let links = scenario.links.filter { $0.endpoints.0 == node || $0.endpoints.1 == node }
            guard !links.isEmpty else { continue }
            var updates = 0
            for track in tracks {
                guard let link = scenario.links.first(where: { $0.name == track.link }),
                      (track.direction == .up ? link.endpoints.0 : link.endpoints.1) == node else { continue }
                for span in track.spans where span.state != .none {
                    if span.start > .zero { updates += 1 }
                    if span.end < scenario.duration { updates += 1 }
                }
            }
            result.append((node, updates, links.count > 1 ? links.map { options.device(of: $0.name) } : []))
        }
        return result
    }

    /// Refuses links that would shape one device of one node's pods together: their chaos
    /// would stack on the same traffic, and neither link would play as written.
    static func checkDevices(_ scenario: Scenario, options: Options) throws(Refusal) {
        var seen: [String: String] = [:]
        for link in scenario.links {
            for node in [link.endpoints.0, link.endpoints.1] {
                let key = node + "\u{0}" + options.device(of: link.name)
                if let other = seen[key] {
                    throw Refusal(message: "links '\(other)' and '\(link.name)' would both be the device '\(options.device(of: link.name))' in the pods of "
                        + "node '\(node)', where their conditions would stack on the same traffic; give each link a device of its own "
                        + "(--device \(link.name)=DEVICE, e.g. a Multus attachment)")
                }
                seen[key] = link.name
            }
        }
    }

    /// `base` as a DNS label: at most 63, not ending in `-`.
    static func trimmedName(_ base: String) -> String {
        var head = String(base.prefix(63))
        while head.hasSuffix("-") { head.removeLast() }
        return head.isEmpty ? "roam" : head
    }

    /// `base-suffix`, with `base` shortened so that the whole is a DNS label (at most 63).
    static func name(_ base: String, suffix: String) -> String {
        let room = max(0, 63 - suffix.count - 1)
        var head = String(base.prefix(room))
        while head.hasSuffix("-") { head.removeLast() }
        return head.isEmpty ? String(suffix.prefix(63)) : head + "-" + suffix
    }

    static func metadata(_ name: String, _ scenario: Scenario, _ options: Options) -> JSONValue {
        .object([("name", .string(name)), ("namespace", .string(options.namespace)),
                 ("labels", .object([("app.kubernetes.io/managed-by", "roam"), ("roam/scenario", .string(trimmedName(dnsName(scenario.name))))]))])
    }

    static func selector(_ node: String, _ options: Options) -> JSONValue {
        let labels = options.selectors[node] ?? ["app": node]
        return .object([("namespaces", .array([.string(options.namespace)])),
                        ("labelSelectors", .object(labels.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))])
    }

    /// A lower-case DNS label: letters, digits and `-`.
    package static func dnsName(_ text: String) -> String {
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

    /// A fraction as Chaos Mesh's percentage strings: `0.1` for 0.001, with the six decimals
    /// its daemon keeps. A non-zero fraction never becomes `0`: below ``smallestPercent`` it is
    /// that (the caller notes it).
    static func percent(_ fraction: Double) -> String {
        var value = (fraction * 100 * 1_000_000).rounded() / 1_000_000
        if fraction > 0 && value < smallestPercent { value = smallestPercent }
        if value == value.rounded() { return String(Int(value)) }
        var text = String(format6(value))
        while text.hasSuffix("0") { text.removeLast() }
        return text
    }

    /// `value` with six decimals, without Foundation.
    private static func format6(_ value: Double) -> String {
        let scaled = Int64((value * 1_000_000).rounded())
        let whole = scaled / 1_000_000, fraction = scaled % 1_000_000
        let digits = String(fraction)
        return "\(whole)." + String(repeating: "0", count: 6 - digits.count) + digits
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

/// Notes, each once, in order; at most ``maximum``, and the rest counted, so that a timeline
/// of 100,000 distinct values cannot make as many notes.
struct Notes {
    private var list: [String] = []
    private var seen: Set<String> = []
    private var omitted = 0
    /// For notes that carry a figure per link: the largest so far, and where its note stands.
    private var packetsInFlight: [String: (count: UInt32, index: Int)] = [:]
    static let maximum = 100

    var items: [String] {
        omitted == 0 ? list : list + ["\(omitted) more note\(omitted == 1 ? "" : "s") of the kinds above not shown"]
    }

    mutating func add(_ note: String) {
        guard !seen.contains(note) else { return }
        guard list.count < Self.maximum else {
            omitted += 1
            return
        }
        seen.insert(note)
        list.append(note)
    }

    /// The note that a side's rate queues in netem's 1000 packets: one per side, at its lowest
    /// rate (where that queue is longest).
    private var netemQueues: [String: (rate: Double, index: Int)] = [:]

    mutating func addNetemQueue(rate: Rate, roamLimit: UInt32, side: String) {
        let text = {
            let netem = Duration.seconds(1000.0 * 1514 * 8 / rate.bitsPerSecond)
            let roam = Duration.seconds(Double(roamLimit) * 8 / rate.bitsPerSecond)
            return "\(side): the rate is netem's own, in the side's one object, so no apply order can change the qdiscs; its queue is netem's "
                + "1000 packets (\(netem.roamDescription) at \(ChaosMeshExport.rate(rate))), not Roam's \(roamLimit) bytes (\(roam.roamDescription)), "
                + "since Chaos Mesh cannot set netem's limit (--chaos-mesh-rate tbf gives Roam's queue where Chaos Mesh applies netem first; "
                + "--format kubernetes plays it exactly)"
        }
        if let (slowest, index) = netemQueues[side] {
            guard rate.bitsPerSecond < slowest else { return }
            list[index] = text()
            netemQueues[side] = (rate.bitsPerSecond, index)
            return
        }
        guard list.count < Self.maximum else {
            omitted += 1
            return
        }
        netemQueues[side] = (rate.bitsPerSecond, list.count)
        list.append(text())
    }

    /// The note that `link` holds more packets in flight than netem's default limit: one per
    /// link, with the most it holds anywhere in the timeline.
    mutating func addPacketsInFlight(_ count: UInt32, link: String) {
        let text = { (count: UInt32) in
            "\(link) holds more than netem's default 1000 packets in flight (up to \(count) at its delay and rate); Chaos Mesh cannot raise netem's limit, so it drops the excess"
        }
        if let (largest, index) = packetsInFlight[link] {
            guard count > largest else { return }
            list[index] = text(count)
            packetsInFlight[link] = (count, index)
            return
        }
        guard list.count < Self.maximum else {
            omitted += 1
            return
        }
        packetsInFlight[link] = (count, list.count)
        list.append(text(count))
    }
}

/// One kind of chaos (netem or bandwidth) on one side of a link (its `up` or `down` sender)
/// over the scenario.
struct Track {
    enum Kind: String {
        case netem, rate
    }

    /// What one track's object does over one span: the netem fields, or the tbf's rate and queue.
    enum State: Equatable {
        case none
        case netem([(String, JSONValue)])
        case bandwidth(rate: Rate, limit: UInt32, buffer: UInt32)

        static func == (lhs: State, rhs: State) -> Bool {
            switch (lhs, rhs) {
            case (.none, .none): true
            case let (.netem(a), .netem(b)): JSONValue.object(a) == JSONValue.object(b)
            case let (.bandwidth(r1, l1, b1), .bandwidth(r2, l2, b2)): r1 == r2 && l1 == l2 && b1 == b2
            default: false
            }
        }
    }

    struct Span: Equatable {
        var start: Duration
        var end: Duration
        var state: State
    }

    /// The link's position in the scenario; it makes every track's name unique.
    var index: Int
    var link: String
    var direction: TrafficDirection
    var kind: Kind
    var spans: [Span]

    /// `l0-wifi-up-netem`: unique (the index), a DNS label, and far from 63 characters
    /// (link names have at most 15).
    var name: String { "l\(index)-\(ChaosMeshExport.dnsName(link))-\(direction.rawValue)-\(kind.rawValue)" }

    /// The NetworkChaos spec for `state`, nil when it does nothing.
    func spec(_ state: State, scenario: Scenario, options: ChaosMeshExport.Options) -> JSONValue? {
        guard let link = scenario.links.first(where: { $0.name == self.link }) else { return nil }
        var spec: [(String, JSONValue)]
        switch state {
        case .none:
            return nil
        case .netem(let fields):
            spec = [("action", "netem")] + fields
        case let .bandwidth(rate, limit, buffer):
            spec = [("action", "bandwidth"),
                    ("bandwidth", .object([("rate", .string(ChaosMeshExport.rate(rate))), ("limit", .int(Int64(limit))), ("buffer", .int(Int64(buffer)))]))]
        }
        let sender = direction == .up ? link.endpoints.0 : link.endpoints.1
        spec.append(("mode", "all"))
        spec.append(("selector", ChaosMeshExport.selector(sender, options)))
        spec.append(("direction", "to"))
        spec.append(("device", .string(options.device(of: link.name))))
        return .object(spec)
    }

    /// The netem fields for one direction's conditions, nil when there are none. Carrier loss
    /// and blackholes are 100% loss.
    static func netem(_ carrier: Bool, _ conditions: LinkConditions, link: String, notes: inout Notes) -> [(String, JSONValue)]? {
        if !carrier || conditions.isBlackholed {
            if !carrier {
                notes.add("carrier loss (down, flap) on \(link) is 100% loss on its device on both sides: pods see their traffic over it stop, "
                    + "not the interface go down, so a path monitor in the pod keeps listing it (as with a blackhole)")
            }
            return [("loss", .object([("loss", "100")]))]
        }
        let impairment = conditions.impairment
        var fields: [(String, JSONValue)] = []
        let delay = impairment.delay ?? .zero
        let jitter = impairment.jitter ?? .zero
        if delay > .zero || jitter > .zero {
            // Chaos Mesh writes netem's delay clause, jitter included, only for a latency above
            // zero: jitter alone gets the smallest latency it can carry.
            let latency = delay > .zero ? delay : .microseconds(1)
            if delay == .zero { notes.add("jitter without delay (\(link)) is exported with a latency of 1us, since Chaos Mesh drops jitter without latency") }
            var members: [(String, JSONValue)] = [("latency", .string(ChaosMeshExport.goDuration(latency)))]
            if jitter > .zero { members.append(("jitter", .string(ChaosMeshExport.goDuration(jitter)))) }
            if let correlation = impairment.delayCorrelation, correlation > 0 { members.append(("correlation", .string(percent(correlation, link, &notes)))) }
            if let reorder = impairment.reorder, reorder > 0 {
                members.append(("reorder", .object([("reorder", .string(percent(reorder, link, &notes))), ("gap", .int(1))])))
            }
            fields.append(("delay", .object(members)))
            if impairment.distribution != nil { notes.add("delay distributions (\(link)) have no Chaos Mesh field; dropped") }
        }
        switch impairment.loss {
        case .random(let rate, let correlation)? where rate > 0:
            var members: [(String, JSONValue)] = [("loss", .string(percent(rate, link, &notes)))]
            if correlation > 0 { members.append(("correlation", .string(percent(correlation, link, &notes)))) }
            fields.append(("loss", .object(members)))
        case .gilbertElliott? :
            let mean = impairment.loss!.meanLoss
            if mean > 0 { fields.append(("loss", .object([("loss", .string(percent(mean, link, &notes)))]))) }
            notes.add("Gilbert-Elliott loss (\(link)) has no Chaos Mesh form; exported as random loss at its long-run rate")
        default: break
        }
        if let duplicate = impairment.duplicate, duplicate > 0 {
            fields.append(("duplicate", .object([("duplicate", .string(percent(duplicate, link, &notes)))])))
        }
        if let corrupt = impairment.corrupt, corrupt > 0 {
            fields.append(("corrupt", .object([("corrupt", .string(percent(corrupt, link, &notes)))])))
        }
        if (impairment.limit != nil || impairment.limitBytes != nil) && impairment.rate == nil && impairment.trace == nil {
            notes.add("a queue limit without a rate (\(link)) would be netem's own limit, which Chaos Mesh cannot set; dropped")
        }
        // netem holds every packet on its delay line; Roam sizes that queue for the flight,
        // Chaos Mesh leaves netem's default of 1000 packets.
        let delayLine = conditions.queuePlan.delayLinePackets
        if delayLine > 1000 {
            notes.addPacketsInFlight(delayLine, link: link)
        }
        return fields.isEmpty ? nil : fields
    }

    /// What a rate that has no exact Chaos Mesh form becomes, noted: a trace its mean rate, a
    /// managed queue drop-tail.
    static func traceAndQueueNotes(_ conditions: LinkConditions, link: String, notes: inout Notes) {
        if let trace = conditions.impairment.trace, conditions.impairment.rate == nil {
            let mean = ChaosMeshExport.rate(Rate(bitsPerSecond: trace.trace.meanRate))
            notes.add("trace-driven capacity (\(link): \(escapedForMessage(trace.path))) has no Chaos Mesh form; exported as its mean rate, \(mean)")
        }
        if let queue = conditions.impairment.queue, queue != .dropTail, conditions.impairment.rate != nil {
            notes.add("queue: \(queue.name) (\(link)) has no Chaos Mesh form: the rate's queue is a FIFO; exported as drop-tail")
        }
    }

    /// netem's own `rate` for `conditions` (``ChaosMeshExport/RateShaping/netem``), noting the
    /// queue it has instead of Roam's.
    static func rateFields(_ conditions: LinkConditions, link: String, direction: TrafficDirection, notes: inout Notes) -> [(String, JSONValue)] {
        traceAndQueueNotes(conditions, link: link, notes: &notes)
        guard let shaped = ChaosMeshExport.bandwidth(conditions) else { return [] }
        notes.addNetemQueue(rate: shaped.rate, roamLimit: shaped.limit, side: "\(link) \(direction.rawValue)")
        return [("rate", .object([("rate", .string(ChaosMeshExport.rate(shaped.rate)))]))]
    }

    static func percent(_ fraction: Double, _ link: String, _ notes: inout Notes) -> String {
        if fraction > 0 && fraction * 100 < ChaosMeshExport.smallestPercent {
            notes.add("a percentage below \(ChaosMeshExport.smallestPercent)% (\(link)) is exported as \(ChaosMeshExport.smallestPercent)%, the smallest Chaos Mesh's daemon writes")
        }
        return ChaosMeshExport.percent(fraction)
    }

    /// Each direction's carrier and conditions at each point where they change, with ramp
    /// steps closer than `resolution` merged into the earlier one.
    static func points(_ link: LinkSpec, _ direction: TrafficDirection, _ schedule: TimelineSchedule,
                       resolution: Duration) -> [(at: Duration, carrier: Bool, conditions: LinkConditions)] {
        var carrier = true
        var conditions = schedule.initial.first { $0.link == link.name && $0.direction == direction }?.conditions ?? LinkConditions()
        var points: [(at: Duration, carrier: Bool, conditions: LinkConditions, structural: Bool)] = [(.zero, carrier, conditions, true)]
        for change in schedule.changes where change.link == link.name {
            var structural = true
            switch change.change {
            case .carrier(let up), .membership(let up):
                carrier = up
            case .network:
                continue
            case .conditions(let changed, let next):
                guard changed == direction else { continue }
                // Ramp steps may merge; the ramp's last step (its final values) may not.
                structural = next.isBlackholed != conditions.isBlackholed || change.action != "ramp" || change.step == change.stepCount
                conditions = next
            }
            if let last = points.last, last.at == change.at {
                points[points.count - 1].carrier = carrier
                points[points.count - 1].conditions = conditions
                points[points.count - 1].structural = last.structural || structural
            } else if !structural, let last = points.last, !last.structural, change.at - last.at < resolution {
                // A ramp step within the resolution of the span's start: the span keeps the
                // values it started with, as Roam holds each step's until the next.
                continue
            } else {
                points.append((change.at, carrier, conditions, structural))
            }
        }
        return points.map { ($0.at, $0.carrier, $0.conditions) }
    }

    static func build(_ scenario: Scenario, options: ChaosMeshExport.Options, notes: inout Notes) -> [Track] {
        let schedule = TimelineSchedule(scenario: scenario)
        var tracks: [Track] = []
        for (index, link) in scenario.links.enumerated() {
            for direction in TrafficDirection.allCases {
                let points = points(link, direction, schedule, resolution: options.resolution)
                for kind in options.rateShaping == .tbf ? [Kind.netem, .rate] : [Kind.netem] {
                    var spans: [Span] = []
                    for (position, point) in points.enumerated() {
                        let end = position + 1 < points.count ? points[position + 1].at : scenario.duration
                        guard end > point.at else { continue }
                        let state: State
                        switch kind {
                        case .netem:
                            var fields = netem(point.carrier, point.conditions, link: link.name, notes: &notes) ?? []
                            if options.rateShaping == .netem, point.carrier, !point.conditions.isBlackholed {
                                fields += rateFields(point.conditions, link: link.name, direction: direction, notes: &notes)
                            }
                            state = fields.isEmpty ? .none : .netem(fields)
                        case .rate:
                            traceAndQueueNotes(point.conditions, link: link.name, notes: &notes)
                            state = ChaosMeshExport.bandwidth(point.conditions).map { State.bandwidth(rate: $0.rate, limit: $0.limit, buffer: $0.buffer) } ?? .none
                        }
                        if let last = spans.last, last.state == state {
                            spans[spans.count - 1].end = end
                        } else {
                            spans.append(Span(start: point.at, end: end, state: state))
                        }
                    }
                    // A track that never does anything is left out.
                    if spans.contains(where: { $0.state != .none }) {
                        tracks.append(Track(index: index, link: link.name, direction: direction, kind: kind, spans: spans))
                    }
                }
            }
        }
        for var order in applyOrder(tracks) {
            guard let link = scenario.links.first(where: { $0.name == order.link }) else { continue }
            order.node = order.direction == .up ? link.endpoints.0 : link.endpoints.1
            order.device = options.device(of: link.name)
            notes.add(order.note(options: options, scenario: scenario))
        }
        return tracks
    }
}

/// Where Chaos Mesh chains a side's tbf above its netem. It keeps one traffic-control entry per
/// object on a pod (`PodNetworkChaos.spec.tcs`), appended as each object is applied, and its
/// daemon makes entry 0 the root qdisc and each next entry the child of the one before
/// (`setGlobalTcs`); an object cannot carry both kinds (`ApplyTc` picks one by `action`). So
/// when a netem object is applied after the side's tbf object (a netem step that starts while a
/// tbf step goes on), tbf is the root and netem is grafted in place of tbf's byte FIFO
/// (`tbf_graft`): the queue is netem's 1000 packets, not the one Roam sizes. Objects applied
/// at the same moment race.
struct ApplyOrder {
    var link: String
    var direction: TrafficDirection
    var device: String
    var node: String
    /// Spans where netem is under tbf (`raced`: applied at the same moment, either order).
    var spans: [(start: Duration, end: Duration, rate: Rate, limit: UInt32, raced: Bool)]

    func note(options: ChaosMeshExport.Options, scenario: Scenario) -> String {
        let certain = spans.filter { !$0.raced }.reduce(Duration.zero) { $0 + ($1.end - $1.start) }
        let raced = spans.filter(\.raced).reduce(Duration.zero) { $0 + ($1.end - $1.start) }
        let worst = spans.max { Double($0.rate.bitsPerSecond) > Double($1.rate.bitsPerSecond) }!
        let netemQueue = Duration.seconds(1000.0 * 1514 * 8 / worst.rate.bitsPerSecond)
        let roamQueue = Duration.seconds(Double(worst.limit) * 8 / worst.rate.bitsPerSecond)
        let shown = spans.prefix(3).map { "\($0.start.roamDescription)-\($0.end.roamDescription)\($0.raced ? " (a race)" : "")" }.joined(separator: ", ")
        var how: [String] = []
        if certain > .zero { how.append("for \(certain.roamDescription) its netem object is applied after its bandwidth object") }
        if raced > .zero { how.append("for \(raced.roamDescription) the two are applied at the same moment, in either order") }
        return "\(link) \(direction.rawValue) (device \(device) of \(node)'s pods): \(how.joined(separator: ", and ")) (\(shown)"
            + "\(spans.count > 3 ? " and \(spans.count - 3) more" : "")); Chaos Mesh chains objects in the order it applies them, so there "
            + "tbf can be the root with netem in place of its queue, which is then netem's 1000 packets (\(netemQueue.roamDescription) at "
            + "\(ChaosMeshExport.rate(worst.rate))) instead of Roam's \(worst.limit) bytes (\(roamQueue.roamDescription)); Kubernetes mode "
            + "(--format kubernetes) plays this exactly"
    }
}

/// Every side whose netem is applied after its tbf at some point (``ApplyOrder``).
func applyOrder(_ tracks: [Track]) -> [ApplyOrder] {
    var result: [ApplyOrder] = []
    for netem in tracks where netem.kind == .netem {
        guard let rate = tracks.first(where: { $0.kind == .rate && $0.link == netem.link && $0.direction == netem.direction }) else { continue }
        var spans: [(start: Duration, end: Duration, rate: Rate, limit: UInt32, raced: Bool)] = []
        for n in netem.spans where n.state != .none {
            for b in rate.spans {
                guard case let .bandwidth(bits, limit, _) = b.state, n.start >= b.start else { continue }
                let start = max(n.start, b.start), end = min(n.end, b.end)
                guard end > start else { continue }
                spans.append((start, end, bits, limit, n.start == b.start))
            }
        }
        if !spans.isEmpty {
            result.append(ApplyOrder(link: netem.link, direction: netem.direction, device: "", node: "", spans: spans.sorted { $0.start < $1.start }))
        }
    }
    return result
}
