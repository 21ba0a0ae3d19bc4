/// One change to a link at a planned time, ready for a backend.
public struct ScheduledChange: Sendable, Hashable {
    /// The cases that carry conditions or a network action are held in a box, so that a
    /// change is a few words however large conditions are: a day of flapping is 86,400 carrier
    /// changes, at most 128 bytes each (a test holds it to that) instead of about 400.
    public enum Change: Sendable, Hashable {
        /// New conditions for one direction.
        indirect case conditions(TrafficDirection, LinkConditions)
        /// Carrier cut (`false`) or restored (`true`).
        case carrier(Bool)
        /// The link's phone joins (`true`) or leaves (`false`) its network.
        case membership(Bool)
        /// A network event carried out by its gateway: `renumber` (on an access link),
        /// `rebind` and `dns` (on the uplink).
        indirect case network(TimelineEvent.Action)
    }

    /// When, from the start of the scenario.
    public var at: Duration
    public var link: String
    public var change: Change
    /// The timeline action that caused it: `set`, `ramp`, `down`, `up`, `blackhole`, `flap`, `profile`, `join`, `leave`.
    public var action: String
    /// The line of that event in the scenario file.
    public var line: Int
    /// For a ramp, the step (1...stepCount); otherwise nil.
    public var step: Int?
    public var stepCount: Int?
    /// Sent while the run played (its control API), not written in the scenario's timeline.
    public var live = false
}

/// A scenario's timeline expanded into the changes a backend applies: ramps cut into steps of at
/// most ``maximumRampStep`` (or into ``maximumRampSteps`` steps, for ramps longer than 100 s), flaps into carrier cuts and restorations, profile switches and
/// partial `set`s resolved into the full conditions of each direction. Pure, so that what a
/// run will do is tested without root.
///
/// Events at the same time apply in file order. A ramp's start is the state when it begins; its
/// steps override only the settings it names, so a `set` of those settings during the ramp lasts
/// until the next step.
public struct TimelineSchedule: Sendable, Hashable {
    public static let maximumRampStep = Duration.milliseconds(100)
    /// The most steps a ramp is cut into: a ramp longer than 100 s takes longer steps.
    public static let maximumRampSteps = 1000

    /// The steps a ramp over `span` is cut into.
    static func rampSteps(over span: Duration) -> Int {
        guard span > .zero else { return 1 }
        let steps = (span / maximumRampStep).rounded(.up)
        return steps >= Double(maximumRampSteps) ? maximumRampSteps : max(1, Int(steps))
    }

    /// How many link changes `event` expands to (a ramp one per step, a flap two per period,
    /// any other event one), without expanding it; saturates far above
    /// ``ScenarioLimits/maximumChanges`` instead of overflowing.
    public static func changeCount(of event: TimelineEvent) -> Int {
        switch event.action {
        case .ramp(_, let over):
            return rampSteps(over: over)
        case let .flap(period, duty, until):
            guard (duty < 1), (period > .zero), (until > event.at) else { return 0 }
            let periods = ((until - event.at) / period).rounded(.up)
            return periods >= 1e12 ? Int(2e12) : 2 * Int(periods)
        default:
            return 1
        }
    }

    /// The conditions each direction of each link starts with, in link order.
    public var initial: [InitialConditions]
    /// Every change, in the order to apply them (by time, then file order).
    public var changes: [ScheduledChange]

    public struct InitialConditions: Sendable, Hashable {
        public var link: String
        public var direction: TrafficDirection
        public var conditions: LinkConditions
    }

    /// Boxed where it carries settings, as ``ScheduledChange/Change`` is: the expansion holds
    /// every change of the timeline at once before sorting them.
    private enum Operation {
        indirect case set(Impairment)
        indirect case rampStep(id: Int, target: Impairment, step: Int, of: Int)
        case carrier(Bool)
        case membership(Bool)
        indirect case network(TimelineEvent.Action)
        case blackhole(Bool)
        indirect case profile(LinkProfile)
        case reset
    }

    private struct Pending {
        var at: Duration
        var order: Int
        var link: String
        var directions: [TrafficDirection]
        var operation: Operation
        var action: String
        var line: Int
        /// The flow a `set`, `ramp`, `blackhole` or `reset` acts on; nil: the link.
        var match: FlowMatch?
    }

    public init(scenario: Scenario) {
        var state: [String: [TrafficDirection: LinkConditions]] = [:]
        var initial: [InitialConditions] = []
        for link in scenario.links {
            func flows(_ direction: TrafficDirection) -> [FlowConditions] {
                Array(link.flows.filter { $0.applies(to: direction) }
                    .map { FlowConditions(match: $0.match, impairment: $0.impairment, isBlackholed: $0.isBlackholed) }
                    .prefix(ScenarioLimits.maximumFlows))
            }
            state[link.name] = [.up: LinkConditions(impairment: link.up, flows: flows(.up)),
                                .down: LinkConditions(impairment: link.down, flows: flows(.down))]
            for direction in TrafficDirection.allCases {
                initial.append(InitialConditions(link: link.name, direction: direction, conditions: state[link.name]![direction]!))
            }
        }
        self.initial = initial
        changes = Self.expand(scenario.timeline, scenario: scenario, state: &state)
    }

    /// The changes that live `events` (``LiveChange``) make to links whose conditions are now
    /// `state` (each link's, per direction): resolved as the timeline's own events are, from
    /// that state (a ramp starts where the link is now), each marked ``ScheduledChange/live``.
    public static func liveChanges(_ events: [TimelineEvent], scenario: Scenario,
                                   from state: [String: [TrafficDirection: LinkConditions]]) -> [ScheduledChange] {
        var state = state
        return expand(events, scenario: scenario, state: &state).map { change in
            var change = change
            change.live = true
            return change
        }
    }

    /// Whether a change to `match`'s flow can be made on a direction now `conditions`: the link
    /// itself, a flow it has, or room for one more (a live change past the bound is refused
    /// before it comes here; a scenario's timeline is checked when read).
    private static func admits(_ match: FlowMatch?, _ conditions: LinkConditions) -> Bool {
        guard let match else { return true }
        return conditions.flow(match) != nil || conditions.flows.count < ScenarioLimits.maximumFlows
    }

    /// `events` expanded into changes, each resolved from `state`, which follows them.
    private static func expand(_ events: [TimelineEvent], scenario: Scenario,
                               state: inout [String: [TrafficDirection: LinkConditions]]) -> [ScheduledChange] {
        var pending: [Pending] = []
        // Known ahead (and bounded by ScenarioLimits for a scenario that was read): no doubling.
        pending.reserveCapacity(min(events.reduce(0) { $0 &+ Self.changeCount(of: $1) }, 4 * ScenarioLimits.maximumChanges))
        for (index, event) in events.enumerated() {
            let directions: [TrafficDirection] = switch event.direction {
            case .both: [.up, .down]
            case .up: [.up]
            case .down: [.down]
            }
            func add(_ at: Duration, _ operation: Operation, _ action: String) {
                pending.append(Pending(at: at, order: pending.count, link: event.link, directions: directions, operation: operation,
                                       action: action, line: event.line, match: event.match))
            }
            switch event.action {
            case .set(let impairment):
                add(event.at, .set(impairment), "set")
            case .ramp(let target, let over):
                let steps = Self.rampSteps(over: over)
                for step in 1...steps {
                    add(event.at + over * (Double(step) / Double(steps)), .rampStep(id: index, target: target, step: step, of: steps), "ramp")
                }
            case .down:
                add(event.at, .carrier(false), "down")
            case .up:
                add(event.at, .carrier(true), "up")
            case .blackhole(let on):
                add(event.at, .blackhole(on), "blackhole")
            case .flap(let period, let duty, let until):
                guard (duty < 1) && (period > .zero) && (until > event.at) else { break }
                var start = event.at
                while start < until {
                    add(start, .carrier(false), "flap")
                    let upAt = min(until, start + period * (1 - max(0, duty)))
                    add(upAt, .carrier(true), "flap")
                    start = start + period
                }
            case .profile(let name):
                if let profile = scenario.profile(named: name) { add(event.at, .profile(profile), "profile") }
            case .membership(let joins):
                add(event.at, .membership(joins), joins ? "join" : "leave")
            case .renumber:
                add(event.at, .network(event.action), "renumber")
            case .rebind:
                add(event.at, .network(event.action), "rebind")
            case .dns(let fault):
                add(event.at, .network(event.action), fault == nil ? "dns-ok" : "dns")
            case .dnsDelay:
                add(event.at, .network(event.action), "dns")
            case .portal(let login):
                add(event.at, .network(event.action), login ? "login" : "logout")
            case .reset:
                if event.match != nil { add(event.at, .reset, "reset") }
            }
        }
        pending.sort { ($0.at, $0.order) < ($1.at, $1.order) }

        var rampStarts: [Int: [TrafficDirection: Impairment]] = [:]
        var changes: [ScheduledChange] = []
        changes.reserveCapacity(pending.count)
        for item in pending {
            guard var conditions = state[item.link] else { continue }
            var step: (Int, Int)?
            switch item.operation {
            case .carrier(let up):
                changes.append(ScheduledChange(at: item.at, link: item.link, change: .carrier(up), action: item.action, line: item.line))
                continue
            case .membership(let joins):
                changes.append(ScheduledChange(at: item.at, link: item.link, change: .membership(joins), action: item.action, line: item.line))
                continue
            case .network(let action):
                changes.append(ScheduledChange(at: item.at, link: item.link, change: .network(action), action: item.action, line: item.line))
                continue
            case .set(let impairment):
                for direction in item.directions where Self.admits(item.match, conditions[direction]!) {
                    conditions[direction]!.modify(item.match) { settings, _ in settings = settings.overridden(by: impairment) }
                }
            case .blackhole(let on):
                for direction in item.directions where Self.admits(item.match, conditions[direction]!) {
                    conditions[direction]!.modify(item.match) { _, blackholed in blackholed = on }
                }
            case .reset:
                for direction in item.directions { conditions[direction]!.flows.removeAll { $0.match == item.match } }
            case .profile(let profile):
                for direction in item.directions { conditions[direction]!.impairment = direction == .up ? profile.up : profile.down }
            case let .rampStep(id, target, index, count):
                step = (index, count)
                if rampStarts[id] == nil {
                    // A flow's ramp starts from what its packets get: the link's settings under its own.
                    rampStarts[id] = Dictionary(uniqueKeysWithValues: item.directions.map { ($0, conditions[$0]!.effectiveImpairment(item.match)) })
                }
                for direction in item.directions where Self.admits(item.match, conditions[direction]!) {
                    let start = rampStarts[id]![direction]!
                    let fraction = Double(index) / Double(count)
                    conditions[direction]!.modify(item.match) { settings, _ in
                        settings = settings.overridden(by: Impairment.interpolate(from: start, to: target, fraction: fraction))
                    }
                }
            }
            state[item.link] = conditions
            for direction in item.directions {
                changes.append(ScheduledChange(at: item.at, link: item.link, change: .conditions(direction, conditions[direction]!),
                                               action: item.action, line: item.line, step: step?.0, stepCount: step?.1))
            }
        }
        return changes
    }
}

extension Impairment {
    /// The settings `target` names, moved `fraction` (0...1) of the way from their values in
    /// `start`. A setting `start` lacks starts from nothing (no delay, no loss); a rate that
    /// `start` lacks (unlimited) takes the target at once; a loss model of another kind, or a
    /// distribution, switches at the end.
    public static func interpolate(from start: Impairment, to target: Impairment, fraction: Double) -> Impairment {
        let f = min(1, max(0, fraction))
        func mix(_ a: Double, _ b: Double) -> Double { a + (b - a) * f }
        func mix(_ a: Duration, _ b: Duration) -> Duration { a + (b - a) * f }
        var result = Impairment()
        if let delay = target.delay { result.delay = mix(start.delay ?? .zero, delay) }
        if let jitter = target.jitter { result.jitter = mix(start.jitter ?? .zero, jitter) }
        if let correlation = target.delayCorrelation { result.delayCorrelation = mix(start.delayCorrelation ?? 0, correlation) }
        if let distribution = target.distribution { result.distribution = f >= 1 ? distribution : start.distribution }
        if let trace = target.trace { result.trace = f >= 1 ? trace : start.trace }
        if let rate = target.rate {
            result.rate = start.rate.map { Rate(bitsPerSecond: mix($0.bitsPerSecond, rate.bitsPerSecond)) } ?? rate
        }
        if let loss = target.loss {
            switch (start.loss ?? .random(rate: 0, correlation: 0), loss) {
            case let (.random(a, ac), .random(b, bc)):
                result.loss = .random(rate: mix(a, b), correlation: mix(ac, bc))
            case let (.gilbertElliott(p1, r1, b1, g1), .gilbertElliott(p2, r2, b2, g2)):
                result.loss = .gilbertElliott(p: mix(p1, p2), r: mix(r1, r2), lossInBad: mix(b1, b2), lossInGood: mix(g1, g2))
            case (let from, let to):
                result.loss = f >= 1 ? to : from
            }
        }
        if let duplicate = target.duplicate { result.duplicate = mix(start.duplicate ?? 0, duplicate) }
        if let reorder = target.reorder { result.reorder = mix(start.reorder ?? 0, reorder) }
        if let corrupt = target.corrupt { result.corrupt = mix(start.corrupt ?? 0, corrupt) }
        if let limit = target.limit { result.limit = Int(mix(Double(start.limit ?? limit), Double(limit)).rounded()) }
        if let bytes = target.limitBytes { result.limitBytes = Int(mix(Double(start.limitBytes ?? bytes), Double(bytes)).rounded()) }
        if let queue = target.queue { result.queue = f >= 1 ? queue : (start.queue ?? .dropTail) }
        return result
    }
}
