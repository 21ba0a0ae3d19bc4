import Foundation
@testable import ScenarioModel
import Testing

@Suite struct RadioModelTests {
    @Test func pathLossIsFriisAtAMetreThenTheExponent() {
        // 20·log10(4π·f/c): 40.10 dB at 2,412 MHz, 46.73 dB at 5,180 MHz.
        #expect(abs(Propagation.referenceLoss(frequency: 2_412) - 40.10) < 0.01)
        #expect(abs(Propagation.referenceLoss(frequency: 5_180) - 46.73) < 0.01)
        let indoor = Propagation.indoor
        #expect(abs(indoor.medianLoss(distance: 10, frequency: 5_180) - (46.73 + 30)) < 0.01)
        #expect(abs(indoor.medianLoss(distance: 100, frequency: 5_180) - (46.73 + 60)) < 0.01)
        #expect(indoor.medianLoss(distance: 0.2, frequency: 5_180) == indoor.medianLoss(distance: 1, frequency: 5_180))
        #expect(AccessPoint(name: "a", network: "n", position: Position(0, 0), channel: 6).frequency == 2_437)
        // TR 36.942's macro cell: 128.1 dB at 1 km, 37.6 dB more per decade.
        #expect(abs(Propagation.outdoor.medianLoss(distance: 1_000, frequency: 1_800) - 128.1) < 1e-9)
        #expect(abs(Propagation.outdoor.medianLoss(distance: 100, frequency: 1_800) - 90.5) < 1e-9)
        #expect(AccessPoint(name: "a", network: "n", position: Position(0, 0), channel: 36).frequency == 5_180)
    }

    @Test func wiFiRatesFollowTheStandardsSensitivities() {
        let ac20 = AccessPoint(name: "a", network: "n", position: Position(0, 0), channel: 36)
        let ac80 = AccessPoint(name: "a", network: "n", position: Position(0, 0), channel: 36, width: .mhz80)
        let n24 = AccessPoint(name: "a", network: "n", position: Position(0, 0), channel: 1)
        #expect(WiFiRates.mcs(signal: -50, accessPoint: ac20) == 8)
        #expect(WiFiRates.mcs(signal: -64, accessPoint: ac20) == 7)
        #expect(WiFiRates.mcs(signal: -64.5, accessPoint: ac20) == 6)
        #expect(WiFiRates.mcs(signal: -50, accessPoint: n24) == 7, "802.11n on 2.4 GHz stops at MCS 7")
        #expect(WiFiRates.mcs(signal: -50, accessPoint: ac80) == 9)
        #expect(WiFiRates.mcs(signal: -70, accessPoint: ac80) == 2, "6 dB more at 80 MHz: MCS 2 needs -71, MCS 3 -68")
        #expect(WiFiRates.mcs(signal: -95, accessPoint: ac20) == 0)
        // Up a step only 2 dB past the next sensitivity; down at once.
        #expect(WiFiRates.mcs(signal: -69.5, accessPoint: ac20, current: 3) == 3)
        #expect(WiFiRates.mcs(signal: -68.5, accessPoint: ac20, current: 3) == 3)
        #expect(WiFiRates.mcs(signal: -67.9, accessPoint: ac20, current: 3) == 4)
        #expect(WiFiRates.mcs(signal: -75, accessPoint: ac20, current: 5) == 2)
        #expect(abs(WiFiRates.goodput(mcs: 7, width: .mhz20) - 65e6 * 0.65) < 1)
        // Above MCS 0's sensitivity nothing is lost; 3 dB under it (0.1·10^0.75)^7; 4 dB under, everything.
        #expect(WiFiRates.loss(signal: -82, width: .mhz20) == 0)
        #expect(abs(WiFiRates.loss(signal: -85, width: .mhz20) - pow(0.1 * pow(10, 0.75), 7)) < 1e-12)
        #expect(WiFiRates.loss(signal: -86, width: .mhz20) == 1)
        #expect(MobilityDerivation.rounded(0.017_83) == 0.018)
        #expect(MobilityDerivation.rounded(1e-9) == 0)
    }

    @Test func cellularBandsStepDownAtOnceAndUpWithHysteresis() {
        #expect(CellularBands.bands[CellularBands.band(rsrp: -75)].name == "excellent")
        #expect(CellularBands.bands[CellularBands.band(rsrp: -95)].name == "fair")
        #expect(CellularBands.bands[CellularBands.band(rsrp: -130)].name == "edge")
        #expect(CellularBands.band(rsrp: -89, current: 2) == 2, "1 dB into a better band is not enough")
        #expect(CellularBands.band(rsrp: -87.5, current: 2) == 1)
        #expect(CellularBands.band(rsrp: -105, current: 0) == 3)
    }
}

@Suite struct MobilityDerivationTests {
    /// A corridor with three APs of one network 30 m apart, a phone walking its length at
    /// 1.4 m/s, and a lift at the end that takes 40 dB.
    func corridor(shadowing: Double = 0, seed: UInt64 = 1) -> MobilityDerivation {
        var indoor = Propagation.indoor
        indoor.shadowing = shadowing
        let mobility = Mobility(
            accessPoints: (0..<3).map { AccessPoint(name: "ap\($0 + 1)", network: "office", position: Position(Double($0) * 30, 3)) },
            obstacles: [Obstacle(name: "lift", from: Position(68, -2), to: Position(72, 2), attenuation: 40)],
            phones: [PhoneMovement(node: "phone", model: .waypoints(start: Position(0, 0), legs: [
                .move(to: Position(70, 0), speed: 1.4), .pause(.seconds(10)),
            ]))],
            indoor: indoor)
        return MobilityDerivation(mobility: mobility, duration: .seconds(70), seed: seed,
                                  networks: [.init(name: "office", isCellular: false, members: ["phone"])], line: 12)
    }

    /// Sampling every k-th step (a map of a long run) keeps the events exactly and the samples
    /// of steps 0, k, 2k, ... and the last.
    @Test func samplingEveryFewStepsKeepsTheEventsAndThinsTheSamples() {
        let every = corridor(shadowing: 4).derive(), sparse = corridor(shadowing: 4).derive(samplingEvery: 7)
        #expect(sparse.events == every.events && sparse.moves == every.moves)
        let steps = every.samples.count
        #expect(sparse.samples.count == (steps - 1) / 7 + 1 + ((steps - 1) % 7 == 0 ? 0 : 1))
        #expect(sparse.samples.first == every.samples.first && sparse.samples.last == every.samples.last)
        #expect(sparse.samples.dropLast().enumerated().allSatisfy { $0.element == every.samples[$0.offset * 7] })
        #expect(corridor().derive(samples: false).samples.isEmpty)
    }

    @Test func aWalkDownACorridorRoamsBetweenAccessPointsThenLosesTheNetworkInTheLift() {
        let result = corridor().derive()
        let events = result.events
        #expect(events.allSatisfy { $0.link == "office.phone" && $0.line == 12 })
        #expect(result.moves == 2, "ap1 → ap2 → ap3")
        let downs = events.filter { $0.action == .down }, ups = events.filter { $0.action == .up }
        #expect(downs.count == 2 && ups.count == 2)
        for (down, up) in zip(downs, ups) { #expect(up.at - down.at == .milliseconds(100)) }
        // Each roam happens past the trigger: the phone is well beyond the midpoint (15 m, 45 m)
        // when ap1 (ap2) has fallen under -70 dBm and the next AP is 8 dB better for 500 ms.
        let samples = result.samples
        let served = samples.map { $0.transmitter ?? "-" }
        #expect(Array(Set(served)).sorted() == ["-", "ap1", "ap2", "ap3"])
        if let first = served.firstIndex(of: "ap2") {
            #expect(samples[first].position.x > 15)
            #expect(samples[first - 1].signal! < -70)
        }
        // In the lift: every beacon lost, the phone leaves; it never joins again (still inside).
        let leaves = events.filter { $0.action == .membership(false) }
        #expect(leaves.count == 1)
        #expect(leaves.first.map { $0.at >= .seconds(48) && $0.at <= .seconds(51) } == true, "\(String(describing: leaves.first?.at))")
        #expect(!events.contains { $0.action == .membership(true) })
        // The first event sets the rate at the start; rates then fall and rise with the distance.
        guard case .set(let first) = events.first?.action else {
            Issue.record("the first event is not a set: \(String(describing: events.first))")
            return
        }
        #expect(events.first?.at == .zero)
        #expect(first.rate.map { abs($0.bitsPerSecond - WiFiRates.goodput(mcs: 8, width: .mhz20)) < 1 } == true)
        let rates = events.compactMap { event -> Double? in if case .set(let impairment) = event.action { impairment.rate?.bitsPerSecond } else { nil } }
        #expect(rates.count >= 6)
        #expect(Set(rates).count >= 4)
    }

    @Test func theSameSeedDerivesTheSameTimelineAndAnotherSeedAnother() {
        let first = corridor(shadowing: 4, seed: 7).derive().events
        let again = corridor(shadowing: 4, seed: 7).derive().events
        let other = corridor(shadowing: 4, seed: 8).derive().events
        #expect(first == again)
        #expect(first != other)
        #expect(first.count > corridor().derive().events.count, "shadowing moves the rate more often")
    }

    @Test func aPhoneOutOfReachAtTheStartIsOutsideUntilItJoins() {
        let mobility = Mobility(
            accessPoints: [AccessPoint(name: "cafe", network: "cafe", position: Position(0, 0))],
            phones: [PhoneMovement(node: "phone", model: .waypoints(start: Position(300, 0), legs: [.move(to: Position(0, 0), speed: 10)]))],
            indoor: Propagation(exponent: 3, shadowing: 0, correlationDistance: 5))
        let result = MobilityDerivation(mobility: mobility, duration: .seconds(40), seed: 1,
                                        networks: [.init(name: "cafe", isCellular: false, members: ["phone"])]).derive()
        let membership = result.events.filter { if case .membership = $0.action { true } else { false } }
        #expect(membership.count == 1)
        #expect(membership.first?.action == .membership(true))
        // Its conditions are set as it joins, and first (the order derived holds at one time).
        if let join = result.events.firstIndex(where: { $0.action == .membership(true) }), join > 0,
           case .set = result.events[join - 1].action {
            #expect(result.events[join - 1].at == result.events[join].at)
        } else {
            Issue.record("no set right before the join: \(result.events)")
        }
        // Joined 2 s (the join delay) after the AP first reached -77 dBm.
        let reach = result.samples.first { sample in
            -Propagation.referenceLoss(frequency: 5_180) - 30 * log10(max(sample.position.distance(to: Position(0, 0)), 1)) + 20 >= -77
        }
        #expect(reach.map { membership.first!.at - $0.at == .seconds(2) } == true)
        // Never in reach: it leaves at the start.
        let far = Mobility(accessPoints: mobility.accessPoints,
                           phones: [PhoneMovement(node: "phone", model: .waypoints(start: Position(900, 0), legs: []))], indoor: mobility.indoor)
        let never = MobilityDerivation(mobility: far, duration: .seconds(10), seed: 1,
                                       networks: [.init(name: "cafe", isCellular: false, members: ["phone"])]).derive()
        #expect(never.events.map(\.action) == [.membership(false)])
    }

    @Test func aPhoneDrivingPastTwoCellSitesIsHandedOverAfterTheTimeToTrigger() {
        let mobility = Mobility(
            cellSites: [CellSite(name: "west", network: "lte", position: Position(0, 0)),
                        CellSite(name: "east", network: "lte", position: Position(2_000, 0))],
            phones: [PhoneMovement(node: "car", model: .waypoints(start: Position(100, 50), legs: [.move(to: Position(1_900, 50), speed: 15)]))],
            outdoor: Propagation(exponent: 3.76, shadowing: 0, correlationDistance: 50, intercept: 15.3))
        let result = MobilityDerivation(mobility: mobility, duration: .seconds(130), seed: 3,
                                        networks: [.init(name: "lte", isCellular: true, members: ["car"])]).derive()
        #expect(result.moves == 1)
        let down = result.events.first { $0.action == .down }
        let up = result.events.first { $0.action == .up }
        #expect(down != nil && up.map { $0.at - down!.at == .milliseconds(50) } == true)
        // Past the midpoint by the A3 offset (3 dB) and 320 ms of time to trigger.
        let handover = result.samples.first { $0.transmitter == "east" }
        #expect(handover.map { $0.position.x > 1_000 && $0.position.x < 1_200 } == true, "\(String(describing: handover?.position))")
        // Rates per direction, by band: fast near a site, slow between them.
        let downRates = result.events.compactMap { event -> Double? in
            guard event.direction == .down, case .set(let impairment) = event.action else { return nil }
            return impairment.rate?.bitsPerSecond
        }
        #expect(downRates.first == 60e6)
        #expect(downRates.min()! < 60e6)
        #expect(!result.events.contains { if case .membership = $0.action { true } else { false } })
    }

    /// A random waypoint in an area too small for floating point to walk (a leg of 1e-100 m takes
    /// no time) with no pause: each step still ends, after at most 1,024 waypoints, and the phone
    /// stays in its area. (It spun forever before: a leg's remaining time never decreased.)
    @Test(arguments: [1e-100, 1e-300, 0.001])
    func aRandomWaypointInAVanishingAreaStillAdvances(size: Double) {
        let area = PhoneMovement.Area(from: Position(5, 5), to: Position(5 + size, 5 + size))
        let mobility = Mobility(accessPoints: [AccessPoint(name: "ap", network: "n", position: Position(0, 0))],
                                phones: [PhoneMovement(node: "p", model: .randomWaypoint(area: area, speed: 0.01...350, pause: .zero ... .zero))],
                                step: .milliseconds(100))
        let derivation = MobilityDerivation(mobility: mobility, duration: .seconds(600), seed: 3,
                                            networks: [.init(name: "n", isCellular: false, members: ["p"])])
        let samples = derivation.derive().samples
        #expect(samples.count == 6_001)
        #expect(samples.allSatisfy { $0.position.x >= 5 && $0.position.x <= 5 + size && $0.position.y >= 5 && $0.position.y <= 5 + size })
        #expect(samples.last?.at == .seconds(600))
    }

    /// Legs whose times do not add up in floating point (a pause of a few attoseconds, a leg far
    /// longer than the run) are walked in order, each step ending.
    @Test func waypointLegsOfAnyLengthEndEveryStep() {
        let legs: [PhoneMovement.Leg] = [.pause(.init(secondsComponent: 0, attosecondsComponent: 3)), .move(to: Position(1e-300, 0), speed: 350),
                                         .move(to: Position(1e6, 1e6), speed: 0.01), .pause(.seconds(5))]
        let mobility = Mobility(accessPoints: [AccessPoint(name: "ap", network: "n", position: Position(0, 0))],
                                phones: [PhoneMovement(node: "p", model: .waypoints(start: Position(0, 0), legs: legs))], step: .milliseconds(100))
        let samples = MobilityDerivation(mobility: mobility, duration: .seconds(60), seed: 1,
                                         networks: [.init(name: "n", isCellular: false, members: ["p"])]).derive().samples
        #expect(samples.count == 601)
        // 0.01 m/s towards (1e6, 1e6): 0.6 m in a minute, along the diagonal.
        let last = samples.last!.position
        #expect(abs(last.distance(to: Position(0, 0)) - 0.6) < 0.01 && abs(last.x - last.y) < 1e-9)
    }

    @Test(arguments: [false, true])
    func modelledMovementStaysInItsAreaAndIsSeeded(gaussMarkov: Bool) {
        let area = PhoneMovement.Area(from: Position(0, 0), to: Position(50, 20))
        let model: PhoneMovement.Model = gaussMarkov ? .gaussMarkov(area: area, speed: 1.2, alpha: 0.75)
            : .randomWaypoint(area: area, speed: 0.5...1.5, pause: .zero ... .seconds(5))
        let mobility = Mobility(accessPoints: [AccessPoint(name: "ap", network: "n", position: Position(25, 10))],
                                phones: (0..<5).map { PhoneMovement(node: "p\($0)", model: model) })
        let derivation = MobilityDerivation(mobility: mobility, duration: .seconds(600), seed: 9,
                                            networks: [.init(name: "n", isCellular: false, members: (0..<5).map { "p\($0)" })])
        let samples = derivation.derive().samples
        #expect(samples.count == 5 * 1_201)
        #expect(samples.allSatisfy { $0.position.x >= 0 && $0.position.x <= 50 && $0.position.y >= 0 && $0.position.y <= 20 })
        // It moves, no faster than the fastest speed allows (Gauss-Markov: a few times the mean).
        let p0 = samples.filter { $0.phone == "p0" }.map(\.position)
        let steps = zip(p0, p0.dropFirst()).map { $0.distance(to: $1) }
        #expect(steps.reduce(0, +) > 100)
        #expect(steps.max()! <= (gaussMarkov ? 5 : 0.75 + 1e-9))
        // Each phone its own path; the same seed the same paths.
        #expect(p0 != samples.filter { $0.phone == "p1" }.map(\.position))
        #expect(samples == derivation.derive().samples)
    }
}

/// `mobility:` read from a scenario: its events in the timeline, on the access links, the
/// phone outside a network it is out of reach of at the start, and every mistake refused where
/// it stands.
@Suite struct MobilityScenarioTests {
    static let base = """
        name: walk
        seed: 4
        duration: 60s
        nodes:
          phone: {}
          api: {internet: true}
        networks:
          - {name: office, type: wifi, members: [phone]}
          - {name: lte, type: cellular, members: [phone]}

        """

    static let mobility = """
        mobility:
          step: 500ms
          accessPoints:
            - {name: ap1, network: office, at: [0, 3], power: 20dBm}
            - {name: ap2, network: office, at: [30, 3], channel: 149, width: 40MHz}
          cells:
            - {name: tower, network: lte, at: [400, 200]}
          obstacles:
            - {name: lift, from: [50, -2], to: [54, 2], attenuation: 40dB}
          roaming: {trigger: -70dBm, margin: 8dB, scan: 300ms, outage: 80ms}
          phones:
            phone:
              start: [0, 0]
              path:
                - {to: [52, 0], speed: 1.4}
                - {pause: 20s}

        """

    func read(_ text: String) -> ScenarioReader.Outcome { ScenarioReader.parse(text, file: "s.yaml") }
    func errors(_ text: String) -> [String] { read(text).errors.map { "\($0.line):\($0.message)" } }

    @Test func movementBecomesTimelineOnThePhonesAccessLinks() throws {
        let outcome = read(Self.base + Self.mobility)
        let scenario = try #require(outcome.scenario, "\(errors(Self.base + Self.mobility))")
        #expect(scenario.mobility?.accessPoints.map(\.name) == ["ap1", "ap2"])
        #expect(scenario.mobility?.roaming.outage == .milliseconds(80))
        let office = scenario.timeline.filter { $0.link == "office.phone" }
        let lte = scenario.timeline.filter { $0.link == "lte.phone" }
        #expect(!office.isEmpty && !lte.isEmpty)
        #expect(scenario.timeline.allSatisfy { $0.line == 11 })
        #expect(scenario.timeline.map(\.at) == scenario.timeline.map(\.at).sorted())
        // One roam (ap1 → ap2), then the lift: the phone leaves the office network.
        #expect(office.filter { $0.action == .down }.count == 1)
        #expect(office.filter { $0.action == .membership(false) }.count == 1)
        #expect(scenario.networks.first { $0.name == "office" }?.joinedAtStart == ["phone"])
        // Same file, same timeline; the scenario's seed changes the shadowing.
        #expect(read(Self.base + Self.mobility).scenario?.timeline == scenario.timeline)
        let reseeded = read(Self.base.replacingOccurrences(of: "seed: 4", with: "seed: 5") + Self.mobility).scenario
        #expect(reseeded?.timeline != scenario.timeline)
        // Derived events count as the timeline's own do.
        #expect(TimelineSchedule(scenario: scenario).changes.count >= scenario.timeline.count)
    }

    @Test func aPhoneOutOfReachAtTheStartStartsOutside() throws {
        let far = Self.mobility.replacingOccurrences(of: "start: [0, 0]", with: "start: [300, 0]")
            .replacingOccurrences(of: "{to: [52, 0], speed: 1.4}", with: "{to: [10, 0], speed: 10}")
        let scenario = try #require(read(Self.base + far).scenario, "\(errors(Self.base + far))")
        #expect(scenario.networks.first { $0.name == "office" }?.joinedAtStart == [])
        #expect(scenario.timeline.first { $0.link == "office.phone" && $0.action == .membership(true) } != nil)
    }

    @Test(arguments: [
        ("    - {name: ap1, network: lte, at: [0, 3]}", "'lte' is not a Wi-Fi network of the scenario; its Wi-Fi networks: office"),
        ("    - {name: ap1, network: office, at: [0]}", "at must be a point [x, y] in metres"),
        ("    - {name: ap1, network: office, at: [0, 3], power: loud}", "power must be a number (in dBm), not 'loud'"),
        ("    - {name: ap1, network: office, at: [0, 3], power: 90dBm}", "power must be between -20 and 40 dBm, not 90dBm"),
        ("    - {name: ap1, network: office, at: [0, 3], channel: 20}", "channel must be 1-14 (2.4 GHz) or 32 and up (5 GHz), not 20"),
        ("    - {name: ap1, network: office, at: [0, 3], channel: 6, width: 80MHz}", "access point 'ap1': 80 MHz is a 5 GHz width (channel 36 and up)"),
        ("    - {name: ap1, network: office, at: [0, 3], colour: red}", "unknown key 'colour' in access point 'ap1'; known keys: name, network, at, power, channel, width"),
        ("    - {name: tower, network: office, at: [0, 3]}", "'tower' names another access point or cell site already"),
    ])
    func mistakesInAccessPointsAreRefusedWhereTheyStand(line: String, message: String) {
        let text = Self.base + Self.mobility.replacingOccurrences(of: "    - {name: ap1, network: office, at: [0, 3], power: 20dBm}", with: line)
        let found = errors(text)
        #expect(found.contains { $0.hasSuffix(":" + message) }, "\(found)")
    }

    @Test func mistakesInMovementAreRefused() {
        func with(_ phones: String) -> [String] {
            errors(Self.base + Self.mobility.components(separatedBy: "  phones:")[0] + "  phones:\n" + phones)
        }
        #expect(with("    phone: {start: [0, 0]}").contains { $0.contains("needs exactly one of path (with start), track, randomWaypoint or gaussMarkov") })
        #expect(with("    phone: {start: [0, 0], path: [], gaussMarkov: {area: [[0, 0], [5, 5]], speed: 1}}")
            .contains { $0.contains("not path and gaussMarkov") })
        #expect(with("    ghost: {start: [0, 0], path: []}").contains { $0.hasSuffix(":'ghost' is not a node of the scenario") })
        #expect(with("    api: {start: [0, 0], path: []}").contains { $0.contains("phone 'api' is a member of no network with access points or cell sites") })
        #expect(with("    phone: {randomWaypoint: {area: [[0, 0], [0, 5]], speed: 1}}").contains { $0.contains("must have a width and a height") })
        #expect(with("    phone: {randomWaypoint: {area: [[0, 0], [9, 5]], speed: [2, 1]}}").contains { $0.contains("the lowest comes first") })
        #expect(with("    phone: {start: [0, 0], path: [{to: [1, 1], speed: 0}]}").contains { $0.contains("speed must be between 0.01 and 350 m/s") })
        #expect(with("    phone: {start: [1e9, 0], path: []}").contains { $0.contains("start x must be between -1000000 and 1000000 m") })
        let valid = with("    phone: {randomWaypoint: {area: [[0, 0], [60, 10]], speed: [0.5, 1.5], pause: [0s, 5s]}}")
        #expect(valid.isEmpty, "\(valid)")
        #expect(with("    phone: {gaussMarkov: {area: [[0, 0], [60, 10]], speed: 1.2, alpha: 0.9}}").isEmpty)
    }

    @Test func aDerivationThatWouldNotBeBoundedIsRefused() {
        func scenario(phones: Int, step: String) -> String {
            let names = (0..<phones).map { "p\($0)" }
            return """
                name: crowd
                duration: 24h
                nodes:
                \(names.map { "  \($0): {}" }.joined(separator: "\n"))
                  api: {internet: true}
                networks:
                  - {name: office, type: wifi, members: [\(names.joined(separator: ", "))]}
                  - {name: lte, type: cellular, members: [\(names.joined(separator: ", "))]}
                mobility:
                  step: \(step)
                  accessPoints: [{name: ap1, network: office, at: [0, 3]}]
                  cells: [{name: tower, network: lte, at: [400, 200]}]
                  phones:
                \(names.map { "    \($0): {start: [0, 0], path: []}" }.joined(separator: "\n"))

                """
        }
        // 6 phones × 2 networks × 864,001 steps of 100 ms: more than 10 million samples.
        #expect(errors(scenario(phones: 6, step: "100ms")) == [
            "15:mobility samples 10368012 positions (phones × networks × steps of 100ms); Roam derives at most 10000000: use a longer step, or fewer phones",
        ])
        // Obstacles and transmitters count: 2 phones for a day at 100 ms among 600 obstacles (3.5
        // million samples, within their bound) is refused before any derivation, with the figure
        // (2.1 billion units of work).
        let obstacles = (0..<600).map { "    - {name: o\($0), from: [\($0), 0], to: [\($0 + 1), 5], attenuation: 3dB}" }.joined(separator: "\n")
        let crowded = scenario(phones: 2, step: "100ms").replacingOccurrences(of: "  phones:\n", with: "  obstacles:\n\(obstacles)\n  phones:\n")
        let refused = errors(crowded)
        #expect(refused.count == 1 && refused[0].contains("mobility would take") && refused[0].contains("Roam derives at most 60000000"), "\(refused)")
        // Too many obstacles or transmitters are refused where they stand.
        let many = (0...1_000).map { "    - {name: o\($0), from: [0, 0], to: [1, 1], attenuation: 1dB}" }.joined(separator: "\n")
        let tooMany = errors(scenario(phones: 1, step: "1s").replacingOccurrences(of: "  phones:\n", with: "  obstacles:\n\(many)\n  phones:\n"))
        #expect(tooMany.contains { $0.hasSuffix("mobility may place at most 1000 obstacles, not 1001") }, "\(tooMany)")
        // At a second's step, the same day derives (a still phone changes nothing after the start).
        let outcome = read(scenario(phones: 6, step: "1s"))
        #expect(outcome.errors.isEmpty, "\(outcome.errors)")
        #expect(outcome.scenario.map { $0.timeline.count > 0 && $0.timeline.count < 100 } == true)
    }
}
