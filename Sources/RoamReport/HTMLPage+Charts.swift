import RoamCore
import RoamSystem
import ScenarioModel

// The charts and tables of a run, each appended to the page.
extension Page {
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

    /// A panel of step lines for each direction, from `top`, `height` high; `carried`, drawn
    /// over them thin and dotted, on the same scale.
    func panel(_ svg: inout SVG, top: Double, height: Double, label: String, unit: String, series: [String: ReportModel.Series],
               carried: [String: ReportModel.Series] = [:]) {
        let maximum = (series.values.map(\.maximum) + carried.values.map(\.maximum)).max() ?? 0
        let scale = maximum > 0 ? maximum * 1.15 : 1
        svg.add("<rect class=panel x=\"\(Page.left)\" y=\"\(top)\" width=\"\(plotWidth)\" height=\"\(height)\"/>")
        svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"\(top + height / 2 + 4)\" text-anchor=end>\(escape(label))</text>")
        svg.add("<text class=tick x=\"\(Page.left + 4)\" y=\"\(top + 11)\">\(escape(format3(scale)))\(escape(unit))</text>")
        for (kind, direction) in [("", "up"), ("", "down"), ("carried ", "up"), ("carried ", "down")] {
            guard let points = (kind.isEmpty ? series : carried)[direction]?.points, !points.isEmpty else { continue }
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
                svg.add("<polyline class=\"series \(kind)\(classToken(direction))\" points=\"\(segment)\"><title>\(escape(kind + direction))</title></polyline>")
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
        let title = "\(tag.map { "[\($0)] " } ?? "")link \(link.name) — up (solid), down (dashed)"
            + (link.carried.isEmpty ? "" : "; rate: as set, and what the link carried (thin, dotted: counted by the receiving interface)")
            + "; grey: carrier down, black: blackhole"
        let html = chart("link", title: title, height: 196) { svg in
            panel(&svg, top: 4, height: 50, label: "delay", unit: " ms", series: link.delay)
            panel(&svg, top: 60, height: 50, label: "loss", unit: " %", series: link.loss)
            panel(&svg, top: 116, height: 50, label: "rate", unit: " Mbit/s", series: link.rate, carried: link.carried)
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
                // A class from the report's data: only a known token (an escaped one would still
                // be markup of the data's choosing inside the attribute).
                let kind = span.satisfied ? classToken(span.type ?? "other") : "unsatisfied"
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
        let rows = model.run.summary.links
        guard !rows.isEmpty else { return }
        // Radio columns only where a link has a cellular radio's states.
        let radio = rows.contains { $0.promotions != 0 || $0.heldForRadio != 0 }
        let aqm = rows.contains { $0.aqmDropped != 0 }
        let columns = ["arrived", "delivered", "lost", "blackholed", "overflowed", "corrupted", "duplicated", "reordered"]
            + (aqm ? ["dropped by AQM"] : []) + (radio ? ["radio promotions", "held for the radio"] : [])
        section("Packets (userspace emulator)")
        body += "<table><thead><tr><th>link</th><th>direction</th>" + columns.map { "<th>\($0)</th>" }.joined() + "</tr></thead><tbody>"
        for row in rows {
            body += "<tr><td>\(escape(row.link))</td><td>\(escape(row.direction))</td>"
            let counts = [row.arrived, row.delivered, row.lost, row.blackholed, row.overflowed, row.corrupted, row.duplicated, row.reordered]
                + (aqm ? [row.aqmDropped] : []) + (radio ? [row.promotions, row.heldForRadio] : [])
            body += counts.map { "<td class=num>\($0)</td>" }.joined() + "</tr>"
        }
        body += "</tbody></table>\n"
    }

    mutating func comparison(_ a: ReportModel, _ b: ReportModel) {
        section("Side by side")
        var rows: [(String, String, String)] = []
        func value(_ model: ReportModel, _ body: (RunSummary) -> String) -> String { body(model.run.summary) }
        rows.append(("result", value(a) { $0.passed ? "pass" : "FAIL" }, value(b) { $0.passed ? "pass" : "FAIL" }))
        rows.append(("backend, seed", value(a) { "\($0.backend), \($0.seed)" }, value(b) { "\($0.backend), \($0.seed)" }))
        // Each run's workloads by name, looked up once each: linear in the workloads.
        func byName(_ model: ReportModel) -> [String: RunSummary.Workload] {
            var result: [String: RunSummary.Workload] = [:]
            for workload in model.run.summary.workloads where result[workload.name] == nil { result[workload.name] = workload }
            return result
        }
        let (summariesA, summariesB) = (byName(a), byName(b))
        for name in HTMLReport.ordered([a.workloads.map(\.name), b.workloads.map(\.name)]) {
            func figure(_ summaries: [String: RunSummary.Workload], _ pick: (RunSummary.Workload) -> String?) -> String {
                guard let workload = summaries[name] else { return "–" }
                return pick(workload) ?? "–"
            }
            func milliseconds(_ duration: Duration?) -> String { format3((duration ?? .zero).seconds * 1000) }
            typealias Pick = (RunSummary.Workload) -> String?
            let transport: Pick = { "\($0.mode), \($0.transfer?.transport ?? "tcp")" }
            let throughput: Pick = { workload in
                guard let bits = workload.transfer?.throughput else { return nil }
                return "\(format3((Double(bits) / 1e4).rounded() / 100)) Mbit/s"
            }
            let completed: Pick = { $0.completed ? "yes" : "no" }
            let connections: Pick = { workload in workload.transfer.map { "\($0.connections), \($0.handovers)" } }
            let gap: Pick = { workload in workload.transfer?.longestGap.map { "\(milliseconds($0.length)) ms" } }
            let stalls: Pick = { workload in workload.stream.map { "\($0.stalls.count) (\(milliseconds($0.longestStall)) ms)" } }
            let requests: Pick = { workload in workload.requests.map { "\($0.succeeded) / \($0.failed)" } }
            let firstByte: Pick = { workload in
                workload.requests.map { "\(milliseconds($0.timeToFirstByte.p50)) / \(milliseconds($0.timeToFirstByte.max)) ms" }
            }
            let exitCode: Pick = { workload in workload.command?.exitCode.map(String.init) }
            let lookups: Pick = { workload in
                workload.lookups.map { "\($0.succeeded) / \($0.failed), \(milliseconds($0.duration.p50)) / \(milliseconds($0.duration.max)) ms" }
            }
            let picks: [(String, Pick)] = [
                ("mode, transport", transport), ("throughput", throughput), ("completed", completed),
                ("connections, handovers", connections), ("longest gap", gap), ("stalls (longest)", stalls),
                ("requests ok / failed", requests), ("time to first byte p50 / max", firstByte), ("exit code", exitCode),
                ("lookups ok / failed, p50 / max", lookups),
            ]
            for (label, pick) in picks {
                let left = figure(summariesA, pick), right = figure(summariesB, pick)
                if left == "–" && right == "–" { continue }
                rows.append(("\(name): \(label)", left, right))
            }
        }
        for node in HTMLReport.ordered([a.nodes.map(\.name), b.nodes.map(\.name)]) {
            rows.append(("\(node): path updates", "\(a.run.summary.pathUpdates[node] ?? 0)", "\(b.run.summary.pathUpdates[node] ?? 0)"))
        }
        body += "<table class=comparison><thead><tr><th></th><th>A: \(escape(a.run.directory))</th><th>B: \(escape(b.run.directory))</th></tr></thead><tbody>"
        for (label, left, right) in rows {
            body += "<tr\(left != right ? " class=differs" : "")><td>\(escape(label))</td><td>\(escape(left))</td><td>\(escape(right))</td></tr>"
        }
        body += "</tbody></table>\n"
    }
}
