import Foundation
import Glibc
import Netlink
import PathMonitor
import RoamFuzzTargets
import RoamCore
import RoamSystem
@testable import RoamReport
@testable import ScenarioModel
@testable import Simulator
import TestSupport
import Testing

/// Hostile and careless input: every class of problem found by hand and by fuzzing is a clear
/// error with its place, or a correct result; never a trap, a hang or unbounded work.
@Suite struct HostileInputTests {
    static let base = ScenarioDiagnosticsTests.valid

    func errors(_ extra: String, base: String = base) -> [String] { ScenarioDiagnosticsTests().errors(extra, base: base) }

    func warnings(_ extra: String, base: String = base) -> [String] {
        ScenarioReader.parse(base + "\n" + extra, file: "t.yaml").diagnostics.filter { $0.severity == .warning }.map { "\($0.line):\($0.column): \($0.message)" }
    }

    // MARK: - Arithmetic: numbers that parse but would overflow later

    @Test(arguments: [
        ("    rate: 1000000gbit", "9:11: rate must be between 8bit and 100gbit, not 1000000gbit"),
        ("    delay: 99999999999h", "9:12: delay: '99999999999h' is too long a duration; the longest a scenario holds is 86400s"),
        ("    delay: 2m", "9:12: delay must be at most 60s, not 2m"),
        ("    limit: 99999999999999999999999", "9:12: limit (packets) must be between 1 and 1000000, not 99999999999999999999999"),
    ])
    func linkNumbersAreBounded(_ line: String, _ expected: String) {
        #expect(errors(line) == [expected])
    }

    @Test(arguments: [
        ("size: 99999999999999999999gb", "14:11: size: '99999999999999999999gb' is too large a size; the largest is 1099511627776 bytes (1tib)"),
        ("size: 2tib", "14:11: size must be between 1b and 1tib, not 2tib"),
        ("size: 1.5b", "14:11: size: '1.5b' is not a whole number of bytes (1.5); sizes count whole bytes"),
    ])
    func bulkSizesAreWholeAndBounded(_ line: String, _ expected: String) {
        #expect(errors("workloads:\n  - name: w\n    kind: bulk\n    from: server\n    to: phone\n    " + line) == [expected])
    }

    @Test(arguments: [
        ("requestSize: 99999999999999999999gb", "14:18: requestSize: '99999999999999999999gb' is too large a size; the largest is 1099511627776 bytes (1tib)"),
        ("requestSize: 1gb", "14:18: requestSize must be between 16b and 64mib, not 1gb"),
        ("requestSize: 8b", "14:18: requestSize must be between 16b and 64mib, not 8b"),
        ("interval: 1ns", "14:15: interval must be at least 1ms, not 1ns"),
    ])
    func requestsAreBounded(_ line: String, _ expected: String) {
        #expect(errors("workloads:\n  - name: w\n    kind: requests\n    from: server\n    to: phone\n    " + line) == [expected])
    }

    @Test func aWholeNumberTooLargeSaysSoNotThatItIsNotWhole() {
        #expect(errors("seed: 99999999999999999999") == ["9:7: seed must be between 0 and 9223372036854775807, not 99999999999999999999"])
        #expect(errors("seed: 12.5") == ["9:7: seed must be a whole number, not '12.5'"])
    }

    @Test func numbersPrintWithoutTrappingHoweverLarge() {
        #expect(Rate(bitsPerSecond: 1e30).description == "1e+21gbit")
        #expect(format3(1e19) == "1e+19")
        #expect(format3(.infinity) == "inf")
        #expect(trim(-9.5e18) == "-9.5e+18")
    }

    @Test func aHugeTraceTimestampIsRefusedWithItsLine() {
        let tooLate = "1\n2\n86400001\n"
        guard case .failure(let problem) = DeliveryTrace.parse(tooLate) else {
            Issue.record("a trace past 24 h parsed")
            return
        }
        #expect(problem.line == 3)
        #expect(problem.message == "a millisecond past the longest trace, 86400000 ms (86400s)")
        guard case .failure(let overflow) = DeliveryTrace.parse("5\n99999999999999999999999\n") else {
            Issue.record("an Int64 overflow parsed")
            return
        }
        #expect(overflow.line == 2 && overflow.message.hasPrefix("a millisecond past the longest trace"))
        // The longest trace allowed is summarised without allocating per millisecond.
        guard case .success(let longest) = DeliveryTrace.parse(String(repeating: "0\n", count: 60) + "86400000\n") else {
            Issue.record("the longest trace was refused")
            return
        }
        #expect(MahimahiImport.summarize(longest).opportunities == 61)
        // Two opportunities a day is below the slowest rate Roam plays.
        guard case .failure(let slow) = DeliveryTrace.parse("0\n86400000\n") else {
            Issue.record("a trace below 8 bit/s parsed")
            return
        }
        #expect(slow.message.hasPrefix("the trace's mean rate, ") && slow.message.contains("is below 8bit"))
    }

    @Test func aReportWithHugeOrMissingNumbersRenders() throws {
        let summary = #"{"scenario":"x","durationSeconds":1e308,"endedAtSeconds":1e19,"workloads":[{"name":"w","kind":"stream","stream":{"stalls":[{"start":1e300,"ongoing":true}],"longestStallMs":1e999}}]}"#
        let timeline = #"{"t":-1e300,"type":"sample","workload":"w","bytes":1e300,"throughputBps":1e308,"bufferedMs":-5}"# + "\n"
            + #"{"t":1e19,"type":"link","link":"l","action":"set","direction":"up","conditions":{"delayMs":1e400,"rateBps":-1}}"#
        let run = try RecordedRun.parse(directory: "d", summary: summary, timeline: timeline)
        let html = HTMLReport.render(run)
        #expect(html.contains("data-roam") || html.contains("<svg"))
        #expect(ReportModel(run).duration == 86400)
    }

    @Test func aLoneHighSurrogateEscapeIsReadNotTrapped() throws {
        // Its arithmetic with the next escape underflowed before.
        #expect(try JSONValue.parse(#""\ud800\u0041""#) == .string("\u{FFFD}A"))
        #expect(try JSONValue.parse(#""\ud83d\ude00""#) == .string("😀"))
    }

    // MARK: - Unbounded work

    /// Thousands of problems on one long line (issue 30, item 11): the first 100 are kept, each
    /// quoting a window of its line, then a count of the rest; what is printed is bounded by a
    /// constant, not by problems × line length.
    @Test func manyProblemsOnOneLongLineCostAConstant() {
        let keys = (0..<30_000).map { "k\($0): 1" }.joined(separator: ",")
        let text = "name: x\nduration: 1s\nnodes: {a: {}, b: {}}\nlinks: [{name: l, between: [a,b], \(keys)}]\n"
        let clock = ContinuousClock()
        var outcome: ScenarioReader.Outcome?
        let elapsed = clock.measure { outcome = ScenarioReader.parse(text, file: "t.yaml") }
        let diagnostics = outcome?.diagnostics ?? []
        #expect(diagnostics.count == 101)
        #expect(diagnostics.last?.message == "29900 more problems not shown (Roam shows the first 100); fix these and read the file again")
        #expect(diagnostics.last?.severity == .error)
        let printed = diagnostics.reduce(0) { $0 + $1.description.utf8.count }
        #expect(printed < 100 * 1024, "\(printed) bytes printed for a \(text.utf8.count)-byte file")
        #expect(diagnostics.allSatisfy { ($0.sourceLine?.unicodeScalars.count ?? 0) <= 200 })
        #expect(outcome?.scenario == nil)
        #expect(elapsed < .seconds(10), "\(elapsed)")
    }

    /// Aliases that stand for far more than the file (issue 30, item 12): an anchored mapping of
    /// a thousand unknown keys aliased a thousand times, and aliases of aliases, are refused
    /// before anything walks them.
    @Test func aliasesThatExpandPastTheFileAreRefused() {
        let keys = (0..<1000).map { "  u\($0): 1" }.joined(separator: "\n")
        let links = String(repeating: "  - *m\n", count: 1000)
        let wide = "name: x\nduration: 1s\nnodes: {a: {}, b: {}}\nbase: &m\n\(keys)\nlinks:\n\(links)"
        let deep = "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
            + "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
        for text in [wide, deep] {
            let clock = ContinuousClock()
            var errors: [String] = []
            let elapsed = clock.measure { errors = ScenarioReader.parse(text, file: "t.yaml").errors.map(\.message) }
            #expect(errors.count == 1)
            #expect(errors.first?.hasPrefix("the file's aliases (*name) expand to more than \(ScenarioReader.maximumValues(forBytes: text.utf8.count)) values") == true,
                    "\(errors)")
            #expect(elapsed < .seconds(10), "\(elapsed)")
        }
        // A file that uses aliases as people do is read.
        let modest = "name: x\nduration: 5s\nnodes: {a: {}, b: {}}\nlinks:\n  - &l {name: l, between: [a, b], delay: 5ms}\n"
            + "timeline:\n  - {at: 1s, link: l, set: &s {delay: 9ms}}\n  - {at: 2s, link: l, set: *s}\n"
        #expect(ScenarioReader.parse(modest, file: "t.yaml").errors.isEmpty)
    }

    /// What an export, a comparison and an import cost grows with what they hold (issue 30,
    /// item 14): 20,000 link changes export to a size in proportion, with the notes bounded;
    /// two runs of 2,000 workloads compare in one pass.
    @Test func exportsAndComparisonsGrowWithWhatTheyHold() throws {
        let events = (0..<20_000).map { "  - {at: \($0 * 10)ms, link: wifi, set: {delay: \($0 % 97 + 1)ms}}" }.joined(separator: "\n")
        let text = "name: many\nduration: 5m\nnodes: {phone: {}, server: {}}\nlinks:\n  - {name: wifi, between: [phone, server], rate: 1gbit}\ntimeline:\n\(events)\n"
        let scenario = try #require(ScenarioReader.parse(text, file: "t.yaml").scenario)
        let clock = ContinuousClock()
        var result: ChaosMeshExport.Result?
        let elapsed = try clock.measure { result = try ChaosMeshExport.export(scenario) }
        let export = try #require(result)
        #expect(export.yaml.utf8.count < 1024 * (export.steps + 16), "\(export.yaml.utf8.count) bytes for \(export.steps) steps")
        #expect(export.notes.count <= 101)
        #expect(export.notes.filter { $0.contains("packets in flight") }.count <= 1, "one note per link for packets in flight")
        #expect(elapsed < .seconds(60), "\(elapsed)")

        let workloads = (0..<2000).map { #"{"name":"w\#($0)","kind":"bulk","mode":"none","bytesReceived":1,"connections":1}"# }.joined(separator: ",")
        let summary = #"{"scenario":"s","durationSeconds":10,"workloads":["# + workloads + "]}"
        let timeline = (0..<2000).map { #"{"t":1,"type":"sample","workload":"w\#($0)","bytes":1,"throughputBps":8}"# }.joined(separator: "\n")
        let run = try RecordedRun.parse(directory: "d", summary: summary, timeline: timeline)
        var page = ""
        let comparing = clock.measure { page = HTMLReport.render(comparing: run, run) }
        #expect(page.contains("w1999: connections, handovers"))
        #expect(comparing < .seconds(30), "\(comparing)")
    }

    @Test func onlyRegularFilesUnderTheCapAreRead() throws {
        for path in ["/dev/zero", "/dev/urandom", "/"] {
            #expect(throws: SafePathError.self) { _ = try readTextFile(atPath: path, maximumBytes: 1 << 20) }
            do throws(SafePathError) {
                _ = try readTextFile(atPath: path, maximumBytes: 1 << 20)
            } catch {
                #expect(error.code == .notRegularFile)
                #expect(error.message.contains("only regular files are read"))
            }
        }
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("roam-fifo-\(getpid())").path
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        // No writer: a blocking open would never return.
        #expect(throws: SafePathError.self) { try readTextFile(atPath: fifo, maximumBytes: 1 << 20) }

        let big = FileManager.default.temporaryDirectory.appendingPathComponent("roam-big-\(getpid())").path
        let fd = open(big, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
        #expect(fd >= 0)
        #expect(ftruncate(fd, off_t(ScenarioLimits.maximumFileSize + 1)) == 0)
        close(fd)
        defer { unlink(big) }
        let outcome = ScenarioReader.read(contentsOf: big)
        #expect(outcome.errors.map(\.message) == ["cannot read the file: \(big) is larger than 32 MiB, the most Roam reads from such a file"])
    }

    @Test func aTraceThatIsADeviceIsRefused() {
        let device = String(repeating: "../", count: 12) + "dev/zero"
        #expect(errors("    trace: \(device)") == ["9:12: cannot read trace '\(device)': not a regular file"])
        #expect(errors("    trace: /dev/zero") == ["9:12: trace '/dev/zero' is an absolute path; a trace is named relative to the scenario file's directory (for example ../traces/lte-steady.trace)"])
    }

    @Test func timelinesAreBoundedInTheChangesTheyMake() {
        let flaps = errors("timeline:\n  - {at: 0s, link: wifi, flap: {period: 10ms}}", base: Self.base.replacingOccurrences(of: "duration: 20s", with: "duration: 24h"))
        #expect(flaps == ["10:5: the timeline makes more than 100000 link changes by this event (this flap alone makes 17280000: two every 10ms until 86400s; use a longer period or end it sooner); Roam plays at most 100000 in a scenario"])
        #expect(errors("timeline:\n  - {at: 0s, link: wifi, flap: {period: 1ns}}") == ["10:41: period must be at least 1ms, not 1ns"])
        // A long ramp takes longer steps instead of growing without bound.
        let ramp = TimelineEvent(at: .zero, link: "wifi", .ramp(to: Impairment(delay: .milliseconds(50)), over: .seconds(3600)))
        #expect(TimelineSchedule.changeCount(of: ramp) == TimelineSchedule.maximumRampSteps)
        let scenario = Scenario(name: "ramp", duration: .seconds(3600), nodes: [ScenarioNode("a"), ScenarioNode("b")],
                                links: [LinkSpec("wifi", between: ("a", "b"))], timeline: [ramp])
        #expect(TimelineSchedule(scenario: scenario).changes.count == 2 * TimelineSchedule.maximumRampSteps)
        // A scenario built in Swift is held to the same bound before it runs.
        var flapping = scenario
        flapping.timeline = [TimelineEvent(at: .zero, link: "wifi", .flap(period: .milliseconds(10), duty: 0.5, until: .seconds(3600)))]
        #expect(flapping.problems == ["the timeline makes 720000 link changes; at most 100000"])
    }

    /// The descriptors a run reserves grow with the scenario, not with its square: 500 phones
    /// with two links and two workloads each stay within a hard limit of 20,000 (an estimate
    /// before wanted 39,000 for them), while each phone still gets room for its own races: more
    /// than the 21 a phone a run of them was measured to take (``DescriptorCosts``).
    @Test func theDescriptorsARunNeedsGrowLinearlyWithItsPhones() throws {
        func phones(_ count: Int) throws -> Int {
            var yaml = "name: many\nduration: 5s\nnodes:\n  server: {}\n"
            yaml += (1...count).map { "  phone\($0): {}\n" }.joined()
            yaml += "links:\n" + (1...count).map { "  - { name: wifi\($0), between: [phone\($0), server] }\n  - { name: cell\($0), between: [phone\($0), server] }\n" }.joined()
            yaml += "workloads:\n" + (1...count).map { "  - { name: video\($0), kind: stream, from: server, to: phone\($0), bitrate: 1mbit }\n  - { name: api\($0), kind: requests, from: server, to: phone\($0) }\n" }.joined()
            let scenario = try #require(ScenarioReader.parse(yaml, file: "many.yaml").scenario)
            return ScenarioRunner.descriptorsNeeded(for: scenario)
        }
        let one = try phones(1), ten = try phones(10), hundred = try phones(100), crowd = try phones(500)
        #expect(crowd < 18_000, "\(crowd): room under 20,000")
        #expect(hundred - ten == 10 * (ten - one), "linear: \(one), \(ten), \(hundred)")
        // A phone (a node, two links, two workloads): above the 21 measured, with room.
        #expect(ten - one >= 9 * 30, "\(ten - one) for 9 phones")
        // Each workload: its signal and listeners, and 2 interfaces' connections with both ends of each.
        #expect(one >= DescriptorCosts.process + 2 * DescriptorCosts.node + 2 * (4 + 3 * 2))
    }

    // MARK: - Names and paths

    @Test func aScenarioNameCannotLeadOutOfTheReportDirectory() {
        let outcome = ScenarioReader.parse(Self.base.replacingOccurrences(of: "name: t", with: "name: ../x"), file: "t.yaml")
        #expect(outcome.errors.map(\.message) == ["scenario name '../x' must start with a letter and use only letters, digits, '-' and '_', at most 64 characters"])
        #expect(ScenarioRunner.pathComponent("../../etc/x") == "------etc-x")
        #expect(ScenarioRunner.pathComponent("") == "scenario")
        let built = Scenario(name: "../x", duration: .seconds(1), nodes: [ScenarioNode("a")])
        #expect(built.problems.first?.hasPrefix("scenario name '../x'") == true)
    }

    // MARK: - Nothing the user wrote vanishes

    @Test(arguments: [
        ("run: \"\"", "13:10: run is empty; write the command to run, e.g. run: \"curl -sS http://$ROAM_SERVER_ADDR/\""),
        ("run: []", "13:10: run needs a command: [program, arguments...]"),
        ("run: [\"\", x]", "13:11: the program to run is empty; the first item of run names it"),
        ("run: \"a\\0b\"", "13:10: run holds a NUL character, which no program can receive; remove it"),
        ("run: true\n    env: {\"A=B\": x}", "14:11: environment variable name 'A=B' cannot be passed to a program: a name is not empty and has no '=' or NUL (write NAME: value)"),
        ("run: true\n    env: {A: \"x\\0\"}", "14:14: env A holds a NUL character, which no program can receive; remove it"),
    ])
    func commandsThatCannotRunAreRefused(_ line: String, _ expected: String) {
        let text = "workloads:\n  - name: c\n    kind: command\n    from: phone\n    \(line)\nexpect:\n  - {workload: c, exitCode: 0}"
        #expect(errors(text) == [expected])
    }

    // MARK: - Nonsense is refused, doubtful things warned about

    @Test(arguments: [
        ("timeline:\n  - {at: 1s, link: wifi, down: true, direction: up}", "10:38: direction does not apply to 'down': a carrier goes down both ways at once; for one direction only, use blackhole with direction"),
        ("timeline:\n  - {at: 1s, link: wifi, up: true}", "10:5: link 'wifi' is up at 1s: no down comes before this up; remove it, or add a down before it"),
        ("timeline:\n  - {at: 1s, link: wifi, down: true}\n  - {at: 2s, link: wifi, down: true}", "11:5: link 'wifi' is down already (since 1s); remove this down, or add an up before it"),
        ("timeline:\n  - {at: 1s, link: wifi, blackhole: false}", "10:5: no blackhole is on for link 'wifi' at 1s; blackhole: false lifts one that an earlier blackhole: true set"),
        ("timeline:\n  - {at: 1s, link: wifi, direction: up, blackhole: true}\n  - {at: 2s, link: wifi, direction: down, blackhole: false}", "11:5: no blackhole is on for link 'wifi' (down) at 2s; blackhole: false lifts one that an earlier blackhole: true set"),
        ("expect:\n  - {node: phone, path: unsatisfied, within: 1s, after: {link: wifi, event: down}}", "10:57: the timeline has no down event on link 'wifi', so this expectation could never be checked; name an event the timeline holds"),
    ])
    func nonsenseIsRefused(_ extra: String, _ expected: String) {
        #expect(errors(extra) == [expected])
    }

    /// What used to validate and then fail at run time, lose a value silently or mean nothing
    /// (issue 30, item 17): each is refused with its place.
    @Test(arguments: [
        ("name: t\nduration: 20s\nnodes: {phone: {}, server: {}}\nlinks:\n  - {name: lo, between: [phone, server]}",
         "5:6: link name 'lo' is Linux's own (lo is every node's loopback; all and default name the interface settings of every interface); choose another"),
        ("name: t\nduration: 20s\nnodes: {phone: {}, server: {}}\nlinks:\n  - {name: default, between: [phone, server]}",
         "5:6: link name 'default' is Linux's own (lo is every node's loopback; all and default name the interface settings of every interface); choose another"),
        ("name: t\nduration: 20s\nnodes: {phone: {}, Phone: {}}\nlinks:\n  - {name: wifi, between: [phone, Phone]}",
         "3:20: node 'Phone' and node 'phone' both give commands ROAM_PHONE_ADDR, one address would be lost; rename one"),
        ("name: t\nduration: 20s\nnodes: {a-b: {}, a_b: {}}\nlinks:\n  - {name: wifi, between: [a-b, a_b]}",
         "3:18: node 'a_b' and node 'a-b' both give commands ROAM_A_B_ADDR, one address would be lost; rename one"),
        ("name: t\nduration: 20s\nnodes: {phone: {}, server: {}}\nlinks:\n  - {name: wifi, between: [phone, server]}\n  - {name: WiFi, between: [phone, server]}",
         "6:5: link 'WiFi' of node 'phone' and link 'wifi' of node 'phone' both give commands ROAM_PHONE_WIFI_ADDR, one address would be lost; rename one"),
        ("name: t\nduration: 20s\nnodes: {phone: {}, server: {}}\nlinks:\n  - {name: wifi, between: [phone, server], rate: 10mbit, up: {trace: ../traces/lte-steady.trace}}",
         "5:5: link 'wifi' (up) gets both a rate and a trace (from the link, its profile or its up block); a trace is the capacity: keep one"),
    ])
    func whatCouldNeverRunIsRefused(_ text: String, _ expected: String) {
        let errors = ScenarioReader.parse(text, file: "t.yaml", baseDirectory: Self.scenarios).errors.map { "\($0.line):\($0.column): \($0.message)" }
        #expect(errors == [expected])
    }

    static let scenarios = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scenarios").path

    @Test(arguments: [
        ("timeline:\n  - {at: 1s, link: wifi, flap: {period: 1s, until: 10s}}\n  - {at: 2s, link: wifi, flap: {period: 500ms, until: 5s}}",
         "11:5: link 'wifi' is flapping already, until 10s; a flap starts after the one before ends"),
        ("timeline:\n  - {at: 1s, link: wifi, set: {}}", "10:31: set changes nothing here: name what it sets (delay, jitter, delayCorrelation, distribution, rate, loss, duplicate, reorder, corrupt, limit, queue, trace)"),
        ("timeline:\n  - {at: 1s, link: wifi, set: {loss: 0x10%}}", "10:38: loss: '0x10%' is not a percentage; write it with a % sign: 0.5%, 40%"),
        ("timeline:\n  - {at: 1s, link: wifi, set: {loss: 1e1%}}", "10:38: loss: '1e1%' is not a percentage; write it with a % sign: 0.5%, 40%"),
        ("timeline:\n  - {at: 1s, link: wifi, set: {delay: !secret 5ms}}", "10:39: YAML tag '!secret' is not one Roam reads (a scenario's values are plain text, numbers with units and lists); remove it"),
        ("workloads:\n  - {name: w, kind: bulk, from: server, to: phone, size: 1mb}\nexpect:\n  - {workload: w, completes: true}\n  - {workload: w, completes: false}",
         "13:19: this contradicts the expectation at line 12 for workload 'w' (completes: true); keep one"),
    ])
    func nonsenseInATimelineOrExpectationsIsRefused(_ extra: String, _ expected: String) {
        #expect(errors(extra) == [expected])
    }

    @Test func aTraceMayStartWithAByteOrderMark() throws {
        guard case .success(let trace) = DeliveryTrace.parse([0xEF, 0xBB, 0xBF] + Array("5\n10\n".utf8)) else {
            Issue.record("a trace with a byte-order mark was refused, as scenarios are not")
            return
        }
        #expect(trace.opportunities == [5, 10])
    }

    @Test func whatMightMeanSomethingIsAcceptedOrWarnedAbout() {
        // An up after a flap's end is not an error: the flap leaves the carrier up... so this up is.
        #expect(errors("timeline:\n  - {at: 1s, link: wifi, flap: {period: 1s, until: 5s}}\n  - {at: 6s, link: wifi, up: true}")
            == ["11:5: link 'wifi' is up at 6s: no down comes before this up; remove it, or add a down before it"])
        // Inside a flap, explicit carrier events cut it short or stretch it: allowed.
        #expect(errors("timeline:\n  - {at: 1s, link: wifi, flap: {period: 1s, until: 5s}}\n  - {at: 2s, link: wifi, up: true}").isEmpty)
        // One-way blackholes lift one way at a time.
        #expect(errors("timeline:\n  - {at: 1s, link: wifi, blackhole: true}\n  - {at: 2s, link: wifi, direction: up, blackhole: false}\n  - {at: 3s, link: wifi, direction: down, blackhole: false}").isEmpty)
        // Out of order plays in time order, with a warning.
        let text = "timeline:\n  - {at: 5s, link: wifi, down: true}\n  - {at: 1s, link: wifi, set: {delay: 5ms}}"
        #expect(errors(text).isEmpty)
        #expect(warnings(text) == ["11:5: this event at 1s is listed after one at 5s (line 10); events play in time order, not in file order"])
        #expect(ScenarioReader.parse(Self.base + "\n" + text, file: "t.yaml").scenario?.timeline.map(\.at) == [.seconds(1), .seconds(5)])
    }

    @Test func workloadsNeedLinksBetweenTheirNodes() {
        let base = Self.base.replacingOccurrences(of: "  server: {}", with: "  server: {}\n  router: {}\n  lone: {}")
            + "\n  - name: uplink\n    between: [server, router]"
        #expect(errors("workloads:\n  - {name: w, kind: bulk, from: server, to: lone}", base: base)
            == ["14:41: no link joins 'server' and 'lone', directly or through other nodes; add a link between them"])
        // Through another node (they forward) is fine.
        #expect(errors("workloads:\n  - {name: w, kind: bulk, from: router, to: phone}", base: base).isEmpty)
    }

    // MARK: - Messages

    @Test func aLinkWithABadNameStillHasItsOtherKeysChecked() {
        let missing = errors("  - between: [phone, server]\n    type: wifi\n    delya: 5ms")
        #expect(missing == ["9:5: a link needs 'name'", "11:5: unknown key 'delya' in this link (did you mean 'delay'?)"])
        let long = errors("  - name: averyveryverylongname\n    between: [phone, server]\n    type: wifi")
        #expect(long == ["9:11: link name 'averyveryverylongname' must start with a letter and use only letters, digits, '-' and '_', at most 15 characters"])
    }

    @Test func aControlCharacterIsReportedWhereItIs() {
        let found = ScenarioReader.parse(Self.base + "\n    delay: 5\u{1}ms", file: "t.yaml").errors
        #expect(found.map { "\($0.line):\($0.column): \($0.message)" }
            == ["9:13: the control character U+0001 is not allowed in YAML; remove it (write it as an escape such as \"\\t\" inside a double-quoted string)"])
        #expect(found.first?.description.contains("\u{1}") == false)
    }

    @Test func aByteOrderMarkAndWindowsLineEndingsAreRead() {
        let windows = "\u{FEFF}" + Self.base.replacingOccurrences(of: "\n", with: "\r\n") + "\r\n    dealy: 5ms\r\n"
        let outcome = ScenarioReader.parse(windows, file: "t.yaml")
        #expect(outcome.errors.map(\.description) == ["t.yaml:9:5: error: unknown key 'dealy' in link 'wifi' (did you mean 'delay'?)\n    dealy: 5ms\n    ^"])
        #expect(ScenarioReader.parse("\u{FEFF}" + Self.base, file: "t.yaml").scenario != nil)
    }

    @Test func windowsTracesHaveTheirLines() {
        guard case .failure(let problem) = DeliveryTrace.parse("1\r\n2\r\nx\r\n") else {
            Issue.record("a broken trace parsed")
            return
        }
        #expect(problem.line == 3 && problem.message == "expected a millisecond (a whole number from 0 to 86400000)")
        guard case .success(let trace) = DeliveryTrace.parse("1\r\n2\r\n2\r\n") else {
            Issue.record("a CR LF trace was refused")
            return
        }
        #expect(trace.opportunities == [1, 2, 2])
    }

    @Test func aBlockScalarKeepsTheMessageOnOneLine() {
        let found = ScenarioReader.parse(Self.base.replacingOccurrences(of: "name: t", with: "name: |\n  two\n  lines"), file: "t.yaml").errors
        #expect(found.map(\.message) == ["scenario name 'two\\nlines\\n' must start with a letter and use only letters, digits, '-' and '_', at most 64 characters"])
        #expect(found.first.map { $0.description.split(separator: "\n")[0].hasPrefix("t.yaml:1:7: error: scenario name") } == true)
    }

    @Test func aVeryLongLineIsQuotedAroundTheColumn() {
        let long = String(repeating: "x", count: 5000)
        let found = ScenarioReader.parse(Self.base + "\n    type: \(long)", file: "t.yaml").errors
        let shown = found.first?.description.split(separator: "\n") ?? []
        #expect(shown.count == 3)
        #expect(shown.allSatisfy { $0.count < 300 })
    }

    @Test func aCutTimelineLineIsLeftOutWithANote() throws {
        let summary = #"{"scenario":"s","durationSeconds":10}"#
        let run = try RecordedRun.parse(directory: "d", summary: summary, timeline: "{\"t\":1,\"type\":\"mark\",\"text\":\"x\"}\n{\"t\":2,\"ty")
        #expect(run.events.count == 1)
        #expect(run.notes == ["d/timeline.jsonl: the last line (2) is cut short (unterminated string at byte 10); the run was probably killed while writing it; read the 1 complete events before it"])
        // Damage before the end is still an error.
        #expect(throws: ReportError.self) {
            try RecordedRun.parse(directory: "d", summary: summary, timeline: "{\"t\":1,\"ty\n{\"t\":2,\"type\":\"mark\"}\n")
        }
    }

    @Test func theImportedProfileIsCheckedAsAScenarioWouldCheckIt() {
        let good = MahimahiImport.profileYAML(name: "lab-lte", upPath: "dev/null-missing", downPath: "dev/null-missing",
                                              up: .init(period: .seconds(1), opportunities: 1, meanRate: .kbit(12), slowestSecond: .kbit(12),
                                                        fastestSecond: .kbit(12), longestGap: .seconds(1)),
                                              down: .init(period: .seconds(1), opportunities: 1, meanRate: .kbit(12), slowestSecond: .kbit(12),
                                                          fastestSecond: .kbit(12), longestGap: .seconds(1)),
                                              type: "cellular", delay: .milliseconds(20), loss: 0.01, sources: ("a", "b"))
        let problems = MahimahiImport.problems(ofProfile: good, named: "lab-lte", baseDirectory: "/")
        #expect(problems == ["cannot read trace 'dev/null-missing': no such file", "cannot read trace 'dev/null-missing': no such file"])
    }
}

/// The fuzz targets' committed corpus and every crash they found, replayed in the ordinary suite.
@Suite struct FuzzCorpusTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz").path

    static func inputs(_ target: FuzzTarget) -> [String] {
        ["Corpus", "Regressions"].flatMap { folder -> [String] in
            let directory = "\(fuzzDirectory)/\(folder)/\(target.rawValue)"
            return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted().map { "\(directory)/\($0)" }
        }
    }

    @Test(arguments: FuzzTarget.allCases)
    func replaysTheCorpus(_ target: FuzzTarget) throws {
        let files = Self.inputs(target)
        #expect(files.count >= 2, "Fuzz/Corpus/\(target.rawValue) holds no seeds")
        for file in files {
            let data = try Data(contentsOf: URL(fileURLWithPath: file))
            target.run([UInt8](data))
        }
    }
}

/// The property `roam validate` must have whatever it is given, on thousands of seeded
/// mutations of the bundled scenarios, in process (the CLI suite runs a sample through the
/// binary): a result or errors with their places, never a trap, within a bounded time.
@Suite struct ScenarioMutationTests {
    static let scenarios: [(name: String, text: String)] = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let directory = root.appendingPathComponent("scenarios").path
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".yaml") }.sorted().compactMap { name in
            (try? String(contentsOfFile: directory + "/" + name, encoding: .utf8)).map { (name, $0) }
        }
    }()

    @Test func mutatedScenariosAreReadOrRefusedWithTheirPlace() throws {
        try #require(Self.scenarios.count >= 7)
        let seed = UInt64(ProcessInfo.processInfo.environment["ROAM_FUZZ_SEED"] ?? "") ?? 20_261_123
        var mutator = ScenarioMutator(seed: seed)
        var valid = 0, refused = 0
        let clock = ContinuousClock()
        for round in 0..<3000 {
            let (name, text) = Self.scenarios[round % Self.scenarios.count]
            let mutated = mutator.mutate(text)
            let started = clock.now
            let outcome = ScenarioReader.parse(mutated, file: name)
            // The fuzz target's checks: FILE:LINE:COL on every diagnostic, reader and runner agree,
            // the timeline stays within its bound, the export runs.
            FuzzTarget.scenario.run(Array(mutated.utf8))
            let elapsed = clock.now - started
            // Not a performance figure: a hang detector for inputs of about a kilobyte.
            #expect(elapsed < .seconds(10), "round \(round) (ROAM_FUZZ_SEED=\(seed)) took \(elapsed)")
            if outcome.scenario != nil { valid += 1 } else { refused += 1 }
            for (index, diagnostic) in outcome.diagnostics.enumerated() where diagnostic.line < 1 {
                // Past the first 100, the rest are counted in one last note about the whole file.
                let isOmissionNote = index == outcome.diagnostics.count - 1 && index >= 100
                    && diagnostic.message.hasSuffix("fix these and read the file again")
                if !isOmissionNote {
                    Issue.record("round \(round) (ROAM_FUZZ_SEED=\(seed)): a diagnostic without a place: \(diagnostic)")
                }
            }
        }
        // Mutations that keep a scenario valid and ones that break it both happen.
        #expect(valid > 100 && refused > 1000, "valid \(valid), refused \(refused)")
    }
}
