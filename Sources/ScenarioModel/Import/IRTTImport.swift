import RoamCore
import RoamSystem

/// `roam import irtt`: a recording of IRTT (the Isochronous Round-Trip Tester: `irtt client -o
/// FILE.json`, Debian's `irtt` package) made into a scenario whose one link plays, window by
/// window, the one-way delays and the losses each direction had.
///
/// What is read is IRTT's documented JSON output (irtt-client(1), "OUTPUT", `json_format` 1):
/// `config.params.interval` (nanoseconds), and each of `round_trips`: `seqno`; `lost` (`false`,
/// `true`, `true_up` or `true_down`); `timestamps.client.send` (`monotonic` or `wall`,
/// nanoseconds), the time base; `timestamps.late`; `delay.send` and `delay.receive` (the one-way
/// delays, nanoseconds, when the server stamped its packets) and `delay.rtt`.
public enum IRTTImport {
    /// The largest file read: at 10 ms intervals about 15 minutes of round trips.
    public static let maximumFileSize = 32 << 20

    /// How a round trip was lost.
    public enum Loss: Sendable, Hashable {
        /// It came back.
        case none
        /// The request never reached the server (`true_up`).
        case up
        /// The reply never came back (`true_down`).
        case down
        /// Lost, IRTT could not tell where (`true`).
        case unknown
    }

    /// One round trip, on the recording's own clock.
    public struct RoundTrip: Sendable, Hashable {
        /// When its request was sent, from the first round trip's.
        public var at: Duration
        public var loss: Loss
        /// Its one-way delays (client to server, server to client) and round-trip time, where
        /// the recording has them.
        public var sendDelay: Duration?
        public var receiveDelay: Duration?
        public var roundTrip: Duration?
        /// Whether it came back out of order (`timestamps.late`).
        public var late: Bool
    }

    /// A recording as read.
    public struct Recording: Sendable, Hashable {
        /// `version.irtt`, when given.
        public var version: String?
        /// The send interval (`config.params.interval`), when given.
        public var interval: Duration?
        public var roundTrips: [RoundTrip]
    }

    /// One window of the recording: what each direction had.
    public struct Window: Sendable, Hashable {
        public var start: Duration
        public var length: Duration
        /// Round trips whose request went in the window.
        public var sent: Int
        /// The median one-way delay each way, nil when nothing came back in the window.
        public var upDelay: Duration?
        public var downDelay: Duration?
        /// The share lost each way: a loss IRTT could not place counts on the uplink, so that the
        /// round trip loses what it lost (`1 - (1 - up)(1 - down)`).
        public var upLoss: Double
        public var downLoss: Double
    }

    /// Reads a recording; the error names the file and what is wrong, and where.
    public static func read(_ path: String) throws(ScenarioError) -> Recording {
        let bytes: [UInt8]
        do throws(SafePathError) {
            bytes = try readRegularFile(atPath: path, maximumBytes: maximumFileSize)
        } catch {
            throw ScenarioError("cannot read the IRTT recording: \(error.message)")
        }
        switch parse(bytes) {
        case .success(let recording): return recording
        case .failure(let error): throw ScenarioError("\(escapedForMessage(path, maximumLength: 256)): \(error.message)")
        }
    }

    /// Parses IRTT's JSON output.
    public static func parse(_ bytes: [UInt8]) -> Result<Recording, ScenarioError> {
        if bytes.starts(with: [0x1f, 0x8b]) {
            return .failure(ScenarioError("a gzip file (irtt writes FILE.json.gz unless the name ends in .json): gunzip it first"))
        }
        guard bytes.count <= maximumFileSize else {
            return .failure(ScenarioError("\(bytes.count) bytes: more than \(maximumFileSize >> 20) MiB (record at a longer interval, or split the test)"))
        }
        let document: JSONValue
        do throws(JSONParseError) {
            document = try JSONValue.parse(String(decoding: bytes, as: UTF8.self))
        } catch {
            return .failure(ScenarioError("not JSON: \(error)"))
        }
        guard case .object = document else { return .failure(ScenarioError("not IRTT's JSON output: the document is not an object")) }
        if let format = document["version"]?["json_format"]?.intValue, format != 1 {
            return .failure(ScenarioError("IRTT JSON format \(format): only format 1 (irtt 0.9) is read"))
        }
        guard let trips = document["round_trips"]?.arrayValue else {
            return .failure(ScenarioError("no round_trips: not IRTT's JSON output (irtt client -o FILE.json), or a streaming test (-s), which records none"))
        }
        var interval: Duration?
        if let nanoseconds = document["config"]?["params"]?["interval"]?.intValue {
            guard nanoseconds > 0, nanoseconds <= 3_600_000_000_000 else {
                return .failure(ScenarioError("config.params.interval \(nanoseconds) ns is not an interval"))
            }
            interval = .nanoseconds(nanoseconds)
        }
        var roundTrips: [RoundTrip] = []
        roundTrips.reserveCapacity(trips.count)
        // The time base, chosen by the first round trip: the client's monotonic send stamp,
        // else its wall clock's, else the sequence number times the interval.
        var base: (clock: String, origin: Int64)?
        for (index, trip) in trips.enumerated() {
            func problem(_ message: String) -> Result<Recording, ScenarioError> {
                .failure(ScenarioError("round_trips[\(index)]: \(message)"))
            }
            guard case .object = trip else { return problem("not an object") }
            let loss: Loss
            switch trip["lost"] {
            case .bool(false), .string("false"): loss = .none
            case .bool(true), .string("true"): loss = .unknown
            case .string("true_up"): loss = .up
            case .string("true_down"): loss = .down
            default: return problem("lost is not false, true, true_up or true_down")
            }
            func stamp(_ clock: String) -> Int64? {
                if clock == "seqno" {
                    guard let interval, let seqno = trip["seqno"]?.intValue, (0...Int64(UInt32.max)).contains(seqno) else { return nil }
                    return seqno &* interval.nanosecondsValue
                }
                return trip["timestamps"]?["client"]?["send"]?[clock]?.intValue
            }
            if base == nil {
                guard let clock = ["monotonic", "wall", "seqno"].first(where: { stamp($0) != nil }), let origin = stamp(clock) else {
                    return problem("no timestamps.client.send, and no interval and seqno to place it by")
                }
                base = (clock, origin)
            }
            guard let base, let sent = stamp(base.clock) else {
                return problem(base.map { $0.clock == "seqno" ? "no seqno within 0 to 2^32-1" : "no timestamps.client.send.\($0.clock), which the first round trip has" } ?? "no time")
            }
            let at = sent &- base.origin
            guard (0...ScenarioLimits.maximumDuration.nanosecondsValue).contains(at) else {
                return problem("sent \(at) ns after the first round trip: outside 0 to 24 h")
            }
            // A one-way delay within a link's bound (60 s; negative where the clocks were not
            // in step), a round trip within twice that.
            func delay(_ key: String, bound: Int64) -> Duration?? {
                guard let value = trip["delay"]?[key] else { return .some(nil) }
                guard let nanoseconds = value.intValue, (-bound...bound).contains(nanoseconds) else { return nil }
                return .some(.nanoseconds(nanoseconds))
            }
            let bound = ScenarioLimits.maximumDelay.nanosecondsValue
            guard let sendDelay = delay("send", bound: bound), let receiveDelay = delay("receive", bound: bound),
                  let roundTrip = delay("rtt", bound: 2 * bound) else {
                return problem("a delay that is not a number of nanoseconds within 60 s (a round trip within 120 s)")
            }
            if let roundTrip, roundTrip < .zero { return problem("a negative round-trip time") }
            roundTrips.append(RoundTrip(at: .nanoseconds(at), loss: loss, sendDelay: sendDelay, receiveDelay: receiveDelay,
                                        roundTrip: roundTrip, late: trip["timestamps"]?["late"]?.boolValue ?? false))
        }
        guard !roundTrips.isEmpty else { return .failure(ScenarioError("round_trips is empty: nothing was recorded")) }
        guard roundTrips.contains(where: { $0.loss == .none }) else {
            return .failure(ScenarioError("every round trip was lost: no delay to play"))
        }
        return .success(Recording(version: document["version"]?["irtt"]?.stringValue, interval: interval, roundTrips: roundTrips))
    }

    /// The recording cut into windows of `width` from its first request, and what could not be
    /// carried over.
    ///
    /// - Parameters:
    ///   - recording: The recording.
    ///   - width: Each window's length (the resolution of what the link plays).
    /// - Returns: The windows in order (a window with no request in it, a gap in the
    ///   recording, keeps the one before's conditions and is said in `notes`), whether the
    ///   one-way delays were the recording's own (else half the round trip each way, said in
    ///   `notes`), and the notes.
    public static func windows(_ recording: Recording, width: Duration) -> (windows: [Window], oneWay: Bool, notes: [String]) {
        var notes: [String] = []
        let received = recording.roundTrips.filter { $0.loss == .none }
        // One-way delays need the server's stamps and clocks in step: a negative one says they
        // were not, and halves of the round trip are the honest figure then.
        let oneWay = received.allSatisfy { ($0.sendDelay.map { $0 >= .zero } ?? false) && ($0.receiveDelay.map { $0 >= .zero } ?? false) }
        if !oneWay {
            notes.append(received.contains { $0.sendDelay != nil }
                ? "the one-way delays are not used (a negative one: the client's and server's clocks were not in step); each direction gets half the round-trip time"
                : "the recording has no one-way delays (no server timestamps); each direction gets half the round-trip time")
        }
        let last = recording.roundTrips.map(\.at).max() ?? .zero
        let count = min(Int(last / width) + 1, ScenarioLimits.maximumChanges)
        var buckets = [[RoundTrip]](repeating: [], count: count)
        for trip in recording.roundTrips { buckets[min(count - 1, Int(trip.at / width))].append(trip) }
        func median(_ values: [Duration]) -> Duration? {
            guard !values.isEmpty else { return nil }
            let sorted = values.sorted()
            return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        }
        var windows: [Window] = []
        var gaps = 0
        for (index, trips) in buckets.enumerated() {
            let back = trips.filter { $0.loss == .none }
            let up = oneWay ? back.compactMap(\.sendDelay) : back.compactMap { $0.roundTrip.map { $0 / 2 } }
            let down = oneWay ? back.compactMap(\.receiveDelay) : back.compactMap { $0.roundTrip.map { $0 / 2 } }
            let lostUp = trips.filter { $0.loss == .up || $0.loss == .unknown }.count
            let lostDown = trips.filter { $0.loss == .down }.count
            if trips.isEmpty { gaps += 1 }
            windows.append(Window(start: width * index, length: width, sent: trips.count, upDelay: median(up), downDelay: median(down),
                                  upLoss: trips.isEmpty ? 0 : Double(lostUp) / Double(trips.count),
                                  downLoss: trips.count - lostUp > 0 ? Double(lostDown) / Double(trips.count - lostUp) : 0))
        }
        if gaps > 0 { notes.append("\(gaps) window\(gaps == 1 ? "" : "s") without a round trip (a gap in the recording) keep the conditions before") }
        let unknown = recording.roundTrips.filter { $0.loss == .unknown }.count
        if unknown > 0 { notes.append("\(unknown) loss\(unknown == 1 ? "" : "es") IRTT could not place up or down counted on the uplink") }
        let late = recording.roundTrips.filter(\.late).count
        if late > 0 { notes.append("not carried over: \(late) late (out-of-order) round trip\(late == 1 ? "" : "s") (the link does not reorder)") }
        notes.append("not carried over: the delay's variation within a window (each window plays its median)")
        return (windows, oneWay, notes)
    }

    /// A scenario whose link `link` between `phone` and `server` plays the windows.
    ///
    /// - Parameters:
    ///   - name: The scenario's name.
    ///   - link: The link's name.
    ///   - windows: From ``windows(_:width:)``.
    ///   - recording: The recording the windows were cut from (its figures go into the comments).
    ///   - type: The link's interface type (`cellular`, ...), if given.
    ///   - notes: What could not be carried over, written as comments.
    ///   - source: The file it came from, for the description (escaped).
    ///   - start: When the recording's first round trip falls in the scenario: the link holds
    ///     the first window's conditions until then (time for the scenario's programs to start).
    /// - Returns: The scenario's YAML.
    public static func scenarioYAML(name: String, link: String = "path", windows: [Window], type: String?, recording: Recording,
                                    notes: [String], source: String, start: Duration = .zero) -> String {
        func milliseconds(_ value: Duration) -> String {
            let tenths = Int64((Double(value.nanosecondsValue) / 100_000).rounded())
            return tenths % 10 == 0 ? "\(tenths / 10)ms" : "\(tenths / 10).\(tenths % 10)ms"
        }
        func percent(_ share: Double) -> String {
            let tenths = Int((share * 1000).rounded())
            return tenths % 10 == 0 ? "\(tenths / 10)%" : "\(tenths / 10).\(tenths % 10)%"
        }
        let width = windows.first?.length ?? .seconds(1)
        let duration = start + (windows.last?.start ?? .zero) + width
        let received = recording.roundTrips.filter { $0.loss == .none }.count
        var lines = [
            "# Imported by roam import irtt from \(sanitizedComment(source)) (irtt \(sanitizedComment(recording.version ?? "unknown version"))):",
            "# \(recording.roundTrips.count) round trips\(recording.interval.map { " every \(milliseconds($0))" } ?? ""), \(received) came back; played in windows of \(milliseconds(width)), each the median delay and the share lost each way"
                + (start > .zero ? ", from \(milliseconds(start))." : "."),
        ]
        lines += notes.map { "# Note: \(sanitizedComment($0))" }
        lines += [
            "name: \(name)",
            "duration: \(milliseconds(duration))",
            "nodes:",
            "  phone: {}",
            "  server: {}",
            "links:",
        ]
        let firstUp = windows.lazy.compactMap(\.upDelay).first ?? .zero
        let firstDown = windows.lazy.compactMap(\.downDelay).first ?? .zero
        let typeText = type.map { ", type: \($0)" } ?? ""
        lines.append("  - {name: \(link), between: [phone, server]\(typeText), up: {delay: \(milliseconds(firstUp)), loss: \(percent(windows.first?.upLoss ?? 0))}, down: {delay: \(milliseconds(firstDown)), loss: \(percent(windows.first?.downLoss ?? 0))}}")
        var events: [String] = []
        var current = (up: (milliseconds(firstUp), percent(windows.first?.upLoss ?? 0)), down: (milliseconds(firstDown), percent(windows.first?.downLoss ?? 0)))
        for window in windows.dropFirst() where window.sent > 0 {
            let up = (window.upDelay.map(milliseconds) ?? current.up.0, percent(window.upLoss))
            let down = (window.downDelay.map(milliseconds) ?? current.down.0, percent(window.downLoss))
            let at = milliseconds(start + window.start)
            if up != current.up { events.append("  - {at: \(at), link: \(link), direction: up, set: {delay: \(up.0), loss: \(up.1)}}") }
            if down != current.down { events.append("  - {at: \(at), link: \(link), direction: down, set: {delay: \(down.0), loss: \(down.1)}}") }
            current = (up, down)
        }
        if !events.isEmpty { lines += ["timeline:"] + events }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `text` as one comment line: no line breaks or control characters, at most 200 characters.
    static func sanitizedComment(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(200).map { $0.properties.generalCategory == .control ? "?" : $0 }))
    }
}

extension Duration {
    /// The whole duration in nanoseconds (saturating beyond Int64).
    var nanosecondsValue: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        return scaled &+ attoseconds / 1_000_000_000
    }
}
