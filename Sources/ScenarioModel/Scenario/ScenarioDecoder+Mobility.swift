import RoamCore
import Yams

// `mobility:`: where the access points and cell sites of the scenario's networks stand, and how
// its phones move among them. Read after the networks; derived into timeline events by
// `MobilityDerivation` in `scenario(_:)`.
extension ScenarioDecoder {
    /// The largest coordinate, metres (a thousand kilometres).
    static let maximumCoordinate = 1e6

    func mobility(_ node: Node, nodes: Set<String>, networks: [NetworkSpec]) -> Mobility? {
        guard var top = fields(node, "mobility") else { return nil }
        var mobility = Mobility()
        mobility.line = node.line
        var ok = true
        let wifi = Set(networks.filter { $0.type != .cellular }.map(\.name))
        let cellular = Set(networks.filter { $0.type == .cellular }.map(\.name))
        var transmitterNames: Set<String> = []
        func transmitterName(_ fields: inout Fields, _ what: String) -> String? {
            let name = take(&fields, "name", required: true) { self.identifier($0, "\(what) name", maxLength: 32) }
            if let name, !transmitterNames.insert(name).inserted {
                error("'\(name)' names another access point or cell site already", at: fields.keyNode("name")!)
                return nil
            }
            return name
        }
        func network(_ fields: inout Fields, among names: Set<String>, kind: String) -> String? {
            take(&fields, "network", required: true) { value -> String? in
                guard let name = self.string(value, "network") else { return nil }
                guard names.contains(name) else {
                    let all = names.sorted()
                    self.error("'\(escapedForMessage(name))' is not a \(kind) network of the scenario"
                        + (all.isEmpty ? " (it has none: add one under networks:)" : "; its \(kind) networks: \(all.joined(separator: ", "))"), at: value)
                    return nil
                }
                return name
            }
        }

        if let value = top.take("step") {
            mobility.step = duration(value, "mobility step", minimum: Mobility.minimumStep, maximum: Mobility.maximumStep) ?? mobility.step
        }
        /// A list of at most `maximum` items, else an error at it.
        func bounded(_ items: [Node]?, _ value: Node, _ what: String, maximum: Int) -> [Node]? {
            guard let items else { return nil }
            guard items.count <= maximum else {
                error("mobility may place at most \(maximum) \(what), not \(items.count)", at: value)
                ok = false
                return nil
            }
            return items
        }
        if let value = top.take("accessPoints"),
           let items = bounded(list(value, "accessPoints"), value, "access points", maximum: MobilityDerivation.maximumTransmitters) {
            for item in items {
                guard var fields = fields(item, "an access point") else { ok = false; continue }
                let name = transmitterName(&fields, "access point")
                fields = Fields(fields, context: name.map { "access point '\($0)'" } ?? "this access point")
                let network = network(&fields, among: wifi, kind: "Wi-Fi")
                let position = take(&fields, "at", required: true) { self.position($0, "at") }
                let power = take(&fields, "power") { self.number($0, "power", range: -20...40, unit: "dBm") }
                let channel = take(&fields, "channel") { value -> Int? in
                    guard let channel = self.integer(value, "channel", range: 1...177) else { return nil }
                    guard (1...14).contains(channel) || channel >= 32 else {
                        self.error("channel must be 1-14 (2.4 GHz) or 32 and up (5 GHz), not \(channel)", at: value)
                        return nil
                    }
                    return channel
                }
                let width = take(&fields, "width") { value -> AccessPoint.Width? in
                    guard let text = self.string(value, "width"), let width = AccessPoint.Width(rawValue: Int(text.hasSuffix("MHz") ? String(text.dropLast(3)) : text) ?? 0) else {
                        self.error("width must be 20MHz, 40MHz or 80MHz", at: value)
                        return nil
                    }
                    return width
                }
                finish(fields, known: ["name", "network", "at", "power", "channel", "width"])
                guard let name, let network, let position else { ok = false; continue }
                let accessPoint = AccessPoint(name: name, network: network, position: position, power: power ?? 20, channel: channel ?? 36,
                                              width: width ?? .mhz20)
                if accessPoint.channel <= 14, accessPoint.width == .mhz80 {
                    error("access point '\(name)': 80 MHz is a 5 GHz width (channel 36 and up)", at: item)
                    ok = false
                    continue
                }
                mobility.accessPoints.append(accessPoint)
            }
        }
        if let value = top.take("cells"),
           let items = bounded(list(value, "cells"), value, "cell sites", maximum: MobilityDerivation.maximumTransmitters) {
            for item in items {
                guard var fields = fields(item, "a cell site") else { ok = false; continue }
                let name = transmitterName(&fields, "cell site")
                fields = Fields(fields, context: name.map { "cell site '\($0)'" } ?? "this cell site")
                let network = network(&fields, among: cellular, kind: "cellular")
                let position = take(&fields, "at", required: true) { self.position($0, "at") }
                let power = take(&fields, "power") { self.number($0, "power", range: 0...60, unit: "dBm") }
                let frequency = take(&fields, "frequency") { self.number($0, "frequency", range: 400...6_000, unit: "MHz") }
                finish(fields, known: ["name", "network", "at", "power", "frequency"])
                guard let name, let network, let position else { ok = false; continue }
                mobility.cellSites.append(CellSite(name: name, network: network, position: position, power: power ?? 46, frequency: frequency ?? 1_800))
            }
        }
        if let value = top.take("obstacles"),
           let items = bounded(list(value, "obstacles"), value, "obstacles", maximum: MobilityDerivation.maximumObstacles) {
            for item in items {
                guard var fields = fields(item, "an obstacle") else { ok = false; continue }
                let name = take(&fields, "name", required: true) { self.identifier($0, "obstacle name", maxLength: 32) }
                let from = take(&fields, "from", required: true) { self.position($0, "from") }
                let to = take(&fields, "to", required: true) { self.position($0, "to") }
                let attenuation = take(&fields, "attenuation", required: true) { self.number($0, "attenuation", range: 0...200, unit: "dB") }
                finish(fields, known: ["name", "from", "to", "attenuation"])
                guard let name, let from, let to, let attenuation else { ok = false; continue }
                mobility.obstacles.append(Obstacle(name: name, from: from, to: to, attenuation: attenuation))
            }
        }
        if let value = top.take("indoor") { mobility.indoor = propagation(value, "indoor", defaults: .indoor) ?? mobility.indoor }
        if let value = top.take("outdoor") { mobility.outdoor = propagation(value, "outdoor", defaults: .outdoor) ?? mobility.outdoor }
        if let value = top.take("roaming"), var fields = fields(value, "roaming") {
            var roaming = mobility.roaming
            roaming.trigger = take(&fields, "trigger") { self.number($0, "trigger", range: -120...0, unit: "dBm") } ?? roaming.trigger
            roaming.margin = take(&fields, "margin") { self.number($0, "margin", range: 0...60, unit: "dB") } ?? roaming.margin
            roaming.scan = take(&fields, "scan") { self.duration($0, "scan", maximum: .seconds(60)) } ?? roaming.scan
            roaming.outage = take(&fields, "outage") { self.duration($0, "outage", maximum: .seconds(60)) } ?? roaming.outage
            roaming.minimum = take(&fields, "minimum") { self.number($0, "minimum", range: -120...0, unit: "dBm") } ?? roaming.minimum
            roaming.join = take(&fields, "join") { self.number($0, "join", range: -120...0, unit: "dBm") } ?? roaming.join
            roaming.joinDelay = take(&fields, "joinDelay") { self.duration($0, "joinDelay", maximum: .seconds(600)) } ?? roaming.joinDelay
            finish(fields, known: ["trigger", "margin", "scan", "outage", "minimum", "join", "joinDelay"])
            if roaming.join < roaming.minimum {
                error("roaming: join (\(roaming.join.roamTrimmed) dBm) must be at least minimum (\(roaming.minimum.roamTrimmed) dBm), or the phone would join and leave at once", at: value)
                ok = false
            }
            mobility.roaming = roaming
        }
        if let value = top.take("handover"), var fields = fields(value, "handover") {
            var handover = mobility.handover
            handover.offset = take(&fields, "offset") { self.number($0, "offset", range: 0...30, unit: "dB") } ?? handover.offset
            handover.timeToTrigger = take(&fields, "timeToTrigger") { self.duration($0, "timeToTrigger", maximum: .seconds(60)) } ?? handover.timeToTrigger
            handover.interruption = take(&fields, "interruption") { self.duration($0, "interruption", maximum: .seconds(60)) } ?? handover.interruption
            handover.minimum = take(&fields, "minimum") { self.number($0, "minimum", range: -160...0, unit: "dBm") } ?? handover.minimum
            handover.attach = take(&fields, "attach") { self.number($0, "attach", range: -160...0, unit: "dBm") } ?? handover.attach
            finish(fields, known: ["offset", "timeToTrigger", "interruption", "minimum", "attach"])
            if handover.attach < handover.minimum {
                error("handover: attach (\(handover.attach.roamTrimmed) dBm) must be at least minimum (\(handover.minimum.roamTrimmed) dBm)", at: value)
                ok = false
            }
            mobility.handover = handover
        }
        let driven = Set(mobility.accessPoints.map(\.network) + mobility.cellSites.map(\.network))
        if let value = top.take("phones") {
            if case .mapping(let mapping) = value {
                for (key, movement) in mapping {
                    guard let phone = string(key, "a phone") else { ok = false; continue }
                    guard nodes.contains(phone) else {
                        error("'\(escapedForMessage(phone))' is not a node of the scenario", at: key)
                        ok = false
                        continue
                    }
                    let memberships = networks.filter { $0.members.contains(phone) && driven.contains($0.name) }
                    if memberships.isEmpty {
                        error("phone '\(phone)' is a member of no network with access points or cell sites here: nothing it does would change", at: key)
                        ok = false
                        continue
                    }
                    guard let model = self.movement(movement, phone: phone) else { ok = false; continue }
                    mobility.phones.append(PhoneMovement(node: phone, model: model))
                }
            } else {
                error("phones must be a mapping of each moving node to its movement", at: value)
                ok = false
            }
        } else {
            error("mobility needs 'phones': which nodes move, and how", at: node)
            ok = false
        }
        finish(top, known: ["step", "accessPoints", "cells", "obstacles", "indoor", "outdoor", "roaming", "handover", "phones"])
        return ok ? mobility : nil
    }

    private func propagation(_ node: Node, _ what: String, defaults: Propagation) -> Propagation? {
        guard var fields = fields(node, what) else { return nil }
        var model = defaults
        model.exponent = take(&fields, "exponent") { self.number($0, "exponent", range: 1...8, unit: nil) } ?? model.exponent
        model.shadowing = take(&fields, "shadowing") { self.number($0, "shadowing", range: 0...20, unit: "dB") } ?? model.shadowing
        model.correlationDistance = take(&fields, "correlation") { self.number($0, "correlation", range: 0.1...10_000, unit: "m") }
            ?? model.correlationDistance
        if let value = fields.take("intercept") { model.intercept = number(value, "intercept", range: -50...200, unit: "dB") ?? model.intercept }
        finish(fields, known: ["exponent", "shadowing", "correlation", "intercept"])
        return model
    }

    /// `start` + `path`, `randomWaypoint: {...}` or `gaussMarkov: {...}`.
    private func movement(_ node: Node, phone: String) -> PhoneMovement.Model? {
        guard var fields = fields(node, "the movement of '\(phone)'") else { return nil }
        let forms = ["path", "track", "randomWaypoint", "gaussMarkov"].filter { fields.has($0) }
        guard forms.count == 1 else {
            error("the movement of '\(phone)' needs exactly one of path (with start), track, randomWaypoint or gaussMarkov"
                + (forms.isEmpty ? "" : ", not \(forms.joined(separator: " and "))"), at: node)
            return nil
        }
        var model: PhoneMovement.Model?
        switch forms[0] {
        case "path":
            let start = take(&fields, "start", required: true) { self.position($0, "start") }
            let legs = take(&fields, "path") { value -> [PhoneMovement.Leg]? in
                guard let items = self.list(value, "path") else { return nil }
                var legs: [PhoneMovement.Leg] = []
                for item in items {
                    guard var leg = self.fields(item, "a step of the path") else { return nil }
                    if leg.has("pause") {
                        guard let pause = self.take(&leg, "pause", { self.duration($0, "pause") }) else { return nil }
                        self.finish(leg, known: ["pause"])
                        legs.append(.pause(pause))
                    } else {
                        let to = self.take(&leg, "to", required: true) { self.position($0, "to") }
                        let speed = self.take(&leg, "speed", required: true) { self.number($0, "speed", range: 0.01...350, unit: "m/s") }
                        self.finish(leg, known: ["to", "speed"])
                        guard let to, let speed else { return nil }
                        legs.append(.move(to: to, speed: speed))
                    }
                }
                return legs
            }
            if let start, let legs { model = .waypoints(start: start, legs: legs) }
            finish(fields, known: ["start", "path"])
        case "track":
            // A recorded track: a file of SECONDS,X,Y relative to the scenario's directory.
            model = take(&fields, "track") { value -> PhoneMovement.Model? in
                guard let path = self.string(value, "track"), !path.isEmpty else { return nil }
                let outcome = TraceReadError.readFile(path, what: "track", baseDirectory: self.baseDirectory, scenarioOwner: self.scenarioOwner,
                                                      maximumBytes: RecordedTrack.maximumFileSize)
                switch outcome.map({ RecordedTrack.parse($0).flatMap(RecordedTrack.path) }) {
                case .success(.success(let path)): return .waypoints(start: path.start, legs: path.legs)
                case .success(.failure(let problem)):
                    self.error("track '\(escapedForMessage(path))' line \(problem.line): \(problem.message)", at: value)
                case .failure(let problem):
                    self.error(problem.message, at: value)
                }
                return nil
            } ?? nil
            finish(fields, known: ["track"])
        case "randomWaypoint":
            let area = take(&fields, "randomWaypoint") { value -> PhoneMovement.Model? in
                guard var spec = self.fields(value, "randomWaypoint") else { return nil }
                let area = self.take(&spec, "area", required: true) { self.area($0) }
                let speed = self.take(&spec, "speed", required: true) { self.numberRange($0, "speed", range: 0.01...350, unit: "m/s") }
                let pause = self.take(&spec, "pause") { value -> ClosedRange<Duration>? in
                    if case .sequence = value {
                        guard let items = self.list(value, "pause"), items.count == 2,
                              let low = self.duration(items[0], "pause"), let high = self.duration(items[1], "pause"), low <= high else {
                            self.error("pause must be a duration or [shortest, longest]", at: value)
                            return nil
                        }
                        return low...high
                    }
                    return self.duration(value, "pause").map { $0...$0 }
                }
                self.finish(spec, known: ["area", "speed", "pause"])
                guard let area, let speed else { return nil }
                return .randomWaypoint(area: area, speed: speed, pause: pause ?? .zero ... .zero)
            }
            model = area ?? nil
            finish(fields, known: ["randomWaypoint"])
        default:
            let gauss = take(&fields, "gaussMarkov") { value -> PhoneMovement.Model? in
                guard var spec = self.fields(value, "gaussMarkov") else { return nil }
                let area = self.take(&spec, "area", required: true) { self.area($0) }
                let speed = self.take(&spec, "speed", required: true) { self.number($0, "speed", range: 0.01...350, unit: "m/s") }
                let alpha = self.take(&spec, "alpha") { self.number($0, "alpha", range: 0...1, unit: nil) }
                self.finish(spec, known: ["area", "speed", "alpha"])
                guard let area, let speed else { return nil }
                return .gaussMarkov(area: area, speed: speed, alpha: alpha ?? 0.75)
            }
            model = gauss ?? nil
            finish(fields, known: ["gaussMarkov"])
        }
        return model
    }

    /// `[x, y]` in metres.
    func position(_ node: Node, _ what: String) -> Position? {
        guard case .sequence(let items) = node, items.count == 2 else {
            error("\(what) must be a point [x, y] in metres", at: node)
            return nil
        }
        let range = -Self.maximumCoordinate...Self.maximumCoordinate
        guard let x = number(items[0], "\(what) x", range: range, unit: "m"), let y = number(items[1], "\(what) y", range: range, unit: "m") else { return nil }
        return Position(x, y)
    }

    /// `[[x, y], [x, y]]`: opposite corners, with some extent each way.
    private func area(_ node: Node) -> PhoneMovement.Area? {
        guard case .sequence(let items) = node, items.count == 2, let from = position(items[0], "area"), let to = position(items[1], "area") else {
            if case .sequence(let items) = node, items.count == 2 { return nil }
            error("area must be two opposite corners [[x, y], [x, y]] in metres", at: node)
            return nil
        }
        guard from.x != to.x, from.y != to.y else {
            error("area must have a width and a height: its corners \(from) and \(to) share a side", at: node)
            return nil
        }
        return PhoneMovement.Area(from: from, to: to)
    }

    /// A number (or `[low, high]`) within `range`.
    private func numberRange(_ node: Node, _ what: String, range: ClosedRange<Double>, unit: String?) -> ClosedRange<Double>? {
        if case .sequence(let items) = node {
            guard items.count == 2, let low = number(items[0], what, range: range, unit: unit), let high = number(items[1], what, range: range, unit: unit) else {
                if items.count != 2 { error("\(what) must be a number or [lowest, highest]", at: node) }
                return nil
            }
            guard low <= high else {
                error("\(what) [\(low.roamTrimmed), \(high.roamTrimmed)]: the lowest comes first", at: node)
                return nil
            }
            return low...high
        }
        return number(node, what, range: range, unit: unit).map { $0...$0 }
    }

    /// A decimal number, written bare or followed by `unit` (`-70dBm`, `-70 dBm`, `-70`), within `range`.
    func number(_ node: Node, _ what: String, range: ClosedRange<Double>, unit: String?) -> Double? {
        guard let raw = string(node, what) else { return nil }
        var text = Substring(raw)
        if let unit, text.hasSuffix(unit) { text = text.dropLast(unit.count) }
        while text.last == " " { text = text.dropLast() }
        while text.first == " " { text = text.dropFirst() }
        let allowed = text.allSatisfy { $0.isASCII && ($0.isNumber || $0 == "." || $0 == "-" || $0 == "+" || $0 == "e" || $0 == "E") }
        guard allowed, text.utf8.count <= 32, let value = Double(String(text)), value.isFinite else {
            error("\(what) must be a number\(unit.map { " (in \($0))" } ?? ""), not '\(escapedForMessage(raw))'", at: node)
            return nil
        }
        guard range.contains(value) else {
            error("\(what) must be between \(range.lowerBound.roamTrimmed) and \(range.upperBound.roamTrimmed)\(unit.map { " \($0)" } ?? ""), not \(escapedForMessage(raw))", at: node)
            return nil
        }
        return value
    }
}
