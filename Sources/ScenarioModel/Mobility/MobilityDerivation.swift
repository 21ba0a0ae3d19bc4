import Glibc
import RoamCore

/// Turns movement into timeline: every `step`, each phone's position, the signal of every access
/// point and cell site of each network it is a member of (``Propagation``, obstacles), which one
/// it uses (association, roaming and handover by ``RoamingPolicy`` and ``HandoverPolicy``), and
/// the conditions of its radio link that follow (`WiFiRates`, `CellularBands`). What comes
/// out is ordinary timeline on the access links `NETWORK.PHONE`: `set` when the rate or loss
/// changes, `down` and `up` around a roam or a handover (the address stays), `leave` when the
/// phone loses the last transmitter of a network and `join` when it finds one again. Pure and
/// seeded: the same mobility, duration and seed derive the same events, on any machine.
package struct MobilityDerivation: Sendable {
    /// A network the derivation drives: its type decides the model (Wi-Fi or cellular).
    public struct Network: Sendable, Hashable {
        public var name: String
        public var isCellular: Bool
        public var members: [String]
        public init(name: String, isCellular: Bool, members: [String]) {
            self.name = name
            self.isCellular = isCellular
            self.members = members
        }
    }

    /// A phone's signal from the transmitter it uses on one network, at one step.
    public struct Sample: Sendable, Hashable {
        public var at: Duration
        public var phone: String
        public var network: String
        public var position: Position
        /// The access point or cell site in use; nil while the phone is outside the network.
        public var transmitter: String?
        /// RSSI (Wi-Fi) or RSRP (cellular) from it, dBm.
        public var signal: Double?
    }

    public struct Result: Sendable {
        public var events: [TimelineEvent]
        /// Every step's sample (`derive(samples: true)`): where each phone was and what it heard, for the report's map and signal chart, and the benchmark.
        public var samples: [Sample]
        /// Roams between access points and handovers between cells.
        public var moves: Int
        /// The derivation stopped early: it derived more than the events it was asked for at most.
        public var truncated = false
        /// The turns the walkers' loops took, all phones together (what the fuzz target bounds:
        /// at most ``maximumTurnsPerStep`` a step and phone, and one more per waypoint leg).
        package var movementTurns = 0
    }

    /// The most turns a walker's loop takes in one step: a random waypoint's 1,024 waypoints and
    /// the pauses between them.
    package static let maximumTurnsPerStep = 2 * Walker.maximumWaypointsPerStep + 2

    /// The most position samples (phones × steps) a derivation takes: 100 phones for a day
    /// at a second, 500 phones for an hour at half a second; a bound on time and memory.
    public static let maximumSamples = 10_000_000

    public let mobility: Mobility
    public let duration: Duration
    public let seed: UInt64
    public let networks: [Network]
    /// The line of `mobility:` in the file, given to every derived event.
    public let line: Int

    public init(mobility: Mobility, duration: Duration, seed: UInt64, networks: [Network], line: Int = 0) {
        self.mobility = mobility
        self.duration = duration
        self.seed = seed
        self.networks = networks
        self.line = line
    }

    /// The most work a derivation does, in units of one transmitter's signal or one obstacle
    /// tested at one sample (``workUnits``), so that `roam validate` answers any file in bounded
    /// time: 0.2 s of one core in a release build at the bound (1 phone for a day at a second's
    /// step among 600 obstacles), several seconds in a debug build.
    public static let maximumWork = 60_000_000

    /// The most access points, cell sites and obstacles a scenario's `mobility:` may place.
    public static let maximumTransmitters = 1_000
    public static let maximumObstacles = 1_000

    /// How many samples the derivation takes (phones × networks × steps).
    public var sampleCount: Int {
        let steps = Int(duration / mobility.step) + 1
        return mobility.phones.reduce(0) { total, phone in
            total + steps * max(1, networks.filter { $0.members.contains(phone.node) }.count)
        }
    }

    /// The work the derivation does, counted before it starts: for every phone and step, each
    /// transmitter of each of its networks heard, and every obstacle tested, once per network.
    /// Saturates instead of overflowing.
    public var workUnits: Int {
        let steps = Int(duration / mobility.step) + 1
        var total = 0
        for phone in mobility.phones {
            var perStep = 1
            for network in networks where network.members.contains(phone.node) {
                let transmitters = network.isCellular
                    ? mobility.cellSites.reduce(0) { $0 + ($1.network == network.name ? 1 : 0) }
                    : mobility.accessPoints.reduce(0) { $0 + ($1.network == network.name ? 1 : 0) }
                guard transmitters > 0 else { continue }
                perStep += transmitters + mobility.obstacles.count
            }
            let (product, overflow) = steps.multipliedReportingOverflow(by: perStep)
            let (sum, overflowed) = total.addingReportingOverflow(product)
            guard !overflow, !overflowed else { return .max }
            total = sum
        }
        return total
    }

    /// The derived events; with `samples`, every step's sample too (what the report draws:
    /// about 90 bytes each, so a reader that needs only the events does not keep them).
    public func derive(samples keepsSamples: Bool = true) -> Result {
        derive(keepingSamples: keepsSamples ? 1 : nil, maximumEvents: .max)
    }

    /// ``derive(samples:)``, stopping once more than `maximumEvents` events are derived
    /// (``Result/truncated``), so that a bound on the timeline is checked without holding an
    /// unbounded timeline first.
    public func derive(samples keepsSamples: Bool, maximumEvents: Int) -> Result {
        derive(keepingSamples: keepsSamples ? 1 : nil, maximumEvents: maximumEvents)
    }

    /// The derived events, and the sample of every `stride`-th step (and the last): what a map
    /// of a long run needs, in bounded memory. The events are the same as ``derive(samples:)``'s.
    public func derive(samplingEvery stride: Int) -> Result {
        derive(keepingSamples: max(1, stride), maximumEvents: .max)
    }

    private func derive(keepingSamples stride: Int?, maximumEvents: Int) -> Result {
        var result = Result(events: [], samples: [], moves: 0)
        let steps = Int(duration / mobility.step)
        let keepsSamples = stride != nil
        if let stride { result.samples.reserveCapacity(min(sampleCount / stride + mobility.phones.count * 4, Self.maximumSamples)) }
        phones: for phone in mobility.phones {
            var walker = Walker(phone.model, step: mobility.step, random: SeededRandom(seed: seed, phone.node, "walk"))
            let positions = (0...steps).map { _ in walker.next() }
            result.movementTurns += walker.turns
            // What the obstacles take from every signal at each position, worked out once for
            // all of the phone's networks.
            let attenuations = mobility.obstacles.isEmpty ? nil : positions.map { position in
                mobility.obstacles.reduce(0.0) { $0 + ($1.contains(position) ? $1.attenuation : 0) }
            }
            for network in networks where network.members.contains(phone.node) {
                let transmitters = self.transmitters(of: network)
                guard !transmitters.isEmpty else { continue }
                derive(phone: phone.node, network: network, transmitters: transmitters, positions: positions, attenuations: attenuations,
                       keepsSamples: keepsSamples, stride: stride ?? 1, into: &result)
                if result.events.count > maximumEvents {
                    result.truncated = true
                    break phones
                }
            }
        }
        // In time order; at one time, by link, then in the order derived (a set before its join,
        // a roam's up before the next roam's down): Swift's sort is not stable, so the order
        // derived is part of the key.
        result.events = result.events.enumerated()
            .sorted { ($0.element.at, $0.element.link, $0.offset) < ($1.element.at, $1.element.link, $1.offset) }
            .map(\.element)
        return result
    }

    private struct Transmitter {
        var name: String
        var position: Position
        /// Power at the receiver before path loss: EIRP, or per resource element for a cell.
        var power: Double
        var frequency: Double
        var accessPoint: AccessPoint?
    }

    private func transmitters(of network: Network) -> [Transmitter] {
        if network.isCellular {
            return mobility.cellSites.filter { $0.network == network.name }.map {
                Transmitter(name: $0.name, position: $0.position, power: $0.power - CellularBands.resourceElementOffset, frequency: $0.frequency)
            }
        }
        return mobility.accessPoints.filter { $0.network == network.name }.map {
            Transmitter(name: $0.name, position: $0.position, power: $0.power, frequency: $0.frequency, accessPoint: $0)
        }
    }

    /// What the phone's radio on `network` does over the run.
    private func derive(phone: String, network: Network, transmitters: [Transmitter], positions: [Position], attenuations: [Double]?,
                        keepsSamples: Bool, stride: Int, into result: inout Result) {
        let link = "\(network.name).\(phone)"
        let propagation = network.isCellular ? mobility.outdoor : mobility.indoor
        let policy = network.isCellular
            ? Policy(trigger: .infinity, margin: mobility.handover.offset, delay: mobility.handover.timeToTrigger,
                     outage: mobility.handover.interruption, minimum: mobility.handover.minimum, join: mobility.handover.attach,
                     joinDelay: .seconds(1))
            : Policy(trigger: mobility.roaming.trigger, margin: mobility.roaming.margin, delay: mobility.roaming.scan,
                     outage: mobility.roaming.outage, minimum: mobility.roaming.minimum, join: mobility.roaming.join,
                     joinDelay: mobility.roaming.joinDelay)
        var shadows = transmitters.map { Shadow(random: SeededRandom(seed: seed, phone, $0.name), propagation: propagation) }
        var serving: Int?
        var candidateSince: Duration?
        var joinSince: Duration?
        var level: Int?
        var loss: Double?
        var events: [TimelineEvent] = []
        func event(_ at: Duration, _ action: TimelineEvent.Action, direction: LinkDirection = .both) {
            events.append(TimelineEvent(at: at, link: link, direction: direction, action: action, line: line))
        }
        /// The conditions at `signal` from transmitter `index`, set when they changed.
        func conditions(_ at: Duration, signal: Double, index: Int) {
            if network.isCellular {
                let band = CellularBands.band(rsrp: signal, current: level)
                guard band != level else { return }
                level = band
                let figures = CellularBands.bands[band]
                event(at, .set(Impairment(delay: figures.delay, rate: figures.down)), direction: .down)
                event(at, .set(Impairment(delay: figures.delay, rate: figures.up)), direction: .up)
            } else {
                let accessPoint = transmitters[index].accessPoint!
                let mcs = WiFiRates.mcs(signal: signal, accessPoint: accessPoint, current: level)
                let residual = Self.rounded(WiFiRates.loss(signal: signal, width: accessPoint.width))
                guard mcs != level || residual != loss else { return }
                level = mcs
                loss = residual
                event(at, .set(Impairment(rate: Rate(bitsPerSecond: WiFiRates.goodput(mcs: mcs, width: accessPoint.width)),
                                          loss: .random(rate: residual, correlation: 0))))
            }
        }

        var previous = positions[0]
        var startsOutside = false
        // The intercept of each transmitter's path loss, worked out once.
        let intercepts = transmitters.map { propagation.intercept ?? Propagation.referenceLoss(frequency: $0.frequency) }
        let slope = 10 * propagation.exponent
        var signals = [Double](repeating: 0, count: transmitters.count)
        for (step, position) in positions.enumerated() {
            let at = mobility.step * step
            let moved = position.distance(to: previous)
            previous = position
            let attenuation = attenuations?[step] ?? 0
            var best = 0
            for index in transmitters.indices {
                let pathLoss = intercepts[index] + slope * log10(max(position.distance(to: transmitters[index].position), 1))
                signals[index] = transmitters[index].power - pathLoss - shadows[index].next(moved: moved) - attenuation
                if signals[index] > signals[best] { best = index }
            }
            if let current = serving {
                if signals[current] < policy.minimum {
                    // Every beacon lost: the phone is off the network (its interface goes down).
                    event(at, .membership(false))
                    serving = nil
                    candidateSince = nil
                    level = nil
                    loss = nil
                } else {
                    let candidate = signals[current] < policy.trigger && best != current && signals[best] >= signals[current] + policy.margin
                    if candidate {
                        candidateSince = candidateSince ?? at
                        if at - candidateSince! >= policy.delay {
                            // The move: a short outage, the same network and address.
                            event(at, .down)
                            event(min(at + policy.outage, duration), .up)
                            result.moves += 1
                            serving = best
                            candidateSince = nil
                        }
                    } else {
                        candidateSince = nil
                    }
                    conditions(at, signal: signals[serving!], index: serving!)
                }
            } else if step == 0 {
                if signals[best] >= policy.minimum {
                    serving = best
                    conditions(at, signal: signals[best], index: best)
                } else {
                    startsOutside = true
                }
            } else if signals[best] >= policy.join {
                joinSince = joinSince ?? at
                if at - joinSince! >= policy.joinDelay {
                    serving = best
                    joinSince = nil
                    conditions(at, signal: signals[best], index: best)
                    event(at, .membership(true))
                }
            } else {
                joinSince = nil
            }
            if keepsSamples, step % stride == 0 || step == positions.count - 1, result.samples.count < Self.maximumSamples {
                result.samples.append(Sample(at: at, phone: phone, network: network.name, position: position,
                                             transmitter: serving.map { transmitters[$0].name }, signal: serving.map { signals[$0] }))
            }
        }
        // A phone outside every transmitter's reach at the start is outside the network from the
        // start: its first membership event is a join, or, if it never finds one, a leave at 0.
        if startsOutside, !events.contains(where: { $0.action == .membership(true) }) {
            events.insert(TimelineEvent(at: .zero, link: link, direction: .both, action: .membership(false), line: line), at: 0)
        }
        result.events += events
    }

    /// Loss to two significant digits, so that a change is a change a user could see.
    static func rounded(_ loss: Double) -> Double {
        guard loss > 1e-6 else { return 0 }
        let scale = pow(10, 1 - floor(log10(loss)))
        return min(1, (loss * scale).rounded() / scale)
    }

    private struct Policy {
        var trigger: Double
        var margin: Double
        var delay: Duration
        var outage: Duration
        var minimum: Double
        var join: Double
        var joinDelay: Duration
    }
}

/// Shadowing of one phone from one transmitter, correlated over the distance it moves
/// (Gudmundson): X' = ρ·X + √(1-ρ²)·σ·N(0,1), ρ = exp(-Δd / dcorr).
private struct Shadow {
    var random: SeededRandom
    let sigma: Double
    let correlationDistance: Double
    var value: Double?

    init(random: SeededRandom, propagation: Propagation) {
        self.random = random
        sigma = propagation.shadowing
        correlationDistance = max(propagation.correlationDistance, 1e-3)
    }

    mutating func next(moved: Double) -> Double {
        guard sigma > 0 else { return 0 }
        guard let value else {
            let first = sigma * random.normal()
            self.value = first
            return first
        }
        let rho = exp(-moved / correlationDistance)
        let next = rho * value + (1 - rho * rho).squareRoot() * sigma * random.normal()
        self.value = next
        return next
    }
}

/// A phone's position step by step.
struct Walker {
    /// The most waypoints a random-waypoint phone reaches in one step.
    static let maximumWaypointsPerStep = 1_024
    let model: PhoneMovement.Model
    let step: Double
    var random: SeededRandom
    var position: Position
    var time = 0.0
    // Waypoints: the leg being walked and the time spent on it.
    var leg = 0
    var legElapsed = 0.0
    var legStart: Position
    // Random waypoint: where to and how fast, or paused until when.
    var target: Position?
    var speed = 0.0
    var pausedUntil = 0.0
    // Gauss-Markov: current speed and heading.
    var heading = 0.0
    /// The turns the movement loops have taken so far.
    var turns = 0

    init(_ model: PhoneMovement.Model, step: Duration, random: SeededRandom) {
        var random = random
        let start: Position
        switch model {
        case .waypoints(let first, _):
            start = first
        case .randomWaypoint(let area, _, _), .gaussMarkov(let area, _, _):
            start = Position(random.uniform(area.from.x...area.to.x), random.uniform(area.from.y...area.to.y))
        }
        if case .gaussMarkov(_, let mean, _) = model {
            speed = mean
            heading = random.uniform(0...(2 * Double.pi))
        }
        self.model = model
        self.step = step.secondsValue
        self.random = random
        position = start
        legStart = start
    }

    /// The position now, then one step on.
    mutating func next() -> Position {
        let now = position
        advance(by: step)
        time += step
        return now
    }

    private mutating func advance(by span: Double) {
        switch model {
        case .waypoints(_, let legs):
            // Each turn either ends a leg or uses all that is left of the span: the loop ends after
            // at most one turn per leg, whatever rounding does to the times.
            var remaining = span
            while remaining > 0, leg < legs.count {
                turns += 1
                switch legs[leg] {
                case .pause(let pause):
                    let left = pause.secondsValue - legElapsed
                    if left <= remaining {
                        remaining -= max(left, 0)
                        nextLeg()
                    } else {
                        legElapsed += remaining
                        remaining = 0
                    }
                case .move(let to, let speed):
                    let length = legStart.distance(to: to) / max(speed, 1e-9)
                    let left = length - legElapsed
                    if left <= remaining {
                        remaining -= max(left, 0)
                        position = to
                        nextLeg()
                    } else {
                        legElapsed += remaining
                        remaining = 0
                        let fraction = length > 0 ? min(1, legElapsed / length) : 1
                        position = Position(legStart.x + (to.x - legStart.x) * fraction, legStart.y + (to.y - legStart.y) * fraction)
                    }
                }
            }
        case .randomWaypoint(let area, let speeds, let pauses):
            // Every waypoint reached takes at least a 1,024th of a step (walking or paused), and
            // a step reaches at most 1,024: movement advances by construction, however small the
            // area or short the pauses (a leg of 1e-100 m takes no time in floating point).
            let minimumLeg = span / Double(Self.maximumWaypointsPerStep)
            var remaining = span
            var clock = time
            var reached = 0
            while remaining > 0 {
                turns += 1
                if clock < pausedUntil {
                    let left = pausedUntil - clock
                    if left >= remaining { break }
                    remaining -= left
                    clock = pausedUntil
                    continue
                }
                guard reached < Self.maximumWaypointsPerStep else { break }
                let destination = target ?? Position(random.uniform(area.from.x...area.to.x), random.uniform(area.from.y...area.to.y))
                if target == nil {
                    target = destination
                    speed = random.uniform(speeds)
                }
                let distance = position.distance(to: destination)
                let needed = distance / max(speed, 1e-9)
                if needed <= remaining {
                    position = destination
                    remaining -= needed
                    clock += needed
                    target = nil
                    reached += 1
                    let low = pauses.lowerBound.secondsValue, high = pauses.upperBound.secondsValue
                    let walked = needed
                    pausedUntil = clock + max(random.uniform(low...high), minimumLeg - walked, 0)
                } else {
                    let fraction = remaining * speed / distance
                    position = Position(position.x + (destination.x - position.x) * fraction, position.y + (destination.y - position.y) * fraction)
                    remaining = 0
                }
            }
        case .gaussMarkov(let area, let mean, let alpha):
            // Liang and Haas: s' = α·s + (1-α)·s̄ + √(1-α²)·σs·N, the same for the heading, whose
            // mean turns towards the area's centre near an edge.
            turns += 1
            let memory = min(max(alpha, 0), 1)
            let spread = (1 - memory * memory).squareRoot()
            speed = max(0, memory * speed + (1 - memory) * mean + spread * (mean / 3) * random.normal())
            let centre = Position((area.from.x + area.to.x) / 2, (area.from.y + area.to.y) / 2)
            let margin = 0.1 * min(area.to.x - area.from.x, area.to.y - area.from.y)
            let nearEdge = position.x < area.from.x + margin || position.x > area.to.x - margin
                || position.y < area.from.y + margin || position.y > area.to.y - margin
            let meanHeading = nearEdge ? atan2(centre.y - position.y, centre.x - position.x) : heading
            heading = memory * heading + (1 - memory) * meanHeading + spread * (Double.pi / 4) * random.normal()
            position = Position(min(max(position.x + speed * span * cos(heading), area.from.x), area.to.x),
                                min(max(position.y + speed * span * sin(heading), area.from.y), area.to.y))
        }
    }

    private mutating func nextLeg() {
        leg += 1
        legElapsed = 0
        legStart = position
    }
}

/// SplitMix64 seeded from the scenario's seed and names (FNV-1a, not Swift's per-process hash),
/// so that every phone and transmitter has its own stream and the same everywhere.
struct SeededRandom {
    private var state: UInt64
    private var spare: Double?

    init(seed: UInt64, _ names: String...) {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for name in names {
            for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
            hash = (hash ^ 0xFF) &* 0x0000_0100_0000_01B3
        }
        state = seed ^ hash
    }

    mutating func next() -> UInt64 { splitMix64(&state) }

    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }

    mutating func uniform(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound + (range.upperBound - range.lowerBound) * unit()
    }

    /// Standard normal (Box-Muller).
    mutating func normal() -> Double {
        if let spare {
            self.spare = nil
            return spare
        }
        let u = max(unit(), 1e-300), v = unit()
        let radius = (-2 * log(u)).squareRoot()
        spare = radius * sin(2 * Double.pi * v)
        return radius * cos(2 * Double.pi * v)
    }
}

extension Duration {
    fileprivate var secondsValue: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
