import RoamSystem
import ScenarioModel

/// The page being built.
struct Page {
    let duration: Double
    /// The page so far; the chart and table builders in the extensions add to it.
    var body = ""
    private let title: String
    var chartCount = 0
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
        let passed = s.passed
        let cancelled = s.cancelled
        let verdict = cancelled ? "CANCELLED" : passed ? "PASS" : "FAIL"
        body += "<header class=\"run\"><h1>\(tag.map { "<span class=tag>\($0)</span> " } ?? "")\(escape(model.run.scenario)) "
        body += "<span class=\"verdict \(passed && !cancelled ? "pass" : "fail")\">\(verdict)</span></h1>\n"
        if let description = s.description { body += "<p>\(escape(description))</p>\n" }
        var facts: [(String, String)] = [
            ("run", s.runID), ("started", s.started),
            ("backend", "\(s.backend) (\(s.backendReason))"),
            ("seed", String(s.seed)),
            ("duration", "\(format3(s.duration.seconds)) s" + (s.endedAt < s.duration ? ", ended at \(format3(s.endedAt.seconds)) s" : "")),
            ("directory", model.run.directory),
        ]
        if s.timeScale != 1 { facts.append(("time scale", format3(s.timeScale))) }
        body += "<dl>" + facts.map { "<dt>\(escape($0.0))</dt><dd>\(escape($0.1))</dd>" }.joined() + "</dl>\n"
        if let fidelity = s.fidelity, !fidelity.faithful {
            body += "<div class=\"note fail unfaithful\"><strong>Not faithful:</strong> this run did not play exactly what its scenario asked; "
                + "its figures may not be the network's.<ul>"
                + fidelity.problems.map { "<li>\(escape($0))</li>" }.joined() + "</ul></div>\n"
        }
        for note in s.notes { body += "<p class=note>note: \(escape(note))</p>\n" }
        for failed in s.timeline.failed {
            body += "<p class=\"note fail\">change to \(escape(failed.link)) failed: \(escape(failed.error))</p>\n"
        }
        body += "</header>\n"
    }

    mutating func expectations(_ model: ReportModel, tag: String? = nil) {
        let rows = model.run.summary.expectations
        body += "<h2>Expectations\(tag.map { " (\($0))" } ?? "")</h2>\n"
        guard !rows.isEmpty else {
            body += "<p>The scenario has no expectations.</p>\n"
            return
        }
        body += "<table class=expectations><thead><tr><th>subject</th><th>requirement</th><th>measured</th><th>detail</th><th>result</th></tr></thead><tbody>\n"
        for row in rows {
            let passed = row.passed
            body += "<tr class=\(passed ? "pass" : "fail")><td>\(escape(row.subject))</td>"
            body += "<td>\(escape(row.requirement))</td><td>\(escape(row.measured))</td>"
            body += "<td>\(escape(row.detail ?? ""))</td><td class=result>\(passed ? "pass" : "FAIL")</td></tr>\n"
        }
        body += "</tbody></table>\n"
    }


    func finish() -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><meta name="generator" content="roam">
        <meta http-equiv="Content-Security-Policy" content="\(Page.contentSecurityPolicy)">
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
}


extension Page {
    /// What the page may load and run: nothing from anywhere, its own inline style, and its one
    /// script by hash, so that markup a report's data could smuggle in (an inline script, an
    /// event handler, a `javascript:` link) would not run even past the escaping.
    static let contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        + "script-src 'sha256-\(SHA256.base64(SHA256.digest(script.utf8)))'; base-uri 'none'; form-action 'none'"
}

/// A value from a report made safe as one token of a `class` attribute: ASCII letters, digits,
/// `-` and `_` kept, anything else dropped (`other` when nothing is left).
func classToken(_ text: String) -> String {
    let kept = String(text.unicodeScalars.filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") }
        .prefix(64).map(Character.init))
    return kept.isEmpty ? "other" : kept
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
        case "'": result += "&#39;"
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
