import RoamCore
import ScenarioModel

/// What the HTML report draws, taken from a recorded run: series on the run's time axis.
struct ReportModel {
    struct Interval {
        var start: Double
        var end: Double
        var label: String
    }

    /// One direction's conditions over time: each value holds from its time to the next.
    struct Series {
        var points: [(t: Double, value: Double?)] = []
        var maximum: Double { points.compactMap(\.value).max() ?? 0 }
    }

    struct Link {
        var name: String
        var delay: [String: Series] = [:]
        var loss: [String: Series] = [:]
        var rate: [String: Series] = [:]
        /// What the link carried each way (Mbit/s), each value over the interval from its time.
        var carried: [String: Series] = [:]
        var down: [Interval] = []
        var blackholed: [String: [Interval]] = [:]
    }

    struct Workload {
        var name: String
        var kind: String
        var mode: String
        /// (time, Mbit/s over the interval before it).
        var throughput: [(t: Double, mbit: Double)] = []
        var buffered: [(t: Double, seconds: Double)] = []
        var stalls: [Interval] = []
        var connects: [(t: Double, label: String)] = []
        var disconnects: [(t: Double, label: String)] = []
        var failedRequests: [(t: Double, label: String)] = []
        var subflows: [(t: Double, label: String)] = []
        var commands: [(t: Double, label: String)] = []
    }

    struct PathSpan {
        var start: Double
        var end: Double
        var satisfied: Bool
        var interface: String?
        var type: String?
        var expensive: Bool
        var constrained: Bool
        /// A carrier's satellite network (older reports: false).
        var ultraConstrained: Bool = false
        /// The primary interface's link quality, where the report says (older reports: nil).
        var quality: String?
        var summary: String
    }

    struct Node {
        var name: String
        var spans: [PathSpan] = []
    }

    var run: RecordedRun
    var duration: Double
    var links: [Link] = []
    var workloads: [Workload] = []
    var nodes: [Node] = []
    var marks: [(t: Double, text: String)] = []
    var mptcpChanges: [(t: Double, label: String)] = []

    init(_ run: RecordedRun) {
        var builder = Builder(run: run)
        for record in run.events { builder.add(record) }
        self = builder.finish()
    }

    /// A model of `summary`'s run with no events yet: ``Builder`` adds them.
    fileprivate init(empty run: RecordedRun) {
        self.run = run
        let summary = run.summary
        // A summary is outside input (roam report reads any directory): keep the axis finite and
        // within what a scenario can last, whatever numbers it holds.
        let recorded = summary.endedAt > .zero ? summary.endedAt.seconds : summary.duration > .zero ? summary.duration.seconds : 1
        let longest = Double(ScenarioLimits.maximumDuration.components.seconds)
        duration = recorded.isFinite ? min(max(0.001, recorded), longest) : longest
    }

    /// Builds the model from a run's events one at a time, as they are read: nothing but what is
    /// drawn is kept of each (a run's timeline need not be held whole).
    struct Builder {
        private var model: ReportModel
        private var links: [String: Link] = [:], linkOrder: [String] = []
        private var workloads: [String: Workload] = [:], workloadOrder: [String] = []
        private var nodes: [String: [PathSpan]] = [:], nodeOrder: [String] = []
        private var openDown: [String: Double] = [:]
        private var openDNS: [String: (start: Double, label: String)] = [:]
        /// Access links a captive portal holds, since when.
        private var openPortal: [String: Double] = [:]
        private var openBlackhole: [String: Double] = [:]
        private var duration: Double { model.duration }

        /// A builder for `run` (its summary and directory; its events are not read).
        init(run: RecordedRun) {
            model = ReportModel(empty: run)
            for workload in run.summary.workloads where workloads[workload.name] == nil {
                workloads[workload.name] = Workload(name: workload.name, kind: workload.kind, mode: workload.mode)
                workloadOrder.append(workload.name)
            }
        }

        private mutating func addTo(_ name: String, _ body: (inout Workload) -> Void) {
            if workloads[name] == nil {
                workloads[name] = Workload(name: name, kind: "", mode: "")
                workloadOrder.append(name)
            }
            body(&workloads[name]!)
        }

        private static func span(_ t: Double, _ path: JSONValue, _ summary: String) -> PathSpan {
            let primary = path["primaryInterface"]?.stringValue
            let type = path["interfaces"]?.arrayValue?.first { $0["name"]?.stringValue == primary }?["type"]?.stringValue
            return PathSpan(start: t, end: t, satisfied: path["status"]?.stringValue == "satisfied",
                            interface: primary, type: type, expensive: path["isExpensive"]?.boolValue ?? false,
                            constrained: path["isConstrained"]?.boolValue ?? false,
                            ultraConstrained: path["isUltraConstrained"]?.boolValue ?? false,
                            quality: path["linkQuality"]?.stringValue, summary: summary)
        }

        mutating func add(_ record: RecordedEvent) {
            let seconds = record.time.seconds
            let t = min(max(seconds, 0), duration)
            switch record.event {
            case .link(let change):
                let name = change.link
                if links[name] == nil {
                    links[name] = Link(name: name)
                    linkOrder.append(name)
                }
                if change.error != nil { return }
                switch change.kind {
                case .carrier(let up):
                    if !up, openDown[name] == nil { openDown[name] = t }
                    if up, let start = openDown.removeValue(forKey: name) {
                        links[name]!.down.append(Interval(start: start, end: t, label: "carrier down"))
                    }
                case .network(let detail):
                    // A captive portal holds a phone from the start or a logout until a login: an
                    // outage of the phone's access link.
                    if detail.hasPrefix("held by") || detail.hasPrefix("logout") {
                        if openPortal[name] == nil { openPortal[name] = t }
                        break
                    }
                    if detail.hasPrefix("login") {
                        if let start = openPortal.removeValue(forKey: name) {
                            links[name]!.down.append(Interval(start: start, end: t, label: "captive portal"))
                        }
                        break
                    }
                    // A resolver's fault shows on its network's uplink as an outage of its own,
                    // until it recovers or another fault takes its place.
                    guard detail.hasPrefix("dns ") else { break }
                    if let (start, label) = openDNS.removeValue(forKey: name) {
                        links[name]!.down.append(Interval(start: start, end: t, label: label))
                    }
                    if detail != "dns ok" { openDNS[name] = (t, "resolver " + detail.dropFirst(4)) }
                case let .conditions(direction, conditions):
                    links[name]!.delay[direction, default: Series()].points.append((t, conditions["delayMs"]?.doubleValue ?? 0))
                    let loss: Double? = conditions["loss"]?.doubleValue ?? conditions["loss"].flatMap { model -> Double? in
                        guard let p = model["p"]?.doubleValue, let r = model["r"]?.doubleValue else { return nil }
                        let bad = model["lossInBad"]?.doubleValue ?? 1, good = model["lossInGood"]?.doubleValue ?? 0
                        return p + r > 0 ? (r * good + p * bad) / (p + r) : good
                    }
                    links[name]!.loss[direction, default: Series()].points.append((t, (loss ?? 0) * 100))
                    links[name]!.rate[direction, default: Series()].points.append((t, conditions["rateBps"]?.doubleValue.map { $0 / 1e6 }))
                    let key = name + "/" + direction
                    let blackholed = conditions["blackhole"]?.boolValue ?? false
                    if blackholed, openBlackhole[key] == nil { openBlackhole[key] = t }
                    if !blackholed, let start = openBlackhole.removeValue(forKey: key) {
                        links[name]!.blackholed[direction, default: []].append(Interval(start: start, end: t, label: "blackhole \(direction)"))
                    }
                }
            case .carried(let carried):
                // A link the timeline never named (none of its events came first) is not drawn.
                guard links[carried.link] != nil else { return }
                let start = min(max(seconds - carried.interval.seconds, 0), duration)
                for (direction, bits) in [("up", carried.up), ("down", carried.down)] {
                    links[carried.link]!.carried[direction, default: Series()].points.append((start, bits.map { Double($0) / 1e6 }))
                }
            case let .path(node, summary, path):
                // Paths published while the network is taken down after the end are not the run's.
                if seconds > duration { return }
                if nodes[node] == nil { nodeOrder.append(node) }
                // Each span runs to the next path's time (the last one, to the end).
                if let last = nodes[node]?.indices.last { nodes[node]![last].end = max(t, nodes[node]![last].start) }
                nodes[node, default: []].append(Self.span(t, path, summary))
            case .sample(let sample):
                addTo(sample.workload) { workload in
                    workload.throughput.append((t, Double(sample.throughputBitsPerSecond) / 1e6))
                    if let buffered = sample.buffered { workload.buffered.append((t, buffered.seconds)) }
                }
            case let .stall(name, start, length):
                addTo(name) { workload in
                    let begin = start.seconds, seconds = length.seconds
                    workload.stalls.append(Interval(start: begin, end: begin + seconds, label: String(format3(seconds)) + " s stall"))
                }
            case .connect(let connect):
                let lookup = connect.lookup.map { "; \($0.name) looked up in \(format3($0.duration.seconds * 1000)) ms at \($0.server): \($0.addresses.joined(separator: ", "))" } ?? ""
                addTo(connect.workload) { $0.connects.append((t, "connected via \(connect.interface ?? "?") (\(connect.local)) to \(connect.remote), \(connect.transport ?? "tcp")\(lookup)")) }
            case let .disconnect(name, reason):
                addTo(name) { $0.disconnects.append((t, "disconnected: \(reason)")) }
            case let .connectFailed(name, reason):
                addTo(name) { $0.failedRequests.append((t, "connect failed: \(reason)")) }
            case .request(let request):
                if case .failed(let reason) = request.outcome {
                    addTo(request.workload) { $0.failedRequests.append((t, "request \(request.number) failed: \(reason)")) }
                }
            case .subflow(let subflow):
                addTo(subflow.workload) { $0.subflows.append((t, "subflow \(subflow.event ?? "") on \(subflow.interface ?? "?"): \(subflow.subflow ?? subflow.error ?? "")")) }
            case .pathStalled(let stalled):
                addTo(stalled.workload) { $0.subflows.append((t, "path-stalled \(stalled.interface)")) }
            case let .pathRestored(name, interface, _):
                addTo(name) { $0.subflows.append((t, "path-restored \(interface)")) }
            case .command(let command):
                addTo(command.workload) { workload in
                    var label: String
                    switch command.phase {
                    case .started: label = "command started"
                    case .failed: label = "command failed"
                    case let .exited(code, signal, _):
                        label = "command exited"
                        if let code { label += ", exit \(code)" }
                        if let signal { label += ", signal \(signal)" }
                    }
                    workload.commands.append((t, label))
                }
            case let .mark(text, node):
                model.marks.append((t, (node.map { $0 + ": " } ?? "") + text))
            case let .mptcp(node, changes, error):
                model.mptcpChanges.append((t, "\(node): \(error ?? changes.joined(separator: "; "))"))
            case .run, .quality, .workload, .subflowSwitch, .complete, .unknown:
                break
            }
        }

        /// The model, once every event is in.
        consuming func finish() -> ReportModel {
            let summary = model.run.summary
            let duration = model.duration
            for (name, start) in openDown { links[name]?.down.append(Interval(start: start, end: duration, label: "carrier down")) }
            for (name, open) in openDNS { links[name]?.down.append(Interval(start: open.start, end: duration, label: open.label)) }
            for (name, start) in openPortal { links[name]?.down.append(Interval(start: start, end: duration, label: "captive portal")) }
            for (key, start) in openBlackhole {
                let parts = key.split(separator: "/").map(String.init)
                links[parts[0]]?.blackholed[parts[1], default: []].append(Interval(start: start, end: duration, label: "blackhole \(parts[1])"))
            }
            // A stall still going at the end is only in the summary.
            for summaryWorkload in summary.workloads where workloads[summaryWorkload.name] != nil {
                for stall in summaryWorkload.stream?.stalls ?? [] where stall.ongoing {
                    workloads[summaryWorkload.name]!.stalls.append(Interval(start: stall.start.seconds, end: duration, label: "stall until the end"))
                }
            }
            model.links = linkOrder.compactMap { links[$0] }
            model.workloads = workloadOrder.compactMap { workloads[$0] }
            model.nodes = nodeOrder.map { name in
                var spans = nodes[name]!
                if let last = spans.indices.last { spans[last].end = max(duration, spans[last].start) }
                return Node(name: name, spans: spans)
            }
            model.downsample()
            return model
        }
    }
}

/// A number with at most three decimals; any Double (huge, infinite) prints without trapping.
func format3(_ value: Double) -> String {
    let rounded = (value * 1000).rounded() / 1000
    return rounded == rounded.rounded() && rounded.magnitude < 9e15 ? String(Int64(rounded)) : String(rounded)
}
