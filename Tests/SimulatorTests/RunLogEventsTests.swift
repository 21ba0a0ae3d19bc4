import PathMonitor
import RoamCore
import RoamSystem
@testable import ScenarioModel
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

    /// A run fixes time zero only once it is set up: what was recorded before is written then,
    /// timed from it, in the order it came, and time zero does not move again.
    @Test func eventsRecordedBeforeTimeZeroIsFixedAreTimedFromIt() throws {
        let log = try RunLog(beginningLater: nil, holdingEvents: true)
        log.record(.mark(text: "zero", node: nil), at: .zero)
        let published = MonotonicInstant.now
        let path = NetworkPath(status: .unsatisfied, unsatisfiedReason: nil, availableInterfaces: [], primaryInterface: nil, isExpensive: false,
                               isConstrained: false, supportsIPv4: false, supportsIPv6: false, supportsDNS: false, gateways: [])
        log.path(path, node: "phone", at: published)
        log.record(.mark(text: "setting up", node: nil))
        #expect(log.events(from: 0, limit: 10).lines.isEmpty, "nothing is written before time zero is fixed")
        #expect(log.paths.isEmpty)
        let begun = MonotonicInstant.now
        log.begin(in: .milliseconds(100))
        let start = log.start
        #expect(start >= begun + .milliseconds(100))
        log.record(.mark(text: "after", node: nil), at: .milliseconds(5))
        log.begin(in: .seconds(10))
        #expect(log.start == start, "time zero is fixed once")
        let lines = log.events(from: 0, limit: 10)
        #expect(lines.first == 0 && lines.next == 4)
        func time(_ line: String) -> Double? {
            guard let object = try? JSONValue.parse(line), case .object(let fields) = object else { return nil }
            return fields.first { $0.0 == "t" }?.1.doubleValue
        }
        let times = lines.lines.map(time)
        #expect(lines.lines[0].contains(#""zero""#) && times[0] == 0, "a time given from time zero stays as given")
        #expect(lines.lines[1].contains(#""type":"path""#))
        let pathTime = try #require(times[1])
        #expect(abs(pathTime - (published - start).seconds) < 1e-6, "a path is timed from when it was published")
        #expect(lines.lines[2].contains(#""setting up""#) && (times[2] ?? 0) <= -0.1, "an event before time zero is negative: \(lines.lines[2])")
        #expect(lines.lines[3].contains(#""after""#) && times[3] == 0.005)
        #expect(log.paths.map(\.at) == [published - start])
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

/// A day's record kept compact: what goes in comes back whole, in order, and a flap's thousands
/// of changes and paths are held as a few distinct ones.
@Suite struct RunLogRecordTests {
    @Test func appliedChangesAndPathsComeBackAsRecordedWhileRepeatsAreHeldOnce() throws {
        let schedule = TimelineSchedule(scenario: try scenario(twoLinks.replacingOccurrences(of: "duration: 30s", with: "duration: 3000s") + """
            timeline:
              - { at: 1s, link: cell, ramp: { to: { delay: 150ms, loss: 2% }, over: 2s } }
              - { at: 10s, link: wifi, flap: { period: 1s, for: 2000s } }

            """))
        #expect(schedule.changes.count > 4_000)
        let log = try RunLog(start: .now, directory: nil)
        func path(_ name: String?, _ index: Int32) -> NetworkPath {
            let interfaces = name.map { [NetworkInterface(name: $0, index: index, type: $0 == "wifi" ? .wifi : .cellular)] } ?? []
            return NetworkPath(status: name == nil ? .unsatisfied : .satisfied, unsatisfiedReason: nil, availableInterfaces: interfaces,
                               primaryInterface: interfaces.first, isExpensive: name == "cell", isConstrained: false,
                               supportsIPv4: name != nil, supportsIPv6: false, supportsDNS: false, gateways: [])
        }
        var expectedChanges: [AppliedChange] = []
        var expectedPaths: [(Duration, String, NetworkPath)] = []
        for (index, change) in schedule.changes.enumerated() {
            // Whole nanoseconds, as a monotonic clock gives them (a ramp's planned times need not be).
            let late = (change.at + .microseconds(index % 97)).components
            let actual = Duration.nanoseconds(late.seconds * 1_000_000_000 + late.attoseconds / 1_000_000_000)
            let failure = index % 1_000 == 7 ? "failed \(index)" : nil
            log.applied(change, actual: actual, failure: failure)
            expectedChanges.append(AppliedChange(change: change, actual: actual, failure: failure))
            let published = path(index % 2 == 0 ? "cell" : "wifi", index % 2 == 0 ? 3 : 2)
            let node = index % 3 == 0 ? "server" : "phone"
            log.path(published, node: node, at: log.start + actual)
            expectedPaths.append((actual, node, published))
        }
        let changes = log.appliedChanges
        #expect(changes == expectedChanges)
        let paths = log.paths
        #expect(paths.count == expectedPaths.count)
        let mismatch = zip(paths, expectedPaths).enumerated().first { !($1.0.at == $1.1.0 && $1.0.node == $1.1.1 && $1.0.path == $1.1.2) }
        #expect(mismatch == nil, "path record \(mismatch?.offset ?? -1) differs")
        let distinct = log.distinctCounts
        // The ramp's steps each differ; the flap's cuts and restorations are two changes.
        let rampSteps = schedule.changes.filter { $0.action == "ramp" }.count
        #expect(rampSteps > 0)
        #expect(distinct.changes == rampSteps + 2)
        #expect(distinct.paths == 2)
    }
}
