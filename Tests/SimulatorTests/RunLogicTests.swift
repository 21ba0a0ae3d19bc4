import Netlink
import PathMonitor
import RoamSystem
@testable import ScenarioModel
@testable import Simulator
import Testing

@Suite struct PlayoutTests {
    // 1 Mbit/s = 125 000 bytes a second of media; a 2 s buffer is 250 000 bytes.
    let origin = MonotonicInstant(nanoseconds: 1_000_000_000_000)
    func at(_ seconds: Double) -> MonotonicInstant { origin + .nanoseconds(Int64(seconds * 1e9)) }
    func media(_ seconds: Double) -> Int64 { Int64(seconds * 125_000) }

    @Test func startsOnceTheBufferIsFullAndStallsWhenThePlayheadCatchesUp() {
        var player = StreamWorkload.Playout(bytesPerSecond: 125_000, buffer: .seconds(2), start: at(0), origin: origin)
        #expect(player.update(now: at(0.5), bytes: media(1)) == nil)
        #expect(player.phase == .starting)
        _ = player.update(now: at(1), bytes: media(2))
        #expect(player.startup == .seconds(1))
        // 3 s of media in all; playing since 1 s from 0, so it runs dry at 4 s.
        _ = player.update(now: at(2), bytes: media(3))
        #expect(player.runsDry(bytes: media(3)) == at(4))
        _ = player.update(now: at(4.5), bytes: media(3))
        #expect(player.phase == .stalled(since: at(4)), "the stall began when the last byte played, not when it was noticed")
        // It plays again once the buffer holds 2 s again.
        #expect(player.update(now: at(5), bytes: media(4)) == nil)
        let stall = player.update(now: at(6), bytes: media(5))
        #expect(stall?.start == .seconds(4) && stall?.duration == .seconds(2) && stall?.ongoing == false)
        #expect(player.finalStalls(end: at(7)).count == 1)
    }

    @Test func aStallStillGoingAtTheEndCountsUntilTheEnd() {
        var player = StreamWorkload.Playout(bytesPerSecond: 125_000, buffer: .seconds(1), start: at(0), origin: origin)
        _ = player.update(now: at(1), bytes: media(1))
        _ = player.update(now: at(3), bytes: media(1.5))
        let stalls = player.finalStalls(end: at(10))
        #expect(stalls.count == 1)
        // Playing from 1 s with 1.5 s of media: it runs dry at 2.5 s and is still dry at 10 s.
        #expect(stalls[0].start == .milliseconds(2500) && stalls[0].duration == .milliseconds(7500) && stalls[0].ongoing)
    }

    @Test func aStreamThatNeverStartsStallsFromItsStart() {
        let player = StreamWorkload.Playout(bytesPerSecond: 125_000, buffer: .seconds(1), start: at(2), origin: origin)
        let stalls = player.finalStalls(end: at(5))
        #expect(stalls.first?.start == .seconds(2) && stalls.first?.duration == .seconds(3))
    }
}

@Suite struct ExpectationEvaluatorTests {
    func workload(_ kind: Workload.Kind, name: String = "w") -> Workload {
        Workload(name: name, kind: kind, from: "server", to: "phone")
    }

    func path(_ status: PathStatus, expensive: Bool) -> NetworkPath {
        NetworkPath(status: status, unsatisfiedReason: nil, availableInterfaces: [], primaryInterface: nil, isExpensive: expensive,
                    isConstrained: false, supportsIPv4: true, supportsIPv6: true, supportsDNS: false, gateways: [])
    }

    @Test func workloadChecksCompareTheMeasuredValue() {
        var stream = WorkloadResult(workload(.stream(bitrate: .mbit(4), buffer: .seconds(2))))
        stream.stream = StreamStatistics(startupDelay: .milliseconds(400), stalls: [.init(start: .seconds(5), duration: .milliseconds(2500), ongoing: false)])
        stream.bytesReceived = 5_000_000
        stream.activeTime = .seconds(10)
        let results = ExpectationEvaluator.evaluate([
            Expectation(subject: "w", check: .maxStall(.seconds(2)), line: 1),
            Expectation(subject: "w", check: .maxStall(.seconds(3)), line: 2),
            Expectation(subject: "w", check: .minThroughput(.mbit(4)), line: 3),
            Expectation(subject: "w", check: .minThroughput(.mbit(4.5)), line: 4),
        ], workloads: [stream], changes: [], paths: [])
        #expect(results.map(\.passed) == [false, true, true, false])
        #expect(results[0].measured == "2.5s")
        #expect(results[2].measured == "4mbit")
    }

    @Test func aFailedRequestFailsTimeToFirstByte() {
        var requests = WorkloadResult(workload(.requests(requestSize: 100, responseSize: 1000, interval: .seconds(1), count: nil)))
        requests.requests = RequestStatistics(sent: 3, succeeded: 2, failed: 1, timeToFirstByte: DurationDistribution([.milliseconds(20), .milliseconds(30)]))
        let result = ExpectationEvaluator.evaluate([Expectation(subject: "w", check: .maxTimeToFirstByte(.seconds(1)), line: 1)],
                                                   workloads: [requests], changes: [], paths: [])
        #expect(result[0].passed == false)
        #expect(result[0].measured == "1 failed")
    }

    @Test func exitCodesAndCompletion() {
        var command = WorkloadResult(workload(.command(run: ["true"], environment: [:])))
        command.command = CommandStatistics(arguments: ["true"], exitCode: 3, stdoutPath: "", stderrPath: "")
        command.completed = true
        let results = ExpectationEvaluator.evaluate([
            Expectation(subject: "w", check: .exitCode(3), line: 1),
            Expectation(subject: "w", check: .exitCode(0), line: 2),
            Expectation(subject: "w", check: .completes(true), line: 3),
            Expectation(subject: "other", check: .completes(true), line: 4),
        ], workloads: [command], changes: [], paths: [])
        #expect(results.map(\.passed) == [true, false, true, false])
    }

    @Test func pathExpectationsMeasureFromTheEventAsApplied() {
        let down = ScheduledChange(at: .seconds(15), link: "wifi", change: .carrier(false), action: "down", line: 9)
        let changes = [AppliedChange(change: down, actual: .milliseconds(15_002), failure: nil)]
        let paths = [
            PathRecord(at: .zero, node: "phone", path: path(.satisfied, expensive: false)),
            PathRecord(at: .milliseconds(15_300), node: "phone", path: path(.satisfied, expensive: true)),
            PathRecord(at: .milliseconds(15_100), node: "server", path: path(.satisfied, expensive: true)),
        ]
        func check(_ condition: PathCondition, within: Duration, event: String = "down") -> ExpectationResult {
            ExpectationEvaluator.evaluate([Expectation(subject: "phone", check: .path(condition: condition, within: within, afterLink: "wifi", afterEvent: event), line: 1)],
                                          workloads: [], changes: changes, paths: paths)[0]
        }
        #expect(check(.expensive, within: .seconds(1)).passed)
        #expect(check(.expensive, within: .seconds(1)).measured == "298ms")
        #expect(!check(.expensive, within: .milliseconds(200)).passed)
        #expect(check(.satisfied, within: .milliseconds(1)).measured == "0ms", "already so when the event happened")
        #expect(!check(.unsatisfied, within: .seconds(5)).passed)
        let never = check(.expensive, within: .seconds(1), event: "up")
        #expect(!never.passed && never.measured == "never")
    }
}
