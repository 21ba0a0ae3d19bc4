@testable import LinkEmulation
import ScenarioModel
import Testing

/// A cellular radio's RRC states, driven by a manual clock (nanoseconds).
@Suite struct RadioStateMachineTests {
    static let ms: Int64 = 1_000_000
    static let states = RadioStates(promotion: .milliseconds(260), tail: .seconds(10), pagingCycle: .milliseconds(1280))

    @Test func theFirstPacketPaysThePromotionAndThoseDuringItWaitForItsEnd() {
        var radio = RadioStateMachine(Self.states, origin: 0)
        #expect(radio.admit(at: 100 * Self.ms, uplink: true, busy: false, lastTransmission: .min) == 360 * Self.ms)
        // An answer (down) and another request (up) during the promotion wait for the same end.
        #expect(radio.admit(at: 200 * Self.ms, uplink: false, busy: true, lastTransmission: .min) == 360 * Self.ms)
        #expect(radio.admit(at: 359 * Self.ms, uplink: true, busy: true, lastTransmission: .min) == 360 * Self.ms)
        // Connected: at once, in either direction.
        #expect(radio.admit(at: 400 * Self.ms, uplink: true, busy: false, lastTransmission: 360 * Self.ms) == 400 * Self.ms)
        #expect(radio.admit(at: 401 * Self.ms, uplink: false, busy: false, lastTransmission: 400 * Self.ms) == 401 * Self.ms)
        #expect(radio.promotions == (1, 0))
    }

    @Test func theRadioGoesIdleATailAfterTheLastPacketAndNotBefore() {
        var radio = RadioStateMachine(Self.states, origin: 0)
        _ = radio.admit(at: 0, uplink: true, busy: false, lastTransmission: .min)
        // The last packet left the transmitter at 1 s: still connected at 10.999 s ...
        let last: Int64 = 1000 * Self.ms
        #expect(radio.admit(at: 10_999 * Self.ms, uplink: true, busy: false, lastTransmission: last) == 10_999 * Self.ms)
        // ... and that packet (admitted at 10.999 s) renews the tail; so does one at 20.998 s,
        // and 10 s after it the radio is idle: the next packet pays the promotion again.
        #expect(radio.admit(at: 20_998 * Self.ms, uplink: true, busy: false, lastTransmission: last) == 20_998 * Self.ms)
        #expect(radio.admit(at: 30_998 * Self.ms, uplink: true, busy: false, lastTransmission: last) == 31_258 * Self.ms)
        #expect(radio.promotions == (2, 0))
    }

    @Test func aQueueStillDrainingKeepsTheRadioConnected() {
        var radio = RadioStateMachine(Self.states, origin: 0)
        _ = radio.admit(at: 0, uplink: false, busy: false, lastTransmission: .min)
        // 60 s later, but a packet still waits for a transmitter (a deep buffer at a low rate).
        #expect(radio.admit(at: 60_000 * Self.ms, uplink: false, busy: true, lastTransmission: 59_990 * Self.ms) == 60_000 * Self.ms)
        // A transmission 5 s ago keeps it connected too, though no packet arrived since.
        #expect(radio.admit(at: 70_000 * Self.ms, uplink: true, busy: false, lastTransmission: 65_000 * Self.ms) == 70_000 * Self.ms)
    }

    @Test func aPacketForAnIdlePhoneWaitsForItsPagingOccasionThenThePromotion() {
        let origin: Int64 = 5 * Self.ms
        var radio = RadioStateMachine(Self.states, origin: origin)
        // Paging occasions at 5 ms, 1285 ms, 2565 ms, ...: a packet at 1300 ms waits for 2565 ms.
        #expect(radio.admit(at: 1300 * Self.ms, uplink: false, busy: false, lastTransmission: .min) == 2565 * Self.ms + 260 * Self.ms)
        #expect(radio.promotions == (0, 1))
        // Exactly on an occasion: no wait for paging.
        var onTime = RadioStateMachine(Self.states, origin: origin)
        #expect(onTime.admit(at: 1285 * Self.ms, uplink: false, busy: false, lastTransmission: .min) == 1285 * Self.ms + 260 * Self.ms)
        // The phone's own packet never waits for paging.
        var up = RadioStateMachine(Self.states, origin: origin)
        #expect(up.admit(at: 1300 * Self.ms, uplink: true, busy: false, lastTransmission: .min) == 1560 * Self.ms)
    }

    @Test func coverageRegainedStartsIdle() {
        var radio = RadioStateMachine(Self.states, origin: 0)
        _ = radio.admit(at: 0, uplink: true, busy: false, lastTransmission: .min)
        #expect(radio.admit(at: 1000 * Self.ms, uplink: true, busy: false, lastTransmission: 900 * Self.ms) == 1000 * Self.ms)
        radio.reset()
        #expect(radio.admit(at: 1001 * Self.ms, uplink: true, busy: false, lastTransmission: 900 * Self.ms) == 1261 * Self.ms)
    }

    /// The pipeline holds a packet until the radio lets it in; a queue at a rate starts from then,
    /// and the decision log says how long it waited.
    @Test func thePipelineStartsAHeldPacketWhenTheRadioIsReady() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(20))),
                                    capacity: .rate(bitsPerSecond: 8_000_000), seed: 1, logsDecisions: true)
        var packet = [UInt8](repeating: 0, count: 1000)
        packet[0] = 0x45
        pipeline.arrive(packet, at: 0, enteringAt: 260 * Self.ms)
        pipeline.arrive(packet, at: 10 * Self.ms, enteringAt: 260 * Self.ms)
        var output: [[UInt8]] = []
        pipeline.release(upTo: 280 * Self.ms, into: &output)
        #expect(output.isEmpty)
        // 1000 bytes at 8 Mbit/s: 1 ms each, from 260 ms; then 20 ms of delay.
        #expect(pipeline.nextEvent() == 281 * Self.ms)
        pipeline.release(upTo: 282 * Self.ms, into: &output)
        #expect(output.count == 2)
        #expect(pipeline.lastTransmission == 262 * Self.ms)
        #expect(pipeline.statistics.heldForRadio == 2)
        let log = pipeline.takeDecisions().map(\.description)
        #expect(log == ["1 1000 radio 260000", "2 1000 radio 250000", "1 1000 deliver 20000", "2 1000 deliver 20000"])
    }
}
