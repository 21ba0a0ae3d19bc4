import PathMonitor
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
        page.section("Links")
        for name in ordered(models.map { $0.links.map(\.name) }) {
            for (model, tag) in zip(models, tags) { if let link = model.links.first(where: { $0.name == name }) { page.link(link, tag: tag) } }
        }
        page.section("Workloads")
        for name in ordered(models.map { $0.workloads.map(\.name) }) {
            for (model, tag) in zip(models, tags) { if let workload = model.workloads.first(where: { $0.name == name }) { page.workload(workload, tag: tag) } }
        }
        page.section("Paths")
        for name in ordered(models.map { $0.nodes.map(\.name) }) {
            for (model, tag) in zip(models, tags) { if let node = model.nodes.first(where: { $0.name == name }) { page.node(node, tag: tag) } }
        }
        for (model, tag) in zip(models, tags) { page.expectations(model, tag: tag) }
        return page.finish()
    }

    /// Renders `DIR/report.html` from the run's files and returns its path.
    @discardableResult
    public static func write(directory: String) throws(ReportError) -> String {
        let run = try RecordedRun.load(directory: directory)
        let path = directory + "/report.html"
        try writeTextFile(render(run), to: path)
        return path
    }

    static func ordered(_ lists: [[String]]) -> [String] {
        var seen = Set<String>()
        return lists.flatMap { $0 }.filter { seen.insert($0).inserted }
    }
}

/// Writes `text` to `path`, replacing it; the error says which file and why.
package func writeTextFile(_ text: String, to path: String) throws(ReportError) {
    do {
        try writeFile(atPath: path, contents: text)
    } catch {
        throw ReportError("cannot write \(path): \(error)")
    }
}

/// The page being built.
struct Page {
    let duration: Double
    private var body = ""
    private let title: String
    private var chartCount = 0
    // Geometry of every chart, so that they share the time axis.
    static let width = 1000.0, left = 190.0, right = 16.0
    var plotWidth: Double { Page.width - Page.left - Page.right }

    init(title: String, duration: Double) {
        self.title = title
        self.duration = duration
    }

    func x(_ t: Double) -> Double { Page.left + min(max(t, 0), duration) / duration * plotWidth }

    mutating func raw(_ html: String) { body += html }

    mutating func section(_ title: String) { body += "<h2>\(escape(title))</h2>\n" }

    mutating func header(_ model: ReportModel, tag: String?) {
        let s = model.run.summary
        let passed = s["passed"]?.boolValue ?? false
        let cancelled = s["cancelled"]?.boolValue ?? false
        let verdict = cancelled ? "CANCELLED" : passed ? "PASS" : "FAIL"
        body += "<header class=\"run\"><h1>\(tag.map { "<span class=tag>\($0)</span> " } ?? "")\(escape(model.run.scenario)) "
        body += "<span class=\"verdict \(passed && !cancelled ? "pass" : "fail")\">\(verdict)</span></h1>\n"
        if let description = s["description"]?.stringValue { body += "<p>\(escape(description))</p>\n" }
        var facts: [(String, String)] = [
            ("run", s["runId"]?.stringValue ?? "?"), ("started", s["started"]?.stringValue ?? "?"),
            ("backend", "\(s["backend"]?.stringValue ?? "?") (\(s["backendReason"]?.stringValue ?? ""))"),
            ("seed", s["seed"]?.intValue.map(String.init) ?? "?"),
            ("duration", "\(format3(s["durationSeconds"]?.doubleValue ?? 0)) s"
                + ((s["endedAtSeconds"]?.doubleValue).map { $0 < (s["durationSeconds"]?.doubleValue ?? 0) ? ", ended at \(format3($0)) s" : "" } ?? "")),
            ("directory", model.run.directory),
        ]
        if let scale = s["timeScale"]?.doubleValue, scale != 1 { facts.append(("time scale", format3(scale))) }
        body += "<dl>" + facts.map { "<dt>\(escape($0.0))</dt><dd>\(escape($0.1))</dd>" }.joined() + "</dl>\n"
        let notes = s["notes"]?.arrayValue?.compactMap(\.stringValue) ?? []
        for note in notes { body += "<p class=note>note: \(escape(note))</p>\n" }
        for failed in s["timeline"]?["failed"]?.arrayValue ?? [] {
            body += "<p class=\"note fail\">change to \(escape(failed["link"]?.stringValue ?? "")) failed: \(escape(failed["error"]?.stringValue ?? ""))</p>\n"
        }
        body += "</header>\n"
    }

    mutating func expectations(_ model: ReportModel, tag: String? = nil) {
        let rows = model.run.summary["expectations"]?.arrayValue ?? []
        body += "<h2>Expectations\(tag.map { " (\($0))" } ?? "")</h2>\n"
        guard !rows.isEmpty else {
            body += "<p>The scenario has no expectations.</p>\n"
            return
        }
        body += "<table class=expectations><thead><tr><th>subject</th><th>requirement</th><th>measured</th><th>detail</th><th>result</th></tr></thead><tbody>\n"
        for row in rows {
            let passed = row["passed"]?.boolValue ?? false
            body += "<tr class=\(passed ? "pass" : "fail")><td>\(escape(row["subject"]?.stringValue ?? ""))</td>"
            body += "<td>\(escape(row["requirement"]?.stringValue ?? ""))</td><td>\(escape(row["measured"]?.stringValue ?? ""))</td>"
            body += "<td>\(escape(row["detail"]?.stringValue ?? ""))</td><td class=result>\(passed ? "pass" : "FAIL")</td></tr>\n"
        }
        body += "</tbody></table>\n"
    }

    // MARK: Charts

    /// A chart: an SVG of `height` with the time axis under it; `draw` adds the content.
    func chart(_ kind: String, title: String, height: Double, _ draw: (inout SVG) -> Void) -> String {
        var svg = SVG()
        draw(&svg)
        let total = height + 22
        var body = "<figure class=\"chart \(kind)\" data-chart=\"\(kind)\"><figcaption>\(escape(title))</figcaption>"
        body += "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(Page.width) \(total)\" width=\"\(Page.width)\" height=\"\(total)\" "
        body += "data-left=\"\(Page.left)\" data-width=\"\(plotWidth)\" data-duration=\"\(duration)\">"
        body += svg.content
        body += axis(y: height)
        body += "<line class=cursor x1=\"-10\" x2=\"-10\" y1=\"0\" y2=\"\(height)\"/>"
        body += "</svg></figure>\n"
        return body
    }

    mutating func add(chart html: String) {
        chartCount += 1
        body += html
    }

    func axis(y: Double) -> String {
        var text = "<g class=axis><line x1=\"\(Page.left)\" x2=\"\(Page.left + plotWidth)\" y1=\"\(y)\" y2=\"\(y)\"/>"
        let step = niceStep(duration / 10)
        var t = 0.0
        while t <= duration + 1e-9 {
            text += "<line x1=\"\(x(t))\" x2=\"\(x(t))\" y1=\"\(y)\" y2=\"\(y + 4)\"/><text x=\"\(x(t))\" y=\"\(y + 16)\" text-anchor=middle>\(format3(t))s</text>"
            t += step
        }
        return text + "</g>"
    }

    /// A panel of step lines for each direction, from `top`, `height` high.
    func panel(_ svg: inout SVG, top: Double, height: Double, label: String, unit: String, series: [String: ReportModel.Series]) {
        let maximum = series.values.map(\.maximum).max() ?? 0
        let scale = maximum > 0 ? maximum * 1.15 : 1
        svg.add("<rect class=panel x=\"\(Page.left)\" y=\"\(top)\" width=\"\(plotWidth)\" height=\"\(height)\"/>")
        svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"\(top + height / 2 + 4)\" text-anchor=end>\(escape(label))</text>")
        svg.add("<text class=tick x=\"\(Page.left + 4)\" y=\"\(top + 11)\">\(escape(format3(scale)))\(escape(unit))</text>")
        for direction in ["up", "down"] {
            guard let points = series[direction]?.points, !points.isEmpty else { continue }
            var segments: [String] = []
            var current: [String] = []
            for (index, point) in points.enumerated() {
                let end = index + 1 < points.count ? points[index + 1].t : duration
                guard let value = point.value else {
                    if !current.isEmpty { segments.append(current.joined(separator: " ")); current = [] }
                    continue
                }
                let y = top + height - value / scale * height
                current.append("\(x(point.t)),\(y) \(x(end)),\(y)")
            }
            if !current.isEmpty { segments.append(current.joined(separator: " ")) }
            for segment in segments {
                svg.add("<polyline class=\"series \(direction)\" points=\"\(segment)\"><title>\(direction)</title></polyline>")
            }
        }
    }

    func band(_ svg: inout SVG, top: Double, height: Double, intervals: [ReportModel.Interval], kind: String) {
        for interval in intervals {
            svg.add("<rect class=\"band \(kind)\" x=\"\(x(interval.start))\" y=\"\(top)\" width=\"\(max(1, x(interval.end) - x(interval.start)))\" height=\"\(height)\">"
                + "<title>\(escape(interval.label)) \(format3(interval.start))–\(format3(interval.end)) s</title></rect>")
        }
    }

    mutating func link(_ link: ReportModel.Link, tag: String?) {
        let title = "\(tag.map { "[\($0)] " } ?? "")link \(link.name) — up (solid), down (dashed); grey: carrier down, black: blackhole"
        let html = chart("link", title: title, height: 196) { svg in
            panel(&svg, top: 4, height: 50, label: "delay", unit: " ms", series: link.delay)
            panel(&svg, top: 60, height: 50, label: "loss", unit: " %", series: link.loss)
            panel(&svg, top: 116, height: 50, label: "rate", unit: " Mbit/s", series: link.rate)
            svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"\(186)\" text-anchor=end>state</text>")
            svg.add("<rect class=\"band up\" x=\"\(Page.left)\" y=\"174\" width=\"\(plotWidth)\" height=\"18\"/>")
            band(&svg, top: 174, height: 18, intervals: link.down, kind: "down")
            band(&svg, top: 174, height: 9, intervals: link.blackholed["up"] ?? [], kind: "blackhole")
            band(&svg, top: 183, height: 9, intervals: link.blackholed["down"] ?? [], kind: "blackhole")
            for interval in link.down + (link.blackholed["up"] ?? []) + (link.blackholed["down"] ?? []) {
                for top in [4.0, 60, 116] { band(&svg, top: top, height: 50, intervals: [interval], kind: "shade") }
            }
        }
        add(chart: html)
    }

    mutating func workload(_ workload: ReportModel.Workload, tag: String?) {
        let title = "\(tag.map { "[\($0)] " } ?? "")workload \(workload.name) (\(workload.kind), mode \(workload.mode)) — red: stalls; ▲ connections, ✕ failures, ◆ multipath events"
        let hasBuffer = !workload.buffered.isEmpty
        let html = chart("workload", title: title, height: hasBuffer ? 164 : 108) { svg in
            let maximum = max(workload.throughput.map(\.mbit).max() ?? 0, 0.001) * 1.15
            let top = 18.0, height = 80.0
            svg.add("<rect class=panel x=\"\(Page.left)\" y=\"\(top)\" width=\"\(plotWidth)\" height=\"\(height)\"/>")
            svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"\(top + height / 2 + 4)\" text-anchor=end>throughput</text>")
            svg.add("<text class=tick x=\"\(Page.left + 4)\" y=\"\(top + 11)\">\(escape(format3(maximum))) Mbit/s</text>")
            band(&svg, top: top, height: height, intervals: workload.stalls, kind: "stall")
            if !workload.throughput.isEmpty {
                var previous = 0.0
                var points: [String] = []
                for sample in workload.throughput {
                    let y = top + height - sample.mbit / maximum * height
                    points.append("\(x(previous)),\(y) \(x(sample.t)),\(y)")
                    previous = sample.t
                }
                svg.add("<polyline class=\"series throughput\" points=\"\(points.joined(separator: " "))\"/>")
            }
            for (t, label) in workload.connects {
                svg.add("<path class=\"marker connect\" d=\"M\(x(t)),4 l-5,10 h10 z\"><title>\(format3(t)) s: \(escape(label))</title></path>")
            }
            for (t, label) in workload.disconnects + workload.failedRequests {
                svg.add("<text class=\"marker failure\" x=\"\(x(t))\" y=\"14\" text-anchor=middle>✕<title>\(format3(t)) s: \(escape(label))</title></text>")
            }
            for (t, label) in workload.subflows + workload.commands {
                svg.add("<path class=\"marker multipath\" d=\"M\(x(t)),\(top + height - 6) l5,5 l-5,5 l-5,-5 z\"><title>\(format3(t)) s: \(escape(label))</title></path>")
            }
            if hasBuffer {
                let btop = 108.0, bheight = 50.0
                let bmax = max(workload.buffered.map(\.seconds).max() ?? 0, 0.001) * 1.15
                svg.add("<rect class=panel x=\"\(Page.left)\" y=\"\(btop)\" width=\"\(plotWidth)\" height=\"\(bheight)\"/>")
                svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"\(btop + bheight / 2 + 4)\" text-anchor=end>buffer</text>")
                svg.add("<text class=tick x=\"\(Page.left + 4)\" y=\"\(btop + 11)\">\(escape(format3(bmax))) s</text>")
                band(&svg, top: btop, height: bheight, intervals: workload.stalls, kind: "stall")
                let points = workload.buffered.map { "\(x($0.t)),\(btop + bheight - $0.seconds / bmax * bheight)" }
                svg.add("<polyline class=\"series buffer\" points=\"\(points.joined(separator: " "))\"/>")
            }
        }
        add(chart: html)
    }

    mutating func node(_ node: ReportModel.Node, tag: String?) {
        let title = "\(tag.map { "[\($0)] " } ?? "")path of \(node.name) — colour: primary interface's type, with its link quality; "
            + "rows: expensive, constrained, ultra-constrained (satellite)"
        let html = chart("path", title: title, height: 70) { svg in
            svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"20\" text-anchor=end>path</text>")
            svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"39\" text-anchor=end>expensive</text>")
            svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"53\" text-anchor=end>constrained</text>")
            svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"67\" text-anchor=end>satellite</text>")
            for span in node.spans {
                let kind = span.satisfied ? (span.type ?? "other") : "unsatisfied"
                let width = max(1, x(span.end) - x(span.start))
                let quality = span.quality.flatMap { $0 == "unknown" ? nil : ", \($0)" } ?? ""
                let label = span.satisfied ? "\(span.interface ?? "?") (\(span.type ?? "?")\(quality))" : "unsatisfied"
                svg.add("<rect class=\"path \(kind)\" x=\"\(x(span.start))\" y=\"4\" width=\"\(width)\" height=\"24\"><title>\(format3(span.start)) s: \(escape(span.summary))</title></rect>")
                if width > Double(label.count) * 7 + 6 {
                    svg.add("<text class=pathlabel x=\"\(x(span.start) + 4)\" y=\"20\">\(escape(label))</text>")
                }
                if span.expensive { svg.add("<rect class=\"flag expensive\" x=\"\(x(span.start))\" y=\"31\" width=\"\(width)\" height=\"10\"/>") }
                if span.constrained { svg.add("<rect class=\"flag constrained\" x=\"\(x(span.start))\" y=\"45\" width=\"\(width)\" height=\"10\"/>") }
                if span.ultraConstrained { svg.add("<rect class=\"flag ultra\" x=\"\(x(span.start))\" y=\"59\" width=\"\(width)\" height=\"10\"/>") }
            }
        }
        add(chart: html)
    }

    mutating func events(_ model: ReportModel) {
        guard !model.marks.isEmpty || !model.mptcpChanges.isEmpty else { return }
        section("Marks and MPTCP endpoints")
        let html = chart("marks", title: "marks from the code under test (|) and MPTCP endpoint changes (◆)", height: 24) { svg in
            for (t, text) in model.marks {
                svg.add("<line class=mark x1=\"\(x(t))\" x2=\"\(x(t))\" y1=\"2\" y2=\"22\"><title>\(format3(t)) s: \(escape(text))</title></line>")
            }
            for (t, text) in model.mptcpChanges {
                svg.add("<path class=\"marker multipath\" d=\"M\(x(t)),6 l6,6 l-6,6 l-6,-6 z\"><title>\(format3(t)) s: \(escape(text))</title></path>")
            }
        }
        add(chart: html)
        body += "<ul class=events>" + (model.marks.map { "<li>\(format3($0.t)) s — \(escape($0.text))</li>" }
            + model.mptcpChanges.map { "<li>\(format3($0.t)) s — MPTCP \(escape($0.label))</li>" }).joined() + "</ul>\n"
    }

    mutating func linkStatistics(_ model: ReportModel) {
        let rows = model.run.summary["links"]?.arrayValue ?? []
        guard !rows.isEmpty else { return }
        let columns = ["arrived", "delivered", "lost", "blackholed", "overflowed", "corrupted", "duplicated", "reordered"]
        section("Packets (userspace emulator)")
        body += "<table><thead><tr><th>link</th><th>direction</th>" + columns.map { "<th>\($0)</th>" }.joined() + "</tr></thead><tbody>"
        for row in rows {
            body += "<tr><td>\(escape(row["link"]?.stringValue ?? ""))</td><td>\(escape(row["direction"]?.stringValue ?? ""))</td>"
            body += columns.map { "<td class=num>\(row[$0]?.intValue ?? 0)</td>" }.joined() + "</tr>"
        }
        body += "</tbody></table>\n"
    }

    mutating func comparison(_ a: ReportModel, _ b: ReportModel) {
        section("Side by side")
        var rows: [(String, String, String)] = []
        func value(_ model: ReportModel, _ body: (JSONValue) -> String?) -> String { body(model.run.summary) ?? "–" }
        rows.append(("result", value(a) { ($0["passed"]?.boolValue ?? false) ? "pass" : "FAIL" }, value(b) { ($0["passed"]?.boolValue ?? false) ? "pass" : "FAIL" }))
        rows.append(("backend, seed", value(a) { "\($0["backend"]?.stringValue ?? "?"), \($0["seed"]?.intValue ?? 0)" },
                     value(b) { "\($0["backend"]?.stringValue ?? "?"), \($0["seed"]?.intValue ?? 0)" }))
        for name in HTMLReport.ordered([a.workloads.map(\.name), b.workloads.map(\.name)]) {
            func figure(_ model: ReportModel, _ pick: (JSONValue) -> String?) -> String {
                guard let workload = model.run.summary["workloads"]?.arrayValue?.first(where: { $0["name"]?.stringValue == name }) else { return "–" }
                return pick(workload) ?? "–"
            }
            let picks: [(String, (JSONValue) -> String?)] = [
                ("mode, transport", { "\($0["mode"]?.stringValue ?? "?"), \($0["transport"]?.stringValue ?? "tcp")" }),
                ("throughput", { $0["throughputBps"]?.doubleValue.map { "\(format3(($0 / 1e4).rounded() / 100)) Mbit/s" } }),
                ("completed", { $0["completed"]?.boolValue.map { $0 ? "yes" : "no" } }),
                ("connections, handovers", { "\($0["connections"]?.intValue ?? 0), \($0["handovers"]?.intValue ?? 0)" }),
                ("longest gap", { $0["longestGap"]?["ms"]?.doubleValue.map { "\(format3($0)) ms" } }),
                ("stalls (longest)", { w in w["stream"].map { "\($0["stallCount"]?.intValue ?? 0) (\(format3($0["longestStallMs"]?.doubleValue ?? 0)) ms)" } }),
                ("requests ok / failed", { w in w["requests"].map { "\($0["succeeded"]?.intValue ?? 0) / \($0["failed"]?.intValue ?? 0)" } }),
                ("time to first byte p50 / max", { w in w["requests"].map { "\(format3($0["ttfbMs"]?["p50"]?.doubleValue ?? 0)) / \(format3($0["ttfbMs"]?["max"]?.doubleValue ?? 0)) ms" } }),
                ("exit code", { w in w["command"].flatMap { $0["exitCode"]?.intValue.map(String.init) } }),
            ]
            for (label, pick) in picks {
                let left = figure(a, pick), right = figure(b, pick)
                if left == "–" && right == "–" { continue }
                rows.append(("\(name): \(label)", left, right))
            }
        }
        for node in HTMLReport.ordered([a.nodes.map(\.name), b.nodes.map(\.name)]) {
            rows.append(("\(node): path updates", "\(a.run.summary["pathUpdates"]?[node]?.intValue ?? 0)", "\(b.run.summary["pathUpdates"]?[node]?.intValue ?? 0)"))
        }
        body += "<table class=comparison><thead><tr><th></th><th>A: \(escape(a.run.directory))</th><th>B: \(escape(b.run.directory))</th></tr></thead><tbody>"
        for (label, left, right) in rows {
            body += "<tr\(left != right ? " class=differs" : "")><td>\(escape(label))</td><td>\(escape(left))</td><td>\(escape(right))</td></tr>"
        }
        body += "</tbody></table>\n"
    }

    func finish() -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><meta name="generator" content="roam">
        <title>\(escape(title))</title>
        <style>\(Page.style)</style></head>
        <body data-charts="\(chartCount)">
        <div id="cursor-time" aria-live="polite"></div>
        \(body)
        <footer>Made by <code>roam report</code> from <code>summary.json</code> and <code>timeline.jsonl</code>. Hover a chart for the time.</footer>
        <script>\(Page.script)</script>
        </body></html>

        """
    }

    static let style = """
    body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1040px;color:#1d1d1f;background:#fff}
    h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
    .tag{background:#444;color:#fff;border-radius:4px;padding:0 6px;font-size:15px}
    .verdict{font-size:14px;border-radius:4px;padding:2px 8px;vertical-align:middle}.verdict.pass{background:#d9f2df;color:#145c2a}.verdict.fail{background:#fbd9d9;color:#8a1111}
    dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}dt{color:#666}dd{margin:0;font-family:ui-monospace,monospace;font-size:13px}
    .note{color:#7a5a00;background:#fff7da;padding:4px 8px;border-radius:4px}.note.fail{color:#8a1111;background:#fbd9d9}
    table{border-collapse:collapse;margin:6px 0;font-size:13px}th,td{border-bottom:1px solid #e4e4e4;padding:4px 10px;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
    tr.pass td.result{color:#145c2a;font-weight:600}tr.fail td{background:#fdeeee}tr.fail td.result{color:#8a1111;font-weight:700}tr.differs td{background:#f3f7ff}
    figure.chart{margin:10px 0 18px}figcaption{font-size:13px;color:#333;margin-bottom:2px}svg{display:block;max-width:100%;height:auto;font-size:11px}
    .panel{fill:#fafafa;stroke:#e2e2e2}.label{fill:#444}.tick{fill:#888}.axis line{stroke:#999}.axis text{fill:#666}
    .series{fill:none;stroke-width:1.6}.series.up{stroke:#2f6fd8}.series.down{stroke:#d8572f;stroke-dasharray:5 3}.series.throughput{stroke:#2f6fd8;stroke-width:2}.series.buffer{stroke:#3a9a5b}
    .band.up{fill:#d9f2df}.band.down{fill:#9a9a9a}.band.blackhole{fill:#111}.band.shade{fill:#000;opacity:.06}.band.stall{fill:#e0301e;opacity:.28}
    .marker.connect{fill:#3a9a5b}.marker.failure{fill:#c1121f;font-size:13px;font-weight:700}.marker.multipath{fill:#7b3fbf}
    rect.path{stroke:#fff;stroke-width:.5}.path.wifi{fill:#4a8fe7}.path.cellular{fill:#f09a36}.path.wiredEthernet{fill:#3a9a5b}.path.other,.path.loopback{fill:#999}.path.unsatisfied{fill:#e5e5e5}
    .pathlabel{fill:#fff;font-weight:600;pointer-events:none}.flag.expensive{fill:#f0c36a}.flag.constrained{fill:#a77bd6}.flag.ultra{fill:#d65a7b}
    .mark{stroke:#7b3fbf;stroke-width:2}.cursor{stroke:#000;stroke-width:1;opacity:.5;pointer-events:none}
    #cursor-time{position:fixed;top:8px;right:8px;background:#222;color:#fff;padding:2px 8px;border-radius:4px;font-size:12px;display:none}
    .pair{display:grid;grid-template-columns:1fr 1fr;gap:16px}.pair dl{grid-template-columns:max-content minmax(0,1fr)}.pair dd{overflow-wrap:anywhere}
    footer{margin-top:32px;color:#888;font-size:12px}
    """

    /// A cursor across every chart at the time under the mouse; the page marks itself ready
    /// (or the first script error) on `<html data-roam>` for checks in a browser.
    static let script = """
    (function(){
      var root=document.documentElement;
      window.addEventListener('error',function(e){root.setAttribute('data-roam','error: '+e.message);});
      var charts=Array.prototype.slice.call(document.querySelectorAll('figure.chart svg'));
      var label=document.getElementById('cursor-time');
      function show(t){charts.forEach(function(svg){var l=+svg.dataset.left,w=+svg.dataset.width,d=+svg.dataset.duration;
        var x=(t===null||t<0||t>d)?-10:l+t/d*w;var c=svg.querySelector('.cursor');c.setAttribute('x1',x);c.setAttribute('x2',x);});
        if(t===null){label.style.display='none';}else{label.style.display='block';label.textContent=t.toFixed(2)+' s';}}
      charts.forEach(function(svg){
        svg.addEventListener('mousemove',function(e){var r=svg.getBoundingClientRect();var scale=svg.viewBox.baseVal.width/r.width;
          var x=(e.clientX-r.left)*scale;var l=+svg.dataset.left,w=+svg.dataset.width,d=+svg.dataset.duration;
          show(x<l||x>l+w?null:(x-l)/w*d);});
        svg.addEventListener('mouseleave',function(){show(null);});
      });
      if(root.getAttribute('data-roam')===null){root.setAttribute('data-roam','ready '+charts.length);}
    })();
    """
}

/// SVG content being built.
struct SVG {
    var content = ""
    mutating func add(_ element: String) { content += element }
}

func escape(_ text: String) -> String {
    var result = ""
    result.reserveCapacity(text.utf8.count)
    for character in text {
        switch character {
        case "&": result += "&amp;"
        case "<": result += "&lt;"
        case ">": result += "&gt;"
        case "\"": result += "&quot;"
        default: result.append(character)
        }
    }
    return result
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
func niceStep(_ raw: Double) -> Double {
    guard raw > 0 else { return 1 }
    var power = 1.0
    while power * 10 <= raw { power *= 10 }
    while power > raw { power /= 10 }
    for factor in [1.0, 2, 5, 10] where power * factor >= raw { return power * factor }
    return power * 10
}
