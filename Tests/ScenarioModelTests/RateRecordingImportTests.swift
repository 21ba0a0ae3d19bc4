import Foundation
import RoamCore
import ScenarioModel
import Testing

private let gnettrack = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/traces/gnettrack").path

/// `roam import gnettrack`: G-NetTrack Pro logs (real excerpts of Raca et al.'s 5G dataset,
/// vendored with their licence in Tests/Fixtures/traces/gnettrack) read by their header's
/// columns and played as a cellular link's downlink rates, second by second; malformed logs
/// refused with what is wrong and on which line.
@Suite struct GNetTrackImportTests {
    func log(_ name: String) throws -> GNetTrackImport.Log {
        try GNetTrackImport.read(gnettrack + "/" + name)
    }

    func yaml(_ log: GNetTrackImport.Log, name: String = "drive") -> (yaml: String, notes: [String]) {
        let (interface, notes) = GNetTrackImport.interface(log)
        return (RateRecording.scenarioYAML(name: name, interfaces: [interface], width: .seconds(1),
                                           header: GNetTrackImport.header(log, source: "drive.csv", width: .seconds(1)), notes: notes), notes)
    }

    @Test func readsEachRowOnTheLogsClock() throws {
        let start = try log("download-driving-start.csv")
        #expect(start.rows.count == 58 && start.outOfOrder == 0)
        // 2019.12.16_07.22.43 twice, then .44 twice: a second's resolution, rows repeated.
        #expect(start.rows.prefix(4).map(\.at) == [.zero, .zero, .seconds(1), .seconds(1)])
        #expect(start.rows[0].down == .kbit(222) && start.rows[0].up == .kbit(53) && start.rows[0].state == "D")
        #expect(start.rows[0].networkMode == "5G" && start.rows[0].cell == "12" && start.rows[0].speed == 0)
        #expect(start.rows.filter { $0.state == "I" }.count == 1)
        let pinged = try #require(start.rows.first { $0.roundTrip != nil })
        #expect(pinged.roundTrip == .milliseconds(80) && pinged.loss == 0)
        #expect(start.rows.last.map { $0.at <= .seconds(60) } == true)
    }

    /// The first seconds of the drive as the link plays them: each second's mean measured
    /// downlink rate, a second at zero passing nothing, the idle row keeping what was before it,
    /// the delay half the ping's least round trip (taken while downloading); the uplink not played.
    @Test func eachSecondPlaysItsMeasuredDownlinkRate() throws {
        let (yaml, notes) = yaml(try log("download-driving-start.csv"))
        let read = ScenarioReader.parse(yaml, file: "drive.yaml")
        #expect(read.errors.isEmpty, "\(read.errors.map(\.message))\n\(yaml.prefix(2000))")
        #expect(yaml.contains("links:\n  - {name: cell, between: [phone, server], type: cellular, up: {delay: 39.5ms, loss: 0%}, down: {rate: 115kbit, delay: 39.5ms, loss: 0%}}"), "\(yaml.prefix(1500))")
        for event in ["{at: 1000ms, link: cell, direction: down, set: {rate: 5kbit}}",      // 8 and 1 kbit/s
                      "{at: 3000ms, link: cell, direction: down, set: {loss: 100%}}",      // 0 (07.22.45 has no row)
                      "{at: 4000ms, link: cell, direction: down, set: {rate: 35kbit, loss: 0%}}",
                      "{at: 5000ms, link: cell, direction: down, set: {loss: 100%}}",
                      "{at: 8000ms, link: cell, direction: down, set: {rate: 149kbit, loss: 0%}}",
                      "{at: 9000ms, link: cell, direction: down, set: {rate: 1915kbit}}"] { // 149 and 3681 kbit/s
            #expect(yaml.contains(event), "\(event) in \(yaml.prefix(1500))")
        }
        // 07.22.49 is the idle row: nothing changes at 6 s.
        #expect(!yaml.contains("{at: 6000ms,"), "\(yaml.prefix(1500))")
        #expect(!yaml.contains("direction: up, set: {rate"), "the uplink is not played")
        #expect(notes.contains { $0.contains("1 in I keep the rate before them") }, "\(notes)")
        #expect(notes.contains { $0.hasPrefix("UL_bitrate is not played") } && notes.contains { $0.contains("position and speed are not played by the link (58 fixes") }, "\(notes)")
        #expect(yaml.hasPrefix("# Imported by roam import gnettrack from drive.csv (G-NetTrack Pro): 58 rows over 59 s, 5G 100%."), "\(yaml.prefix(300))")
    }

    /// Two minutes of 5G and LTE cells: every second's played rate is the mean of its rows',
    /// the changes of cell and mode are listed, and the scenario reads back.
    @Test func cellChangesAreListedAndTheRatesFollowThem() throws {
        let log = try log("download-driving-handovers.csv")
        #expect(log.rows.count == 124)
        let (interface, notes) = GNetTrackImport.interface(log)
        let windows = RateRecording.windows(interface.samples, width: .seconds(1), count: RateRecording.windowCount([interface], width: .seconds(1)))
        for window in windows {
            let rows = log.rows.filter { $0.at >= window.start && $0.at < window.start + .seconds(1) }
            let rates = rows.compactMap(\.down).map(\.bitsPerSecond)
            #expect(window.samples == rows.count)
            #expect(window.down.map(\.bitsPerSecond) == (rates.isEmpty ? nil : rates.reduce(0, +) / Double(rates.count)), "\(window.start)")
        }
        #expect(windows.compactMap(\.down).max() == .kbit(164_656))
        let changes = try #require(notes.first { $0.contains("change") && $0.contains("of cell or network mode") })
        #expect(changes.contains("5G cell") && changes.contains("LTE cell"), "\(changes)")
        let (yaml, _) = yaml(log)
        #expect(ScenarioReader.parse(yaml, file: "drive.yaml").errors.isEmpty)
        #expect(yaml.contains("set: {rate: 164656kbit}"))
    }

    static let header = "Timestamp,Longitude,Latitude,Speed,Operatorname,CellID,NetworkMode,RSRP,RSRQ,SNR,CQI,RSSI,DL_bitrate,UL_bitrate,State,PINGAVG,PINGMIN,PINGMAX,PINGSTDEV,PINGLOSS"
    static let row = "2019.12.16_07.22.43,-8.388197,51.935609,0,B,12,5G,-98,-10,3.0,12,-88,222,53,D,-,-,-,-,-"

    @Test(arguments: [
        ("", "empty: no header line"),
        ("Timestamp,Longitude,UL_bitrate\n", "line 1: no DL_bitrate column: not a G-NetTrack Pro log"),
        ("PK\u{3}\u{4}rest", "a zip archive: unzip it"),
        ("\(header)\n", "no rows after the header"),
        ("\(header)\n\(row)\n2019.12.16_07.22.44,1,2\n", "line 3: 3 fields where the header has 20"),
        ("\(header)\n\(row.replacingOccurrences(of: "2019.12.16_07.22.43", with: "2019-12-16 07:22:43"))\n", "line 2: Timestamp '2019-12-16 07:22:43' is not YYYY.MM.DD_HH.MM.SS"),
        ("\(header)\n\(row.replacingOccurrences(of: "2019.12.16", with: "2019.13.16"))\n", "line 2: Timestamp '2019.13.16_07.22.43'"),
        ("\(header)\n\(row.replacingOccurrences(of: ",222,", with: ",fast,"))\n", "line 2: DL_bitrate 'fast' is not a number from 0.0 to"),
        ("\(header)\n\(row.replacingOccurrences(of: ",222,", with: ",nan,"))\n", "line 2: DL_bitrate 'nan' is not a number"),
        ("\(header)\n\(row.replacingOccurrences(of: ",222,", with: ",2e5,"))\n", "line 2: DL_bitrate '2e5' is not a number"),
        ("\(header)\n\(row.replacingOccurrences(of: ",222,", with: ",-5,"))\n", "line 2: DL_bitrate '-5' is not a number"),
        ("\(header)\n\(row)\n\(row.replacingOccurrences(of: "2019.12.16", with: "2019.12.18"))\n", "line 3: 172800 s from the first row: the log spans more than 24 h"),
        ("\(header)\n\(row.replacingOccurrences(of: "-,-,-,-,-", with: "-,-,-,-,250"))\n", "line 2: PINGLOSS '250' is not a number from 0.0 to 100.0"),
        ("\(header)\n\(row.replacingOccurrences(of: "-,-,-,-,-", with: "80,x,-,-,0"))\n", "line 2: PINGMIN 'x' is not a number from 0.0 to 120000.0"),
        // A clock that stepped back a day, then on: more than a day in all (found by the fuzzer).
        ("\(header)\n\(row)\n\(row.replacingOccurrences(of: "2019.12.16_07.22.43", with: "2019.12.15_07.22.44"))\n\(row.replacingOccurrences(of: "07.22.43", with: "07.22.45"))\n",
         "line 4: 2 s from the first row: the log spans more than 24 h"),
    ])
    func refusesWhatIsNotALog(_ text: String, _ message: String) {
        guard case .failure(let error) = GNetTrackImport.parse(Array(text.utf8)) else {
            Issue.record("accepted: \(text.prefix(200))")
            return
        }
        #expect(error.message.contains(message), "\(error.message)")
    }

    /// A ping taken while the app downloaded measured the download's queue too, which the
    /// replay's own download builds again: it plays the least round trip (PINGMIN) of the 10 s
    /// before it; an idle phone's ping plays its mean. Without PINGMIN, the least mean.
    @Test func aPingTakenWhileDownloadingPlaysTheLeastRoundTripOfTheTenSecondsBefore() throws {
        func row(_ time: String, _ state: String, _ ping: String) -> String {
            Self.row.replacingOccurrences(of: "07.22.43", with: time).replacingOccurrences(of: ",D,-,-,-,-,-", with: ",\(state),\(ping)")
        }
        let text = [Self.header, row("07.22.43", "D", "100,60,140,20,0"), row("07.22.46", "I", "50,45,55,3,0"),
                    row("07.22.48", "D", "120,90,150,20,0"), row("07.22.59", "D", "110,95,130,10,0")].joined(separator: "\n") + "\n"
        let log = try GNetTrackImport.parse(Array(text.utf8)).get()
        #expect(log.rows.map(\.roundTripMinimum) == [.milliseconds(60), .milliseconds(45), .milliseconds(90), .milliseconds(95)])
        let (interface, notes) = GNetTrackImport.interface(log)
        // 0 s: its own least; 3 s idle: its mean; 5 s: the idle ping's 45 ms is the least of the
        // ten seconds before; 16 s: only its own least is that recent.
        #expect(interface.samples.map(\.roundTrip) == [.milliseconds(60), .milliseconds(50), .milliseconds(45), .milliseconds(95)])
        #expect(notes.contains { $0.contains("3 taken while the app downloaded play the least round trip (PINGMIN) of the 10s before") }, "\(notes)")
        // A log without PINGMIN: the least of the means.
        let withoutLeast = text.split(separator: "\n").map { line in
            var fields = line.split(separator: ",", omittingEmptySubsequences: false)
            fields.remove(at: 16)
            return fields.joined(separator: ",")
        }.joined(separator: "\n")
        let means = GNetTrackImport.interface(try GNetTrackImport.parse(Array(withoutLeast.utf8)).get()).interface.samples.map(\.roundTrip)
        #expect(means == [.milliseconds(100), .milliseconds(50), .milliseconds(50), .milliseconds(110)])
    }

    /// A clock that stepped back (one of the published logs has one) places the row by its time.
    @Test func aRowOutOfTimeOrderIsPlacedByItsTime() throws {
        let later = Self.row.replacingOccurrences(of: "07.22.43", with: "07.22.45")
        let text = "\(Self.header)\n\(later)\n\(Self.row)\n"
        let log = try GNetTrackImport.parse(Array(text.utf8)).get()
        #expect(log.outOfOrder == 1 && log.rows.map(\.at) == [.zero, .seconds(2)])
        #expect(GNetTrackImport.interface(log).notes.contains { $0.hasPrefix("1 row out of time order") })
    }

    /// Every prefix of a real log is read or refused with a line number, never trapped on.
    @Test func everyPrefixIsReadOrRefused() throws {
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: gnettrack + "/download-driving-start.csv")))
        for length in stride(from: 0, through: bytes.count, by: 37) {
            switch GNetTrackImport.parse(Array(bytes.prefix(length))) {
            case .success(let log): #expect(!log.rows.isEmpty)
            case .failure(let error): #expect(!error.message.isEmpty)
            }
        }
    }
}

/// `roam import mp-traces`: a pair of MP-Traces files (the format its README documents:
/// `timeInSeconds,BytesPerSecond`, one file per interface) made into a Wi-Fi and a cellular
/// link on one clock. The dataset carries no licence, so these are pairs written here in its
/// format; docs/import.md says where to get the recordings.
@Suite struct MPTracesImportTests {
    /// A walk: the Wi-Fi carries 6 MB/s for 4 s, nothing for 3 s, then 3 MB/s; the cellular
    /// link 1 MB/s throughout, its file missing second 6.
    static let wifi = (1...10).map { "\($0),\($0 <= 4 ? 6_000_000 : $0 <= 7 ? 0 : 3_000_000)" }.joined(separator: "\n") + "\n"
    static let cellular = (1...10).filter { $0 != 6 }.map { "\($0),1000000" }.joined(separator: "\r\n") + "\r\n"

    @Test func aPairIsTwoLinksOnOneClock() throws {
        let wifi = try MPTracesImport.parse(Array(Self.wifi.utf8)).get(), cellular = try MPTracesImport.parse(Array(Self.cellular.utf8)).get()
        #expect(wifi.count == 10 && cellular.count == 9 && wifi[4].second == 5 && wifi[4].bytesPerSecond == 0)
        let (interfaces, notes) = MPTracesImport.interfaces(wifi: wifi, cellular: cellular, wifiDelay: .milliseconds(5), cellularDelay: .milliseconds(30))
        #expect(interfaces.map(\.link) == ["wifi", "cell"] && interfaces.map(\.type) == ["wifi", "cellular"])
        #expect(notes.contains("1 second missing from the cellular file keep the rate before them"), "\(notes)")
        let yaml = RateRecording.scenarioYAML(name: "walk", interfaces: interfaces, width: .seconds(1), start: .seconds(2),
                                              header: MPTracesImport.header(wifi: wifi, cellular: cellular, sources: ("7_1_wifi.csv", "7_1_cellular.csv"), width: .seconds(1)),
                                              notes: notes)
        let read = ScenarioReader.parse(yaml, file: "walk.yaml")
        #expect(read.errors.isEmpty, "\(read.errors.map(\.message))\n\(yaml)")
        #expect(read.scenario?.duration == .seconds(12) && read.scenario?.links.count == 2)
        #expect(yaml.contains("  - {name: wifi, between: [phone, server], type: wifi, up: {delay: 5ms, loss: 0%}, down: {rate: 48000kbit, delay: 5ms, loss: 0%}}"), "\(yaml)")
        #expect(yaml.contains("  - {name: cell, between: [phone, server], type: cellular, up: {delay: 30ms, loss: 0%}, down: {rate: 8000kbit, delay: 30ms, loss: 0%}}"), "\(yaml)")
        // The Wi-Fi's collapse at its fifth second, 2 s into the scenario: 6 s; back at 9 s.
        #expect(yaml.contains("timeline:\n  - {at: 6000ms, link: wifi, direction: down, set: {loss: 100%}}\n  - {at: 9000ms, link: wifi, direction: down, set: {rate: 24000kbit, loss: 0%}}\n"), "\(yaml)")
        #expect(!yaml.contains("link: cell, direction"), "the cellular link holds through its missing second")
        #expect(yaml.contains("# Wi-Fi as recorded: mean 37.71 Mbit/s (24.00 to 48.00), 3 at zero, of 10 samples"), "\(yaml)")
    }

    @Test func withoutDelaysTheNotesSaySo() throws {
        let wifi = try MPTracesImport.parse(Array(Self.wifi.utf8)).get()
        let notes = MPTracesImport.interfaces(wifi: wifi, cellular: wifi, wifiDelay: nil, cellularDelay: .milliseconds(30)).notes
        #expect(notes.contains { $0.hasPrefix("the recordings carry no delay: the Wi-Fi plays none") }, "\(notes)")
    }

    @Test(arguments: [
        ("", "no seconds: an empty file"),
        ("1,100\n2,abc\n", "line 2: '2,abc' is not timeInSeconds,BytesPerSecond"),
        ("1,100\n1,200\n", "line 2: second 1 a second time"),
        ("1,-5\n", "line 1: '1,-5' is not"),
        ("1,100,7\n", "line 1: '1,100,7' is not"),
        ("timeInSeconds,BytesPerSecond\ntime,bytes\n", "line 2: 'time,bytes' is not"),
        ("90000,1\n", "line 1: second 90000: more than a day"),
        ("1,99999999999999\n", "line 1: 99999999999999 bytes a second: more than 100 Gbit/s"),
    ])
    func refusesWhatIsNotARecording(_ text: String, _ message: String) {
        guard case .failure(let error) = MPTracesImport.parse(Array(text.utf8)) else {
            Issue.record("accepted: \(text)")
            return
        }
        #expect(error.message.contains(message), "\(error.message)")
    }

    @Test func aHeaderLineIsReadPast() throws {
        let seconds = try MPTracesImport.parse(Array("timeInSeconds,BytesPerSecond\n1,100\n".utf8)).get()
        #expect(seconds.count == 1 && seconds[0].second == 1 && seconds[0].bytesPerSecond == 100)
    }
}

/// `phones: {phone: {track: FILE}}`: a recorded movement played as a path that keeps the
/// recording's times; a G-NetTrack log's fixes made into one; bad tracks refused with their line.
@Suite struct RecordedTrackTests {
    @Test func aTrackIsAPathThatArrivesOnTime() throws {
        let text = "# a drive\n0,0,0\n5,0,0\n10,30,40\n20,30,40.0005\n1000,30,42.0005\n"
        let points = try RecordedTrack.parse(Array(text.utf8)).get()
        #expect(points.count == 5 && points[2].at == .seconds(10) && points[2].position == Position(30, 40))
        let (start, legs) = try RecordedTrack.path(points).get()
        #expect(start == Position(0, 0))
        // 5 s standing; 50 m in 5 s; 10 s within a millimetre: standing; 2 m in 980 s: slower
        // than a path moves, so standing 780 s, then 200 s at 0.01 m/s.
        #expect(legs == [.pause(.seconds(5)), .move(to: Position(30, 40), speed: 10), .pause(.seconds(10)),
                         .pause(.seconds(780)), .move(to: Position(30, 42.0005), speed: 0.01)], "\(legs)")
        let starting = try RecordedTrack.path(RecordedTrack.parse(Array("3,1,1\n4,2,1\n".utf8)).get()).get()
        #expect(starting.legs.first == .pause(.seconds(3)), "stands at its first position until its time")
    }

    @Test(arguments: [
        ("", "line 1: no positions"),
        ("0,0\n", "line 1: not SECONDS,X,Y"),
        ("0,0,0\n0,1,1\n", "line 2: 0 s is not after the line before's"),
        ("0,0,0\n1,1e3,0\n", "line 2: not SECONDS,X,Y"),
        ("-1,0,0\n", "line 1: -1 s is outside 0 to 24 h"),
        ("0,2000000,0\n", "line 1: a position more than 1,000 km"),
    ])
    func refusesWhatIsNotATrack(_ text: String, _ message: String) {
        switch RecordedTrack.parse(Array(text.utf8)) {
        case .success: Issue.record("accepted \(text)")
        case .failure(let error): #expect("\(error)".contains(message), "\(error)")
        }
    }

    @Test func aFixThatJumpsIsRefused() throws {
        let points = try RecordedTrack.parse(Array("0,0,0\n1,0,0\n2,5000,0\n".utf8)).get()
        guard case .failure(let error) = RecordedTrack.path(points) else {
            Issue.record("a jump of 5 km in a second accepted")
            return
        }
        #expect("\(error)" == "line 3: 5000 m in 1.0 s: faster than 350 m/s (a fix that jumped)")
    }

    /// A scenario names the track relative to its own directory; the phone walks it past a
    /// cell site, and the reader refuses a missing file and a bad line with the scenario's place.
    @Test func aScenarioPlaysATrackFromItsDirectory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("roam-track-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = try GNetTrackImport.read(gnettrack + "/download-driving-handovers.csv")
        let track = try #require(GNetTrackImport.track(log))
        try track.write(toFile: directory + "/drive.track", atomically: true, encoding: .utf8)
        let scenario = """
            name: drive
            duration: 120s
            nodes:
              phone: {}
            networks:
              - {name: lte, type: cellular, profile: lte, members: [phone]}
            mobility:
              cells:
                - {name: tower, network: lte, at: [-500, -300]}
              phones:
                phone: {track: drive.track}

            """
        let read = ScenarioReader.parse(scenario, file: "drive.yaml", baseDirectory: directory)
        #expect(read.errors.isEmpty, "\(read.errors.map(\.message))")
        let movement = try #require(read.scenario?.mobility?.phones.first)
        guard case .waypoints(let start, let legs) = movement.model else {
            Issue.record("not a path: \(movement.model)")
            return
        }
        #expect(start == Position(0, 0) && legs.count >= 15, "\(legs.count) legs")
        let missing = ScenarioReader.parse(scenario.replacingOccurrences(of: "drive.track", with: "gone.track"), file: "drive.yaml", baseDirectory: directory)
        #expect(missing.errors.contains { $0.message.contains("cannot read track 'gone.track': no such file") && $0.description.hasPrefix("drive.yaml:11:20:") },
                "\(missing.errors.map(\.description))")
        try "0,0,0\nfast\n".write(toFile: directory + "/bad.track", atomically: true, encoding: .utf8)
        let bad = ScenarioReader.parse(scenario.replacingOccurrences(of: "drive.track", with: "bad.track"), file: "drive.yaml", baseDirectory: directory)
        #expect(bad.errors.contains { $0.message.contains("track 'bad.track' line 2: not SECONDS,X,Y") }, "\(bad.errors.map(\.description))")
        let absolute = ScenarioReader.parse(scenario.replacingOccurrences(of: "drive.track", with: "/etc/passwd"), file: "drive.yaml", baseDirectory: directory)
        #expect(absolute.errors.contains { $0.message.contains("track '/etc/passwd' is an absolute path") }, "\(absolute.errors.map(\.description))")
    }
}
