import RoamReport
import ScenarioModel

extension Scenario {
    /// The report's map of a scenario with `mobility:`: its transmitters and obstacles, and
    /// each phone's track derived again exactly as the timeline was (the same file, seed and
    /// full-length duration; times scaled as the run was), thinned to
    /// ``RunSummary/MobilityMap/maximumPoints`` a phone. At each step the phone used its Wi-Fi
    /// network where it had one, else its cellular one (the path monitor's order).
    func mobilityMap(timeScale: Double) -> RunSummary.MobilityMap? {
        guard let mobility else { return nil }
        let factor = timeScale > 0 ? timeScale : 1
        let derivation = MobilityDerivation(
            mobility: mobility, duration: duration / factor, seed: seed,
            networks: networks.map { MobilityDerivation.Network(name: $0.name, isCellular: $0.type == .cellular, members: $0.members) },
            line: mobility.line)
        guard derivation.sampleCount <= MobilityDerivation.maximumSamples, derivation.workUnits <= MobilityDerivation.maximumWork else { return nil }
        // Only the steps the map keeps are sampled: memory stays bounded whatever the run's length.
        // Steps 0, k, 2k, ... and the last: at most maximumPoints of them.
        let stepCount = Int(derivation.duration / mobility.step) + 1
        let room = RunSummary.MobilityMap.maximumPoints - 2
        let sampling = max(1, (stepCount - 1 + room - 1) / room)
        let cellular = Set(networks.filter { $0.type == .cellular }.map(\.name))
        // Each phone's steps, in time order, one sample per network each.
        var steps: [String: [Duration: [MobilityDerivation.Sample]]] = [:]
        for sample in derivation.derive(samplingEvery: sampling).samples { steps[sample.phone, default: [:]][sample.at, default: []].append(sample) }
        var tracks: [RunSummary.MobilityMap.Track] = []
        for phone in mobility.phones.map(\.node) {
            guard let byTime = steps[phone] else { continue }
            let times = byTime.keys.sorted()
            // Evenly thinned to the bound, the last step kept.
            let stride = max(1, (times.count + RunSummary.MobilityMap.maximumPoints - 1) / RunSummary.MobilityMap.maximumPoints)
            var points: [RunSummary.MobilityMap.Point] = []
            for (index, time) in times.enumerated() where index % stride == 0 || index == times.count - 1 {
                guard points.count < RunSummary.MobilityMap.maximumPoints, let samples = byTime[time], let first = samples.first else { continue }
                let used = samples.filter { $0.transmitter != nil }.min { (cellular.contains($0.network) ? 1 : 0, $0.network) < (cellular.contains($1.network) ? 1 : 0, $1.network) }
                points.append(RunSummary.MobilityMap.Point(t: (time * factor).seconds, x: first.position.x, y: first.position.y,
                                                          network: used?.network, transmitter: used?.transmitter, signal: used?.signal))
            }
            tracks.append(RunSummary.MobilityMap.Track(node: phone, points: points))
        }
        let transmitters = mobility.accessPoints.map {
            RunSummary.MobilityMap.Transmitter(name: $0.name, network: $0.network, isCellular: false, x: $0.position.x, y: $0.position.y)
        } + mobility.cellSites.map {
            RunSummary.MobilityMap.Transmitter(name: $0.name, network: $0.network, isCellular: true, x: $0.position.x, y: $0.position.y)
        }
        let obstacles = mobility.obstacles.map {
            RunSummary.MobilityMap.Obstacle(name: $0.name, x0: $0.from.x, y0: $0.from.y, x1: $0.to.x, y1: $0.to.y)
        }
        return RunSummary.MobilityMap(transmitters: Array(transmitters.prefix(RunSummary.MobilityMap.maximumItems)),
                                      obstacles: Array(obstacles.prefix(RunSummary.MobilityMap.maximumItems)),
                                      tracks: Array(tracks.prefix(RunSummary.MobilityMap.maximumItems)))
    }
}
