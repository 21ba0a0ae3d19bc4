import RoamCore
@testable import RoamReport
import Testing

/// The report's map: read back as written, bounded against a hostile summary, drawn with every
/// name escaped, roams and network changes marked.
@Suite struct MobilityMapTests {
    typealias Map = RunSummary.MobilityMap

    static func walk() -> Map {
        var points: [Map.Point] = []
        for step in 0...40 {
            let x = Double(step) * 2
            let (network, transmitter): (String?, String?) = x < 30 ? ("office", "ap-east") : x < 60 ? ("office", "ap-<west>") : ("lte", "tower")
            points.append(Map.Point(t: Double(step), x: x, y: 0, network: network, transmitter: transmitter, signal: -40 - x / 2))
        }
        return Map(transmitters: [Map.Transmitter(name: "ap-east", network: "office", isCellular: false, x: 0, y: 4),
                                  Map.Transmitter(name: "ap-<west>", network: "office", isCellular: false, x: 50, y: 4),
                                  Map.Transmitter(name: "tower", network: "lte", isCellular: true, x: 150, y: 100)],
                   obstacles: [Map.Obstacle(name: "lift\"><script>", x0: 70, y0: -3, x1: 76, y1: 3)],
                   tracks: [Map.Track(node: "phone", points: points)])
    }

    @Test func whatIsWrittenIsRead() throws {
        let map = Self.walk()
        let read = try Map(json: try JSONValue.parse(map.json.serialized))
        #expect(read == map)
    }

    @Test func aHostileMapIsBoundedOrRefused() throws {
        let many = "[" + Array(repeating: "[1, 2, 3, null, null, null]", count: 5000).joined(separator: ",") + "]"
        let json = #"{"transmitters": [], "obstacles": [], "tracks": [{"node": "p", "points": \#(many)}]}"#
        let read = try Map(json: try JSONValue.parse(json))
        #expect(read.tracks[0].points.count == Map.maximumPoints)
        let far = try Map(json: try JSONValue.parse(#"{"tracks": [{"node": "p", "points": [[0, 1e300, -1e300, null, null, null]]}]}"#))
        #expect(far.tracks[0].points[0].x == 1e7 && far.tracks[0].points[0].y == -1e7)
        for broken in [#"{"tracks": [{"node": "p", "points": [[0, 1, 2]]}]}"#, #"{"tracks": [{"node": "p", "points": [[0, "x", 2, null, null, null]]}]}"#,
                       #"{"obstacles": [{"name": "o", "from": [1], "to": [2, 3]}]}"#, #"{"transmitters": [{"name": "a", "network": "n", "kind": "ap", "x": 1}]}"#] {
            #expect(throws: ReportError.self) { try Map(json: try JSONValue.parse(broken)) }
        }
    }

    @Test func theMapMarksRoamsAndNetworkChangesAndEscapesNames() throws {
        var run = try reportFixture()
        run.summary.map = Self.walk()
        let html = HTMLReport.render(run)
        // One roam (ap-east → ap-<west>), one network change (office → lte).
        #expect(html.contains("data-map=\"1 3 1 1\""), "\(html.components(separatedBy: "figure class=map").dropFirst().first?.prefix(200) ?? "no map")")
        #expect(html.contains("phone roam ap-east → ap-&lt;west&gt; at 15 s"))
        #expect(html.contains("class=handover"))
        #expect(html.contains("lift&quot;&gt;&lt;script&gt;") && !html.contains("lift\"><script>"))
        #expect(html.components(separatedBy: "<script").count - 1 == 1, "one script, the page's own")
        // The signal chart joins the page's charts.
        #expect(html.contains("data-chart=\"signal\""))
        #expect(html.contains("data-charts=\"7\""))
    }
}
