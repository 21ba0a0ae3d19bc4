import RoamCore
import RoamSystem
import Yams

// Impairments: the keys shared by a link, a profile and a timeline step, and their checks.
extension ScenarioDecoder {
    /// Reads the impairment keys present in `fields` (marking them used).
    func impairment(from fields: inout Fields) -> Impairment {
        var result = Impairment()
        result.delay = take(&fields, "delay") { self.duration($0, "delay", maximum: ScenarioLimits.maximumDelay) }
        result.jitter = take(&fields, "jitter") { self.duration($0, "jitter", maximum: ScenarioLimits.maximumDelay) }
        result.delayCorrelation = take(&fields, "delayCorrelation") { self.fraction($0, "delayCorrelation") }
        result.distribution = take(&fields, "distribution") { self.choice($0, "distribution", DelayDistribution.self) }
        result.rate = take(&fields, "rate") { self.rate($0, "rate") }
        result.loss = take(&fields, "loss") { self.loss($0) }
        result.duplicate = take(&fields, "duplicate") { self.fraction($0, "duplicate") }
        result.reorder = take(&fields, "reorder") { self.fraction($0, "reorder") }
        result.corrupt = take(&fields, "corrupt") { self.fraction($0, "corrupt") }
        if let limit = take(&fields, "limit", { self.queueLimit($0) }) {
            switch limit {
            case .packets(let packets): result.limit = packets
            case .bytes(let bytes): result.limitBytes = bytes
            }
        }
        result.queue = take(&fields, "queue") { self.queueDiscipline($0) }
        result.trace = take(&fields, "trace") { self.trace($0) }
        if result.trace != nil, result.rate != nil, let node = fields.keyNode("trace") {
            error("rate and trace both set the capacity; keep one", at: node)
        }
        return result
    }

    enum QueueLimit { case packets(Int), bytes(Int) }

    /// `limit: 500` (packets) or `limit: 256kb` (bytes, 1 KiB to 1 GiB).
    func queueLimit(_ node: Node) -> QueueLimit? {
        guard let text = string(node, "limit") else { return nil }
        if text.first.map({ $0.isASCII && ($0.isNumber || $0 == "-" || $0 == "+") }) == true, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "-" || $0 == "+") }) {
            return integer(node, "limit (packets)", range: 1...1_000_000).map { .packets($0) }
        }
        // Neither a count nor a size (no digit first): say both forms.
        guard text.first.map({ $0.isASCII && ($0.isNumber || $0 == ".") }) == true else {
            error("limit must be packets (a whole number: 500) or bytes (a size: 256kb), not '\(escapedForMessage(text))'", at: node)
            return nil
        }
        return size(node, "limit (bytes)", range: ScenarioLimits.queueBytes).map { .bytes(Int($0)) }
    }

    /// `queue: drop-tail`, `codel`, `fq-codel`, or `{discipline: codel, target: 5ms, interval:
    /// 100ms}` (and `flows`, `quantum` for fq-codel).
    func queueDiscipline(_ node: Node) -> QueueDiscipline? {
        let names = ["drop-tail", "codel", "fq-codel"]
        func named(_ node: Node, _ what: String) -> String? {
            guard let text = string(node, what) else { return nil }
            guard names.contains(text) else {
                let guess = suggestion(for: text, among: names).map { " (did you mean '\($0)'?)" } ?? ""
                error("\(what) must be one of \(names.joined(separator: ", ")), not '\(escapedForMessage(text))'\(guess)", at: node)
                return nil
            }
            return text
        }
        var parameters = CoDelParameters()
        var flows = QueueDiscipline.defaultFlows, quantum = QueueDiscipline.defaultQuantum
        let discipline: String
        if case .scalar = node {
            guard let name = named(node, "queue") else { return nil }
            discipline = name
        } else {
            guard var fields = fields(node, "queue") else { return nil }
            let name = take(&fields, "discipline", required: true) { named($0, "queue discipline") }
            let target = take(&fields, "target") {
                self.duration($0, "target", minimum: CoDelParameters.targetRange.lowerBound, maximum: CoDelParameters.targetRange.upperBound)
            }
            let interval = take(&fields, "interval") {
                self.duration($0, "interval", minimum: CoDelParameters.intervalRange.lowerBound, maximum: CoDelParameters.intervalRange.upperBound)
            }
            let flowCount = take(&fields, "flows") { self.integer($0, "flows", range: QueueDiscipline.flowRange) }
            let quantumBytes = take(&fields, "quantum") { self.integer($0, "quantum (bytes)", range: QueueDiscipline.quantumRange) }
            finish(fields, known: ["discipline", "target", "interval", "flows", "quantum"])
            guard let name else { return nil }
            discipline = name
            if discipline == "drop-tail", let key = ["target", "interval", "flows", "quantum"].first(where: { fields.has($0) }) {
                error("queue: drop-tail has no \(key); it is CoDel's (codel, fq-codel)", at: fields.keyNode(key)!)
                return nil
            }
            if discipline == "codel", let key = ["flows", "quantum"].first(where: { fields.has($0) }) {
                error("queue: codel has one queue; \(key) is fq-codel's", at: fields.keyNode(key)!)
                return nil
            }
            if let target { parameters.target = target }
            if let interval { parameters.interval = interval }
            if parameters.interval < parameters.target {
                error("queue: interval (\(parameters.interval.roamDescription)) must be at least target (\(parameters.target.roamDescription))", at: node)
                return nil
            }
            if let flowCount { flows = flowCount }
            if let quantumBytes { quantum = quantumBytes }
        }
        switch discipline {
        case "codel": return .codel(parameters)
        case "fq-codel": return .fqCodel(parameters, flows: flows, quantum: quantum)
        default: return .dropTail
        }
    }

    /// `trace: traces/lte-steady.trace`: a mahimahi trace, relative to the scenario's directory.
    /// Each file is read once however many links name it.
    func trace(_ node: Node) -> LinkTrace? {
        guard let path = string(node, "trace"), !path.isEmpty else { return nil }
        let outcome: Result<DeliveryTrace, TraceReadError>
        if let cached = traces[path] {
            outcome = cached
        } else {
            outcome = TraceReadError.load(path, baseDirectory: baseDirectory, scenarioOwner: scenarioOwner)
            traces[path] = outcome
        }
        switch outcome {
        case .success(let trace):
            return LinkTrace(path: path, trace: trace)
        case .failure(let problem):
            self.error(problem.message, at: node)
            return nil
        }
    }

    func impairmentBlock(_ node: Node, _ context: String) -> Impairment? {
        guard var block = fields(node, context) else { return nil }
        let result = impairment(from: &block)
        finish(block, known: Self.impairmentKeys)
        return result
    }

    /// `loss: 1%`, or `loss: {model: random, rate: 1%, correlation: 25%}`, or
    /// `loss: {model: gilbert-elliott, p: 1%, r: 30%, lossInBad: 100%, lossInGood: 0%}`.
    func loss(_ node: Node) -> LossModel? {
        if case .scalar = node {
            return fraction(node, "loss").map { .random(rate: $0, correlation: 0) }
        }
        guard var model = fields(node, "loss") else { return nil }
        let kind = take(&model, "model") { self.string($0, "loss model") } ?? "random"
        switch kind {
        case "random":
            let rate = take(&model, "rate", required: true) { self.fraction($0, "loss rate") }
            let correlation = take(&model, "correlation") { self.fraction($0, "loss correlation") } ?? 0
            finish(model, known: ["model", "rate", "correlation"])
            return rate.map { .random(rate: $0, correlation: correlation) }
        case "gilbert-elliott":
            let p = take(&model, "p", required: true) { self.fraction($0, "p (good to bad)") }
            let r = take(&model, "r", required: true) { self.fraction($0, "r (bad to good)") }
            let bad = take(&model, "lossInBad") { self.fraction($0, "lossInBad") } ?? 1
            let good = take(&model, "lossInGood") { self.fraction($0, "lossInGood") } ?? 0
            finish(model, known: ["model", "p", "r", "lossInBad", "lossInGood"])
            guard let p, let r else { return nil }
            return .gilbertElliott(p: p, r: r, lossInBad: bad, lossInGood: good)
        default:
            let guess = suggestion(for: kind, among: ["random", "gilbert-elliott"]).map { " (did you mean '\($0)'?)" } ?? ""
            error("loss model must be random or gilbert-elliott, not '\(escapedForMessage(kind))'\(guess)", at: model.node)
            return nil
        }
    }

    func checkConsistency(_ impairment: Impairment, at node: Node, _ context: String) {
        if let queue = impairment.queue, queue != .dropTail, impairment.rate == nil, impairment.trace == nil {
            error("\(context): queue: \(queue.name) manages the queue behind a bottleneck, and there is none: give a rate", at: node)
        }
        if let queue = impairment.queue, queue != .dropTail, impairment.trace != nil {
            error("\(context): queue: \(queue.name) behind a trace's capacity is not emulated (Roam's CoDel runs behind a rate); "
                  + "use a rate, or drop-tail", at: node)
        }
        if impairment.reorder.map({ $0 > 0 }) == true && (impairment.delay ?? .zero) == .zero {
            diagnostics.warning("\(context): reorder has no effect without a delay (reordered packets skip the delay others get)",
                                line: node.line, column: node.column)
        }
        if let jitter = impairment.jitter, jitter > (impairment.delay ?? .zero) {
            diagnostics.warning("\(context): jitter larger than the delay reorders packets; add a delay at least as large",
                                line: node.line, column: node.column)
        }
    }
}

// Flow-scoped impairments: `match:` and a link's or network's `flows:`.
extension ScenarioDecoder {
    static let matchKeys = ["protocol", "port", "localPort", "server", "to", "dns"]

    /// `match: {protocol: udp, port: 53}`, `{port: [80, 443]}`, `{port: 8000-8100}`,
    /// `{server: web}`, `{to: 198.18.5.0/24}`, `{dns: true}`: the packets a flow-scoped
    /// impairment acts on. Each key takes one value or a list.
    func flowMatch(_ node: Node) -> FlowMatch? {
        guard var fields = fields(node, "match") else { return nil }
        let limit = ScenarioLimits.maximumMatchItems
        func items(_ key: String) -> [Node]? {
            guard let value = fields.take(key) else { return nil }
            let values: [Node]
            if case .sequence = value {
                guard let listed = list(value, key) else { return nil }
                values = listed
            } else {
                values = [value]
            }
            if values.isEmpty {
                error("\(key) in match lists nothing; name at least one, or remove it", at: value)
                return nil
            }
            if values.count > limit {
                error("\(key) in match lists \(values.count); a match takes at most \(limit)", at: value)
                return nil
            }
            return values
        }
        var valid = true
        let protocols = items("protocol")?.compactMap { self.choice($0, "protocol", FlowMatch.TransportProtocol.self) }
        func ports(_ key: String) -> [PortRange]? {
            items(key)?.compactMap { value -> PortRange? in
                guard let text = self.string(value, key) else { return nil }
                guard let range = PortRange(parsing: text) else {
                    self.error("\(key) must be a port (1 to 65535) or a range of them (8000-8100), not '\(escapedForMessage(text))'", at: value)
                    valid = false
                    return nil
                }
                return range
            }
        }
        let remotePorts = ports("port")
        let localPorts = ports("localPort")
        let known = knownNodes ?? Set(nodePlaces.keys)
        let servers = items("server")?.compactMap { value -> String? in
            guard let name = self.string(value, "server") else { return nil }
            guard known.contains(name) else {
                let guess = suggestion(for: name, among: known).map { " (did you mean '\($0)'?)" } ?? ""
                self.error("server in match names a node, and no node is named '\(escapedForMessage(name))'\(guess)", at: value)
                valid = false
                return nil
            }
            return name
        }
        let prefixes = items("to")?.compactMap { value -> AddressPrefix? in
            guard let text = self.string(value, "to") else { return nil }
            guard let prefix = AddressPrefix(parsing: text) else {
                self.error("to must be an address or a prefix (198.18.5.0/24, fd00::/8), not '\(escapedForMessage(text))'", at: value)
                valid = false
                return nil
            }
            return prefix
        }
        let dns = fields.take("dns").flatMap { self.bool($0, "dns") }
        finish(fields, known: Self.matchKeys)
        if dns == true, let key = ["protocol", "port", "server", "to"].first(where: { fields.has($0) }) {
            error("dns: true is TCP and UDP to port 53 of the network's resolver already; remove \(key)", at: fields.keyNode(key)!)
            return nil
        }
        if dns == false {
            error("dns: false matches nothing more than no dns key; remove it, or write dns: true", at: fields.keyNode("dns")!)
            return nil
        }
        if let protocols, protocols == [.icmp], let key = ["port", "localPort"].first(where: { fields.has($0) }) {
            error("ICMP has no ports: remove \(key), or match tcp or udp", at: fields.keyNode(key)!)
            return nil
        }
        let match = FlowMatch(protocols: protocols ?? [], ports: remotePorts ?? [], localPorts: localPorts ?? [], servers: servers ?? [],
                              prefixes: prefixes ?? [], dns: dns ?? false)
        if match.isEmpty {
            // A key that was there but wrong is reported already.
            if !Self.matchKeys.contains(where: fields.has) {
                error("match names no packets; give at least one of \(Self.matchKeys.joined(separator: ", "))", at: node)
            }
            return nil
        }
        return valid ? match : nil
    }

    /// `flows:` of a link or a network: a list of `{match: {...}, direction: up|down|both,
    /// blackhole: true, ...settings}`, each acting only on the packets it matches.
    func flowSettings(_ node: Node, _ context: String) -> [FlowSetting] {
        guard let items = list(node, "flows of \(context)") else { return [] }
        var settings: [FlowSetting] = []
        for item in items {
            guard var fields = fields(item, "a flow of \(context)") else { continue }
            let match = take(&fields, "match", required: true) { self.flowMatch($0) }
            let direction = take(&fields, "direction") { self.choice($0, "direction", LinkDirection.self) } ?? .both
            let blackhole = take(&fields, "blackhole") { value -> Bool? in
                guard let flag = self.bool(value, "blackhole") else { return nil }
                if !flag { self.error("a flow passes as its link does unless blackholed: remove blackhole: false", at: value) }
                return flag
            }
            let impairment = self.impairment(from: &fields)
            let misspelt = !fields.untaken.isEmpty
            finish(fields, known: ["match", "direction", "blackhole"] + Self.impairmentKeys)
            if impairment.isEmpty, blackhole == nil, match != nil, !misspelt {
                error("this flow changes nothing: give it settings (\(Self.impairmentKeys.joined(separator: ", "))) or blackhole: true", at: item)
                continue
            }
            checkConsistency(impairment, at: item, "a flow of \(context)")
            guard let match else { continue }
            if let earlier = settings.first(where: { $0.match == match && ($0.direction == .both || direction == .both || $0.direction == direction) }) {
                error("\(context) has a flow with this match already (\(earlier.match)); put its settings together", at: item)
                continue
            }
            settings.append(FlowSetting(match: match, direction: direction, impairment: impairment, isBlackholed: blackhole ?? false))
        }
        for direction in TrafficDirection.allCases where settings.filter({ $0.applies(to: direction) }).count > ScenarioLimits.maximumFlows {
            error("\(context) has more than \(ScenarioLimits.maximumFlows) flows \(direction.rawValue); a link direction holds at most "
                + "\(ScenarioLimits.maximumFlows)", at: node)
            return []
        }
        return settings
    }
}
