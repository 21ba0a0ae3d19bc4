import RoamCore
import RoamSystem

/// A run read back from its report directory: `summary.json` and `timeline.jsonl`, as
/// `roam report` and the HTML report use them.
public struct RecordedRun: Sendable {
    public var directory: String
    public var summary: RunSummary
    /// Every event of the timeline, in order.
    public var events: [RecordedEvent]

    public init(directory: String, summary: RunSummary, events: [RecordedEvent]) {
        self.directory = directory
        self.summary = summary
        self.events = events
    }

    /// The largest `summary.json` and `timeline.jsonl` read.
    public static let maximumSummarySize = 64 << 20
    public static let maximumTimelineSize = 256 << 20

    /// Lines of the timeline that were left out: a last line cut short by a killed run.
    public var notes: [String] = []

    /// Reads `DIR/summary.json` and `DIR/timeline.jsonl`; the error names the file and what is wrong.
    public static func load(directory: String) throws(ReportError) -> RecordedRun {
        try load(from: openDirectory(directory))
    }

    /// Opens a report directory (`SecureDirectory`: no link another user could have planted
    /// is followed on the way).
    static func openDirectory(_ path: String) throws(ReportError) -> SecureDirectory {
        do throws(SafePathError) {
            return try SecureDirectory.open(path)
        } catch {
            throw ReportError("\(escapedForMessage(path, maximumLength: 256)) is not a run's report directory: \(error.message)")
        }
    }

    /// Reads `summary.json` and `timeline.jsonl` in `directory` (held open; a link at either
    /// name is refused, not followed).
    package static func load(from directory: SecureDirectory) throws(ReportError) -> RecordedRun {
        let shown = escapedForMessage(directory.path, maximumLength: 256)
        func read(_ name: String, _ limit: Int) throws(ReportError) -> String {
            do throws(SafePathError) {
                return String(decoding: try directory.readFile(named: name, maximumBytes: limit), as: UTF8.self)
            } catch {
                throw ReportError("\(shown) is not a run's report directory: cannot read \(name) (\(error.message))")
            }
        }
        return try parse(directory: shown, summary: read("summary.json", maximumSummarySize),
                         timeline: read("timeline.jsonl", maximumTimelineSize))
    }

    /// Reads a run from the text of its `summary.json` and `timeline.jsonl`. A last timeline
    /// line that is not JSON (a run killed while writing it) is left out with a note; damage
    /// anywhere else, or an event without what its type needs, is an error naming the line.
    public static func parse(directory: String, summary summaryText: String, timeline: String) throws(ReportError) -> RecordedRun {
        let summary = try parseSummary(directory: directory, summaryText)
        var events: [RecordedEvent] = []
        var decoder = TimelineDecoder(directory: directory)
        for line in textLines(timeline) {
            if let event = try decoder.decode(line) { events.append(event) }
        }
        var run = RecordedRun(directory: directory, summary: summary, events: events)
        run.notes = decoder.finish().map { [$0] } ?? []
        return run
    }

    /// A run's `summary.json` from its text.
    static func parseSummary(directory: String, _ summaryText: String) throws(ReportError) -> RunSummary {
        let json: JSONValue
        do throws(JSONParseError) {
            json = try JSONValue.parse(summaryText)
        } catch {
            throw ReportError("\(directory)/summary.json is not valid JSON: \(error)")
        }
        guard json["scenario"]?.stringValue != nil else {
            throw ReportError("\(directory)/summary.json is not a Roam run summary (no 'scenario')")
        }
        let summary: RunSummary
        do throws(ReportError) {
            summary = try RunSummary(json: json)
        } catch {
            throw ReportError("\(directory)/\(error.message)")
        }
        return summary
    }

    /// The scenario's name.
    public var scenario: String { summary.scenario }
}
