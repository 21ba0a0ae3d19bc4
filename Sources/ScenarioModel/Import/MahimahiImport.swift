import RoamCore
import RoamSystem

/// `roam import mahimahi`: mahimahi delivery traces (one file per direction, as mahimahi's own
/// `*.up` / `*.down` pairs) made into a link profile for a scenario's `profiles:`, with what
/// each trace holds summarised.
public enum MahimahiImport {
    /// What a trace holds, in figures.
    public struct Summary: Sendable, Hashable, CustomStringConvertible {
        public var period: Duration
        public var opportunities: Int
        public var meanRate: Rate
        /// The lowest and highest capacity over one-second windows.
        public var slowestSecond: Rate
        public var fastestSecond: Rate
        /// The longest time without a delivery opportunity (an outage, for the link).
        public var longestGap: Duration

        public var description: String {
            "\(opportunities) opportunities over \(period.roamDescription): mean \(meanRate), one-second windows \(slowestSecond) to \(fastestSecond), longest gap \(longestGap.roamDescription)"
        }
    }

    public static func summarize(_ trace: DeliveryTrace) -> Summary {
        let bitsPer = Double(DeliveryTrace.opportunityBytes * 8)
        var windows = [Int](repeating: 0, count: max(1, Int((trace.period + 999) / 1000)))
        for millisecond in trace.opportunities { windows[min(windows.count - 1, Int(millisecond / 1000))] += 1 }
        // A last window shorter than a second would read as slow; leave it out when there are others.
        let full = trace.period % 1000 == 0 || windows.count == 1 ? windows : Array(windows.dropLast())
        var gap: Int64 = 0
        var previous = trace.opportunities.first.map { $0 + trace.period - (trace.opportunities.last ?? 0) } ?? trace.period
        gap = previous
        for (index, millisecond) in trace.opportunities.enumerated() where index > 0 {
            previous = millisecond - trace.opportunities[index - 1]
            gap = max(gap, previous)
        }
        return Summary(period: .milliseconds(trace.period), opportunities: trace.opportunities.count,
                       meanRate: Rate(bitsPerSecond: trace.meanRate),
                       slowestSecond: Rate(bitsPerSecond: Double(full.min() ?? 0) * bitsPer),
                       fastestSecond: Rate(bitsPerSecond: Double(full.max() ?? 0) * bitsPer),
                       longestGap: .milliseconds(gap))
    }

    /// Reads a trace file; the error names the file and the line.
    public static func read(_ path: String) throws(ScenarioError) -> DeliveryTrace {
        let bytes: [UInt8]
        do throws(SafePathError) {
            bytes = try readRegularFile(atPath: path, maximumBytes: ScenarioLimits.maximumTraceFileSize)
        } catch {
            throw ScenarioError("cannot read the trace: \(error.message)")
        }
        switch DeliveryTrace.parse(bytes) {
        case .success(let trace): return trace
        case .failure(let problem):
            throw ScenarioError("\(escapedForMessage(path, maximumLength: 256)):\(problem.line): \(problem.message) (a mahimahi trace has one millisecond per line)")
        }
    }

    /// The `profiles:` block of a scenario for a link whose capacity follows `up` and `down`
    /// (paths as the scenario will name them, relative to its directory).
    public static func profileYAML(name: String, upPath: String, downPath: String, up: Summary, down: Summary, type: String?,
                                   delay: Duration?, loss: Double?, sources: (String, String)) -> String {
        var lines = [
            // Escaped: a line break in a file name would end the comment and start YAML of its own.
            "# Imported by roam import mahimahi from \(escapedForMessage(sources.0, maximumLength: 256)) (up) and "
                + "\(escapedForMessage(sources.1, maximumLength: 256)) (down).",
            "# up:   \(up)",
            "# down: \(down)",
            "# The userspace backend plays each delivery opportunity; netem (and roam attach) the trace's rate stepped every 100 ms.",
            "profiles:",
            "  \(name):",
        ]
        if let type { lines.append("    type: \(type)") }
        if let delay { lines.append("    delay: \(delay.roamDescription)") }
        if let loss { lines.append("    loss: \(ChaosMeshExport.percent(loss))%") }
        lines.append("    up: { trace: \(quoted(upPath)) }")
        lines.append("    down: { trace: \(quoted(downPath)) }")
        return lines.joined(separator: "\n") + "\n"
    }

    static func quoted(_ text: String) -> String { JSONValue.string(text).serialized }

    /// The problems a scenario's reader finds with `profileYAML` (a `profiles:` block) used by
    /// a link; empty when a scenario can use it as written.
    public static func problems(ofProfile profileYAML: String, named name: String, baseDirectory: String) -> [String] {
        let scenario = """
            name: import-check
            duration: 1s
            nodes: {a: {}, b: {}}
            links:
              - {name: l, between: [a, b], profile: \(name)}

            """ + profileYAML
        return ScenarioReader.parse(scenario, file: "import", baseDirectory: baseDirectory).errors.map(\.message)
    }
}
