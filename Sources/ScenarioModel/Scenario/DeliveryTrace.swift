import Netlink

/// A link's capacity as a mahimahi trace: each line is a millisecond at which one delivery
/// opportunity of 1500 bytes occurs (a millisecond may repeat, for several opportunities); the
/// trace repeats with a period of its last millisecond.
public struct DeliveryTrace: Sendable, Hashable {
    /// Opportunities in one period, in milliseconds, sorted.
    public let opportunities: [Int64]
    /// The period in milliseconds.
    public let period: Int64
    /// Bytes each opportunity can carry.
    public static let opportunityBytes = 1500

    /// The last millisecond a trace may hold (``ScenarioLimits/maximumTracePeriod``).
    public static let maximumMillisecond = Int64(ScenarioLimits.maximumTracePeriod.components.seconds) * 1000

    /// Parses the text of a trace (LF or CR LF lines); nil with a reason when it is not one.
    public static func parse(_ text: String) -> Result<DeliveryTrace, TraceError> {
        var values: [Int64] = []
        for (number, line) in textLines(text).enumerated() {
            let trimmed = String(line.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
            if trimmed.isEmpty { continue }
            guard let value = Int64(trimmed), value >= 0 else {
                let digits = trimmed.first == "-" || trimmed.first == "+" ? trimmed.dropFirst() : Substring(trimmed)
                if !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), trimmed.first != "-" {
                    return .failure(TraceError(line: number + 1, message: "millisecond \(escapedForMessage(trimmed)) is past the longest trace, "
                        + "\(maximumMillisecond) ms (\(ScenarioLimits.maximumTracePeriod.roamDescription))"))
                }
                return .failure(TraceError(line: number + 1, message: "expected a millisecond (a whole number), not '\(escapedForMessage(trimmed))'"))
            }
            guard value <= maximumMillisecond else {
                return .failure(TraceError(line: number + 1, message: "millisecond \(value) is past the longest trace, \(maximumMillisecond) ms "
                    + "(\(ScenarioLimits.maximumTracePeriod.roamDescription))"))
            }
            if let last = values.last, value < last {
                return .failure(TraceError(line: number + 1, message: "milliseconds must not decrease (\(value) after \(last))"))
            }
            values.append(value)
        }
        guard let last = values.last, last > 0 else {
            return .failure(TraceError(line: 1, message: "a trace needs at least one opportunity after millisecond 0"))
        }
        return .success(DeliveryTrace(opportunities: values, period: last))
    }

    public init(opportunities: [Int64], period: Int64) {
        self.opportunities = opportunities
        self.period = max(1, period)
    }

    /// The first opportunity at or after `time` (nanoseconds since the trace began).
    public func opportunity(atOrAfter time: Int64) -> Int64 {
        self.time(ofIndex: index(atOrAfter: time))
    }

    /// The absolute number of the first opportunity at or after `time` (nanoseconds since the
    /// trace began), counting every opportunity of every earlier period.
    public func index(atOrAfter time: Int64) -> Int64 {
        let periodNanoseconds = period * 1_000_000
        let cycle = max(0, time) / periodNanoseconds
        let offset = max(0, time) - cycle * periodNanoseconds
        var low = 0, high = opportunities.count
        while low < high {
            let middle = (low + high) / 2
            if opportunities[middle] * 1_000_000 < offset { low = middle + 1 } else { high = middle }
        }
        return cycle * Int64(opportunities.count) + Int64(low)
    }

    /// When the opportunity numbered `index` occurs (nanoseconds since the trace began).
    public func time(ofIndex index: Int64) -> Int64 {
        let count = Int64(opportunities.count)
        return (index / count) * period * 1_000_000 + opportunities[Int(index % count)] * 1_000_000
    }

    /// The mean capacity in bits per second.
    public var meanRate: Double {
        Double(opportunities.count * Self.opportunityBytes * 8) / (Double(period) / 1000)
    }
}

/// Why a trace file could not be read.
public struct TraceError: Error, Sendable, Hashable, CustomStringConvertible {
    public var line: Int
    public var message: String
    public var description: String { "line \(line): \(message)" }
}
