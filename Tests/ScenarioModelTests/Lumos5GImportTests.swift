import Foundation
import RoamCore
import ScenarioModel
import Testing

private let lumos5g = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/traces/lumos5g/loop-excerpt.csv").path

/// `roam import lumos5g`: rows in the Lumos5G dataset's format (its README's columns; written
/// here, as Tests/Fixtures/traces/lumos5g/SOURCE.md says: the dataset's CSV is not reachable from
/// this machine) read by their header, split into runs, and one run played as a cellular link's
/// downlink, second by second; malformed files refused with what is wrong and on which line.
@Suite struct Lumos5GImportTests {
    @Test func splitsTheFileIntoItsRuns() throws {
        let runs = try Lumos5GImport.read(lumos5g)
        #expect(runs.map(\.label) == ["run 3 walking CW", "run 3 driving CW", "run 4 walking ACW"])
        #expect(runs.map(\.rows.count) == [23, 8, 5])
        let walk = runs[0]
        #expect(walk.rows.first?.throughput == .mbit(950) && walk.rows.first?.onNR == true && walk.rows.first?.tower == "17")
        // Android's CellInfo.UNAVAILABLE is "not reported", not -2 GW of signal.
        #expect(walk.rows[10].nrRSRP == nil && walk.rows[10].lteRSRP == -89 && walk.rows[10].onNR == false)
        #expect(walk.rows[0].nrRSRP == -75 && walk.rows[0].speed == 1.4)
        // Second 12 has no row; second 14 received nothing.
        #expect(!walk.rows.contains { $0.second == 12 } && walk.rows.first { $0.second == 14 }?.throughput == .mbit(0))
        // The third run's NR fields are empty.
        #expect(runs[2].rows.allSatisfy { $0.nrRSRP == nil && $0.nrStatus == "NONE" })
    }

    @Test func aRunIsChosenByItsNumberModeAndDirection() throws {
        let runs = try Lumos5GImport.read(lumos5g)
        #expect(try Lumos5GImport.select(runs, number: 4, mobility: nil, direction: nil).label == "run 4 walking ACW")
        #expect(try Lumos5GImport.select(runs, number: 3, mobility: "Driving", direction: nil).rows.count == 8)
        #expect(try Lumos5GImport.select([runs[2]], number: nil, mobility: nil, direction: nil).label == "run 4 walking ACW")
        #expect(throws: ScenarioError("the file has 3 runs: run 3 walking CW (23 rows), run 3 driving CW (8 rows), run 4 walking ACW (5 rows); choose one with --run (and --mobility, --direction where a number names several)")) {
            try Lumos5GImport.select(runs, number: nil, mobility: nil, direction: nil)
        }
        #expect(throws: ScenarioError("2 runs match: run 3 walking CW (23 rows), run 3 driving CW (8 rows); choose one with --run, --mobility and --direction")) {
            try Lumos5GImport.select(runs, number: 3, mobility: nil, direction: nil)
        }
        #expect(throws: ScenarioError("no run is run 4 driving; the file has run 3 walking CW (23 rows), run 3 driving CW (8 rows), run 4 walking ACW (5 rows)")) {
            try Lumos5GImport.select(runs, number: 4, mobility: "driving", direction: nil)
        }
    }

    /// The walking run as the link plays it: each second's Throughput as the downlink's rate, the
    /// missing second keeping the one before, the second at zero passing nothing, the given delay
    /// both ways; the uplink unlimited; the 5G/LTE changes and what was not carried over said.
    @Test func eachSecondPlaysItsThroughput() throws {
        let run = try Lumos5GImport.select(try Lumos5GImport.read(lumos5g), number: 3, mobility: "walking", direction: "CW")
        let (interface, notes) = Lumos5GImport.interface(run, delay: .milliseconds(12))
        let yaml = RateRecording.scenarioYAML(name: "loop", interfaces: [interface], width: .seconds(1),
                                              header: Lumos5GImport.header(run, source: "loop.csv", width: .seconds(1)), notes: notes)
        let read = ScenarioReader.parse(yaml, file: "loop.yaml")
        #expect(read.errors.isEmpty, "\(read.errors.map(\.message))\n\(yaml.prefix(2000))")
        #expect(yaml.contains("links:\n  - {name: cell, between: [phone, server], type: cellular, up: {delay: 12ms, loss: 0%}, down: {rate: 950000kbit, delay: 12ms, loss: 0%}}"), "\(yaml.prefix(1500))")
        for event in ["{at: 10000ms, link: cell, direction: down, set: {rate: 72500kbit}}",   // to LTE
                      "{at: 13000ms, link: cell, direction: down, set: {rate: 75500kbit}}",   // 12 s has no row: 11 s's rate held
                      "{at: 14000ms, link: cell, direction: down, set: {loss: 100%}}",
                      "{at: 15000ms, link: cell, direction: down, set: {rate: 77500kbit, loss: 0%}}",
                      "{at: 16000ms, link: cell, direction: down, set: {rate: 700000kbit}}"] {
            #expect(yaml.contains(event), "\(event) in \(yaml.prefix(2000))")
        }
        #expect(!yaml.contains("{at: 12000ms,") && !yaml.contains("direction: up"), "\(yaml.prefix(2000))")
        #expect(read.scenario?.duration == .seconds(24))
        #expect(yaml.hasPrefix("# Imported by roam import lumos5g from loop.csv (Lumos5G, Narayanan et al., IMC 2020; CC BY 4.0): run 3 walking CW, 23 rows over 23 s."), "\(yaml.prefix(300))")
        #expect(notes.contains("1 of the run's 24 seconds has no row: it keeps the rate before it"), "\(notes)")
        #expect(notes.contains { $0.hasPrefix("on 5G (nrStatus CONNECTED) 18 of 23 s; 2 changes between 5G and LTE, played only as the rates around them: 10 s to LTE; 16 s to 5G") }, "\(notes)")
        #expect(notes.contains("2 towers: the handovers between them are in the rates"), "\(notes)")
        let undelayed = Lumos5GImport.interface(run).notes
        #expect(undelayed.contains { $0.hasPrefix("the dataset measures no delay") }, "\(undelayed)")
    }

    /// The run's positions as a track: metres north of the first fix at 1.4 m/s, the missing
    /// second left out, read back by mobility's reader.
    @Test func theRunsPositionsBecomeATrack() throws {
        let run = try Lumos5GImport.select(try Lumos5GImport.read(lumos5g), number: 3, mobility: "walking", direction: "CW")
        let text = try #require(Lumos5GImport.track(run))
        let points = try RecordedTrack.parse(Array(text.utf8)).get()
        #expect(points.count == 23 && points.first?.position == Position(0, 0))
        let last = try #require(points.last)
        #expect(last.at == .seconds(23) && abs(last.position.y - 23 * 1.4) < 0.2 && last.position.x == 0, "\(last)")
        #expect(!points.contains { $0.at == .seconds(12) })
    }

    static let header = "run_num,seq_num,abstractSignalStr,latitude,longitude,movingSpeed,compassDirection,nrStatus,lte_rssi,lte_rsrp,lte_rsrq,lte_rssnr,nr_ssRsrp,nr_ssRsrq,nr_ssSinr,Throughput,mobility_mode,trajectory_direction,tower_id"
    static let row = "3,0,3,44.973900,-93.257800,1.4,0.5,CONNECTED,2147483647,-88,-11,12,-75,-11,14,950,walking,CW,17"

    @Test(arguments: [
        ("", "empty: no header line"),
        ("run_num,seq_num,latitude\n", "line 1: no Throughput column: not Lumos5G's CSV"),
        ("PK\u{3}\u{4}rest", "a zip archive: unzip it"),
        ("\(header)\n", "no rows after the header"),
        ("\(header)\n\(row)\n3,1,2\n", "line 3: 3 fields where the header has 19"),
        ("\(header)\n\(row.replacingOccurrences(of: "3,0,3,", with: "x,0,3,"))\n", "line 2: run_num 'x' is not a whole number from 0 to 1000000"),
        ("\(header)\n\(row.replacingOccurrences(of: "3,0,3,", with: "3,-1,3,"))\n", "line 2: seq_num '-1' is not a whole number from 0 to 86400"),
        ("\(header)\n\(row.replacingOccurrences(of: "3,0,3,", with: "3,90000,3,"))\n", "line 2: seq_num '90000' is not a whole number"),
        ("\(header)\n\(row.replacingOccurrences(of: ",950,", with: ",fast,"))\n", "line 2: Throughput 'fast' is not a number"),
        ("\(header)\n\(row.replacingOccurrences(of: ",950,", with: ",-5,"))\n", "line 2: Throughput -5 is outside 0 to"),
        ("\(header)\n\(row.replacingOccurrences(of: ",950,", with: ",inf,"))\n", "line 2: Throughput 'inf' is not a number"),
        ("\(header)\n\(row.replacingOccurrences(of: "44.973900", with: "95"))\n", "line 2: latitude 95 is outside -90 to 90"),
        ("\(header)\n\(row.replacingOccurrences(of: ",1.4,", with: ",5000,"))\n", "line 2: movingSpeed 5000 is outside 0 to 1000"),
        ("\(header)\n\(row.replacingOccurrences(of: "CONNECTED", with: "CONN\u{1b}[2J"))\n", "line 2: nrStatus 'CONN\\u{1b}[2J' is not a word"),
        ("\(header)\n\(row)" + String(repeating: "9", count: 5000) + "\n", "line 2: 5095 bytes: longer than a Lumos5G row"),
    ])
    func refusesWhatIsNotLumos5G(_ text: String, _ message: String) {
        guard case .failure(let error) = Lumos5GImport.parse(Array(text.utf8)) else {
            Issue.record("accepted: \(text.prefix(200))")
            return
        }
        #expect(error.message.contains(message), "\(error.message)")
    }

    /// pandas' ways of writing the same row: an index column without a name, a whole number
    /// as a float, NaN for an empty field, a quoted word, CRLF line ends.
    @Test func readsWhatASpreadsheetOrPandasWrites() throws {
        let text = ",\(Self.header)\r\n0,3.0,0.0,3,44.9739,-93.2578,NaN,0.5,\"CONNECTED\",,-88,-11,12,-75,-11,14,950.5,walking,CW,17\r\n"
        let runs = try Lumos5GImport.parse(Array(text.utf8)).get()
        let row = try #require(runs.first?.rows.first)
        #expect(runs.count == 1 && row.run == 3 && row.second == 0 && row.speed == nil && row.onNR && row.throughput == .mbit(950.5))
    }

    /// Every prefix of the excerpt is read or refused with a message, never trapped on.
    @Test func everyPrefixIsReadOrRefused() throws {
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: lumos5g)))
        for length in stride(from: 0, through: bytes.count, by: 29) {
            switch Lumos5GImport.parse(Array(bytes.prefix(length))) {
            case .success(let runs): #expect(!runs.isEmpty && runs.allSatisfy { !$0.rows.isEmpty })
            case .failure(let error): #expect(!error.message.isEmpty)
            }
        }
    }
}
