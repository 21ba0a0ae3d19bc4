import RoamCore
import ScenarioModel
import Testing

/// `roam import irtt`: IRTT's JSON output (irtt-client(1), "OUTPUT") read into round trips,
/// cut into windows, and written as a scenario the reader accepts; malformed recordings refused
/// with what is wrong and where.
@Suite struct IRTTImportTests {
    /// One round trip as IRTT writes it: sent at `at` ms, its one-way delays in ms (nil: the
    /// server did not stamp), `lost` as IRTT spells it.
    func trip(_ seqno: Int, at: Double, send: Double? = nil, receive: Double? = nil, lost: String = "false", late: Bool = false) -> String {
        let base = Int64(1_000_000_000) + Int64(at * 1e6)
        let delays: String
        if lost != "false" {
            delays = "{}"
        } else if let send, let receive {
            delays = "{\"receive\": \(Int64(receive * 1e6)), \"rtt\": \(Int64((send + receive) * 1e6)), \"send\": \(Int64(send * 1e6))}"
        } else {
            delays = "{\"rtt\": 40000000}"
        }
        let lostValue = lost == "false" ? "false" : lost == "true" ? "true" : "\"\(lost)\""
        return """
            {"seqno": \(seqno), "lost": \(lostValue), "timestamps": {"client": {"send": {"wall": \(base + 1_600_000_000_000_000_000), "monotonic": \(base)}, "receive": {}}, "server": {}, "late": \(late)}, "delay": \(delays), "ipdv": {}}
            """
    }

    func recording(_ trips: [String], interval: Int64 = 100_000_000) -> [UInt8] {
        Array("""
            {"version": {"irtt": "0.9.0", "protocol": 1, "json_format": 1}, "system_info": {"os": "linux"},
             "config": {"params": {"interval": \(interval), "duration": 3000000000}}, "stats": {},
             "round_trips": [\(trips.joined(separator: ",\n"))]}
            """.utf8)
    }

    /// Three seconds at 100 ms: the first second 20 ms up and 30 ms down, one request lost on
    /// the way up; the second second 50 ms down and a reply lost; the third one request IRTT
    /// could not place and one late reply.
    var threeSeconds: [UInt8] {
        var trips: [String] = []
        for index in 0..<30 {
            let at = Double(index) * 100
            switch index {
            case 3: trips.append(trip(index, at: at, lost: "true_up"))
            case 14: trips.append(trip(index, at: at, lost: "true_down"))
            case 25: trips.append(trip(index, at: at, lost: "true"))
            case 10..<20: trips.append(trip(index, at: at, send: 20, receive: 50))
            default: trips.append(trip(index, at: at, send: 20 + Double(index % 3), receive: 30, late: index == 27))
            }
        }
        return recording(trips)
    }

    @Test func readsEachRoundTripOnItsOwnClock() throws {
        let recording = try IRTTImport.parse(threeSeconds).get()
        #expect(recording.version == "0.9.0" && recording.interval == .milliseconds(100) && recording.roundTrips.count == 30)
        #expect(recording.roundTrips[12].at == .milliseconds(1200))
        #expect(recording.roundTrips[3].loss == .up && recording.roundTrips[14].loss == .down && recording.roundTrips[25].loss == .unknown)
        #expect(recording.roundTrips[12].sendDelay == .milliseconds(20) && recording.roundTrips[12].receiveDelay == .milliseconds(50))
        #expect(recording.roundTrips[27].late)
    }

    /// Each window: the median delay each way, the share lost each way (a loss IRTT could not
    /// place on the uplink), and what was not carried over in the notes.
    @Test func eachWindowPlaysItsMedianDelayAndItsLossesEachWay() throws {
        let recording = try IRTTImport.parse(threeSeconds).get()
        let (windows, oneWay, notes) = IRTTImport.windows(recording, width: .seconds(1))
        #expect(oneWay && windows.count == 3 && windows.map(\.sent) == [10, 10, 10])
        #expect(windows[0].upDelay == .milliseconds(21) && windows[0].downDelay == .milliseconds(30))
        #expect(windows[0].upLoss == 0.1 && windows[0].downLoss == 0)
        #expect(windows[1].upDelay == .milliseconds(20) && windows[1].downDelay == .milliseconds(50))
        #expect(windows[1].upLoss == 0 && windows[1].downLoss == 0.1)
        #expect(windows[2].upLoss == 0.1 && windows[2].downLoss == 0)
        #expect(notes.contains { $0.hasPrefix("1 loss IRTT could not place") } && notes.contains { $0.hasPrefix("not carried over: 1 late") }, "\(notes)")

        let yaml = IRTTImport.scenarioYAML(name: "lab", windows: windows, type: "cellular", recording: recording, notes: notes, source: "lab.json")
        let read = ScenarioReader.parse(yaml, file: "lab.yaml")
        #expect(read.errors.isEmpty, "\(read.errors.map(\.message))\n\(yaml)")
        let scenario = try #require(read.scenario)
        #expect(scenario.duration == .seconds(3) && scenario.links.count == 1)
        #expect(yaml.contains("up: {delay: 21ms, loss: 10%}, down: {delay: 30ms, loss: 0%}"), "\(yaml)")
        #expect(yaml.contains("{at: 1000ms, link: path, direction: up, set: {delay: 20ms, loss: 0%}}"), "\(yaml)")
        #expect(yaml.contains("{at: 1000ms, link: path, direction: down, set: {delay: 50ms, loss: 10%}}"), "\(yaml)")
        #expect(yaml.contains("{at: 2000ms, link: path, direction: down, set: {delay: 30ms, loss: 0%}}"), "\(yaml)")
        #expect(yaml.hasPrefix("# Imported by roam import irtt from lab.json (irtt 0.9.0)"))
    }

    /// Without the server's stamps (or with clocks out of step: a negative one-way delay) each
    /// way gets half the round trip, and the notes say so; a gap keeps the conditions before.
    @Test func withoutOneWayDelaysEachWayGetsHalfTheRoundTrip() throws {
        let trips = (0..<10).map { trip($0, at: Double($0) * 100) } + (0..<5).map { trip(10 + $0, at: 3000 + Double($0) * 100) }
        let halves = try IRTTImport.parse(recording(trips)).get()
        let (windows, oneWay, notes) = IRTTImport.windows(halves, width: .seconds(1))
        #expect(!oneWay && windows.count == 4 && windows[0].upDelay == .milliseconds(20) && windows[0].downDelay == .milliseconds(20))
        #expect(windows[1].sent == 0 && windows[2].sent == 0)
        #expect(notes.contains { $0.contains("no one-way delays") } && notes.contains { $0.hasPrefix("2 windows without a round trip") }, "\(notes)")
        let skewed = try IRTTImport.parse(recording([trip(0, at: 0, send: -3, receive: 43), trip(1, at: 100, send: -2, receive: 42)])).get()
        let (_, skewedOneWay, skewedNotes) = IRTTImport.windows(skewed, width: .seconds(1))
        #expect(!skewedOneWay && skewedNotes.contains { $0.contains("clocks were not in step") })
    }

    /// Each malformed recording is refused with what is wrong and, for a round trip, which.
    @Test(arguments: [
        ("gzip", "a gzip file"),
        ("[]", "not IRTT's JSON output: the document is not an object"),
        ("{\"round_trips\": ", "not JSON"),
        ("{\"version\": {\"json_format\": 2}, \"round_trips\": []}", "IRTT JSON format 2"),
        ("{\"stats\": {}}", "no round_trips"),
        ("{\"round_trips\": []}", "round_trips is empty"),
        ("{\"round_trips\": [1]}", "round_trips[0]: not an object"),
        ("{\"round_trips\": [{\"lost\": \"maybe\"}]}", "round_trips[0]: lost is not false, true, true_up or true_down"),
        ("{\"round_trips\": [{\"lost\": false}]}", "round_trips[0]: no timestamps.client.send, and no interval and seqno"),
        ("{\"round_trips\": [{\"lost\": false, \"timestamps\": {\"client\": {\"send\": {\"monotonic\": 5}}}, \"delay\": {\"rtt\": -1}}]}", "round_trips[0]: a negative round-trip time"),
        ("{\"round_trips\": [{\"lost\": false, \"timestamps\": {\"client\": {\"send\": {\"monotonic\": 5}}}, \"delay\": {\"send\": 61000000000}}]}", "round_trips[0]: a delay that is not a number of nanoseconds within 60 s"),
        ("{\"round_trips\": [{\"lost\": false, \"timestamps\": {\"client\": {\"send\": {\"monotonic\": 5}}}, \"delay\": {\"rtt\": 1}}, {\"lost\": false, \"timestamps\": {\"client\": {\"send\": {\"monotonic\": 1}}}}]}", "round_trips[1]: sent -4 ns after the first round trip"),
        ("{\"round_trips\": [{\"lost\": false, \"timestamps\": {\"client\": {\"send\": {\"monotonic\": 5}}}}, {\"lost\": false, \"timestamps\": {\"client\": {\"send\": {\"wall\": 9}}}}]}", "round_trips[1]: no timestamps.client.send.monotonic, which the first round trip has"),
        ("{\"round_trips\": [{\"lost\": true, \"timestamps\": {\"client\": {\"send\": {\"monotonic\": 5}}}}]}", "every round trip was lost"),
        ("{\"config\": {\"params\": {\"interval\": 0}}, \"round_trips\": []}", "config.params.interval 0 ns is not an interval"),
    ])
    func malformedRecordingsAreRefusedWithWhatIsWrong(_ text: String, _ expected: String) {
        let bytes: [UInt8] = text == "gzip" ? [0x1f, 0x8b, 8, 0] : Array(text.utf8)
        switch IRTTImport.parse(bytes) {
        case .success: Issue.record("read: \(text)")
        case .failure(let error): #expect(error.message.hasPrefix(expected), "\(error.message)")
        }
    }

    /// A recording's text cannot reach the scenario but as comments: a version or file name with
    /// line breaks stays on its comment line.
    @Test func aRecordingsTextStaysInItsComments() throws {
        var text = String(decoding: recording([trip(0, at: 0, send: 10, receive: 10)]), as: UTF8.self)
        text = text.replacing("\"irtt\": \"0.9.0\"", with: "\"irtt\": \"0.9\\nname: evil\\nduration: 1h\"")
        let read = try IRTTImport.parse(Array(text.utf8)).get()
        let (windows, _, notes) = IRTTImport.windows(read, width: .seconds(1))
        let yaml = IRTTImport.scenarioYAML(name: "lab", windows: windows, type: nil, recording: read, notes: notes, source: "a\nb.json")
        #expect(yaml.split(separator: "\n").filter { $0.hasPrefix("name:") } == ["name: lab"], "\(yaml)")
        #expect(ScenarioReader.parse(yaml, file: "lab.yaml").errors.isEmpty)
    }
}
