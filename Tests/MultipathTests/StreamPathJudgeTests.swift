import Multipath
import Testing

/// The rule that moves a stream off a path too poor for it, on a manual clock: a path is judged
/// by what it delivers against the bitrate, never by the low buffer a new connection inherited,
/// and a flow does not go back to a path that delivered less.
@Suite struct StreamPathJudgeTests {
    /// 2 s of buffer at 500 kB/s (4 Mbit/s).
    static let bitrate = 500_000.0
    let origin = Duration.seconds(1000)

    /// A judge fed `seconds` of samples every 100 ms at `share` of the bitrate, from `bytes`.
    func fed(_ judge: inout StreamPathJudge, from start: Double, seconds: Double, share: Double, bytes: inout Int64) {
        var t = start
        while t <= start + seconds + 1e-9 {
            judge.record(now: at(t), bytes: bytes)
            bytes += Int64(Self.bitrate * share / 10)
            t += 0.1
        }
    }

    /// A judge that has seen `seconds` of delivery at `share` of the bitrate from time zero, and
    /// the byte count it saw last.
    func started(delivering share: Double, for seconds: Double = 2) -> (StreamPathJudge, Int64) {
        var judge = StreamPathJudge(bytesPerSecond: Self.bitrate, bufferTarget: .seconds(2))
        var bytes: Int64 = 0
        fed(&judge, from: 0, seconds: seconds, share: share, bytes: &bytes)
        return (judge, bytes)
    }

    func at(_ seconds: Double) -> Duration { origin + .milliseconds(Int64((seconds * 1000).rounded())) }

    func connection(_ number: Int, age: Double, on interface: String) -> StreamPathJudge.Connection {
        StreamPathJudge.Connection(number: number, age: .milliseconds(Int64(age * 1000)), interface: interface)
    }

    @Test func aTricklingPathWithALowBufferIsTooPoor() throws {
        var (judge, _) = started(delivering: 0.25)
        let rate = try #require(judge.deliveryRate)
        #expect(abs(rate / Self.bitrate - 0.25) < 0.03, "\(rate)")
        // At a quarter of the bitrate, the buffer drains 0.75 s a second: 1.2 s of buffer outlasts
        // a 1.5 s move (1.125 s drained), 1.1 s does not.
        let notYetLow = judge.verdict(buffered: 1.2, connection: connection(1, age: 2, on: "wifi"), now: at(2))
        #expect(notYetLow == nil)
        let low = judge.verdict(buffered: 1.1, connection: connection(1, age: 2, on: "wifi"), now: at(2))
        let verdict = try #require(low)
        #expect(verdict.contains("1.10 s") && verdict.contains("25% of the bitrate"), "\(verdict)")
        // Judged once per connection.
        let again = judge.verdict(buffered: 0.3, connection: connection(1, age: 2.1, on: "wifi"), now: at(2.1))
        #expect(again == nil)
    }

    /// Leaving a Wi-Fi that delivers `wifi` of the bitrate for a cellular that delivers `cell`:
    /// a cellular that refills the buffer (twice the bitrate) stays although the buffer is still
    /// low a second later; one that delivers less than the Wi-Fi did is left too.
    @Test(arguments: [(wifi: 0.2, cell: 2.0, cellularStays: true), (wifi: 0.5, cell: 0.1, cellularStays: false)])
    func cellularIsJudgedByWhatItDelivers(_ shares: (wifi: Double, cell: Double, cellularStays: Bool)) {
        var (judge, bytes) = started(delivering: shares.wifi)
        let leavingWiFi = judge.verdict(buffered: 0.4, connection: connection(1, age: 2, on: "wifi"), now: at(2))
        #expect(leavingWiFi != nil)
        fed(&judge, from: 2.1, seconds: 1.2, share: shares.cell, bytes: &bytes)
        let onCellular = judge.verdict(buffered: 0.1, connection: connection(2, age: 1.2, on: "cell"), now: at(3.3))
        #expect((onCellular == nil) == shares.cellularStays, "\(onCellular ?? "kept")")
    }

    @Test func noVerdictBeforeTheConnectionSettledOrASecondWasMeasured() {
        var (judge, bytes) = started(delivering: 0, for: 0.5)
        #expect(judge.deliveryRate == nil)
        let unmeasured = judge.verdict(buffered: 0, connection: connection(1, age: 3, on: "wifi"), now: at(0.5))
        #expect(unmeasured == nil)
        fed(&judge, from: 0.6, seconds: 1, share: 0, bytes: &bytes)
        let young = judge.verdict(buffered: 0, connection: connection(1, age: 0.9, on: "wifi"), now: at(1.6))
        #expect(young == nil)
        let unconnected = judge.verdict(buffered: 0, connection: nil, now: at(1.6))
        #expect(unconnected == nil)
        let settled = judge.verdict(buffered: 0, connection: connection(1, age: 1, on: "wifi"), now: at(1.6))
        #expect(settled != nil)
    }

    /// The flapping seen in the VM: the flow left a Wi-Fi delivering 22% for a cellular
    /// connection that, a second later on a slow start, delivered 87%. Cellular stays; once the
    /// evidence against Wi-Fi is old, a poor cellular is judged again.
    @Test func theFlowDoesNotGoBackToAPathThatDeliveredLess() {
        var (judge, bytes) = started(delivering: 0.22)
        let leavingWiFi = judge.verdict(buffered: 0.5 - 0.01, connection: connection(1, age: 2, on: "wifi"), now: at(2))
        #expect(leavingWiFi != nil)
        fed(&judge, from: 2.1, seconds: 1.1, share: 0.87, bytes: &bytes)
        let onCellular = judge.verdict(buffered: 0.15, connection: connection(2, age: 1.1, on: "cell"), now: at(3.2))
        #expect(onCellular == nil)
        // Ten seconds on, cellular still under the bitrate with a low buffer: judged on its own.
        fed(&judge, from: 3.3, seconds: 9, share: 0.87, bytes: &bytes)
        let later = judge.verdict(buffered: 0.15, connection: connection(2, age: 10.2, on: "cell"), now: at(12.3))
        #expect(later != nil)
    }

    @Test func aPathCloseToTheBitrateIsLeftOnlyWhenTheBufferIsUnderAQuarter() {
        var (judge, _) = started(delivering: 0.9)
        let quarter = judge.verdict(buffered: 0.5, connection: connection(1, age: 2, on: "wifi"), now: at(2))
        #expect(quarter == nil)
        let under = judge.verdict(buffered: 0.49, connection: connection(1, age: 2, on: "wifi"), now: at(2))
        #expect(under != nil)
    }
}
