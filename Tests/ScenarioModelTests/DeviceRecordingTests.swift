import RoamCore
import ScenarioModel
import Testing

/// `roam record`'s recordings (JSON Lines): written and read back, refused with the line and
/// what is wrong, and replayed as links whose rate, delay and loss are what was recorded.
@Suite struct DeviceRecordingTests {
    static let wifi = DeviceRecording.Interface(name: "wlan0", type: "wifi", target: IPAddress("192.168.1.1"))
    static let cell = DeviceRecording.Interface(name: "wwan0", type: "cellular", target: IPAddress("10.64.0.1"))

    static func text(_ recording: DeviceRecording.Recording) -> String {
        ([DeviceRecording.headerLine(recording)] + recording.samples.map(DeviceRecording.line)).joined(separator: "\n") + "\n"
    }

    static let recording = DeviceRecording.Recording(interval: .seconds(1), interfaces: [wifi, cell], samples: [
        .init(at: .seconds(1), interface: "wlan0", carrier: true, bssid: "02:00:00:00:01:00", signal: -52, transmitBitrate: 65_000_000,
              receiveBitrate: 72_200_000, sent: 5, received: 5, roundTrip: .milliseconds(12)),
        .init(at: .seconds(1), interface: "wwan0", carrier: true, sent: 5, received: 4, roundTrip: .milliseconds(48)),
        .init(at: .seconds(2), interface: "wlan0", carrier: true, bssid: "02:00:00:00:01:00", signal: -71, transmitBitrate: 13_000_000,
              receiveBitrate: 19_500_000, sent: 5, received: 3, roundTrip: .milliseconds(30)),
        .init(at: .seconds(2), interface: "wwan0", carrier: true, sent: 5, received: 5, roundTrip: .milliseconds(46)),
        .init(at: .seconds(3), interface: "wlan0", carrier: false, sent: 5, received: 0),
        .init(at: .seconds(3), interface: "wwan0", carrier: true, sent: 5, received: 5, roundTrip: .milliseconds(46)),
    ])

    /// The scenario that replays `recording` (a window a second) and the import's notes; the
    /// scenario is checked to validate.
    static func replayed(_ recording: DeviceRecording.Recording, name: String) -> (yaml: String, notes: [String]) {
        let (interfaces, notes) = DeviceRecording.interfaces(recording)
        let yaml = RateRecording.scenarioYAML(name: name, interfaces: interfaces, width: .seconds(1),
                                              header: DeviceRecording.header(recording, source: "\(name).jsonl", width: .seconds(1)), notes: notes)
        let read = ScenarioReader.parse(yaml, file: "\(name).yaml")
        #expect(read.errors.isEmpty, "\(read.errors.map(\.message))\n\(yaml)")
        return (yaml, notes)
    }

    @Test func whatIsWrittenReadsBackAsItself() throws {
        let text = Self.text(Self.recording)
        #expect(text.hasPrefix(#"{"roamRecording":1,"interval":1.0,"interfaces":[{"name":"wlan0","type":"wifi","target":"192.168.1.1"}"#), "\(text)")
        #expect(text.contains(#"{"t":1.0,"interface":"wlan0","carrier":true,"bssid":"02:00:00:00:01:00","signal":-52,"txBitrate":65000000,"rxBitrate":72200000,"sent":5,"received":5,"rtt":0.012}"#), "\(text)")
        let read = try DeviceRecording.parse(Array(text.utf8)).get()
        #expect(read == Self.recording)
    }

    /// Each link plays 65% of the radio's bitrates (mobility:'s efficiency), half the echoes'
    /// round trip each way, the share of echoes lost on the uplink, and nothing while the
    /// carrier was down; a link with no bitrate recorded is not limited, and the notes say so.
    @Test func eachInterfaceIsALinkPlayingWhatItRecorded() throws {
        let (yaml, notes) = Self.replayed(Self.recording, name: "walk")
        // 72.2 Mbit/s from the access point and 65 toward it: 46.93 and 42.25 Mbit/s played.
        #expect(yaml.contains("  - {name: wlan0, between: [phone, server], type: wifi, up: {rate: 42250kbit, delay: 6ms, loss: 0%}, down: {rate: 46930kbit, delay: 6ms, loss: 0%}}"), "\(yaml)")
        #expect(yaml.contains("  - {name: wwan0, between: [phone, server], type: cellular, up: {delay: 24ms, loss: 20%}, down: {delay: 24ms, loss: 0%}}"), "\(yaml)")
        for event in ["{at: 1000ms, link: wlan0, direction: up, set: {rate: 8450kbit, delay: 15ms, loss: 40%}}",
                      "{at: 1000ms, link: wlan0, direction: down, set: {rate: 12675kbit, delay: 15ms}}",
                      "{at: 1000ms, link: wwan0, direction: up, set: {delay: 23ms, loss: 0%}}",
                      "{at: 2000ms, link: wlan0, direction: up, set: {loss: 100%}}",
                      "{at: 2000ms, link: wlan0, direction: down, set: {loss: 100%}}"] {
            #expect(yaml.contains(event), "\(event) in \(yaml)")
        }
        #expect(notes.contains("wwan0: no modem signal was recorded (no ModemManager, or no RSRP from it): its rate is not limited, only its delay and loss are played"), "\(notes)")
        #expect(notes.contains("wlan0: 1 interval with the carrier down pass nothing"), "\(notes)")
        #expect(yaml.contains("# wlan0 as recorded: 3 samples, signal -71 to -52 dBm, round trip mean 21.0 ms, 7 of 15 echoes lost"), "\(yaml)")
    }

    /// A modem's readings (ModemManager's) are written and read back, and a cellular link plays
    /// the rates of its RSRP's band as `mobility:` derives them (``CellularBands``), with its
    /// hysteresis: -75 dBm is excellent, -105 poor, and -89 after poor is fair, not good (a
    /// better band needs 2 dB more than its edge). Without an echo, the band's delay.
    @Test func aModemsSignalPlaysItsBandsRates() throws {
        func sample(_ seconds: Int64, _ rsrp: Double, _ technology: String, roundTrip: Duration? = .milliseconds(50)) -> DeviceRecording.Sample {
            var sample = DeviceRecording.Sample(at: .seconds(seconds), interface: "wwan0", carrier: true, sent: roundTrip == nil ? 0 : 2,
                                                received: roundTrip == nil ? 0 : 2, roundTrip: roundTrip)
            sample.technology = technology
            sample.quality = 60
            sample.rsrp = rsrp
            sample.rsrq = -11
            sample.snr = 13.5
            return sample
        }
        let recording = DeviceRecording.Recording(interval: .seconds(1), interfaces: [Self.cell], samples: [
            sample(1, -75, "lte"), sample(2, -105, "umts"), sample(3, -89, "5gnr,lte"), sample(4, -89, "lte", roundTrip: nil),
        ])
        let text = Self.text(recording)
        #expect(text.contains(#"{"t":2.0,"interface":"wwan0","carrier":true,"technology":"umts","quality":60,"rsrp":-105.0,"rsrq":-11.0,"snr":13.5,"sent":2,"received":2,"rtt":0.05}"#), "\(text)")
        #expect(try DeviceRecording.parse(Array(text.utf8)).get() == recording)

        let (yaml, notes) = Self.replayed(recording, name: "drive")
        // Excellent (60 and 20 Mbit/s), then poor (4 and 1), then fair (12 and 4); 25 ms each
        // way from the echoes, then the fair band's 28 ms where none was answered.
        #expect(yaml.contains("  - {name: wwan0, between: [phone, server], type: cellular, up: {rate: 20000kbit, delay: 25ms, loss: 0%}, down: {rate: 60000kbit, delay: 25ms, loss: 0%}}"), "\(yaml)")
        for event in ["{at: 1000ms, link: wwan0, direction: up, set: {rate: 1000kbit}}", "{at: 1000ms, link: wwan0, direction: down, set: {rate: 4000kbit}}",
                      "{at: 2000ms, link: wwan0, direction: up, set: {rate: 4000kbit}}", "{at: 2000ms, link: wwan0, direction: down, set: {rate: 12000kbit}}",
                      "{at: 3000ms, link: wwan0, direction: up, set: {delay: 28ms}}"] {
            #expect(yaml.contains(event), "\(event) in \(yaml)")
        }
        #expect(notes.last == "a round trip's losses are played on the uplink", "no Wi-Fi bitrate: \(notes)")
        #expect(notes.contains("wwan0: 4 intervals played at the rates of the modem's RSRP band (mobility:'s cellular bands, not a measured throughput); 1 without an echo answered play the band's delay"), "\(notes)")
        #expect(yaml.contains("# wwan0 as recorded: 4 samples, RSRP -105.0 to -75.0 dBm, technology lte then umts then 5gnr,lte then lte, round trip mean 50.0 ms"), "\(yaml)")
    }

    /// `--throughput`: what a download received is written and read back, and played as the
    /// downlink's rate over the radio's estimate; an interval without a whole one of download
    /// keeps the measured rate before it, and one that received nothing passes nothing.
    @Test func aMeasuredThroughputIsTheDownlinksRate() throws {
        func sample(_ seconds: Int64, _ throughput: UInt64?) -> DeviceRecording.Sample {
            var sample = DeviceRecording.Sample(at: .seconds(seconds), interface: "wlan0", carrier: true, bssid: "02:00:00:00:01:00", signal: -60,
                                                transmitBitrate: 65_000_000, receiveBitrate: 72_200_000, sent: 2, received: 2, roundTrip: .milliseconds(20))
            sample.throughput = throughput
            return sample
        }
        let recording = DeviceRecording.Recording(interval: .seconds(1), interfaces: [Self.wifi], samples: [
            sample(1, nil), sample(2, 31_250_000), sample(3, nil), sample(4, 0), sample(5, 8_000_000),
        ])
        let text = Self.text(recording)
        #expect(text.contains(#""rxBitrate":72200000,"throughput":31250000,"sent":2"#), "\(text)")
        #expect(try DeviceRecording.parse(Array(text.utf8)).get() == recording)
        let (yaml, notes) = Self.replayed(recording, name: "walk")
        // The first measured rate from the start (not 65% of 72.2 Mbit/s), the uplink the
        // bitrate's 42.25; 3 s keeps 31.25; 4 s passes nothing; 5 s plays 8.
        #expect(yaml.contains("up: {rate: 42250kbit, delay: 10ms, loss: 0%}, down: {rate: 31250kbit, delay: 10ms, loss: 0%}}"), "\(yaml)")
        #expect(!yaml.contains("{at: 1000ms, link: wlan0, direction: down") && !yaml.contains("{at: 2000ms, link: wlan0, direction: down"), "\(yaml)")
        for event in ["{at: 3000ms, link: wlan0, direction: down, set: {loss: 100%}}", "{at: 4000ms, link: wlan0, direction: down, set: {rate: 8000kbit, loss: 0%}}"] {
            #expect(yaml.contains(event), "\(event) in \(yaml)")
        }
        #expect(notes.contains("wlan0: 3 intervals play the download's throughput as the downlink's rate (one TCP flow's: a lower bound of the capacity); 2 without a whole interval of it keep the rate before"), "\(notes)")
    }

    /// A download loads the link it measures, and the echoes beside it measure its queue: the
    /// replay plays each interval's delay from the least round trip of the 10 s before it, which
    /// the replay's own download adds its queue to, not the loaded mean.
    @Test func aLoadedLinksDelayIsTheLeastRoundTripBeforeIt() throws {
        func sample(_ seconds: Int64, mean: Int64, least: Int64, throughput: UInt64?) -> DeviceRecording.Sample {
            var sample = DeviceRecording.Sample(at: .seconds(seconds), interface: "wlan0", carrier: true, sent: 4, received: 4, roundTrip: .milliseconds(mean))
            sample.roundTripMinimum = .milliseconds(least)
            sample.throughput = throughput
            return sample
        }
        // Idle at first (20 ms), then loaded: 100 ms on average, the least 60 ms.
        let loaded = DeviceRecording.Recording(interval: .seconds(1), interfaces: [Self.wifi], samples:
            [sample(1, mean: 20, least: 20, throughput: nil)] + (2...14).map { sample($0, mean: 100, least: 60, throughput: 8_000_000) })
        let text = Self.text(loaded)
        #expect(text.contains(#""rtt":0.1,"rttMin":0.06}"#), "\(text)")
        #expect(try DeviceRecording.parse(Array(text.utf8)).get() == loaded)
        let (yaml, notes) = Self.replayed(loaded, name: "loaded")
        // 10 ms each way while the idle second is within 10 s; 30 ms (half of 60) from the
        // interval after it left the window (the sample at 11 s speaks for 10 s to 11 s); never
        // 50 ms, half the loaded mean.
        #expect(yaml.contains("delay: 10ms"), "\(yaml)")
        #expect(yaml.contains("{at: 10000ms, link: wlan0, direction: up, set: {delay: 30ms") && yaml.contains("{at: 10000ms, link: wlan0, direction: down, set: {delay: 30ms"), "\(yaml)")
        #expect(!yaml.contains("delay: 50ms"), "\(yaml)")
        #expect(notes.contains("wlan0: a download loaded the link while it was recorded: 14 intervals play the least round trip of the 10s before each, not their mean (the queue the download built is the replay's own traffic's to build)"), "\(notes)")
        // Without a download, each interval plays its own mean, as before.
        var idle = loaded
        for index in idle.samples.indices { idle.samples[index].throughput = nil }
        let (played, unloadedNotes) = Self.replayed(idle, name: "idle")
        #expect(played.contains("delay: 50ms") && !unloadedNotes.contains { $0.contains("least round trip") }, "\(played)")
    }

    /// gpsd's fixes: lines of their own, read back as written, and a track of metres east and
    /// north of the first fix (unmoved fixes merged), which mobility: reads.
    @Test func positionsAreATrack() throws {
        var recording = Self.recording
        recording.fixes = [
            .init(at: .seconds(1), latitude: 48.8583701, longitude: 2.2944813, speed: 1.4),
            .init(at: .seconds(2), latitude: 48.8583701, longitude: 2.2944813, speed: 0),
            .init(at: .seconds(3), latitude: 48.8584601, longitude: 2.2946813),
        ]
        let text = Self.text(recording) + recording.fixes.map(DeviceRecording.line).joined(separator: "\n") + "\n"
        #expect(text.contains(#"{"t":1.0,"lat":48.8583701,"lon":2.2944813,"speed":1.4}"#), "\(text)")
        #expect(try DeviceRecording.parse(Array(text.utf8)).get() == recording)
        let track = try #require(DeviceRecording.track(recording))
        let points = try RecordedTrack.parse(Array(track.utf8)).get()
        // 0.00009° north is 10.0 m; 0.0002° east at 48.86° north is 14.6 m.
        #expect(points.map(\.at) == [.seconds(1), .seconds(3)], "\(track)")
        #expect(points.last?.position == Position(14.6, 10), "\(track)")
        #expect(DeviceRecording.track(Self.recording) == nil)
        let notes = DeviceRecording.interfaces(recording).notes
        #expect(notes.contains("position is not played by the links (3 fixes from gpsd, 0 to 1.4 m/s); --track FILE writes them as a track for mobility: (phones: {phone: {track: FILE}})"), "\(notes)")
    }

    @Test func aNameThatIsNotALinksIsMadeOne() {
        #expect(DeviceRecording.linkName("eth0.100") == "eth0-100")
        #expect(DeviceRecording.linkName("5gmodem") == "if-5gmodem")
        #expect(DeviceRecording.linkName("wlan0") == "wlan0")
        #expect(DeviceRecording.linkName("lo") == "if-lo" && DeviceRecording.linkName("default") == "if-default")
    }

    /// Bad input: refused with the line and what is wrong, never trapped on.
    @Test(arguments: [
        ("", "an empty file"),
        ("{\"t\":1}\n", "line 1: the first line has no roamRecording"),
        ("{\"roamRecording\":2,\"interval\":1,\"interfaces\":[]}\n", "line 1: roamRecording 2: this roam reads version 1"),
        ("{\"roamRecording\":1,\"interval\":0.01,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n", "line 1: interval is not a number of seconds from 0.1 to 60"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a b\",\"type\":\"wifi\"}]}\n", "line 1: interfaces[0].name is not an interface name"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"loopback\"}]}\n", "line 1: interfaces[0].type is not wifi"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\",\"target\":\"example.com\"}]}\n", "line 1: interfaces[0].target is not an IP address"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n", "no samples after the first line"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"b\"}\n", "line 2: interface 'b' is not in the first line's interfaces"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":2,\"interface\":\"a\"}\n{\"t\":2,\"interface\":\"a\"}\n", "line 3: t 2.0 is not after a's sample before it"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"sent\":2,\"received\":3}\n", "line 2: sent and received are not counts"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"signal\":20}\n", "line 2: signal is not a whole number of dBm"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"bssid\":\"zz\"}\n", "line 2: bssid is not a hardware address"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1e9,\"interface\":\"a\"}\n", "line 2: t is not a number of seconds from 0 to a day"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n[1]\n", "line 2: not a JSON object"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"rtt\":-1}\n", "line 2: rtt is not a number of seconds from 0 to 60"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"rtt\":0.02,\"rttMin\":61}\n", "line 2: rttMin is not a number of seconds from 0 to 60"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"rtt\":0.02,\"rttMin\":0.03}\n", "line 2: rttMin is not at most rtt"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"rttMin\":0.03}\n", "line 2: rttMin is not at most rtt"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"cellular\"}]}\n{\"t\":1,\"interface\":\"a\",\"technology\":\"LTE\"}\n", "line 2: technology is not a list of access technologies"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\"}\n{\"t\":1,\"lat\":91,\"lon\":0}\n", "line 3: lat and lon are not degrees"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":2,\"lat\":1,\"lon\":1}\n{\"t\":2,\"lat\":1,\"lon\":1}\n", "line 3: t 2.0 is not after the position before it"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":2,\"lat\":1,\"lon\":1,\"speed\":-1}\n", "line 2: speed is not a number of m/s"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"cellular\"}]}\n{\"t\":1,\"interface\":\"a\",\"technology\":\"lte,,umts\"}\n", "line 2: technology is not a list of access technologies"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"cellular\"}]}\n{\"t\":1,\"interface\":\"a\",\"quality\":101}\n", "line 2: quality is not a percentage"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"cellular\"}]}\n{\"t\":1,\"interface\":\"a\",\"rsrp\":12}\n", "line 2: rsrp is not a number of dBm from -200 to 0"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"cellular\"}]}\n{\"t\":1,\"interface\":\"a\",\"snr\":\"high\"}\n", "line 2: snr is not a number of dB from -50 to 60"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"throughput\":-5}\n", "line 2: throughput is not a whole number of bits per second"),
        ("{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"throughput\":1e12}\n", "line 2: throughput is not a whole number of bits per second up to 100 Gbit/s"),
    ])
    func aMalformedRecordingIsRefusedWithItsLine(_ input: String, _ expected: String) {
        guard case .failure(let error) = DeviceRecording.parse(Array(input.utf8)) else {
            Issue.record("\(input) was read")
            return
        }
        #expect(error.message.contains(expected), "\(error.message)")
    }

    @Test func aLineLongerThanRoamWritesIsRefusedUnread() {
        let input = "{\"roamRecording\":1,\"interval\":1,\"interfaces\":[{\"name\":\"a\",\"type\":\"wifi\"}]}\n{\"t\":1,\"interface\":\"a\",\"x\":\"" + String(repeating: "y", count: 5000) + "\"}\n"
        guard case .failure(let error) = DeviceRecording.parse(Array(input.utf8)) else {
            Issue.record("a line of 5 KB was read")
            return
        }
        #expect(error.message.hasPrefix("line 2: ") && error.message.contains("bytes: longer than a line roam record writes"), "\(error.message)")
    }
}
