@testable import ScenarioModel
import Testing

@Suite struct UnitsTests {
    @Test(arguments: [("250ms", Duration.milliseconds(250)), ("30s", .seconds(30)), ("1.5s", .milliseconds(1500)), ("2m", .seconds(120)),
                      ("100us", .microseconds(100)), ("-5ms", .milliseconds(-5)), ("0s", .zero), ("1h", .seconds(3600))])
    func readsDurations(_ text: String, _ expected: Duration) throws {
        #expect(try Units.duration(text).get() == expected)
    }

    @Test(arguments: ["30", "ms", "5 parsecs", "", "1e400s"])
    func rejectsBadDurations(_ text: String) {
        #expect(throws: UnitError.self) { try Units.duration(text).get() }
    }

    @Test func readsRates() throws {
        #expect(try Units.rate("10mbit").get() == .mbit(10))
        #expect(try Units.rate("512kbit").get() == .kbit(512))
        #expect(try Units.rate("1.5Gbit").get().bitsPerSecond == 1.5e9)
        #expect(try Units.rate("800bit").get().bitsPerSecond == 800)
        let error = #expect(throws: UnitError.self) { try Units.rate("10mbps").get() }
        #expect(error?.message.contains("10mbit") == true)
        #expect(Rate.mbit(10).description == "10mbit")
        #expect(Rate.kbit(1.5).description == "1.5kbit")
    }

    @Test func readsPercentagesAndSizes() throws {
        #expect(try Units.percentage("0.5%").get() == 0.005)
        #expect(try Units.percentage("40%").get() == 0.4)
        #expect(throws: UnitError.self) { try Units.percentage("0.5").get() }
        #expect(try Units.size("10mb").get() == 10_000_000)
        #expect(try Units.size("64kib").get() == 65536)
        #expect(throws: UnitError.self) { try Units.size("10 parsecs").get() }
    }

    @Test func suggestsCloseWords() {
        #expect(suggestion(for: "dealy", among: ["delay", "jitter", "rate"]) == "delay")
        #expect(suggestion(for: "xyz", among: ["delay", "jitter", "rate"]) == nil)
        #expect(editDistance("kitten", "sitting") == 3)
    }

    @Test func gilbertElliottMeanLoss() {
        #expect(LossModel.gilbertElliott(p: 0.01, r: 0.3, lossInBad: 1, lossInGood: 0).meanLoss == 0.01 / 0.31)
        #expect(LossModel.random(rate: 0.1, correlation: 0.25).meanLoss == 0.1)
    }
}
