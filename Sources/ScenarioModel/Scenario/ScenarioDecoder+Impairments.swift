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
        result.limit = take(&fields, "limit") { self.integer($0, "limit (packets)", range: 1...1_000_000) }
        result.trace = take(&fields, "trace") { self.trace($0) }
        if result.trace != nil, result.rate != nil, let node = fields.keyNode("trace") {
            error("rate and trace both set the capacity; keep one", at: node)
        }
        return result
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
