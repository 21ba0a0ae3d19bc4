import Foundation
import Glibc
import Netlink
import Testing
import TestSupport

/// Headless Chromium from Debian (`scripts/setup.sh --browser`), run as the tests' user.
enum Browser {
    static let path: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { access($0, X_OK) == 0 }

    /// Chromium's profile: a directory of this process's own (never a name another user could
    /// make first), removed at exit.
    static let profile: String = {
        do { return try TestEnvironment.processScratchDirectory("roam-chromium") } catch { fatalError("cannot make a directory under /tmp: \(error)") }
    }()

    static func arguments(_ extra: [String]) -> [String] {
        ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--disable-extensions",
         "--user-data-dir=" + profile] + extra
    }

    /// The page's DOM after its scripts ran.
    static func dom(of file: String) throws -> String {
        let result = try RunningCommand.run(path!, arguments(["--dump-dom", "file://" + file]), timeout: 90)
        #expect(result.status == 0, "chromium: \(result.error.suffix(500))")
        return result.output
    }

    /// Renders the page to a PNG of `width`×`height` and returns its bytes.
    static func screenshot(of file: String, to png: String, width: Int, height: Int) throws -> [UInt8] {
        let result = try RunningCommand.run(path!, arguments(["--window-size=\(width),\(height)", "--screenshot=\(png)", "file://" + file]), timeout: 90)
        #expect(result.status == 0, "chromium: \(result.error.suffix(500))")
        return Array((try? Data(contentsOf: URL(fileURLWithPath: png))) ?? Data())
    }

    /// The width and height in a PNG's IHDR chunk.
    static func pngSize(_ bytes: [UInt8]) -> (Int, Int)? {
        guard bytes.count > 24, bytes[0..<8].elementsEqual([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { return nil }
        func be32(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        return (be32(16), be32(20))
    }
}

/// `roam report`: the HTML report, re-rendered, compared, and loaded in a real browser.
@Suite(.enabled(if: TestEnvironment.roamExecutable != nil, "the roam executable was not built (run `swift build` first)"), .serialized)
struct ReportCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    /// A copy of `Tests/Fixtures/report` in a fresh directory.
    func fixtureCopy() throws -> String {
        let directory = try TestEnvironment.scratchDirectory("roam-report-test")
        for file in ["summary.json", "timeline.jsonl"] {
            try FileManager.default.copyItem(atPath: NetemHost.root + "/Tests/Fixtures/report/" + file, toPath: directory + "/" + file)
        }
        return directory
    }

    @Test func reRendersAReportAndRefusesWhatIsNotOne() throws {
        let directory = try fixtureCopy()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try RunningCommand.run(roam, ["report", directory])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains(directory + "/report.html"))
        let html = try String(contentsOfFile: directory + "/report.html", encoding: .utf8)
        #expect(html.contains("data-charts=\"6\""))

        let missing = try RunningCommand.run(roam, ["report", directory + "/nothing-here"])
        #expect(missing.status == 2)
        #expect(missing.error.contains("nothing-here is not a run's report directory: \(directory)/nothing-here: no such directory"))
        #expect(mkdir(directory + "/empty", 0o755) == 0)
        let empty = try RunningCommand.run(roam, ["report", directory + "/empty"])
        #expect(empty.status == 2)
        #expect(empty.error.contains("is not a run's report directory: cannot read summary.json"))
        try "{\"scenario\":".write(toFile: directory + "/summary.json", atomically: true, encoding: .utf8)
        let broken = try RunningCommand.run(roam, ["report", directory])
        #expect(broken.status == 2)
        #expect(broken.error.contains("summary.json is not valid JSON"))
        let three = try RunningCommand.run(roam, ["report", directory, directory, directory])
        #expect(three.status == 2)
        #expect(three.error.contains("name one report directory, or two to compare"))
    }

    @Test(.enabled(if: Browser.path != nil, "needs chromium (scripts/setup.sh --browser)"))
    func theReportLoadsInABrowserWithItsChartsAndNoScriptError() throws {
        let directory = try fixtureCopy()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try RunningCommand.run(roam, ["report", directory]).status == 0)
        let dom = try Browser.dom(of: directory + "/report.html")
        // The page's script marks <html> ready with the charts it wired up, or with the first error.
        #expect(dom.contains("data-roam=\"ready 6\""), "\(dom.prefix(300))")
        #expect(dom.components(separatedBy: "<figure class=\"chart").count - 1 == 6)
        #expect(dom.contains("class=\"band stall\""))
        let png = try Browser.screenshot(of: directory + "/report.html", to: directory + "/report.png", width: 1100, height: 1800)
        let size = try #require(Browser.pngSize(png), "chromium wrote no PNG")
        #expect(size.0 == 1100 && size.1 == 1800)
        // A blank page of that size compresses to a few kilobytes; the charts do not.
        #expect(png.count > 30_000, "\(png.count) bytes")
    }

    /// A report whose timeline was written by someone else: a path's interface type and a
    /// workload's name carry markup. Nothing of it runs: the values are escaped for where they
    /// stand, classes take only known tokens, and the page's policy allows its own script only.
    @Test(.enabled(if: Browser.path != nil, "needs chromium (scripts/setup.sh --browser)"))
    func markupInAReportsDataNeverRuns() throws {
        let directory = try fixtureCopy()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let payload = #"x\"><script>document.documentElement.setAttribute('data-pwned','1')</script><img src=x onerror=\"document.documentElement.setAttribute('data-pwned','2')\">"#
        let path = #"{"t":1.5,"type":"path","node":"phone","summary":"satisfied via wifi","path":{"status":"satisfied","isExpensive":false,"isConstrained":false,"primaryInterface":"wifi","interfaces":[{"name":"wifi","type":"PAYLOAD"},{"name":"cell","type":"cellular"}]}}"#
            .replacingOccurrences(of: "PAYLOAD", with: payload)
        let mark = #"{"t":2.0,"type":"mark","text":"it's <b onmouseover='x'>a mark</b>"}"#
        let timeline = try String(contentsOfFile: directory + "/timeline.jsonl", encoding: .utf8)
        try (timeline + path + "\n" + mark + "\n").write(toFile: directory + "/timeline.jsonl", atomically: true, encoding: .utf8)
        let result = try RunningCommand.run(roam, ["report", directory])
        #expect(result.status == 0, "\(result.error)")
        let html = try String(contentsOfFile: directory + "/report.html", encoding: .utf8)
        #expect(html.contains("class=\"path xscriptdocumentdocumentElementsetAttributedata-pwned1script"), "the type became a plain token")
        #expect(html.components(separatedBy: "<script").count - 1 == 1, "one script, the page's own")
        #expect(!html.contains("onerror=") && !html.contains("onmouseover='"), "no attribute of the data's making")
        #expect(html.contains("it&#39;s &lt;b onmouseover=&#39;x&#39;&gt;"))
        #expect(html.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-"))
        let dom = try Browser.dom(of: directory + "/report.html")
        // The payload stays text (its words appear, escaped); an attribute it set would read data-pwned="1".
        #expect(!dom.contains("data-pwned=\""), "markup from the report's data ran")
        #expect(dom.contains("data-roam=\"ready "), "the page's own script still runs under its policy: \(dom.prefix(300))")
    }

    /// Two real runs of one scenario, `mode: none` and `mode: handover`, compared in one page.
    @Test(.enabled(if: TestEnvironment.isRoot && Browser.path != nil, "needs root and chromium"))
    func twoRealRunsComparedSideBySide() throws {
        let base = try TestEnvironment.scratchDirectory("roam-compare")
        defer { try? FileManager.default.removeItem(atPath: base) }
        var directories: [String] = []
        for mode in ["none", "handover"] {
            let scenario = """
                name: compare-\(mode)
                seed: 3
                duration: 6s
                nodes: { phone: {}, server: {} }
                links:
                  - { name: wifi, between: [phone, server], profile: wifi }
                  - { name: cell, between: [phone, server], profile: lte }
                timeline:
                  - { at: 2s, link: wifi, blackhole: true }
                workloads:
                  - { name: api, kind: requests, from: server, to: phone, size: 20kb, interval: 250ms, timeout: 2s, mode: \(mode) }
                expect:
                  - { workload: api, maxTimeToFirstByte: 1s }
                """
            try scenario.write(toFile: "\(base)/\(mode).yaml", atomically: true, encoding: .utf8)
            let run = try RunningCommand.run(roam, ["run", "\(base)/\(mode).yaml", "--backend", "userspace", "--quiet", "--report", "\(base)/\(mode)"], timeout: 60)
            #expect(run.status == (mode == "none" ? 1 : 0), "\(mode): \(run.output) \(run.error)")
            #expect(access("\(base)/\(mode)/report.html", R_OK) == 0, "roam run writes report.html")
            directories.append("\(base)/\(mode)")
        }
        let compared = try RunningCommand.run(roam, ["report"] + directories + ["-o", "\(base)/comparison.html"])
        #expect(compared.status == 0, "\(compared.error)")
        let html = try String(contentsOfFile: "\(base)/comparison.html", encoding: .utf8)
        #expect(html.contains("<td>result</td><td>FAIL</td><td>pass</td>"))
        #expect(html.contains("[A] workload api") && html.contains("[B] workload api"))
        let dom = try Browser.dom(of: "\(base)/comparison.html")
        // Per run: 2 links, 1 workload, 2 nodes.
        #expect(dom.contains("data-roam=\"ready 10\""), "\(dom.prefix(300))")
    }
}
