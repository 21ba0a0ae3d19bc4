import ScenarioModel
import Testing

/// `radio:` on a cellular link or network: presets, overrides, and every mistake a clear error.
@Suite struct RadioStatesTests {
    func read(_ radio: String, type: String = "cellular", network: Bool = false) -> ScenarioReader.Outcome {
        let text = network
            ? """
            name: r
            duration: 10s
            nodes: {phone: {}, api: {internet: true}}
            networks:
              - {name: lte, type: \(type), members: [phone], radio: \(radio)}

            """
            : """
            name: r
            duration: 10s
            nodes: {phone: {}, server: {}}
            links:
              - {name: lte, between: [phone, server], type: \(type), radio: \(radio)}

            """
        return ScenarioReader.parse(text, file: "s.yaml")
    }

    func errors(_ radio: String, type: String = "cellular") -> [String] { read(radio, type: type).errors.map(\.message) }

    @Test func presetsAndOverridesAreRead() throws {
        let lte = try #require(read("lte").scenario?.links.first?.radio)
        #expect(lte == .lte)
        #expect(lte.promotion == .milliseconds(260) && lte.tail == .milliseconds(11_576) && lte.pagingCycle == .milliseconds(1280))
        let nsa = try #require(read("5g-nsa").scenario?.links.first?.radio)
        #expect(nsa.preset == "5g-nsa" && nsa.promotion == lte.promotion)
        let tuned = try #require(read("{states: lte, tail: 5s}").scenario?.links.first?.radio)
        #expect(tuned.tail == .seconds(5) && tuned.promotion == .milliseconds(260) && tuned.preset == "lte")
        let own = try #require(read("{promotion: 400ms, tail: 10s, pagingCycle: 640ms}").scenario?.links.first?.radio)
        #expect(own == RadioStates(promotion: .milliseconds(400), tail: .seconds(10), pagingCycle: .milliseconds(640)))
        // A network's radio is every member's access link's.
        let network = try #require(read("lte", network: true).scenario)
        #expect(network.links.first { $0.name == "lte.phone" }?.radio == .lte)
        #expect(network.links.filter { $0.radio != nil }.count == 1)
    }

    @Test(arguments: [
        ("lte", "wifi", "link 'lte' is wifi, but RRC radio states (radio:) are a cellular radio's"),
        ("ltee", "cellular", "(did you mean 'lte'?)"),
        ("{promotion: 400ms}", "cellular", "missing: tail, pagingCycle"),
        ("{states: lte, promotion: 11s}", "cellular", "promotion must be at most 10s"),
        ("{states: lte, tail: 0s}", "cellular", "tail must be at least 1ms"),
        ("{states: lte, pagingCycle: 20s}", "cellular", "pagingCycle must be at most"),
        ("{states: lte, drx: 40ms}", "cellular", "unknown key 'drx'"),
        ("[lte]", "cellular", "must be a mapping"),
    ])
    func mistakesAreErrors(radio: String, type: String, message: String) {
        let found = errors(radio, type: type)
        #expect(found.count == 1 && found.allSatisfy { $0.contains(message) }, "\(found)")
    }

    @Test func aNetworkOfWiFiRefusesARadio() {
        #expect(read("lte", type: "wifi", network: true).errors.contains { $0.message.contains("network 'lte' is wifi") })
    }

    /// Half speed halves the radio's timers (on the scenario's clock) but not its promotion (a
    /// delay, like the link's own).
    @Test func timeScalingScalesTheTimersNotThePromotion() throws {
        let scaled = try #require(read("lte").scenario?.timeScaled(by: 0.5).links.first?.radio)
        #expect(scaled.promotion == .milliseconds(260))
        #expect(scaled.tail == .milliseconds(5788) && scaled.pagingCycle == .milliseconds(640))
    }
}
