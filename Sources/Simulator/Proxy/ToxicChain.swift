import RoamCore
import RoamSystem
import ScenarioModel

/// What a proxy's toxics do to one direction of one connection, as toxiproxy's chain does: each
/// chunk read goes through the toxics in order, and comes out as pieces, each due at a time;
/// the toxics can also end the connection (`timeout`, `reset_peer`, `limit_data`).
///
/// Pure: no I/O, no clock of its own (every call says when it is), so that every toxic's rule is
/// tested on a manual clock. The proxy's loop performs what it returns: it writes each piece
/// when it is due, in order, and ends the connection at ``nextEnding``.
///
/// Toxiproxy's toxics each run in order on every chunk, one chunk at a time, so each keeps the
/// time its last chunk left: a chunk never overtakes the one before it, and a delay is counted
/// from when the chunk came, not from when the one before it left (`latency`).
package struct ToxicChain {
    /// What comes out: bytes, or the end of the stream (a FIN to send).
    package enum Output: Equatable, Sendable {
        case data([UInt8])
        case end
        /// The proxy answers the client itself with these bytes (`http_status`), then ends
        /// the connection: nothing more goes to the server, nothing more of its comes back.
        case answer([UInt8])
    }

    package struct Scheduled: Equatable, Sendable {
        package var due: MonotonicInstant
        package var output: Output
    }

    /// How a toxic ends the connection.
    package enum Ending: Equatable, Sendable {
        /// Both ends closed (FIN): `timeout`, `limit_data`.
        case close
        /// Both ends reset (RST): `reset_peer`.
        case reset
    }

    private struct Stage {
        var toxic: Toxic
        /// Drawn once, when the toxic begins on the connection: whether it acts on it (toxicity).
        var active: Bool
        var started: MonotonicInstant
        /// When the last piece left this toxic.
        var lastOut: MonotonicInstant
        /// `limit_data`: bytes passed so far, and when the limit was reached.
        var passed: Int64 = 0
        var limitReached: MonotonicInstant?
        /// `http_status`, `http_truncate`: where the HTTP messages are.
        var http = HTTPFraming()
    }

    private let stream: Toxic.Stream
    private var stages: [Stage] = []
    private var random: UInt64

    /// The chain of `toxics` (those of `stream`), begun at `now`; `seed` draws toxicity, jitter
    /// and slice sizes.
    package init(toxics: [Toxic], stream: Toxic.Stream, now: MonotonicInstant, seed: UInt64) {
        self.stream = stream
        random = seed
        update(toxics: toxics, now: now)
    }

    /// The proxy's toxics changed at `now`: a toxic that stays (by name and type) keeps what it
    /// has drawn and counted, with its new attributes; one added begins now; one removed acts
    /// no more (what it already scheduled stays scheduled).
    package mutating func update(toxics: [Toxic], now: MonotonicInstant) {
        var next: [Stage] = []
        for toxic in toxics where toxic.stream == stream {
            if var kept = stages.first(where: { $0.toxic.name == toxic.name && $0.toxic.kind.typeName == toxic.kind.typeName }) {
                kept.toxic = toxic
                next.append(kept)
            } else {
                let active = toxic.toxicity >= 1 || (toxic.toxicity > 0 && uniform() < toxic.toxicity)
                next.append(Stage(toxic: toxic, active: active, started: now, lastOut: now))
            }
        }
        stages = next
    }

    /// Whether any toxic acts on this direction (none: bytes may pass at once, untouched).
    package var isEmpty: Bool { !stages.contains(where: \.active) }

    /// `bytes` read at `now`: the pieces to write, and when.
    package mutating func receive(_ bytes: [UInt8], at now: MonotonicInstant) -> [Scheduled] {
        run([Scheduled(due: now, output: .data(bytes))])
    }

    /// The source ended (read EOF) at `now`: when to pass the end on.
    package mutating func finish(at now: MonotonicInstant) -> [Scheduled] {
        run([Scheduled(due: now, output: .end)])
    }

    /// The earliest time a toxic ends the connection, and how; nil while none will.
    package var nextEnding: (at: MonotonicInstant, ending: Ending)? {
        var best: (at: MonotonicInstant, ending: Ending)?
        func consider(_ at: MonotonicInstant, _ ending: Ending) {
            if best == nil || at < best!.at { best = (at, ending) }
        }
        for stage in stages where stage.active {
            switch stage.toxic.kind {
            case .timeout(let timeout) where timeout > .zero: consider(stage.started + timeout, .close)
            case .resetPeer(let timeout): consider(stage.started + timeout, .reset)
            case .limitData(let bytes):
                if let reached = stage.limitReached { consider(reached, .close) } else if bytes == 0 { consider(stage.started, .close) }
            case .httpTruncate:
                if let reached = stage.limitReached { consider(reached, .close) }
            default: break
            }
        }
        return best
    }

    private mutating func run(_ input: [Scheduled]) -> [Scheduled] {
        var items = input
        for index in stages.indices where stages[index].active {
            var output: [Scheduled] = []
            output.reserveCapacity(items.count)
            for item in items { apply(index, item, into: &output) }
            items = output
        }
        return items
    }

    private mutating func apply(_ index: Int, _ item: Scheduled, into output: inout [Scheduled]) {
        let toxic = stages[index].toxic
        let start = max(item.due, stages[index].lastOut)
        if case .answer = item.output {
            output.append(item)
            return
        }
        guard case .data(let bytes) = item.output else {
            // The end passes after every piece before it; slow_close holds it longer.
            var due = start
            if case .slowClose(let delay) = toxic.kind { due = due + delay }
            if case .limitData = toxic.kind, stages[index].limitReached != nil { return }
            if case .httpTruncate = toxic.kind, stages[index].limitReached != nil { return }
            stages[index].lastOut = due
            output.append(Scheduled(due: due, output: .end))
            return
        }
        switch toxic.kind {
        case let .latency(latency, jitter):
            var delay = latency
            if jitter > .zero { delay += jitter * (2 * uniform() - 1) }
            let due = max(item.due + max(delay, .zero), stages[index].lastOut)
            stages[index].lastOut = due
            output.append(Scheduled(due: due, output: item.output))
        case .bandwidth(let rate) where rate > 0:
            // As toxiproxy: pieces of at most 100 ms of the rate, each sent once its time at the
            // rate is over.
            let largest = max(1, rate * 100)
            var due = start
            var offset = 0
            while offset < bytes.count {
                let piece = Array(bytes[offset..<min(bytes.count, offset + largest)])
                offset += piece.count
                due = due + .microseconds(Int64(piece.count) * 1000 / Int64(rate))
                output.append(Scheduled(due: due, output: .data(piece)))
            }
            stages[index].lastOut = due
        case let .slicer(size, variation, delay) where size > 0:
            var due = start
            var offset = 0
            var first = true
            while offset < bytes.count {
                var length = size
                if variation > 0 { length += Int((2 * uniform() - 1) * Double(variation)) }
                length = max(1, min(length, bytes.count - offset))
                if !first { due = due + delay }
                first = false
                output.append(Scheduled(due: due, output: .data(Array(bytes[offset..<offset + length]))))
                offset += length
            }
            stages[index].lastOut = due
        case .limitData(let limit):
            guard stages[index].limitReached == nil else { return }
            let room = limit - stages[index].passed
            let passing = Int(min(Int64(bytes.count), max(0, room)))
            if passing > 0 { output.append(Scheduled(due: start, output: .data(Array(bytes.prefix(passing))))) }
            stages[index].passed += Int64(passing)
            stages[index].lastOut = start
            if stages[index].passed >= limit { stages[index].limitReached = start }
        case .timeout:
            // Nothing passes while it acts (toxiproxy drops it).
            return
        case .tlsStall(let delay):
            let due = max(item.due, stages[index].started + delay, stages[index].lastOut)
            stages[index].lastOut = due
            output.append(Scheduled(due: due, output: item.output))
        case let .httpStatus(status, percent):
            var http = stages[index].http
            let (passing, answered) = http.requests(bytes) { _ in self.uniform() * 100 < Double(percent) }
            stages[index].http = http
            if !passing.isEmpty { output.append(Scheduled(due: start, output: .data(passing))) }
            if answered { output.append(Scheduled(due: start, output: .answer(HTTPFraming.answer(status: status)))) }
            stages[index].lastOut = start
        case let .httpTruncate(limit, percent):
            guard stages[index].limitReached == nil else { return }
            var http = stages[index].http
            let (passing, cut) = http.responses(bytes, cutAfter: limit) { _ in self.uniform() * 100 < Double(percent) }
            stages[index].http = http
            if !passing.isEmpty { output.append(Scheduled(due: start, output: .data(passing))) }
            if cut { stages[index].limitReached = start }
            stages[index].lastOut = start
        default:
            stages[index].lastOut = start
            output.append(Scheduled(due: start, output: item.output))
        }
    }

    /// A uniform draw in [0, 1).
    private mutating func uniform() -> Double {
        Double(splitMix64(&random) >> 11) / Double(1 << 53)
    }
}
