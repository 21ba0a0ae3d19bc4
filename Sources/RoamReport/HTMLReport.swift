import RoamCore
import RoamSystem
import ScenarioModel
import SystemPackage

/// `report.html`: one self-contained page (inline CSS, SVG and a few lines of script; nothing
/// fetched) with charts of a run on one time axis: each link's delay, loss and rate with its
/// down and blackhole spans, each workload's throughput with its stalls, connections and
/// failures, each node's path; and the expectations. Or two runs, one above the other on the
/// same axis, with their figures side by side.
public enum HTMLReport {
    /// The page for one run.
    public static func render(_ run: RecordedRun) -> String {
        render(ReportModel(run))
    }

    static func render(_ model: ReportModel) -> String {
        let run = model.run
        var page = Page(title: "\(run.scenario) — Roam report", duration: model.duration)
        page.header(model, tag: nil)
        page.expectations(model)
        page.section("Links")
        for link in model.links { page.link(link, tag: nil) }
        page.section("Workloads")
        for workload in model.workloads { page.workload(workload, tag: nil) }
        page.section("Paths")
        for node in model.nodes { page.node(node, tag: nil) }
        page.map(model)
        page.events(model)
        page.linkStatistics(model)
        return page.finish()
    }

    /// The page comparing run `a` with run `b` (e.g. `mode: none` against `handover`).
    public static func render(comparing a: RecordedRun, _ b: RecordedRun) -> String {
        render(comparing: ReportModel(a), ReportModel(b))
    }

    static func render(comparing a: ReportModel, _ b: ReportModel) -> String {
        let models = [a, b]
        let tags = ["A", "B"]
        var page = Page(title: "\(a.run.scenario) (A) vs \(b.run.scenario) (B) — Roam comparison", duration: models.map(\.duration).max()!)
        page.raw("<div class=pair>")
        for (model, tag) in zip(models, tags) { page.header(model, tag: tag) }
        page.raw("</div>")
        page.comparison(models[0], models[1])
        // Looked up by name, not searched: linear in the links, workloads and nodes.
        func index<T>(_ items: [T], _ name: (T) -> String) -> [String: T] {
            Dictionary(items.map { (name($0), $0) }, uniquingKeysWith: { first, _ in first })
        }
        page.section("Links")
        let links = models.map { index($0.links, \.name) }
        for name in ordered(models.map { $0.links.map(\.name) }) {
            for (byName, tag) in zip(links, tags) { if let link = byName[name] { page.link(link, tag: tag) } }
        }
        page.section("Workloads")
        let workloads = models.map { index($0.workloads, \.name) }
        for name in ordered(models.map { $0.workloads.map(\.name) }) {
            for (byName, tag) in zip(workloads, tags) { if let workload = byName[name] { page.workload(workload, tag: tag) } }
        }
        page.section("Paths")
        let nodes = models.map { index($0.nodes, \.name) }
        for name in ordered(models.map { $0.nodes.map(\.name) }) {
            for (byName, tag) in zip(nodes, tags) { if let node = byName[name] { page.node(node, tag: tag) } }
        }
        for (model, tag) in zip(models, tags) { page.expectations(model, tag: tag) }
        return page.finish()
    }

    /// The page of the run in one report directory, or of two compared (as `roam report` writes
    /// it), and the notes about their timelines (a last line cut short). Each timeline is read a
    /// piece at a time, as `write(to:)` reads it.
    public static func page(directories: [String]) throws(ReportError) -> (html: String, notes: [String]) {
        precondition((1...2).contains(directories.count), "one report directory, or two")
        var models: [ReportModel] = []
        for directory in directories { models.append(try streamedModel(in: RecordedRun.openDirectory(directory))) }
        let notes = models.flatMap(\.run.notes)
        return (models.count == 1 ? render(models[0]) : render(comparing: models[0], models[1]), notes)
    }

    /// Renders `DIR/report.html` from the run's files and returns its path.
    @discardableResult
    public static func write(directory: String) throws(ReportError) -> String {
        try write(to: RecordedRun.openDirectory(directory))
    }

    /// Renders `report.html` in `directory` (held open) from the run's files there, and returns
    /// its path. The timeline is read a piece at a time and only what the page draws is kept of
    /// each event (a point, span or marker, thinned to about one per pixel at the end), so that a
    /// run of a day (hundreds of megabytes of timeline) is drawn in a fraction of its size; a
    /// timeline over ``maximumTimelineSize`` is refused.
    @discardableResult
    package static func write(to directory: SecureDirectory) throws(ReportError) -> String {
        let model = try streamedModel(in: directory)
        do throws(SafePathError) {
            try directory.replaceFile(named: "report.html", contents: render(model).utf8, mode: RunReportFiles.mode)
        } catch {
            throw ReportError(error.message)
        }
        return directory.child("report.html")
    }

    /// The largest timeline drawn: days of a busy run (the soak's mix writes about 20 MB an
    /// hour); reading it takes a few minutes (a day's 431 MB, 21 s on a 2-core machine).
    public static let maximumTimelineSize = 4 << 30

    /// The model of the run in `directory`, its timeline read a piece at a time.
    static func streamedModel(in directory: SecureDirectory) throws(ReportError) -> ReportModel {
        let shown = escapedForMessage(directory.path, maximumLength: 256)
        func cannotRead(_ name: String, _ error: SafePathError) -> ReportError {
            ReportError("\(shown) is not a run's report directory: cannot read \(name) (\(error.message))")
        }
        let summaryText: String
        let timeline: (file: FileDescriptor, size: Int)
        do throws(SafePathError) {
            summaryText = String(decoding: try directory.readFile(named: "summary.json", maximumBytes: RecordedRun.maximumSummarySize),
                                 as: UTF8.self)
        } catch {
            throw cannotRead("summary.json", error)
        }
        do throws(SafePathError) {
            timeline = try directory.openRegularFile(named: "timeline.jsonl")
        } catch {
            throw cannotRead("timeline.jsonl", error)
        }
        defer { try? timeline.file.close() }
        // Refused before reading when it says so; one that grows while read is stopped at the bound.
        guard timeline.size <= maximumTimelineSize else {
            throw ReportError("\(shown)/timeline.jsonl is \(byteCountDescription(timeline.size)), larger than "
                + "\(byteCountDescription(maximumTimelineSize)), the most Roam reads of a timeline")
        }
        let run = RecordedRun(directory: shown, summary: try RecordedRun.parseSummary(directory: shown, summaryText), events: [])
        var builder = ReportModel.Builder(run: run)
        var decoder = TimelineDecoder(directory: shown)
        try TimelineStream.forEachLine(of: timeline.file, display: "\(shown)/timeline.jsonl", maximumBytes: maximumTimelineSize) { line throws(ReportError) in
            if let event = try decoder.decode(line) { builder.add(event) }
        }
        var model = builder.finish()
        model.run.notes = decoder.finish().map { [$0] } ?? []
        return model
    }

    static func ordered(_ lists: [[String]]) -> [String] {
        var seen = Set<String>()
        return lists.flatMap { $0 }.filter { seen.insert($0).inserted }
    }
}

/// Writes `text` as the whole content of the file at `path` (its directory must exist),
/// atomically and without following a link planted at it (`SecureDirectory`); the error says
/// which file and why.
package func writeTextFile(_ text: String, to path: String) throws(ReportError) {
    do throws(SafePathError) {
        try replaceFile(atPath: path, contents: text.utf8)
    } catch {
        throw ReportError(error.message)
    }
}
