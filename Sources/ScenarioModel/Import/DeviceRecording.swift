import RoamCore
import RoamSystem

/// What `roam record` measured on a real device's interfaces, interval by interval, and the
/// scenario that replays it (`roam import recording`).
///
/// The file is JSON Lines. The first line says what was recorded:
///
///     {"roamRecording":1,"interval":1,"interfaces":[{"name":"wlan0","type":"wifi","target":"192.168.1.1"}]}
///
/// and each line after it is one interval of one interface, `t` seconds from the recording's
/// start (the end of the interval):
///
///     {"t":1,"interface":"wlan0","carrier":true,"bssid":"02:00:00:00:01:00","signal":-52,
///      "txBitrate":65000000,"rxBitrate":72200000,"sent":5,"received":5,"rtt":0.0123}
///
/// `carrier` is the interface's operational state; `bssid`, `signal` (dBm), `txBitrate` and
/// `rxBitrate` (bits per second: the rates the driver's rate controller used last toward the
/// access point and from it) are nl80211's station information, on a Wi-Fi client interface that
/// is associated; `sent` and `received` count the interval's ICMP echoes to the target through
/// the interface, `rtt` is the mean round trip of those answered (seconds). On a cellular
/// interface whose modem ModemManager drives, `technology` (its access technologies, ModemManager's
/// names joined by `,`: `lte`, `5gnr,lte`, `umts`), `quality` (its signal quality, a percentage),
/// and from its `Modem.Signal` the LTE (else 5G NR) `rsrp` (dBm), `rsrq` (dB) and `snr` (dB):
///
///     {"t":1,"interface":"wwan0","carrier":true,"technology":"lte","quality":70,"rsrp":-95,
///      "rsrq":-11,"snr":13.5,"sent":5,"received":5,"rtt":0.0481}
///
/// Every member but `t` and `interface` may be missing. Where gpsd gave the device a fix in the
/// interval, a line without an interface holds the latest one, degrees north and east and the
/// speed over ground (m/s):
///
///     {"t":1,"lat":48.8583701,"lon":2.2944813,"speed":1.4}
///
/// Replayed, each interface is a link between `phone` and `server` (``RateRecording``): its
/// rate each way is the Wi-Fi bitrate times 0.65 (what reaches the
/// transport at that bitrate, as `mobility:` derives it), or on a cellular interface the rates
/// of the RSRP's band (as `mobility:` derives a cellular link: 60 Mbit/s down and 20 up from
/// -80 dBm, down to 1 Mbit/s and 250 kbit/s below -110), its delay half
/// the round trip, its loss the share of echoes lost; an interval whose carrier was down, or in
/// which nothing came back, passes nothing.
public enum DeviceRecording {
    /// The format's version, `roamRecording` in the first line.
    public static let version: Int64 = 1
    /// The largest file read: a day at one interval a second on four interfaces is about 60 MiB.
    public static let maximumFileSize = 64 << 20
    /// The longest line read.
    public static let maximumLineLength = 4096
    /// The most interfaces a recording has.
    public static let maximumInterfaces = 8
    /// The longest recording: a day.
    public static let maximumSpan = Duration.seconds(86_400)

    /// One recorded interface.
    public struct Interface: Sendable, Hashable {
        /// Its name on the device (`wlan0`): also the replayed link's name.
        public var name: String
        /// Its type: `wifi`, `cellular`, `wiredEthernet` or `other`.
        public var type: String
        /// The address its echoes went to, if any were sent.
        public var target: IPAddress?

        /// An interface.
        ///
        /// - Parameters:
        ///   - name: Its name on the device.
        ///   - type: Its interface type's name.
        ///   - target: The address its echoes went to.
        public init(name: String, type: String, target: IPAddress? = nil) {
            self.name = name
            self.type = type
            self.target = target
        }
    }

    /// One interval of one interface.
    public struct Sample: Sendable, Hashable {
        /// The interval's end, from the recording's start.
        public var at: Duration
        /// The interface's name.
        public var interface: String
        /// Whether its carrier was up (operationally), if read.
        public var carrier: Bool?
        /// The access point (its address, `02:00:00:00:01:00`), its signal (dBm) and the bitrates
        /// toward it and from it (bits per second), on an associated Wi-Fi client.
        public var bssid: String?
        public var signal: Int?
        public var transmitBitrate: UInt64?
        public var receiveBitrate: UInt64?
        /// ICMP echoes sent to the target in the interval, those answered, and their mean round
        /// trip.
        public var sent: Int
        public var received: Int
        public var roundTrip: Duration?
        /// The least of the answered echoes' round trips (`rttMin`): what a link's queue added
        /// least to, where a download loaded it.
        public var roundTripMinimum: Duration?
        /// On a cellular interface: the modem's access technologies (ModemManager's names, joined
        /// by `,`), its signal quality (a percentage), and its LTE (else 5G NR) RSRP (dBm), RSRQ
        /// (dB) and SNR (dB).
        public var technology: String?
        public var quality: Int?
        public var rsrp: Double?
        public var rsrq: Double?
        public var snr: Double?
        /// What a download through the interface received in the interval, bits per second
        /// (`roam record --throughput`), where one ran for the whole interval.
        public var throughput: UInt64?

        /// A sample.
        ///
        /// - Parameters:
        ///   - at: The interval's end, from the recording's start.
        ///   - interface: The interface's name.
        ///   - carrier: Whether its carrier was up, if read.
        ///   - bssid: The access point's address, on an associated Wi-Fi client.
        ///   - signal: Its signal, dBm.
        ///   - transmitBitrate: The bitrate toward it, bits per second.
        ///   - receiveBitrate: The bitrate from it, bits per second.
        ///   - sent: Echoes sent in the interval.
        ///   - received: Echoes answered.
        ///   - roundTrip: The answered echoes' mean round trip.
        public init(at: Duration, interface: String, carrier: Bool? = nil, bssid: String? = nil, signal: Int? = nil, transmitBitrate: UInt64? = nil,
                    receiveBitrate: UInt64? = nil, sent: Int = 0, received: Int = 0, roundTrip: Duration? = nil) {
            self.at = at
            self.interface = interface
            self.carrier = carrier
            self.bssid = bssid
            self.signal = signal
            self.transmitBitrate = transmitBitrate
            self.receiveBitrate = receiveBitrate
            self.sent = sent
            self.received = received
            self.roundTrip = roundTrip
        }
    }

    /// The device's position at the end of an interval, from gpsd.
    public struct Fix: Sendable, Hashable {
        /// The interval's end, from the recording's start.
        public var at: Duration
        /// Degrees north and east.
        public var latitude: Double
        public var longitude: Double
        /// Speed over ground, m/s, where gpsd gave one.
        public var speed: Double?

        /// A fix.
        ///
        /// - Parameters:
        ///   - at: The interval's end, from the recording's start.
        ///   - latitude: Degrees north.
        ///   - longitude: Degrees east.
        ///   - speed: Speed over ground, m/s.
        public init(at: Duration, latitude: Double, longitude: Double, speed: Double? = nil) {
            self.at = at
            self.latitude = latitude
            self.longitude = longitude
            self.speed = speed
        }
    }

    /// A recording as read.
    public struct Recording: Sendable, Hashable {
        /// The interval between samples of an interface.
        public var interval: Duration
        public var interfaces: [Interface]
        /// In the file's order.
        public var samples: [Sample]
        /// The device's positions, in time order.
        public var fixes: [Fix]

        /// A recording.
        ///
        /// - Parameters:
        ///   - interval: The interval between samples.
        ///   - interfaces: The recorded interfaces.
        ///   - samples: Their samples.
        ///   - fixes: The device's positions.
        public init(interval: Duration, interfaces: [Interface], samples: [Sample] = [], fixes: [Fix] = []) {
            self.interval = interval
            self.interfaces = interfaces
            self.samples = samples
            self.fixes = fixes
        }
    }

    // MARK: - Writing

    /// The first line of a recording.
    ///
    /// - Parameter recording: What is recorded (its samples are not written).
    /// - Returns: The line, without its line break.
    public static func headerLine(_ recording: Recording) -> String {
        let interfaces = recording.interfaces.map { interface -> JSONValue in
            var members: [(String, JSONValue)] = [("name", .string(interface.name)), ("type", .string(interface.type))]
            if let target = interface.target { members.append(("target", .string("\(target)"))) }
            return .object(members)
        }
        return JSONValue.object([("roamRecording", .int(version)), ("interval", .double(recording.interval.seconds)), ("interfaces", .array(interfaces))]).serialized
    }

    /// One sample's line.
    ///
    /// - Parameter sample: The sample.
    /// - Returns: The line, without its line break.
    public static func line(_ sample: Sample) -> String {
        var members: [(String, JSONValue)] = [("t", .double(milliseconds(sample.at))), ("interface", .string(sample.interface))]
        if let carrier = sample.carrier { members.append(("carrier", .bool(carrier))) }
        if let bssid = sample.bssid { members.append(("bssid", .string(bssid))) }
        if let signal = sample.signal { members.append(("signal", .int(Int64(signal)))) }
        if let rate = sample.transmitBitrate { members.append(("txBitrate", .int(Int64(clamping: rate)))) }
        if let rate = sample.receiveBitrate { members.append(("rxBitrate", .int(Int64(clamping: rate)))) }
        if let technology = sample.technology { members.append(("technology", .string(technology))) }
        if let quality = sample.quality { members.append(("quality", .int(Int64(quality)))) }
        for (key, value) in [("rsrp", sample.rsrp), ("rsrq", sample.rsrq), ("snr", sample.snr)] {
            // To the tenth of a decibel, as modems report them.
            if let value { members.append((key, .double((value * 10).rounded() / 10))) }
        }
        if let throughput = sample.throughput { members.append(("throughput", .int(Int64(clamping: throughput)))) }
        members.append(("sent", .int(Int64(sample.sent))))
        members.append(("received", .int(Int64(sample.received))))
        if let roundTrip = sample.roundTrip { members.append(("rtt", .double((roundTrip.seconds * 1e6).rounded() / 1e6))) }
        if let least = sample.roundTripMinimum { members.append(("rttMin", .double((least.seconds * 1e6).rounded() / 1e6))) }
        return JSONValue.object(members).serialized
    }

    /// One fix's line.
    ///
    /// - Parameter fix: The fix.
    /// - Returns: The line, without its line break.
    public static func line(_ fix: Fix) -> String {
        // Degrees to the ten-millionth (about a centimetre), as gpsd gives them.
        var members: [(String, JSONValue)] = [("t", .double(milliseconds(fix.at))), ("lat", .double((fix.latitude * 1e7).rounded() / 1e7)),
                                              ("lon", .double((fix.longitude * 1e7).rounded() / 1e7))]
        if let speed = fix.speed { members.append(("speed", .double((speed * 1000).rounded() / 1000))) }
        return JSONValue.object(members).serialized
    }

    /// Seconds rounded to the millisecond.
    private static func milliseconds(_ value: Duration) -> Double {
        (value.seconds * 1000).rounded() / 1000
    }

    // MARK: - Reading

    /// Reads a recording; the error names the file and what is wrong, and where.
    ///
    /// - Parameter path: The file (never through a symbolic link; at most ``maximumFileSize``).
    /// - Returns: The recording.
    /// - Throws: ``ScenarioError`` when it cannot be read or is not a recording.
    public static func read(_ path: String) throws(ScenarioError) -> Recording {
        let bytes: [UInt8]
        do throws(SafePathError) {
            bytes = try readRegularFile(atPath: path, maximumBytes: maximumFileSize)
        } catch {
            throw ScenarioError("cannot read the recording: \(error.message)")
        }
        switch parse(bytes) {
        case .success(let recording): return recording
        case .failure(let error): throw ScenarioError("\(escapedForMessage(path, maximumLength: 256)): \(error.message)")
        }
    }

    /// Parses a recording's bytes.
    ///
    /// - Parameter bytes: The file's bytes.
    /// - Returns: The recording, or what is wrong and on which line.
    public static func parse(_ bytes: [UInt8]) -> Result<Recording, ScenarioError> {
        guard bytes.count <= maximumFileSize else {
            return .failure(ScenarioError("\(bytes.count) bytes: more than \(maximumFileSize >> 20) MiB: not a recording roam record wrote"))
        }
        var recording: Recording?
        var names: [String: Int] = [:]
        var last: [Duration] = []
        for (offset, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            if line.isEmpty || line.allSatisfy({ $0 == 0x20 || $0 == 0x0d }) { continue }
            func problem(_ message: String) -> Result<Recording, ScenarioError> {
                .failure(ScenarioError("line \(offset + 1): \(message)"))
            }
            guard line.count <= maximumLineLength else { return problem("\(line.count) bytes: longer than a line roam record writes") }
            let value: JSONValue
            do throws(JSONParseError) {
                value = try JSONValue.parse(String(decoding: line, as: UTF8.self))
            } catch {
                return problem("not JSON: \(error)")
            }
            guard case .object = value else { return problem("not a JSON object") }
            guard var current = recording else {
                switch header(value) {
                case .success(let read):
                    recording = read
                    for (index, interface) in read.interfaces.enumerated() { names[interface.name] = index }
                    last = Array(repeating: .seconds(-1), count: read.interfaces.count)
                    continue
                case .failure(let error):
                    return problem(error.message)
                }
            }
            if value["interface"] == nil, value["lat"] != nil {
                switch fix(value) {
                case .failure(let error):
                    return problem(error.message)
                case .success(let fix):
                    if let before = current.fixes.last, fix.at <= before.at {
                        return problem("t \(fix.at.seconds) is not after the position before it")
                    }
                    current.fixes.append(fix)
                    recording = current
                    continue
                }
            }
            switch sample(value) {
            case .failure(let error):
                return problem(error.message)
            case .success(let sample):
                guard let index = names[sample.interface] else {
                    return problem("interface '\(escapedForMessage(sample.interface, maximumLength: 32))' is not in the first line's interfaces")
                }
                guard sample.at > last[index] else {
                    return problem("t \(sample.at.seconds) is not after \(sample.interface)'s sample before it")
                }
                last[index] = sample.at
                current.samples.append(sample)
                recording = current
            }
        }
        guard let recording else { return .failure(ScenarioError("an empty file: not a recording roam record wrote")) }
        guard !recording.samples.isEmpty else { return .failure(ScenarioError("no samples after the first line: nothing was recorded")) }
        return .success(recording)
    }

    private static func header(_ value: JSONValue) -> Result<Recording, ScenarioError> {
        guard let format = value["roamRecording"]?.intValue else {
            return .failure(ScenarioError("the first line has no roamRecording: not a recording roam record wrote"))
        }
        guard format == version else { return .failure(ScenarioError("roamRecording \(format): this roam reads version \(version)")) }
        guard let seconds = value["interval"]?.doubleValue, seconds >= 0.1, seconds <= 60 else {
            return .failure(ScenarioError("interval is not a number of seconds from 0.1 to 60"))
        }
        guard let list = value["interfaces"]?.arrayValue, !list.isEmpty, list.count <= maximumInterfaces else {
            return .failure(ScenarioError("interfaces is not a list of 1 to \(maximumInterfaces) interfaces"))
        }
        var interfaces: [Interface] = []
        for (index, entry) in list.enumerated() {
            guard let name = entry["name"]?.stringValue, isInterfaceName(name) else {
                return .failure(ScenarioError("interfaces[\(index)].name is not an interface name (1 to 15 letters, digits, '-', '_', '.')"))
            }
            guard let type = entry["type"]?.stringValue, let interfaceType = InterfaceType(name: type), interfaceType != .loopback else {
                return .failure(ScenarioError("interfaces[\(index)].type is not wifi, cellular, wiredEthernet or other"))
            }
            guard !interfaces.contains(where: { $0.name == name }) else {
                return .failure(ScenarioError("interfaces[\(index)]: '\(name)' a second time"))
            }
            var target: IPAddress?
            if let given = entry["target"] {
                guard let text = given.stringValue, text.utf8.count <= 64, let address = IPAddress(text) else {
                    return .failure(ScenarioError("interfaces[\(index)].target is not an IP address"))
                }
                target = address
            }
            interfaces.append(Interface(name: name, type: interfaceType.rawValue, target: target))
        }
        return .success(Recording(interval: .seconds(seconds), interfaces: interfaces))
    }

    private static func sample(_ value: JSONValue) -> Result<Sample, ScenarioError> {
        guard let seconds = value["t"]?.doubleValue, seconds >= 0, seconds <= maximumSpan.seconds else {
            return .failure(ScenarioError("t is not a number of seconds from 0 to a day"))
        }
        guard let interface = value["interface"]?.stringValue else { return .failure(ScenarioError("no interface")) }
        // To the millisecond and the microsecond, as written: what is read is what was written.
        var sample = Sample(at: .milliseconds(Int64((seconds * 1000).rounded())), interface: interface)
        if let carrier = value["carrier"] {
            guard let up = carrier.boolValue else { return .failure(ScenarioError("carrier is not true or false")) }
            sample.carrier = up
        }
        if let bssid = value["bssid"] {
            guard let text = bssid.stringValue, isHardwareAddress(text) else { return .failure(ScenarioError("bssid is not a hardware address (02:00:00:00:01:00)")) }
            sample.bssid = text
        }
        if let signal = value["signal"] {
            guard let dBm = signal.intValue, (-150...0).contains(dBm) else { return .failure(ScenarioError("signal is not a whole number of dBm from -150 to 0")) }
            sample.signal = Int(dBm)
        }
        for (key, path) in [("txBitrate", \Sample.transmitBitrate), ("rxBitrate", \Sample.receiveBitrate), ("throughput", \Sample.throughput)] {
            guard let rate = value[key] else { continue }
            guard let bits = rate.intValue, bits >= 0, Double(bits) <= ScenarioLimits.maximumRate.bitsPerSecond else {
                return .failure(ScenarioError("\(key) is not a whole number of bits per second up to 100 Gbit/s"))
            }
            sample[keyPath: path] = UInt64(bits)
        }
        guard let sent = value["sent"]?.intValue ?? .some(0), let received = value["received"]?.intValue ?? .some(0),
              (0...10_000).contains(sent), (0...sent).contains(received) else {
            return .failure(ScenarioError("sent and received are not counts (0 to 10,000, received at most sent)"))
        }
        sample.sent = Int(sent)
        sample.received = Int(received)
        if let technology = value["technology"] {
            guard let text = technology.stringValue, isTechnologyList(text) else {
                return .failure(ScenarioError("technology is not a list of access technologies (lte, 5gnr, umts, ... joined by ',')"))
            }
            sample.technology = text
        }
        if let quality = value["quality"] {
            guard let percent = quality.intValue, (0...100).contains(percent) else { return .failure(ScenarioError("quality is not a percentage (0 to 100)")) }
            sample.quality = Int(percent)
        }
        for (key, range, path) in [("rsrp", -200.0...0.0, \Sample.rsrp), ("rsrq", -50.0...20.0, \Sample.rsrq), ("snr", -50.0...60.0, \Sample.snr)] {
            guard let given = value[key] else { continue }
            guard let decibels = given.doubleValue, range.contains(decibels) else {
                return .failure(ScenarioError("\(key) is not a number of \(key == "rsrp" ? "dBm" : "dB") from \(Int(range.lowerBound)) to \(Int(range.upperBound))"))
            }
            sample[keyPath: path] = (decibels * 10).rounded() / 10
        }
        for (key, path) in [("rtt", \Sample.roundTrip), ("rttMin", \Sample.roundTripMinimum)] {
            guard let given = value[key] else { continue }
            guard let seconds = given.doubleValue, seconds >= 0, seconds <= 60 else { return .failure(ScenarioError("\(key) is not a number of seconds from 0 to 60")) }
            sample[keyPath: path] = .microseconds(Int64((seconds * 1e6).rounded()))
        }
        if let least = sample.roundTripMinimum {
            guard let mean = sample.roundTrip, least <= mean else { return .failure(ScenarioError("rttMin is not at most rtt (the least round trip of the interval, beside their mean)")) }
        }
        return .success(sample)
    }

    private static func fix(_ value: JSONValue) -> Result<Fix, ScenarioError> {
        guard let seconds = value["t"]?.doubleValue, seconds >= 0, seconds <= maximumSpan.seconds else {
            return .failure(ScenarioError("t is not a number of seconds from 0 to a day"))
        }
        guard let latitude = value["lat"]?.doubleValue, (-90...90).contains(latitude),
              let longitude = value["lon"]?.doubleValue, (-180...180).contains(longitude) else {
            return .failure(ScenarioError("lat and lon are not degrees (-90 to 90 and -180 to 180)"))
        }
        var fix = Fix(at: .milliseconds(Int64((seconds * 1000).rounded())), latitude: latitude, longitude: longitude)
        if let speed = value["speed"] {
            guard let metres = speed.doubleValue, metres >= 0, metres < 1000 else { return .failure(ScenarioError("speed is not a number of m/s from 0 to 1000")) }
            fix.speed = metres
        }
        return .success(fix)
    }

    /// A Linux interface name: 1 to 15 bytes of letters, digits, `-`, `_`, `.`.
    public static func isInterfaceName(_ name: String) -> Bool {
        (1...15).contains(name.utf8.count) && name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5a).contains(byte) || (0x61...0x7a).contains(byte) || byte == 0x2d || byte == 0x5f || byte == 0x2e
        }
    }

    /// Access technologies as `roam record` writes them: 1 to 8 names of lowercase letters,
    /// digits and `-`, joined by `,`.
    private static func isTechnologyList(_ text: String) -> Bool {
        let names = text.split(separator: ",", omittingEmptySubsequences: false)
        return (1...8).contains(names.count) && names.allSatisfy { name in
            (1...16).contains(name.utf8.count) && name.utf8.allSatisfy { (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2d }
        }
    }

    private static func isHardwareAddress(_ text: String) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 6 && parts.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }
    }

    // MARK: - Replaying

    /// How far back a loaded interval's delay looks for the least round trip (BBR's window for
    /// a path's minimum round trip).
    public static var loadedRoundTripWindow: Duration { RateRecording.LoadedRoundTrip.window }

    /// The recording as interfaces a scenario plays (``RateRecording``), on the recording's
    /// clock, and what could not be carried over.
    ///
    /// - Parameter recording: The recording.
    /// - Returns: One interface per recorded one, in the first line's order, and the notes.
    public static func interfaces(_ recording: Recording) -> (interfaces: [RateRecording.Interface], notes: [String]) {
        var notes: [String] = []
        var result: [RateRecording.Interface] = []
        var anyBitrate = false
        for interface in recording.interfaces {
            let samples = recording.samples.filter { $0.interface == interface.name }
            var played: [RateRecording.Sample] = []
            var bitrates = 0, down = 0, signals = 0, modelledDelays = 0, measured = 0
            let downloaded = samples.contains { $0.throughput != nil }
            var band: Int?
            // While a download loaded the link, the echoes measured its queue too: those
            // intervals play the least round trip of the 10 s before them, not their mean.
            var loadedDelay = RateRecording.LoadedRoundTrip()
            for sample in samples {
                // A sample speaks for the interval that ends at it.
                let at = max(.zero, sample.at - recording.interval)
                let efficiency = WiFiRates.efficiency
                var up = sample.transmitBitrate.map { Rate(bitsPerSecond: Double($0) * efficiency) }
                var downRate = sample.receiveBitrate.map { Rate(bitsPerSecond: Double($0) * efficiency) }
                if up != nil || downRate != nil { bitrates += 1 }
                loadedDelay.record(sample.roundTripMinimum ?? sample.roundTrip, at: sample.at)
                var roundTrip = loadedDelay.played(sample.roundTrip, loaded: downloaded)
                if up == nil, downRate == nil, let rsrp = sample.rsrp {
                    // A modem's signal: its band's rates, with mobility:'s hysteresis between
                    // bands; its delay where no echo measured one.
                    let index = CellularBands.band(rsrp: rsrp, current: band)
                    band = index
                    up = CellularBands.bands[index].up
                    downRate = CellularBands.bands[index].down
                    signals += 1
                    if roundTrip == nil {
                        roundTrip = CellularBands.bands[index].delay * 2
                        modelledDelays += 1
                    }
                }
                if let throughput = sample.throughput {
                    // What a download received: the downlink's rate, measured (an interval that
                    // received nothing passes nothing).
                    downRate = Rate(bitsPerSecond: Double(throughput))
                    measured += 1
                } else if downloaded {
                    // An interval without a whole one of download (it was starting again) keeps
                    // the measured rate before it, not the radio's estimate.
                    downRate = nil
                }
                var loss: Double? = sample.sent > 0 ? 1 - Double(sample.received) / Double(sample.sent) : nil
                if sample.carrier == false {
                    // Down: nothing passes, whatever was read of the radio.
                    up = nil
                    downRate = nil
                    loss = nil
                    down += 1
                }
                played.append(RateRecording.Sample(at: at, down: downRate, up: up, roundTrip: roundTrip, loss: loss,
                                                   blocked: sample.carrier.map { !$0 }))
            }
            if bitrates > 0 { anyBitrate = true }
            if measured > 0 {
                let unmeasured = samples.count - measured
                notes.append("\(interface.name): \(measured) interval\(measured == 1 ? " plays" : "s play") the download's throughput as the downlink's rate (one TCP flow's: a lower bound of the capacity)"
                    + (unmeasured > 0 ? "; \(unmeasured) without a whole interval of it keep\(unmeasured == 1 ? "s" : "") the rate before" : ""))
            }
            let unloadedDelays = loadedDelay.replaced
            if unloadedDelays > 0 {
                notes.append("\(interface.name): a download loaded the link while it was recorded: \(unloadedDelays) interval\(unloadedDelays == 1 ? " plays" : "s play") the least round trip of the \(loadedRoundTripWindow.roamDescription) before \(unloadedDelays == 1 ? "it" : "each"), not \(unloadedDelays == 1 ? "its" : "their") mean (the queue the download built is the replay's own traffic's to build)")
            }
            if signals > 0 {
                notes.append("\(interface.name): \(signals) interval\(signals == 1 ? "" : "s") played at the rates of the modem's RSRP band (mobility:'s cellular bands, not a measured throughput)"
                    + (modelledDelays > 0 ? "; \(modelledDelays) without an echo answered play the band's delay" : ""))
            } else if bitrates == 0 {
                let why = interface.type == "wifi" ? "no Wi-Fi bitrate was recorded (not associated, or no nl80211)"
                    : interface.type == "cellular" ? "no modem signal was recorded (no ModemManager, or no RSRP from it)" : "no radio was recorded"
                notes.append("\(interface.name): \(why): " + (measured > 0 ? "its uplink's rate is not limited" : "its rate is not limited, only its delay and loss are played"))
            }
            if down > 0 { notes.append("\(interface.name): \(down) interval\(down == 1 ? "" : "s") with the carrier down pass nothing") }
            if !samples.contains(where: { $0.roundTrip != nil }) {
                notes.append("\(interface.name): no echo came back: no round trip to play, the delay is none")
            }
            result.append(RateRecording.Interface(link: linkName(interface.name), type: interface.type, samples: played))
        }
        if !recording.fixes.isEmpty {
            let speeds = recording.fixes.compactMap(\.speed)
            notes.append("position is not played by the links (\(recording.fixes.count) fixes from gpsd\(speeds.isEmpty ? "" : ", \((speeds.min() ?? 0).roamTrimmed) to \((speeds.max() ?? 0).roamTrimmed) m/s")); --track FILE writes them as a track for mobility: (phones: {phone: {track: FILE}})")
        }
        notes.append("a round trip's losses are played on the uplink"
            + (anyBitrate ? "; the Wi-Fi bitrates are the radio's, of which \(Int(WiFiRates.efficiency * 100))% is played as the link's rate (what reaches the transport, as mobility: derives it)" : ""))
        return (result, notes)
    }

    /// The recording's positions as a track file (`phones: {phone: {track: FILE}}`): a line a
    /// fix, `SECONDS,X,Y`, seconds from the recording's start and metres east and north of its
    /// first fix (``RecordedTrack/Projection``), fixes that did not move merged.
    ///
    /// - Parameter recording: The recording.
    /// - Returns: The file's text, or nil when it has no fixes.
    public static func track(_ recording: Recording) -> String? {
        RecordedTrack.text(recording.fixes.map { ($0.at, $0.latitude, $0.longitude) },
                           comment: "Imported by roam import recording: gpsd's fixes, seconds from the recording's start, metres east and north of its first fix")
    }

    /// A link name for an interface: a scenario's names start with a letter and are letters,
    /// digits, `-` and `_`, so a `.` (a VLAN's `eth0.100`) becomes `-`, and a name that starts
    /// otherwise, or that Linux keeps for itself (`lo`, `all`, `default`), gets `if-` before it.
    public static func linkName(_ interface: String) -> String {
        let name = String(interface.map { $0 == "." ? "-" : $0 })
        return name.first?.isLetter == true && !["lo", "all", "default"].contains(name) ? name : "if-" + name
    }

    /// The header comments for a scenario made from a recording.
    ///
    /// - Parameters:
    ///   - recording: The recording.
    ///   - source: The file's name.
    ///   - width: The windows' length.
    /// - Returns: The comment lines.
    public static func header(_ recording: Recording, source: String, width: Duration) -> [String] {
        var lines = [
            "Imported by roam import recording from \(source) (roam record: \(recording.interfaces.map { "\($0.name) (\($0.type)\($0.target.map { ", echoes to \($0)" } ?? ""))" }.joined(separator: ", ")), every \(RateRecording.milliseconds(recording.interval))).",
            "Played in windows of \(RateRecording.milliseconds(width)): each link's rate, delay and loss the means recorded in it.",
        ]
        for interface in recording.interfaces {
            let samples = recording.samples.filter { $0.interface == interface.name }
            let signals = samples.compactMap(\.signal)
            let roundTrips = samples.compactMap(\.roundTrip).map { $0.seconds * 1000 }
            let sent = samples.map(\.sent).reduce(0, +), received = samples.map(\.received).reduce(0, +)
            var parts = ["\(samples.count) samples"]
            if let least = signals.min(), let most = signals.max() { parts.append("signal \(least) to \(most) dBm") }
            let rsrps = samples.compactMap(\.rsrp)
            if let least = rsrps.min(), let most = rsrps.max() { parts.append("RSRP \(least) to \(most) dBm") }
            var technologies: [String] = []
            for technology in samples.compactMap(\.technology) where technologies.last != technology && technologies.count < 16 {
                technologies.append(technology)
            }
            if !technologies.isEmpty { parts.append("technology " + technologies.joined(separator: " then ")) }
            if !roundTrips.isEmpty {
                let mean = roundTrips.reduce(0, +) / Double(roundTrips.count)
                parts.append("round trip mean \((mean * 10).rounded() / 10) ms")
            }
            if sent > 0 { parts.append("\(sent - received) of \(sent) echoes lost") }
            lines.append("\(interface.name) as recorded: " + parts.joined(separator: ", "))
        }
        return lines
    }
}
