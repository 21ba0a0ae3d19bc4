import RoamCore

extension TimelineSchedule {
    /// How often a trace's capacity is stepped where a backend plays rates, not delivery
    /// opportunities (netem): each window's rate is what the trace delivers in it.
    public static let traceStep = Duration.milliseconds(100)
    /// The most trace steps a schedule takes; a run that would need more (many traced links
    /// over hours) takes longer windows.
    public static let maximumTraceSteps = 50_000
    /// The rate of a window of `window` in which a trace has no delivery opportunity: one
    /// full frame (1514 bytes) a window. A token bucket cannot pass nothing and keep its queue
    /// (100% loss would drop what mahimahi's link holds until the next opportunity), and it must
    /// not be slower: tbf schedules its next dequeue for when the frame at the head has its
    /// tokens, and a change of rate does not move that moment, so at a slower rate the queue
    /// would wait past the windows after it (measured: seconds without a packet, and TCP's
    /// retransmission timer backing off behind them).
    public static func silentTraceRate(window: Duration) -> Rate {
        Rate(bitsPerSecond: (Double(1514 * 8) / window.seconds).rounded(.up))
    }

    /// This schedule with every trace's capacity (a link's or a flow's) played as a `rate` that
    /// changes every ``traceStep`` until `end`: the rate of each window is the trace's
    /// opportunities in it (1500 bytes each; the trace starting at the scenario's start and
    /// repeating, as the userspace emulator plays it), consecutive equal windows are one change,
    /// and a window without opportunities is ``silentTraceRate(window:)``. The trace stays in the
    /// conditions beside the rate, so that the link's grade is the trace's mean rate (it does not
    /// flap with each window) and what was played is recorded with its trace. Unless the
    /// scenario set one, the queue is the emulator's (``LinkConditions/emulatorQueuePackets``). Windows are longer than
    /// ``traceStep`` where the run would otherwise take more than ``maximumTraceSteps``.
    /// Returns the schedule, and the window used (nil: nothing was traced).
    public func steppingTraces(until end: Duration) -> (schedule: TimelineSchedule, window: Duration?) {
        struct Key: Hashable { var link: String; var direction: TrafficDirection }
        // Each traced direction's spans: from a change (or the start) to the next change of that
        // direction (or the end).
        struct Span { var start: Duration; var end: Duration; var conditions: LinkConditions; var change: Int? }
        var open: [Key: Span] = [:]
        var spans: [Key: [Span]] = [:]
        func close(_ key: Key, at time: Duration) {
            guard var span = open.removeValue(forKey: key) else { return }
            span.end = min(time, end)
            if span.end > span.start { spans[key, default: []].append(span) }
        }
        for item in initial where item.conditions.hasTrace {
            open[Key(link: item.link, direction: item.direction)] = Span(start: .zero, end: end, conditions: item.conditions, change: nil)
        }
        for (index, change) in changes.enumerated() {
            guard case let .conditions(direction, conditions) = change.change else { continue }
            let key = Key(link: change.link, direction: direction)
            close(key, at: change.at)
            if conditions.hasTrace { open[key] = Span(start: change.at, end: end, conditions: conditions, change: index) }
        }
        for key in Array(open.keys) { close(key, at: end) }
        let traced = initial.contains { $0.conditions.hasTrace } || changes.contains {
            if case .conditions(_, let conditions) = $0.change { conditions.hasTrace } else { false }
        }
        guard traced else { return (self, nil) }

        // The window: traceStep, or longer when the spans would take too many.
        let stepSeconds = Self.traceStep.seconds
        let spanSeconds = spans.values.joined().reduce(0.0) { $0 + ($1.end - $1.start).seconds }
        let windows = (spanSeconds / stepSeconds).rounded(.up)
        let factor = max(1, (windows / Double(Self.maximumTraceSteps)).rounded(.up))
        let window = Self.traceStep * factor
        let windowNanoseconds = Int64(stepSeconds * factor * 1e9)

        var result = self
        // The initial conditions and the timeline's own changes, at their first window.
        result.initial = initial.map { item in
            var item = item
            item.conditions = item.conditions.steppedTrace(window: 0, length: windowNanoseconds)
            return item
        }
        var stepped = changes.map { change -> ScheduledChange in
            guard case let .conditions(direction, conditions) = change.change, conditions.hasTrace else { return change }
            var change = change
            change.change = .conditions(direction, conditions.steppedTrace(window: change.at.nanoseconds / windowNanoseconds, length: windowNanoseconds))
            return change
        }
        // Each span's later windows, where the rate changes.
        var added: [ScheduledChange] = []
        for (key, list) in spans {
            for span in list {
                var last = span.change.map { index -> LinkConditions? in
                    if case .conditions(_, let conditions) = stepped[index].change { conditions } else { nil }
                } ?? result.initial.first { $0.link == key.link && $0.direction == key.direction }?.conditions
                let line = span.change.map { changes[$0].line } ?? 0
                let first = span.start.nanoseconds / windowNanoseconds
                let count = Int((span.end.nanoseconds - 1) / windowNanoseconds - first + 1)
                var number = first + 1
                while Duration.nanoseconds(number * windowNanoseconds) < span.end {
                    let conditions = span.conditions.steppedTrace(window: number, length: windowNanoseconds)
                    if conditions != last {
                        added.append(ScheduledChange(at: .nanoseconds(number * windowNanoseconds), link: key.link,
                                                     change: .conditions(key.direction, conditions), action: "trace", line: line,
                                                     step: Int(number - first) + 1, stepCount: count))
                        last = conditions
                    }
                    number += 1
                }
            }
        }
        // In time order; at one time the timeline's own changes first, then the steps by link
        // and direction (a step never shares a time with a change of its own direction).
        added.sort { ($0.at, $0.link, $0.directionOrder) < ($1.at, $1.link, $1.directionOrder) }
        var merged: [ScheduledChange] = []
        merged.reserveCapacity(stepped.count + added.count)
        var next = 0
        for change in stepped {
            while next < added.count, added[next].at < change.at {
                merged.append(added[next])
                next += 1
            }
            merged.append(change)
        }
        merged.append(contentsOf: added[next...])
        stepped = merged
        result.changes = stepped
        return (result, window)
    }
}

extension ScheduledChange {
    fileprivate var directionOrder: Int {
        if case .conditions(let direction, _) = change { direction == .up ? 0 : 1 } else { 2 }
    }
}

extension LinkConditions {
    /// Whether the link's capacity, or a flow's, comes from a trace.
    public var hasTrace: Bool {
        impairment.trace != nil || flows.contains { $0.impairment.trace != nil }
    }

    /// These conditions with each trace's capacity in window `window` (of `length` nanoseconds,
    /// counted from the scenario's start) as a rate beside it (see
    /// ``TimelineSchedule/steppingTraces(until:)``).
    func steppedTrace(window: Int64, length: Int64) -> LinkConditions {
        var result = self
        result.impairment = impairment.steppedTrace(window: window, length: length)
        for index in result.flows.indices {
            result.flows[index].impairment = result.flows[index].impairment.steppedTrace(window: window, length: length)
        }
        return result
    }
}

extension Impairment {
    func steppedTrace(window: Int64, length: Int64) -> Impairment {
        guard let trace = trace?.trace else { return self }
        var result = self
        let start = window * length
        let opportunities = trace.index(atOrAfter: start + length) - trace.index(atOrAfter: start)
        let bitsPerSecond = Double(opportunities) * Double(DeliveryTrace.opportunityBytes * 8) / (Double(length) / 1e9)
        result.rate = opportunities == 0 ? TimelineSchedule.silentTraceRate(window: .nanoseconds(length)) : Rate(bitsPerSecond: bitsPerSecond)
        if limit == nil, limitBytes == nil { result.limit = LinkConditions.emulatorQueuePackets }
        return result
    }
}
