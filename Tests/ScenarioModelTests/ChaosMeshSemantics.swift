import PathMonitor
@testable import ScenarioModel

/// What Chaos Mesh does with exported NetworkChaos objects, read from its source (commit
/// 608b61e7, the one the vendored CRDs come from) and written down here as a model, so that
/// tests can check that an export plays the scenario, not only that it parses:
///
/// - An object acts on the pods of `selector` with `direction: to` (and on `target`'s pods with
///   `from`, `both`), on the egress of `device` (`eth0` when unset; `targetDevice` on the
///   target side). `controllers/chaosimpl/networkchaos/trafficcontrol`, `.../partition`.
/// - With a `target`, the tc or iptables rule matches only packets to the target pods'
///   primary IP (`pod.Status.PodIP`, `controllers/podnetworkchaos/ipset`). Traffic over a second
///   device is addressed to the peer's address on that network, so it matches nothing there.
/// - netem gets its delay clause, jitter included, only for a latency above zero
///   (`convertNetemToArgs`); percentages are written with six decimals.
/// - `bandwidth` is a tbf with the object's rate, `limit` and `buffer`; netem's own `rate` keeps
///   netem's default queue of 1000 packets.
/// - Objects without a filter on one device are chained (`setGlobalTcs`); `partition` is an
///   iptables DROP on the device (`-o` for `to`, `-i` for `from`).
/// - In a Workflow, a Parallel runs its children at once, a Serial one after another, each
///   step for its `deadline`.
enum ChaosMeshSemantics {
    /// What a packet leaving one device of one node's pods meets.
    struct Egress: Equatable, CustomStringConvertible {
        var latency: Duration = .zero
        var jitter: Duration = .zero
        /// Percentages, as netem gets them.
        var loss = 0.0, duplicate = 0.0, corrupt = 0.0, reorder = 0.0
        /// The tbf: bits per second, queue and bucket in bytes.
        var rate: UInt64?
        var limit: UInt32?
        var buffer: UInt32?
        /// netem's own rate, behind its 1000-packet queue.
        var netemRate: String?
        /// iptables drops everything.
        var dropped = false
        /// How many netem and tbf objects act at once (more than one of a kind stack).
        var netemObjects = 0, tbfObjects = 0
        /// The order the daemon chains them in: applied later is deeper (`setGlobalTcs`). A tbf
        /// applied before a netem is its parent, and the netem takes the place of tbf's queue
        /// (`tbf_graft`); applied at the same moment, either order.
        enum Order: Equatable { case netemAboveTbf, tbfAboveNetem, either }
        var order: Order?

        var description: String {
            var parts: [String] = []
            if dropped { parts.append("DROP") }
            if latency > .zero { parts.append("delay \(latency) ±\(jitter)") }
            if loss > 0 { parts.append("loss \(loss)%") }
            if duplicate > 0 { parts.append("dup \(duplicate)%") }
            if corrupt > 0 { parts.append("corrupt \(corrupt)%") }
            if reorder > 0 { parts.append("reorder \(reorder)%") }
            if let rate { parts.append("tbf \(rate)bit/s limit \(limit ?? 0) buffer \(buffer ?? 0)") }
            if let netemRate { parts.append("netem rate \(netemRate)") }
            return parts.isEmpty ? "clear" : parts.joined(separator: ", ")
        }

        /// The conditions, without the counts of objects.
        var conditions: Egress {
            var copy = self
            copy.netemObjects = 0
            copy.tbfObjects = 0
            copy.order = nil
            return copy
        }
    }

    /// One object acting over a span of time.
    struct Activation {
        var start: Duration
        var end: Duration
        var spec: [String: Any]
    }

    /// Where `(node, device)` is: a side of a link.
    struct Side: Hashable {
        var node: String
        var device: String
    }

    /// The objects of an export, with when each acts.
    static func activations(_ documents: [[String: Any]], duration: Duration) -> [Activation] {
        var result: [Activation] = []
        for document in documents {
            switch document["kind"] as? String {
            case "NetworkChaos":
                result.append(Activation(start: .zero, end: duration, spec: document["spec"] as? [String: Any] ?? [:]))
            case "Workflow":
                let spec = document["spec"] as? [String: Any] ?? [:]
                let templates = spec["templates"] as? [[String: Any]] ?? []
                let byName = Dictionary(templates.map { ($0["name"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
                func deadline(_ template: [String: Any]) -> Duration {
                    (template["deadline"] as? String).flatMap { try? Units.duration($0).get() } ?? duration
                }
                func play(_ name: String, at start: Duration) -> Duration {
                    guard let template = byName[name] else { return start }
                    switch template["templateType"] as? String {
                    case "Serial":
                        var time = start
                        for child in template["children"] as? [String] ?? [] { time = play(child, at: time) }
                        return time
                    case "Parallel":
                        let ends = (template["children"] as? [String] ?? []).map { play($0, at: start) }
                        return min(ends.max() ?? start, start + deadline(template))
                    case "NetworkChaos":
                        let end = start + deadline(template)
                        result.append(Activation(start: start, end: end, spec: template["networkChaos"] as? [String: Any] ?? [:]))
                        return end
                    default:
                        return start + deadline(template)
                    }
                }
                _ = play(spec["entry"] as? String ?? "", at: .zero)
            default:
                break
            }
        }
        return result
    }

    /// The node whose pods `selector` picks, by the labels each node's pods carry.
    static func node(of selector: Any?, labels: [String: [String: String]]) -> String? {
        guard let selector = selector as? [String: Any], let wanted = selector["labelSelectors"] as? [String: String] else { return nil }
        return labels.first { $0.value == wanted }?.key
    }

    /// What every side meets at `time`.
    static func egress(at time: Duration, _ activations: [Activation], labels: [String: [String: String]]) -> [Side: Egress] {
        var sides: [Side: Egress] = [:]
        var applied: [Side: (netem: Duration?, tbf: Duration?)] = [:]
        for activation in activations where activation.start <= time && time < activation.end {
            let spec = activation.spec
            let source = node(of: spec["selector"], labels: labels)
            let targetSpec = spec["target"] as? [String: Any]
            let target = targetSpec.flatMap { node(of: $0["selector"], labels: labels) }
            let direction = spec["direction"] as? String ?? "to"
            var acting: [Side] = []
            if direction == "to" || direction == "both", let source { acting.append(Side(node: source, device: spec["device"] as? String ?? "eth0")) }
            if direction == "from" || direction == "both", let target { acting.append(Side(node: target, device: spec["targetDevice"] as? String ?? "eth0")) }
            for side in acting {
                // A target filters by the peers' primary IP: traffic on another device never matches.
                if targetSpec != nil && side.device != "eth0" { continue }
                apply(spec, to: &sides[side, default: Egress()])
                if spec["action"] as? String == "bandwidth" { applied[side, default: (nil, nil)].tbf = activation.start }
                else if spec["action"] as? String != "partition" { applied[side, default: (nil, nil)].netem = activation.start }
            }
        }
        for (side, times) in applied {
            guard let netem = times.netem, let tbf = times.tbf else { continue }
            sides[side]?.order = netem < tbf ? .netemAboveTbf : netem > tbf ? .tbfAboveNetem : .either
        }
        return sides
    }

    /// When each node's pods are updated: an object that acts on them applied or removed,
    /// strictly inside the run. Chaos Mesh's daemon then sets every device's qdiscs of the pod
    /// again (`SetTcs` removes each device's root qdisc first, `tc_server.go`), so each is a
    /// rebuild of all of them, dropping what they queued.
    static func podUpdates(_ activations: [Activation], labels: [String: [String: String]], duration: Duration) -> [String: [Duration]] {
        var updates: [String: [Duration]] = [:]
        for activation in activations {
            guard let node = node(of: activation.spec["selector"], labels: labels) else { continue }
            if activation.start > .zero { updates[node, default: []].append(activation.start) }
            if activation.end < duration { updates[node, default: []].append(activation.end) }
        }
        return updates.mapValues { $0.sorted() }
    }

    static func apply(_ spec: [String: Any], to egress: inout Egress) {
        func percent(_ object: Any?, _ key: String) -> Double {
            guard let text = (object as? [String: Any])?[key] as? String, let value = Double(text) else { return 0 }
            return (value * 1_000_000).rounded() / 1_000_000
        }
        switch spec["action"] as? String {
        case "partition":
            egress.dropped = true
        case "bandwidth":
            egress.tbfObjects += 1
            let bandwidth = spec["bandwidth"] as? [String: Any] ?? [:]
            egress.rate = (bandwidth["rate"] as? String).flatMap(bits)
            egress.limit = (bandwidth["limit"] as? Int).map(UInt32.init)
            egress.buffer = (bandwidth["buffer"] as? Int).map(UInt32.init)
        default:
            egress.netemObjects += 1
            if let delay = spec["delay"] as? [String: Any], let latency = (delay["latency"] as? String).flatMap({ try? Units.duration($0).get() }),
               latency > .zero {
                egress.latency = latency
                egress.jitter = (delay["jitter"] as? String).flatMap { try? Units.duration($0).get() } ?? .zero
                egress.reorder = percent(delay["reorder"], "reorder")
            }
            egress.loss = percent(spec["loss"], "loss")
            egress.duplicate = percent(spec["duplicate"], "duplicate")
            egress.corrupt = percent(spec["corrupt"], "corrupt")
            egress.netemRate = (spec["rate"] as? [String: Any])?["rate"] as? String
        }
    }

    /// `1500kbit` in bits per second.
    static func bits(_ text: String) -> UInt64? {
        for (unit, scale) in [("gbit", UInt64(1_000_000_000)), ("mbit", 1_000_000), ("kbit", 1000), ("bit", 1)] where text.hasSuffix(unit) {
            return UInt64(text.dropLast(unit.count)).map { $0 * scale }
        }
        return nil
    }

    /// What Roam plays on one direction, as it would meet it on Chaos Mesh given the
    /// approximations the export documents: Gilbert-Elliott as its long-run loss, a trace as
    /// its mean rate, no delay distribution, jitter alone with a latency of 1us, carrier loss
    /// and blackholes as 100% loss, the rate behind the tbf queue Roam's netem backend uses.
    static func expected(_ carrier: Bool, _ conditions: LinkConditions, shaping: ChaosMeshExport.RateShaping = .tbf) -> Egress {
        var egress = Egress()
        func percent(_ fraction: Double) -> Double {
            let value = (fraction * 100 * 1_000_000).rounded() / 1_000_000
            return fraction > 0 ? max(value, ChaosMeshExport.smallestPercent) : 0
        }
        let impairment = conditions.impairment
        if !carrier || conditions.isBlackholed {
            egress.loss = 100
        } else {
            let delay = impairment.delay ?? .zero, jitter = impairment.jitter ?? .zero
            if delay > .zero || jitter > .zero {
                egress.latency = delay > .zero ? delay : .microseconds(1)
                egress.jitter = jitter
                egress.reorder = percent(impairment.reorder ?? 0)
            }
            egress.loss = percent(impairment.loss?.meanLoss ?? 0)
            egress.duplicate = percent(impairment.duplicate ?? 0)
            egress.corrupt = percent(impairment.corrupt ?? 0)
        }
        if let rate = impairment.rate ?? impairment.trace.map({ Rate(bitsPerSecond: $0.trace.meanRate) }) {
            var shaped = conditions
            shaped.impairment.rate = rate
            if let bucket = shaped.queuePlan.tokenBucket {
                switch shaping {
                case .tbf:
                    egress.rate = bits(ChaosMeshExport.rate(rate))
                    egress.limit = bucket.limit
                    egress.buffer = bucket.bucket
                case .netem:
                    // In the side's netem object, which carrier loss and blackholes replace.
                    if carrier && !conditions.isBlackholed { egress.netemRate = ChaosMeshExport.rate(rate) }
                }
            }
        }
        return egress
    }

    /// Roam's own timeline for one direction of `link`, change by change (no merging):
    /// `(time, carrier, conditions, fromRamp)`.
    static func roam(_ scenario: Scenario, link: String, direction: TrafficDirection,
                     shaping: ChaosMeshExport.RateShaping = .tbf) -> [(at: Duration, egress: Egress, ramp: Bool)] {
        let schedule = TimelineSchedule(scenario: scenario)
        var carrier = true
        var conditions = schedule.initial.first { $0.link == link && $0.direction == direction }?.conditions ?? LinkConditions()
        var points: [(at: Duration, egress: Egress, ramp: Bool)] = [(.zero, expected(carrier, conditions, shaping: shaping), false)]
        for change in schedule.changes where change.link == link {
            switch change.change {
            case .carrier(let up), .membership(let up): carrier = up
            case .network: continue
            case .conditions(let changed, let next):
                guard changed == direction else { continue }
                conditions = next
            }
            let point = (change.at, expected(carrier, conditions, shaping: shaping), change.action == "ramp" && change.step != change.stepCount)
            if points.last?.at == change.at { points[points.count - 1] = point } else { points.append(point) }
        }
        return points
    }
}
