@testable import LinkEmulation
@testable import ScenarioModel
import Testing

/// What a run says of its own fidelity (issue 57), on a manual clock: each packet's lateness
/// against its due time, and the loss drawn against the loss configured.
@Suite struct LatenessHistogramTests {
    static let ms: Int64 = 1_000_000

    @Test func percentilesAreKnownWithinAnEighthAndNeverPastTheMaximum() {
        var histogram = LatenessHistogram()
        #expect(histogram.percentile(0.99) == nil)
        // 900 on time, 90 at 100 µs, 10 at 5 ms.
        histogram.recordOnTime(900)
        for _ in 0..<90 { histogram.record(100_000) }
        for _ in 0..<10 { histogram.record(5 * Self.ms) }
        #expect(histogram.count == 1000 && histogram.onTime == 900)
        #expect(histogram.percentile(0.5) == 0)
        let p99 = try! #require(histogram.percentile(0.99))
        #expect(p99 >= 100_000 && p99 <= 112_500, "\(p99)")
        #expect(histogram.percentile(1) == 5 * Self.ms)
        #expect(histogram.maximum == 5 * Self.ms)
        // Every value lands in a bucket whose upper edge is within 12.5% above it.
        for value in [1, 7, 8, 9, 15, 16, 1000, 123_456, 999_999_999, Int64(1) << 39] as [Int64] {
            let edge = LatenessHistogram.upperEdge(of: LatenessHistogram.bucket(of: value))
            #expect(edge > value && Double(edge) <= Double(value) * 1.125 + 1, "\(value) → \(edge)")
        }
        // Past 2^40 ns, the last bucket, the maximum exact.
        var late = LatenessHistogram()
        late.record(Int64(1) << 50)
        #expect(late.percentile(0.5) == Int64(1) << 50)
        var merged = histogram
        merged.merge(late)
        #expect(merged.count == 1001 && merged.maximum == Int64(1) << 50)
    }

    @Test func aPipelineRecordsHowLateItsPacketsLeft() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(10))), capacity: .unlimited, seed: 1)
        var output: [[UInt8]] = []
        for number in 0..<10 { pipeline.arrive([0x45, UInt8(number)], at: Int64(number) * Self.ms) }
        // The loop woke on time for the first five, 3 ms late for the rest.
        pipeline.release(upTo: 14 * Self.ms, into: &output)
        #expect(output.count == 5)
        pipeline.release(upTo: 22 * Self.ms, into: &output)
        #expect(output.count == 10)
        let lateness = pipeline.statistics.lateness
        #expect(lateness.count == 10)
        // Due at 10...14 ms, released at 14 ms: 4, 3, 2, 1 and 0 ms late; due at 15...19, released at 22.
        #expect(lateness.onTime == 1)
        #expect(lateness.maximum == 7 * Self.ms)
        #expect(lateness.percentile(0.5).map { $0 >= 3 * Self.ms && $0 <= 4 * Self.ms } == true, "\(String(describing: lateness.percentile(0.5)))")
    }

    @Test func theLossDrawnIsReportedBesideTheLossConfigured() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(loss: .random(rate: 0.1, correlation: 0))),
                                    capacity: .unlimited, seed: 7)
        for number in 0..<10_000 { pipeline.arrive([0x45, 0], at: Int64(number) * Self.ms) }
        let statistics = pipeline.statistics
        #expect(abs(statistics.expectedLost - 1000) < 0.001)
        #expect(abs(statistics.lost - 1000) < 100, "\(statistics.lost) lost of 10000 at 10%")
    }
}
