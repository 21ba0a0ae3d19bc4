import Glibc

/// A point on the scenario's floor plan or map, in metres.
public struct Position: Sendable, Hashable, CustomStringConvertible {
    public var x: Double
    public var y: Double

    public init(_ x: Double, _ y: Double) {
        self.x = x
        self.y = y
    }

    public func distance(to other: Position) -> Double {
        ((x - other.x) * (x - other.x) + (y - other.y) * (y - other.y)).squareRoot()
    }

    public var description: String { "[\(x.roamTrimmed), \(y.roamTrimmed)]" }
}

/// Where phones move, and what transmits around them: the `mobility:` part of a scenario. The
/// conditions of each phone's radio links are derived from it before the run, as ordinary
/// timeline events (see `MobilityDerivation`, Roam's own).
public struct Mobility: Sendable, Hashable {
    public var accessPoints: [AccessPoint]
    public var cellSites: [CellSite]
    public var obstacles: [Obstacle]
    /// How each phone moves, by node name.
    public var phones: [PhoneMovement]
    public var indoor: Propagation
    public var outdoor: Propagation
    public var roaming: RoamingPolicy
    public var handover: HandoverPolicy
    /// How often positions are sampled and conditions derived.
    public var step: Duration
    /// The line of `mobility:` in its file: every event it derives carries it.
    public var line = 0

    public init(accessPoints: [AccessPoint] = [], cellSites: [CellSite] = [], obstacles: [Obstacle] = [], phones: [PhoneMovement] = [],
                indoor: Propagation = .indoor, outdoor: Propagation = .outdoor, roaming: RoamingPolicy = RoamingPolicy(),
                handover: HandoverPolicy = HandoverPolicy(), step: Duration = .milliseconds(500)) {
        self.accessPoints = accessPoints
        self.cellSites = cellSites
        self.obstacles = obstacles
        self.phones = phones
        self.indoor = indoor
        self.outdoor = outdoor
        self.roaming = roaming
        self.handover = handover
        self.step = step
    }

    /// The shortest and longest sampling step.
    public static let minimumStep = Duration.milliseconds(100)
    public static let maximumStep = Duration.seconds(10)
}

/// A Wi-Fi access point of one network.
public struct AccessPoint: Sendable, Hashable {
    public enum Width: Int, Sendable, Hashable, CaseIterable {
        case mhz20 = 20, mhz40 = 40, mhz80 = 80
    }

    public var name: String
    /// The Wi-Fi network (a `networks:` entry) it belongs to.
    public var network: String
    public var position: Position
    /// Transmit power (EIRP), dBm. Default 20 dBm (100 mW, a typical indoor AP).
    public var power: Double
    /// Channel: 1-14 are 2.4 GHz (802.11n), 36 and up 5 GHz (802.11ac).
    public var channel: Int
    public var width: Width

    public init(name: String, network: String, position: Position, power: Double = 20, channel: Int = 36, width: Width = .mhz20) {
        self.name = name
        self.network = network
        self.position = position
        self.power = power
        self.channel = channel
        self.width = width
    }

    /// The channel's centre frequency, MHz (IEEE 802.11 channel numbering).
    public var frequency: Double {
        channel <= 14 ? (channel == 14 ? 2484 : 2407 + 5 * Double(channel)) : 5000 + 5 * Double(channel)
    }
}

/// A cellular base station of one network.
public struct CellSite: Sendable, Hashable {
    public var name: String
    /// The cellular network (a `networks:` entry) it belongs to.
    public var network: String
    public var position: Position
    /// Transmit power of the carrier, dBm. Default 46 dBm (40 W, a macro cell's 20 MHz LTE carrier).
    public var power: Double
    /// Carrier frequency, MHz. Default 1,800 (LTE band 3).
    public var frequency: Double

    public init(name: String, network: String, position: Position, power: Double = 46, frequency: Double = 1_800) {
        self.name = name
        self.network = network
        self.position = position
        self.power = power
        self.frequency = frequency
    }
}

/// A zone that attenuates every signal received inside it (a lift, a tunnel, a basement).
/// Inside is where the phone is: a wall between a phone and an AP is a zone around the far side.
public struct Obstacle: Sendable, Hashable {
    public var name: String
    /// Opposite corners of the zone (an axis-aligned rectangle).
    public var from: Position
    public var to: Position
    /// dB taken from every signal received inside.
    public var attenuation: Double

    public init(name: String, from: Position, to: Position, attenuation: Double) {
        self.name = name
        self.from = from
        self.to = to
        self.attenuation = attenuation
    }

    public func contains(_ point: Position) -> Bool {
        (min(from.x, to.x)...max(from.x, to.x)).contains(point.x) && (min(from.y, to.y)...max(from.y, to.y)).contains(point.y)
    }
}

/// Log-distance path loss with log-normal shadowing:
///
///     PL(d) = PL0 + 10 · n · log10(d / d0) + X,   d0 = 1 m
///     PL0 = 20 · log10(4π · d0 · f / c)            (Friis, free space at d0), unless `intercept` is given
///
/// where X is shadowing, normal with standard deviation σ dB, correlated over the distance the
/// phone moves as Gudmundson measured: X' = ρ·X + √(1-ρ²)·σ·N(0,1), ρ = exp(-Δd / dcorr)
/// (M. Gudmundson, "Correlation model for shadow fading in mobile radio systems", Electronics
/// Letters 27(23), 1991). Rappaport's "Wireless Communications" (2nd ed., tables 4.2 and 4.3)
/// gives n and σ for buildings and cities.
public struct Propagation: Sendable, Hashable {
    /// Path loss exponent n.
    public var exponent: Double
    /// Shadowing standard deviation σ, dB (0: none).
    public var shadowing: Double
    /// Decorrelation distance of shadowing, metres.
    public var correlationDistance: Double
    /// The loss at 1 m, dB, where a published model fixes it (antenna gains included); nil:
    /// free space at the transmitter's frequency.
    public var intercept: Double?

    public init(exponent: Double, shadowing: Double, correlationDistance: Double, intercept: Double? = nil) {
        self.exponent = exponent
        self.shadowing = shadowing
        self.correlationDistance = correlationDistance
        self.intercept = intercept
    }

    /// Inside an office building (Wi-Fi): n = 3.0 (Rappaport: 2.6-3.3 for offices; Mininet-WiFi's
    /// default too), σ = 4 dB, decorrelation over 5 m.
    public static let indoor = Propagation(exponent: 3.0, shadowing: 4, correlationDistance: 5)
    /// A city's macro cells, 3GPP TR 36.942 §4.5.2 (urban macro at 2 GHz, antenna gains
    /// included): L = 128.1 + 37.6 · log10(R / 1 km), that is 15.3 dB at 1 m and n = 3.76;
    /// σ = 8 dB and decorrelation over 50 m (TR 36.814, table A.2.1.1.2-3).
    public static let outdoor = Propagation(exponent: 3.76, shadowing: 8, correlationDistance: 50, intercept: 128.1 - 37.6 * 3)

    /// Free-space loss at 1 m for `frequency` MHz, dB.
    public static func referenceLoss(frequency: Double) -> Double {
        20 * log10(4 * Double.pi * frequency * 1e6 / 299_792_458)
    }

    /// Median path loss at `distance` metres (shadowing and obstacles aside), dB. Closer than
    /// 1 m counts as 1 m.
    public func medianLoss(distance: Double, frequency: Double) -> Double {
        (intercept ?? Self.referenceLoss(frequency: frequency)) + 10 * exponent * log10(max(distance, 1))
    }
}

/// When a phone roams between access points of one network, after Apple's "Wi-Fi roaming
/// support in Apple devices" (support.apple.com/guide/deployment/dep98f116c0f, HT203068): a
/// phone keeps its AP until the signal falls below the trigger (-70 dBm), then scans, and moves
/// to an AP at least `margin` better (8 dB while passing data; 12 dB idle). A scan with 802.11k
/// neighbour reports takes a fraction of a second, without them "several seconds"; the roam
/// itself (reassociation and the 4-way handshake; 802.11r makes it shorter) is a short outage.
public struct RoamingPolicy: Sendable, Hashable {
    /// RSSI below which the phone looks for another AP, dBm.
    public var trigger: Double
    /// How much better a candidate must be, dB.
    public var margin: Double
    /// From crossing the trigger to choosing a candidate.
    public var scan: Duration
    /// The outage of the move itself: the carrier is down this long, the address stays.
    public var outage: Duration
    /// RSSI below which the phone cannot stay associated (beacons lost), dBm: it leaves the
    /// network. Default -82 dBm, the 802.11 minimum sensitivity of the slowest rate.
    public var minimum: Double
    /// RSSI the best AP must reach before a phone outside the network joins it, dBm (a little
    /// above `minimum`, so that the edge does not join and leave over and over).
    public var join: Double
    /// From finding an AP above `join` to being on the network (scan, association, DHCP).
    public var joinDelay: Duration

    public init(trigger: Double = -70, margin: Double = 8, scan: Duration = .milliseconds(500), outage: Duration = .milliseconds(100),
                minimum: Double = -82, join: Double = -77, joinDelay: Duration = .seconds(2)) {
        self.trigger = trigger
        self.margin = margin
        self.scan = scan
        self.outage = outage
        self.minimum = minimum
        self.join = join
        self.joinDelay = joinDelay
    }
}

/// When a phone changes cells of one cellular network: an A3 event (a neighbour better than the
/// serving cell by `offset` for `timeToTrigger`, 3GPP TS 36.331 §5.5.4.4) and a short
/// interruption (LTE's X2 handover: 3GPP TR 36.881 puts the interruption near 50 ms).
public struct HandoverPolicy: Sendable, Hashable {
    public var offset: Double
    public var timeToTrigger: Duration
    public var interruption: Duration
    /// RSRP below which there is no service, dBm (the phone leaves the network), and above
    /// which a phone without service attaches again.
    public var minimum: Double
    public var attach: Double

    public init(offset: Double = 3, timeToTrigger: Duration = .milliseconds(320), interruption: Duration = .milliseconds(50),
                minimum: Double = -124, attach: Double = -118) {
        self.offset = offset
        self.timeToTrigger = timeToTrigger
        self.interruption = interruption
        self.minimum = minimum
        self.attach = attach
    }
}

/// How one phone moves.
public struct PhoneMovement: Sendable, Hashable {
    public enum Model: Sendable, Hashable {
        /// From `start` through each leg in turn, then still.
        case waypoints(start: Position, legs: [Leg])
        /// Random waypoint (Johnson and Maltz, 1996): a destination drawn uniformly in `area`,
        /// walked at a speed drawn uniformly in `speed`, then a pause drawn uniformly in `pause`.
        case randomWaypoint(area: Area, speed: ClosedRange<Double>, pause: ClosedRange<Duration>)
        /// Gauss-Markov (Liang and Haas, 1999; Camp, Boleng and Davies' survey, 2002): speed and
        /// direction drift from their previous values towards their means with memory `alpha`
        /// (0: random walk, 1: straight line), with Gaussian variation, turned back at the area's edges.
        case gaussMarkov(area: Area, speed: Double, alpha: Double)
    }

    public enum Leg: Sendable, Hashable {
        /// Walk to a point at a speed (m/s).
        case move(to: Position, speed: Double)
        case pause(Duration)
    }

    public struct Area: Sendable, Hashable {
        public var from: Position
        public var to: Position
        public init(from: Position, to: Position) {
            self.from = Position(min(from.x, to.x), min(from.y, to.y))
            self.to = Position(max(from.x, to.x), max(from.y, to.y))
        }
    }

    public var node: String
    public var model: Model

    public init(node: String, model: Model) {
        self.node = node
        self.model = model
    }
}

extension Double {
    /// Without a trailing `.0`, at most three decimals.
    var roamTrimmed: String {
        let rounded = (self * 1000).rounded() / 1000
        return rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int64(rounded)) : String(rounded)
    }
}
