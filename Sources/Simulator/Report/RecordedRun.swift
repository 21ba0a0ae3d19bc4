import Netlink
import PathMonitor

/// A run read back from its report directory: `summary.json` and `timeline.jsonl`, as
/// `roam report` and the HTML report use them.
public struct RecordedRun: Sendable {
    public var directory: String
    public var summary: JSONValue
    /// Every line of the timeline, in order.
    public var events: [JSONValue]

    public init(directory: String, summary: JSONValue, events: [JSONValue]) {
        self.directory = directory
        self.summary = summary
        self.events = events
    }

    /// Reads `DIR/summary.json` and `DIR/timeline.jsonl`; the error names the file and what is wrong.
    public static func load(directory: String) throws(SimulatorError) -> RecordedRun {
        func read(_ name: String) throws(SimulatorError) -> String {
            do throws(NetlinkError) {
                return try readTextFile(atPath: directory + "/" + name)
            } catch {
                throw SimulatorError(.invalidScenario, "\(directory) is not a run's report directory: cannot read \(name) (\(error.reason))")
            }
        }
        let summaryText = try read("summary.json")
        let summary: JSONValue
        do throws(JSONParseError) {
            summary = try JSONValue.parse(summaryText)
        } catch {
            throw SimulatorError(.invalidScenario, "\(directory)/summary.json is not valid JSON: \(error)")
        }
        guard summary["scenario"]?.stringValue != nil else {
            throw SimulatorError(.invalidScenario, "\(directory)/summary.json is not a Roam run summary (no 'scenario')")
        }
        var events: [JSONValue] = []
        for (number, line) in try read("timeline.jsonl").split(separator: "\n").enumerated() where !line.isEmpty {
            do throws(JSONParseError) {
                events.append(try JSONValue.parse(String(line)))
            } catch {
                // A run killed while writing leaves a cut last line; anything else is damage.
                throw SimulatorError(.invalidScenario, "\(directory)/timeline.jsonl line \(number + 1): \(error)")
            }
        }
        return RecordedRun(directory: directory, summary: summary, events: events)
    }

    /// The scenario's name.
    public var scenario: String { summary["scenario"]?.stringValue ?? "?" }
}
