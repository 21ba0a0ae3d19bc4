import RoamSystem
import ScenarioModel

/// `report.html`: one self-contained page (inline CSS, SVG and a few lines of script; nothing
/// fetched) with charts of a run on one time axis: each link's delay, loss and rate with its
/// down and blackhole spans, each workload's throughput with its stalls, connections and
/// failures, each node's path; and the expectations. Or two runs, one above the other on the
/// same axis, with their figures side by side.
public enum HTMLReport {
    /// The page for one run.
    public static func render(_ run: RecordedRun) -> String {
        let model = ReportModel(run)
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
        let models = [ReportModel(a), ReportModel(b)]
        let tags = ["A", "B"]
        var page = Page(title: "\(a.scenario) (A) vs \(b.scenario) (B) — Roam comparison", duration: models.map(\.duration).max()!)
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

    /// Renders `DIR/report.html` from the run's files and returns its path.
    @discardableResult
    public static func write(directory: String) throws(ReportError) -> String {
        try write(to: RecordedRun.openDirectory(directory))
    }

    /// Renders `report.html` in `directory` (held open) from the run's files there, and returns
    /// its path.
    @discardableResult
    public static func write(to directory: SecureDirectory) throws(ReportError) -> String {
        let run = try RecordedRun.load(from: directory)
        do throws(SafePathError) {
            try directory.replaceFile(named: "report.html", contents: render(run).utf8)
        } catch {
            throw ReportError(error.message)
        }
        return directory.child("report.html")
    }

    static func ordered(_ lists: [[String]]) -> [String] {
        var seen = Set<String>()
        return lists.flatMap { $0 }.filter { seen.insert($0).inserted }
    }
}

/// Writes `text` as the whole content of the file at `path` (its directory must exist),
/// atomically and without following a link planted at it (``SecureDirectory``); the error says
/// which file and why.
package func writeTextFile(_ text: String, to path: String) throws(ReportError) {
    do throws(SafePathError) {
        try replaceFile(atPath: path, contents: text.utf8)
    } catch {
        throw ReportError(error.message)
    }
}
