import Glibc
import RoamCore
import RoamSystem

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

    /// Parses the text of a trace (LF, CR LF or CR lines); the reason when it is not one.
    public static func parse(_ text: String) -> Result<DeliveryTrace, TraceError> {
        parse(Array(text.utf8))
    }

    /// Parses a trace's bytes in one pass. A problem names its line and what is wrong, and
    /// quotes nothing of the file: a path that names some other file (a secret, say) must not
    /// have its content shown back in the error.
    public static func parse(_ bytes: [UInt8]) -> Result<DeliveryTrace, TraceError> {
        var values: [Int64] = []
        var line = 1
        // A byte-order mark, as an editor on Windows writes it, is read past (as in scenarios).
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        let count = bytes.count
        while index < count {
            var end = index
            while end < count, bytes[end] != 0x0A, bytes[end] != 0x0D { end += 1 }
            var first = index, last = end
            while first < last, bytes[first] == 0x20 || bytes[first] == 0x09 { first += 1 }
            while last > first, bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09 { last -= 1 }
            if first < last {
                var value: Int64 = 0
                var tooLarge = false
                for position in first..<last {
                    let byte = bytes[position]
                    guard byte >= 0x30, byte <= 0x39 else {
                        return .failure(TraceError(line: line, message: "expected a millisecond (a whole number from 0 to \(maximumMillisecond))"))
                    }
                    if !tooLarge {
                        value = value * 10 + Int64(byte - 0x30)
                        if value > maximumMillisecond { tooLarge = true }
                    }
                }
                if tooLarge {
                    return .failure(TraceError(line: line, message: "a millisecond past the longest trace, \(maximumMillisecond) ms "
                        + "(\(ScenarioLimits.maximumTracePeriod.roamDescription))"))
                }
                if let previous = values.last, value < previous {
                    return .failure(TraceError(line: line, message: "milliseconds must not decrease (this line's is smaller than the line before's)"))
                }
                values.append(value)
            }
            // One line break: LF, CR LF or CR.
            if end < count, bytes[end] == 0x0D, end + 1 < count, bytes[end + 1] == 0x0A { end += 1 }
            index = end + 1
            line += 1
        }
        guard let last = values.last, last > 0 else {
            return .failure(TraceError(line: 1, message: "a trace needs at least one opportunity after millisecond 0"))
        }
        let trace = DeliveryTrace(opportunities: values, period: last)
        guard trace.meanRate >= ScenarioLimits.minimumRate.bitsPerSecond else {
            return .failure(TraceError(line: line - 1, message: "the trace's mean rate, \(Rate(bitsPerSecond: trace.meanRate)), is below "
                + "\(ScenarioLimits.minimumRate), the slowest rate Roam plays (\(values.count) opportunities of 1500 bytes in \(last) ms)"))
        }
        return .success(trace)
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
        var cycle = max(0, time) / periodNanoseconds
        var offset = max(0, time) - cycle * periodNanoseconds
        // A period's last opportunity is at its end, the next period's start: asked for that
        // moment, it is the first (the next period's would skip it).
        if offset == 0, cycle > 0 {
            cycle -= 1
            offset = periodNanoseconds
        }
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

/// Why a scenario's `trace:` (or `track:`) could not be used; the message quotes nothing from the file.
struct TraceReadError: Error, Sendable, Hashable {
    var message: String

    /// Reads the file a scenario names at `path` (`what`: `trace`, `track`), relative to
    /// `baseDirectory` (absolute paths are refused), the way `SecureDirectory` resolves paths.
    /// When the scenario's owner is not the caller (root running a scenario another user wrote),
    /// only a file that user owns is read, and a file that is missing and one that is not theirs
    /// get the same answer: the scenario cannot make Roam read, or tell apart, files its author
    /// could not.
    static func readFile(_ path: String, what: String, baseDirectory: String, scenarioOwner: uid_t?, maximumBytes: Int) -> Result<[UInt8], TraceReadError> {
        let shown = escapedForMessage(path)
        guard !path.hasPrefix("/") else {
            return .failure(TraceReadError(message: "\(what) '\(shown)' is an absolute path; a \(what) is named relative to the scenario file's "
                + "directory (for example ../traces/lte-steady.trace)"))
        }
        do throws(SafePathError) {
            let (directory, name) = try SecureDirectory.resolveFile(baseDirectory + "/" + path)
            if let scenarioOwner, scenarioOwner != geteuid() {
                guard let status = directory.status(of: name), status.owner == scenarioOwner else {
                    return .failure(TraceReadError(message: "cannot read \(what) '\(shown)': no such file of uid \(scenarioOwner), who owns the "
                        + "scenario (a scenario may name only \(what)s its owner owns)"))
                }
            }
            return .success(try directory.readFile(named: name, maximumBytes: maximumBytes))
        } catch {
            let reason: String
            switch error.code {
            case .system where error.errno == .noSuchFileOrDirectory: reason = "no such file"
            case .system: reason = error.errno.map { "\($0)" } ?? "cannot be read"
            case .notRegularFile: reason = "not a regular file"
            case .tooLarge: reason = "larger than \(byteCountDescription(maximumBytes)), the most Roam reads"
            case .untrustedLink: reason = "a symbolic link on the way belongs to another user, in a directory other users can write"
            default: reason = error.message
            }
            return .failure(TraceReadError(message: "cannot read \(what) '\(shown)': \(reason)"))
        }
    }

    /// Reads the trace at `path`, relative to `baseDirectory` (absolute paths are refused), the
    /// way `SecureDirectory` resolves paths. When the scenario's owner is not the caller (root
    /// running a scenario another user wrote), only a trace that user owns is read, and a trace
    /// that is missing and one that is not theirs get the same answer: the scenario cannot make
    /// Roam read, or tell apart, files its author could not.
    static func load(_ path: String, baseDirectory: String, scenarioOwner: uid_t?) -> Result<DeliveryTrace, TraceReadError> {
        let bytes: [UInt8]
        switch readFile(path, what: "trace", baseDirectory: baseDirectory, scenarioOwner: scenarioOwner, maximumBytes: ScenarioLimits.maximumTraceFileSize) {
        case .success(let read): bytes = read
        case .failure(let error): return .failure(error)
        }
        let shown = escapedForMessage(path)
        switch DeliveryTrace.parse(bytes) {
        case .success(let trace): return .success(trace)
        case .failure(let problem): return .failure(TraceReadError(message: "trace '\(shown)' line \(problem.line): \(problem.message)"))
        }
    }
}
