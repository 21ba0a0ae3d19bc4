import RoamSystem
import Synchronization
import Testing
@testable import Simulator

/// The events a run holds for its control API's streams: numbered from 0 without gaps, bounded,
/// and what fell out of the bound is seen as a gap in the numbers.
struct RunLogEventsTests {
    @Test func eventsAreNumberedHeldWithinTheBoundAndWakeTheirReaders() throws {
        let log = try RunLog(start: .now, directory: nil, holdingEvents: true)
        let wakes = Atomic<Int>(0)
        let token = log.subscribe { wakes.add(1, ordering: .relaxed) }
        for index in 0..<10 { log.record(.mark(text: "m\(index)", node: nil)) }
        let first = log.events(from: 0, limit: 100)
        #expect(first.lines.count == 10 && first.first == 0 && first.next == 10)
        #expect(first.lines[3].contains(#""text":"m3""#))
        #expect(wakes.load(ordering: .relaxed) == 10)
        let page = log.events(from: 4, limit: 3)
        #expect(page.first == 4 && page.lines.count == 3 && page.lines[0].contains(#""m4""#))
        #expect(log.events(from: 10, limit: 5).lines.isEmpty)
        log.unsubscribe(token)
        // Past the bound: the oldest go, and a reader asking for them starts at the oldest held.
        for index in 10..<(RunLog.heldEvents + 100) { log.record(.mark(text: "m\(index)", node: nil)) }
        #expect(wakes.load(ordering: .relaxed) == 10, "no reader is woken after it left")
        let late = log.events(from: 0, limit: 1)
        #expect(late.first > 0 && late.next == RunLog.heldEvents + 100)
        #expect(late.lines.first?.contains(#""m\#(late.first)""#) == true)
        let tail = log.events(from: RunLog.heldEvents + 95, limit: 100)
        #expect(tail.lines.count == 5 && tail.lines.last?.contains(#""m\#(RunLog.heldEvents + 99)""#) == true)
    }

    @Test func aLogNotHoldingEventsKeepsNoneUntilAReaderComes() throws {
        let log = try RunLog(start: .now, directory: nil)
        for index in 0..<5 { log.record(.mark(text: "m\(index)", node: nil)) }
        #expect(log.events(from: 0, limit: 10).lines.isEmpty)
        let token = log.subscribe {}
        log.record(.mark(text: "m5", node: nil))
        let held = log.events(from: 0, limit: 10)
        #expect(held.first == 5 && held.lines.count == 1)
        log.unsubscribe(token)
    }
}
