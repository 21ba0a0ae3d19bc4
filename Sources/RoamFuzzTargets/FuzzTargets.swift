import Netlink
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel
import Simulator

/// The fuzz targets of Roam's input readers: each takes arbitrary bytes, runs them through a
/// reader as `roam` would, and checks what must hold whatever the input. A violation stops the
/// process (`preconditionFailure`), which a fuzzer reports as a crash; so does any trap inside
/// the readers. `Fuzz/` builds one libFuzzer binary per target, and the test suite replays the
/// committed corpus and every crash found (`Fuzz/Corpus`, `Fuzz/Regressions`).
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// A scenario file (`roam validate`, `roam run`), and, when valid, what is made from it:
    /// the timeline's expansion and the Chaos Mesh export.
    case scenario
    /// A mahimahi delivery trace (`trace:`, `roam import`), and its summary.
    case trace
    /// An interfaces file (`roam monitor --interfaces`), and alias tags.
    case interfaces
    /// The JSON reader (`roam report`).
    case json
    /// A run's `summary.json` and `timeline.jsonl` (`roam report`), rendered to HTML. The input
    /// holds both, split at the first NUL byte.
    case report

    /// Runs one input through the target.
    public func run(_ bytes: UnsafeRawBufferPointer) {
        let text = String(decoding: bytes, as: UTF8.self)
        switch self {
        case .scenario: Self.scenario(text)
        case .trace: Self.trace(text)
        case .interfaces: Self.interfaces(text)
        case .json: Self.json(text)
        case .report: Self.report(bytes)
        }
    }

    /// Runs one input given as an array.
    public func run(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { run($0) }
    }

    static func scenario(_ text: String) {
        // Traces named by the input resolve against a directory that holds none.
        let outcome = ScenarioReader.parse(text, file: "fuzz.yaml", baseDirectory: "/nonexistent-roam-fuzz")
        for diagnostic in outcome.diagnostics {
            let first = diagnostic.description.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)[0]
            precondition(!diagnostic.message.contains("\n") && !diagnostic.message.contains("\r"), "a diagnostic message spans lines")
            precondition(diagnostic.line >= 1 && diagnostic.column >= 1, "a diagnostic has no place: \(first)")
            precondition(first.hasPrefix("fuzz.yaml:\(diagnostic.line):\(diagnostic.column): "), "not FILE:LINE:COL: \(first)")
        }
        guard let scenario = outcome.scenario else {
            precondition(!outcome.errors.isEmpty, "no scenario and no error")
            return
        }
        // What the reader accepts, the runner accepts.
        precondition(scenario.problems.isEmpty, "the reader accepted what the runner refuses: \(scenario.problems)")
        let schedule = TimelineSchedule(scenario: scenario)
        precondition(schedule.changes.count <= 2 * ScenarioLimits.maximumChanges, "the timeline expanded past its bound")
        // Every link is a device of its own by default, so the export never refuses.
        precondition((try? ChaosMeshExport.export(scenario)) != nil, "the export refused a scenario with default devices")
        _ = scenario.timeScaled(by: 0.5)
    }

    static func trace(_ text: String) {
        guard case .success(let trace) = DeliveryTrace.parse(text) else { return }
        precondition(trace.period >= 1 && trace.period <= DeliveryTrace.maximumMillisecond, "period out of range")
        _ = MahimahiImport.summarize(trace)
        let end = trace.period * 1_000_000 * 3
        let index = trace.index(atOrAfter: end / 2)
        precondition(trace.time(ofIndex: index) >= end / 2, "the opportunity found is before the time asked")
    }

    static func interfaces(_ text: String) {
        if let rules = try? InterfaceRules(parsing: text, source: "fuzz") {
            for name in ["wlan0", "eth0", "wwan0", "lo", String(text.prefix(15))] { _ = rules.attributes(forInterfaceNamed: name) }
        }
        for line in textLines(text).prefix(64) {
            let attributes = InterfaceTag.attributes(fromAlias: String(line))
            _ = InterfaceTag.problems(inAlias: String(line))
            // What a tag says, written back as a tag, says the same.
            precondition(InterfaceTag.attributes(fromAlias: InterfaceTag.alias(for: attributes)) == attributes, "tag round trip differs")
        }
    }

    static func json(_ text: String) {
        guard let value = try? JSONValue.parse(text) else { return }
        // What the reader reads, the writer writes back to the same value.
        guard let again = try? JSONValue.parse(value.serialized) else {
            preconditionFailure("the JSON writer wrote what the reader refuses: \(value.serialized.prefix(200))")
        }
        precondition(again == value, "JSON round trip differs")
    }

    static func report(_ bytes: UnsafeRawBufferPointer) {
        let split = bytes.firstIndex(of: 0) ?? bytes.count
        let summary = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<split]), as: UTF8.self)
        let timeline = split < bytes.count ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[(split + 1)...]), as: UTF8.self) : ""
        guard let run = try? RecordedRun.parse(directory: "fuzz", summary: summary, timeline: timeline) else { return }
        let html = HTMLReport.render(run)
        precondition(html.hasPrefix("<!DOCTYPE html>") || html.hasPrefix("<!doctype html>"), "the report is not a page")
        _ = HTMLReport.render(comparing: run, run)
    }
}
