import Foundation
import Glibc
import PathMonitor
import RoamCore
import RoamReport
import ScenarioModel
import Simulator
import TestSupport
import Testing

/// Where the netem backend can be proved on this machine: its own kernel, or a VM booted with
/// Debian's kernel (scripts/vm.sh), or nowhere.
enum NetemHost {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let hostHasNetem = TestEnvironment.isRoot && NetemBackend.probe() == .available

    static var vmAvailable: Bool {
        guard TestEnvironment.isRoot else { return false }
        let candidates = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/vng" }
            + [NSHomeDirectory() + "/.cache/roam/vng/bin/vng"]
        let vng = candidates.contains { path in access(path, X_OK) == 0 }
        let kernels = (try? FileManager.default.contentsOfDirectory(atPath: "/boot")) ?? []
        let hasNetemKernel = kernels.filter { $0.hasPrefix("vmlinuz-") }.contains { image in
            let version = String(image.dropFirst("vmlinuz-".count))
            let directory = "/lib/modules/\(version)/kernel/net/sched"
            return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).contains { $0.hasPrefix("sch_netem.ko") }
        }
        return vng && hasNetemKernel
    }

    static var canRun: Bool { TestEnvironment.roamExecutable != nil && (hostHasNetem || vmAvailable) }

    /// Runs scripts/netem-check.sh once per test process (directly, or in the VM) and returns
    /// its output directory.
    static var output: String? { checks.netem }

    /// What one boot of the VM checked: netem-check.sh's output directory, and wifi-check.sh's
    /// outcome when it ran in the same boot (nil: it did not), which saves ``WiFiTests`` a boot
    /// of its own (about 30 s). Read from the boot scripts/test-suites.sh ran before this process
    /// where it ran one (``prebooted``), else made here on first use.
    static let checks: (netem: String?, wifi: Result<String, WiFiCheckFailure>?) = {
        if let prebooted { return prebooted }
        guard let roam = TestEnvironment.roamExecutable else { return (nil, nil) }
        // Both checks write under a directory this process made (`mkdtemp`; removed when the
        // tests exit): the scripts empty and remake the paths they are given, so those must not
        // be names another user could make first.
        guard let scratch = try? TestEnvironment.processScratchDirectory("roam-netem-check") else { return (nil, nil) }
        let directory = scratch + "/netem"
        if hostHasNetem {
            let check = [root + "/scripts/netem-check.sh", roam, directory]
            guard let result = try? RunningCommand.run(check[0], Array(check.dropFirst()), timeout: 1500) else { return (nil, nil) }
            print(result.output)
            if result.status != 0 { print(result.error) }
            return (result.status == 0 ? directory : nil, nil)
        }
        let wifi = WiFiHost.canRun && WiFiHost.claim(.netemBoot)
        let command = [root + "/scripts/vm-checks.sh", roam, scratch] + (wifi ? ["--wifi"] : [])
        let result = try? RunningCommand.run(command[0], Array(command.dropFirst()), timeout: 1800)
        if let result {
            print(result.output)
            if result.status != 0 { print(result.error) }
        }
        let log = result.map { String($0.output.suffix(2000) + $0.error.suffix(2000)) } ?? "the VM did not finish in 1800 s"
        return (result?.status == 0 ? directory : nil, wifi ? wifiOutcome(scratch + "/wifi", log: log) : nil)
    }()

    /// The checks of the VM that scripts/test-suites.sh booted before this process, in the
    /// directory ROAM_VM_CHECKS names (nil when it names none): `vm-status` (the boot's exit
    /// status), `vm.log` (what it printed), `netem/` and, when Wi-Fi was checked in that boot,
    /// `wifi/`. The directory must be one this user made for it and no one else may write in.
    static let prebooted: (netem: String?, wifi: Result<String, WiFiCheckFailure>?)? = {
        guard let directory = ProcessInfo.processInfo.environment["ROAM_VM_CHECKS"], !directory.isEmpty else { return nil }
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        var info = stat()
        defer { if descriptor >= 0 { close(descriptor) } }
        guard descriptor >= 0, fstat(descriptor, &info) == 0, info.st_uid == geteuid(), info.st_mode & 0o022 == 0 else {
            print("ROAM_VM_CHECKS=\(directory) is not a directory of this user's that no one else may write in: the VM's checks are not read from it")
            return (nil, nil)
        }
        let status = text(directory + "/vm-status").trimmingCharacters(in: .whitespacesAndNewlines)
        let log = "scripts/vm-checks.sh exited \(status.isEmpty ? "(no status)" : status): " + text(directory + "/vm.log").suffix(4000)
        let wifi = FileManager.default.fileExists(atPath: directory + "/wifi") ? wifiOutcome(directory + "/wifi", log: log) : nil
        return (status == "0" ? directory + "/netem" : nil, wifi)
    }()

    /// wifi-check.sh's outcome in `directory`, the directory it was given: its `exit` says.
    static func wifiOutcome(_ directory: String, log: String) -> Result<String, WiFiCheckFailure> {
        let status = text(directory + "/exit").trimmingCharacters(in: .whitespacesAndNewlines)
        guard status == "0" else {
            return .failure(WiFiCheckFailure(message: "scripts/wifi-check.sh in the netem check's VM "
                + (status.isEmpty ? "did not finish: " : "exited \(status): ") + text(directory + "/failure") + log))
        }
        return .success(directory)
    }

    /// A run's `summary.json`, typed: nil when it is missing or damaged. Read as any file, not
    /// through `RecordedRun.load`, which refuses a report another user owns (a rootless run's,
    /// `nobody`'s, read here as root).
    static func summary(_ directory: String) -> RunSummary? {
        guard let data = FileManager.default.contents(atPath: directory + "/summary.json"),
              let json = try? JSONValue.parse(String(decoding: data, as: UTF8.self)) else { return nil }
        return try? RunSummary(json: json)
    }

    /// The JSON objects of a JSON-lines file (`roam monitor --json`'s output).
    static func lines(_ path: String) -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }

    /// The run's timeline, read as `roam report` reads it: a missing or damaged one is a
    /// recorded failure.
    static func timeline(_ directory: String, sourceLocation: SourceLocation = #_sourceLocation) -> [RecordedEvent] {
        do {
            return try RecordedRun.load(directory: directory).events
        } catch {
            Issue.record("\(error)", sourceLocation: sourceLocation)
            return []
        }
    }

    static func text(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
}

/// The netem backend on a kernel that has netem: every bundled scenario runs at full length and
/// meets its expectations, the accuracy fixture measures what netem was told to do, and interrupted, killed
/// and concurrent runs leave nothing behind. On a machine without netem this boots a VM
/// (about 30 s) and runs there.
@Suite(.enabled(if: NetemHost.canRun, "needs root, the built roam, and sch_netem on this kernel or a VM (scripts/setup.sh --vm)"), .serialized)
struct NetemBackendTests {
    static let scenarios = ["airplane-wifi", "blackholed-wifi", "commuter-train", "elevator", "ipv6-cellular", "laptop-daemon", "low-data-mode", "satellite", "spotty-wifi", "tethered-hotspot", "walk-out-of-home"]

    func output() throws -> String {
        try #require(NetemHost.output, "scripts/netem-check.sh did not complete")
    }

    /// Bundled scenarios with networks on netem: every expectation holds. The NAT ones at full
    /// length, office-walk's movement at half speed (scripts/netem-check.sh says why not the
    /// resolver's and the portal's).
    /// What each command workload of the run in DIRECTORY printed (the end of its standard output
    /// and error), for a failure to say what went wrong in the VM, whose directories are gone
    /// once it stops.
    static func outputs(_ directory: String) -> String {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasSuffix(".stdout") || $0.hasSuffix(".stderr") }.sorted()
            .compactMap { name in
                let text = NetemHost.text(directory + "/" + name)
                return text.isEmpty ? nil : "\(name):\n" + text.suffix(2000)
            }.joined(separator: "\n")
    }

    static let networkScenarios = ["coffee-shop-to-lte", "carrier-nat-rebind", "office-walk"]

    @Test(arguments: networkScenarios) func networkScenarioPasses(_ name: String) throws {
        let directory = try output() + "/network-" + name
        let exit = NetemHost.text(directory + "/exit").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(exit == "0", "exit \(exit): \(NetemHost.text(directory + ".console"))\n\(Self.outputs(directory))")
        let summary = try #require(NetemHost.summary(directory))
        #expect(summary.backend == "netem")
        #expect(summary.timeline.failed.isEmpty, "every link and network change was applied")
        #expect(!summary.expectations.isEmpty && summary.expectations.allSatisfy { $0.passed })
    }

    /// Flows (`match:`) on netem: a prio root, a band per flow, u32 filters to them, and the
    /// same effect on the phone's programs as on the userspace emulator.
    @Test func flowsActOnlyOnThePacketsTheyMatch() throws {
        let directory = try output() + "/network-flow-faults"
        let exit = NetemHost.text(directory + "/exit").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(exit == "0", "exit \(exit): \(NetemHost.text(directory + ".console"))")
        let medians = FlowFaultsCheck.check(directory, netem: true)
        print("flow-faults (netem) medians: \(medians.sorted { $0.key < $1.key })")
    }

    /// Every expectation of every bundled scenario netem can play holds, at full length, three
    /// runs at a time in the VM: what the README promises of them is what netem and the kernel's
    /// MPTCP deliver too.
    @Test(arguments: scenarios) func bundledScenarioPasses(_ name: String) throws {
        let directory = try output() + "/" + name
        let exit = NetemHost.text(directory + "/exit").trimmingCharacters(in: .whitespacesAndNewlines)
        let failed = (NetemHost.summary(directory)?.expectations ?? []).filter { !$0.passed }
        // The timeline's moments of trouble, for a failure to say what went wrong in the VM.
        let trouble = NetemHost.text(directory + "/timeline.jsonl").split(separator: "\n").filter { line in
            ["\"ok\":false", "\"type\":\"stall\"", "\"type\":\"disconnect\"", "\"type\":\"path-stalled\"", "\"type\":\"connect-failed\""]
                .contains { line.contains($0) }
        }.prefix(40).joined(separator: "\n")
        let message = Comment(rawValue: "exit \(exit), expectations that failed: \(failed): \(NetemHost.text(directory + ".console"))\n\(trouble)\n\(Self.outputs(directory))")
        let summary = try #require(NetemHost.summary(directory))
        #expect(exit == "0", message)
        #expect(summary.backend == "netem")
        #expect(!summary.cancelled)
        #expect(summary.timeline.failed.isEmpty, "every link change was applied")
        // Every node's monitor published at least its first path.
        #expect(summary.pathUpdates.count == 2 && summary.pathUpdates.values.allSatisfy { $0 >= 1 })
        for workload in summary.workloads where workload.kind != "command" {
            #expect((workload.transfer?.bytesReceived ?? 0) > 0, "\(workload.name) moved data")
        }
        // The exit status agrees with the expectations.
        #expect((exit == "0") == summary.expectations.allSatisfy(\.passed))
        #expect(NetemHost.timeline(directory).count == summary.events)
        // The run judged its own fidelity and, on netem, read the kernel's qdisc counters: the
        // netem qdiscs that carried the workloads counted their packets.
        let fidelity = try #require(summary.fidelity, "summary.json has a fidelity section")
        #expect(fidelity.deliveryP99 == nil, "delivery lateness is the userspace emulator's")
        #expect(fidelity.qdiscs.contains { $0.kind == "netem" && $0.packets > 0 }, "\(fidelity.qdiscs)")
    }

    /// commuter-train's traces on netem: each direction's rate stepped as the pure schedule
    /// steps it (``TimelineSchedule/steppingTraces(until:)``), every step applied and recorded
    /// with its trace, the run's notes saying so; and the link graded once, by the traces' means.
    @Test func aTraceIsPlayedAsSteppedRates() throws {
        let directory = try output() + "/commuter-train"
        let summary = try #require(NetemHost.summary(directory))
        #expect(summary.backend == "netem" && summary.timeline.failed.isEmpty)
        #expect(summary.notes.contains { $0.contains("played by netem as a rate stepped every 100ms") }, "\(summary.notes)")
        let scenario = try #require(ScenarioReader.read(contentsOf: NetemHost.root + "/scenarios/commuter-train.yaml").scenario)
        let planned = TimelineSchedule(scenario: scenario).steppingTraces(until: scenario.duration).schedule.changes.compactMap { change -> [String]? in
            guard case let .conditions(direction, conditions) = change.change else { return nil }
            return [direction.rawValue, String(Int64(conditions.impairment.rate!.bitsPerSecond.rounded()))]
        }
        let lines = NetemHost.lines(directory + "/timeline.jsonl")
        let played = lines.filter { $0["type"] as? String == "link" && $0["action"] as? String == "trace" }.map { line -> [String] in
            let conditions = line["conditions"] as? [String: Any]
            #expect(conditions?["trace"] as? String != nil, "the trace recorded beside its rate: \(line)")
            return [line["direction"] as? String ?? "?", (conditions?["rateBps"] as? NSNumber).map { "\($0.int64Value)" } ?? "?"]
        }
        #expect(planned.count > 100)
        #expect(played == planned)
        // One grade for the link all along: no quality change after the start.
        #expect(lines.filter { $0["type"] as? String == "quality" }.count <= 1)
    }

    /// A mahimahi trace (its own Verizon LTE) on netem under a bulk download: from its third
    /// second to its last, the download receives most of what the trace delivers. Before the
    /// netem backend's tbf requests carried the bucket and the link layer as tc's do, a tbf whose
    /// rate changed every 100 ms passed about a third of it here (0.37 over a minute).
    @Test func aTraceReplaysAtItsCapacity() throws {
        let directory = try output() + "/trace-replay"
        #expect(NetemHost.text(directory + "/exit").trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(NetemHost.text(directory + ".console"))")
        let down = try #require(try? DeliveryTrace.parse(String(contentsOfFile: NetemHost.root + "/Tests/Fixtures/traces/mahimahi/Verizon-LTE-short-60s.down",
                                                                     encoding: .utf8)).get())
        // The trace's bits in each second from the start (it repeats only after a minute).
        var capacity = [Double](repeating: 0, count: 16)
        for millisecond in down.opportunities where millisecond < 16_000 { capacity[Int(millisecond / 1000)] += 12_000 }
        var received = [Double](repeating: 0, count: 17)
        for line in NetemHost.lines(directory + "/timeline.jsonl") where line["type"] as? String == "sample" && line["workload"] as? String == "download" {
            guard let t = line["t"] as? Double, let bits = (line["throughputBps"] as? NSNumber)?.doubleValue else { continue }
            let second = Int(t.rounded())
            if second < received.count { received[second] = bits }
        }
        // The sample at t covers the second before it.
        let got = (3..<15).reduce(0.0) { $0 + received[$1 + 1] }, offered = (3..<15).reduce(0.0) { $0 + capacity[$1] }
        print("trace-replay (netem): received \(got) of the trace's \(offered) bits, \(got / offered)")
        #expect(got / offered > 0.6 && got / offered < 1.15, "received \(got / offered) of the trace's capacity: \(received)")
    }

    /// Handover over MPTCP on the kernel netem ran on (in the VM, Debian 12's 6.1): `auto`
    /// uses the userspace path manager exactly where `mptcp-userspace` is not refused, and the
    /// stream crosses the carrier loss either way (see ``HandoverTransport``).
    @Test func handoverOverMPTCPFollowsWhatTheKernelCan() throws {
        let directory = try output()
        let status = { (name: String) in Int32(NetemHost.text(directory + "/\(name)/exit").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }
        print("handover over MPTCP on kernel \(NetemHost.text(directory + "/kernel").trimmingCharacters(in: .whitespacesAndNewlines)): "
              + "mptcp-userspace exited \(status("handover-userspace"))")
        try HandoverTransport.verify(auto: directory + "/handover-auto", autoStatus: status("handover-auto"),
                                     explicit: directory + "/handover-userspace", explicitStatus: status("handover-userspace"),
                                     explicitConsole: NetemHost.text(directory + "/handover-userspace.console"))
    }

    /// Paths as each node's monitor reported them, with their times.
    func paths(_ name: String, node: String) throws -> [(t: Double, path: JSONValue)] {
        NetemHost.timeline(try output() + "/\(name)").compactMap { record in
            guard case .path(node, _, let path) = record.event else { return nil }
            return (record.time.seconds, path)
        }
    }

    /// The first planned change of `link` that `matches`, as applied.
    func linkChange(_ name: String, link: String, where matches: (RunEvent.LinkChange.Kind) -> Bool) throws -> RunEvent.LinkChange? {
        for record in NetemHost.timeline(try output() + "/\(name)") {
            if case .link(let change) = record.event, change.link == link, change.planned != nil, matches(change.kind) { return change }
        }
        return nil
    }

    @Test func thePhoneIsToldCellularIsExpensiveWhenWiFiGoes() throws {
        let change = try #require(try linkChange("walk-out-of-home", link: "wifi") { if case .carrier(up: false) = $0 { true } else { false } })
        let down = try #require(change.actual).seconds
        // `actual` is taken once the change is made, and the monitor may hear of it first: the
        // first path after the planned time (a change never comes before it) is the answer.
        let planned = try #require(change.planned).seconds
        let after = try paths("walk-out-of-home", node: "phone").first { $0.t >= planned }
        let update = try #require(after)
        #expect(update.t - down < 1.0)
        #expect(update.path["primaryInterface"]?.stringValue == "cell")
        #expect(update.path["isExpensive"]?.boolValue == true)
    }

    @Test func aBlackholedWiFiStaysThePrimaryPath() throws {
        // The silent failure: the link passes nothing, yet nothing tells the phone.
        let blackhole = try #require(try linkChange("blackholed-wifi", link: "wifi") { kind in
            if case .conditions(_, let conditions) = kind { conditions["blackhole"]?.boolValue == true } else { false }
        })
        let start = try #require(blackhole.actual).seconds
        let phone = try paths("blackholed-wifi", node: "phone")
        #expect(phone.last { $0.t <= start }?.path["primaryInterface"]?.stringValue == "wifi")
        #expect(phone.filter { $0.t > start }.allSatisfy { $0.path["primaryInterface"]?.stringValue == "wifi" })
        // ... so only stall detection can get the requests (mode: handover) over to cellular:
        // requests sent into the blackhole were answered, and every one was.
        let requests = NetemHost.timeline(try output() + "/blackholed-wifi").compactMap { record -> (t: Double, request: RunEvent.Request)? in
            guard case .request(let request) = record.event else { return nil }
            return (record.time.seconds, request)
        }
        // A request's event is written when it completes: it was sent its completion time before.
        let sentIntoTheBlackhole = requests.filter { record in
            guard case .completed(_, let completion) = record.request.outcome else { return false }
            return record.t - completion.seconds >= start
        }
        #expect(!sentIntoTheBlackhole.isEmpty, "requests sent after the blackhole began were answered: \(requests)")
        #expect(requests.allSatisfy { if case .completed = $0.request.outcome { true } else { false } }, "\(requests)")
        let summary = try #require(NetemHost.summary(try output() + "/blackholed-wifi"))
        let api = try #require(summary.workloads.first)
        #expect(api.transfer?.handovers ?? 0 >= 1)
        // Where the data was when the Wi-Fi went dark, and where it went next: with `auto` on a
        // kernel whose userspace path manager can, the connection's standby subflow over
        // cellular (a subflow switch); elsewhere a new connection over cellular. The connection
        // races both interfaces, so on a busy machine cellular may win it (the Wi-Fi's SYN
        // unanswered for the race's 250 ms) and the data move to the Wi-Fi, a better path,
        // before the blackhole: a switch or connection before it says nothing of the blackhole.
        var carrier: String?
        var moves: [String] = []
        var seen: [String] = []
        for record in NetemHost.timeline(try output() + "/blackholed-wifi") {
            let t = record.time.seconds
            let to: String
            switch record.event {
            case .connect(let connect):
                to = connect.interface ?? "?"
                seen.append("\(t): connected over \(to)")
            case .subflowSwitch(_, let interface, let reason):
                to = interface
                seen.append("\(t): to \(to) (\(reason))")
            default: continue
            }
            if t < start { carrier = to } else { moves.append(to) }
        }
        #expect(carrier == "wifi", "the data was over the Wi-Fi when it went dark at \(start) s: \(seen)")
        #expect(moves.first == "cell", "\(summary.multipath): \(seen)")
        if summary.multipath == "mptcp-userspace" {
            #expect(seen.contains { $0.contains(": to cell (") }, "a subflow switch, not a new connection: \(seen)")
        }
        #expect(api.bytesByInterface["cell"] ?? 0 > 0)
    }

    @Test func lowDataModeAndHotspotsShowInThePath() throws {
        #expect(try paths("low-data-mode", node: "phone").first?.path["isConstrained"]?.boolValue == true)
        let laptop = try #require(try paths("tethered-hotspot", node: "laptop").first)
        #expect(laptop.path["isExpensive"]?.boolValue == true)
        #expect(laptop.path["primaryInterface"]?.stringValue == "hotspot")
        #expect(try paths("airplane-wifi", node: "phone").first?.path["isConstrained"]?.boolValue == true)
    }

    /// `PING ... --- N packets transmitted, M received, ... rtt min/avg/max/mdev = a/b/c/d ms`
    func ping(_ workload: String) throws -> (loss: Double, min: Double, avg: Double) {
        let text = NetemHost.text(try output() + "/netem-accuracy/\(workload).stdout")
        let numbers = { (pattern: String) -> [Double] in
            guard let regex = try? NSRegularExpression(pattern: pattern),
                  let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) else { return [] }
            return (1..<match.numberOfRanges).compactMap { Range(match.range(at: $0), in: text).flatMap { Double(text[$0]) } }
        }
        let counts = numbers(#"(\d+) packets transmitted, (\d+) received"#)
        let rtt = numbers(#"= ([\d.]+)/([\d.]+)/([\d.]+)"#)
        try #require(counts.count == 2 && rtt.count == 3, "ping output: \(text)")
        return (1 - counts[1] / counts[0], rtt[0], rtt[1])
    }

    /// The loss netem itself drew: the netem qdisc's counters printed after ping (`tc -s qdisc`),
    /// dropped over dropped and sent. Ping's own count also holds what netem did not do: echo
    /// requests the kernel drops from its queue of packets waiting for an ARP answer when netem
    /// has dropped the ARP request (a run's ping counted 18.9% over a link set to 10%, with every
    /// answered echo back within 9 ms), and replies that miss ping's deadline when the emulated
    /// guest stalls. The requests the ARP queue dropped never reach netem, so netem may count
    /// fewer than ping sent (a CI run: 992 of 1000).
    func netemLoss(_ workload: String) throws -> (loss: Double, packets: Double) {
        let lines = NetemHost.text(try output() + "/netem-accuracy/\(workload).stdout").split(separator: "\n").map(String.init)
        let index = try #require(lines.firstIndex { $0.contains("qdisc netem") }, "no netem counters in \(workload).stdout")
        let counters = try #require(index + 1 < lines.count ? lines[index + 1] : nil)
        let regex = try NSRegularExpression(pattern: #"Sent \d+ bytes (\d+) pkt \(dropped (\d+)"#)
        let match = try #require(regex.firstMatch(in: counters, range: NSRange(counters.startIndex..., in: counters)), "\(counters)")
        let numbers = (1...2).compactMap { Range(match.range(at: $0), in: counters).flatMap { Double(counters[$0]) } }
        try #require(numbers.count == 2)
        return (numbers[1] / (numbers[0] + numbers[1]), numbers[0] + numbers[1])
    }

    /// 40 ms each way: netem never delivers early, so no echo comes back in under 80 ms, and the
    /// delay is applied once per direction, so the median stays under twice that. (Software
    /// emulation adds about 1 ms to the typical echo; the emulated guest now and then stops for a
    /// second or two, so not the mean: a CI run measured a mean of 104.8 ms with a median near
    /// 82 ms and a maximum of 2.2 s.) Random loss of 10% on the requests only, judged on the packets netem
    /// saw (see ``netemLoss(_:)``), within 4 σ of 10% for that count: over 1000 the count lost has
    /// a standard deviation of 9.5, so 4 σ allows 6.2% to 13.8%.
    @Test func roundTripTimeAndRandomLossMatchTheConfiguration() throws {
        let measured = try ping("ping-delayed")
        let times = NetemHost.text(try output() + "/netem-accuracy/ping-delayed.stdout").split(separator: "\n")
            .compactMap { line in line.range(of: "time=").flatMap { Double(line[$0.upperBound...].prefix { $0.isNumber || $0 == "." }) } }
            .sorted()
        try #require(times.count > 500, "one line per echo answered")
        let median = times[times.count / 2]
        #expect(measured.min >= 80 && median < 160, "rtt min \(measured.min) median \(median) mean \(measured.avg)")
        let drawn = try netemLoss("ping-delayed")
        #expect(drawn.packets >= 800, "netem saw \(drawn.packets) packets of ping's 1000 echo requests")
        let spread = 4 * (0.1 * 0.9 / drawn.packets).squareRoot()
        #expect(abs(drawn.loss - 0.1) <= spread, "netem dropped \(drawn.loss) of \(drawn.packets) (10% ± \(spread)); ping saw \(measured.loss)")
    }

    /// Gilbert-Elliott with p = 5% and r = 45% (loss 100% in the bad state, none in the good)
    /// loses p / (p + r) = 10% in the long run, in bursts of 1 / r ≈ 2.2: bursts widen the spread
    /// about threefold over random loss (the deviation √3 times wider), so 4 σ over 1000 echoes
    /// allows 3.4% to 16.6%. A wrong
    /// encoding of the model would lose nothing (the attribute ignored) or everything. Counted by
    /// netem itself (see ``netemLoss(_:)``).
    @Test func gilbertElliottLossMatchesTheModel() throws {
        let measured = try ping("ping-bursty")
        let drawn = try netemLoss("ping-bursty")
        #expect(drawn.packets >= 800, "netem saw \(drawn.packets) packets of ping's 1000 echo requests")
        let spread = 4 * (3 * 0.1 * 0.9 / drawn.packets).squareRoot()
        #expect(abs(drawn.loss - 0.1) <= spread, "netem dropped \(drawn.loss) of \(drawn.packets) (10% ± \(spread)); ping saw \(measured.loss)")
    }

    /// tbf at 20 Mbit/s: TCP's goodput stays under the rate (headers take about 4%), and above
    /// half of it (a rate read in the wrong unit would be off by 8 or 1000). How close it comes
    /// depends on the machine, not on Roam.
    @Test func rateLimitsTheTransfer() throws {
        let summary = try #require(NetemHost.summary(try output() + "/netem-accuracy"))
        let transfer = try #require(summary.workloads.first { $0.name == "transfer" })
        let throughput = Double(transfer.transfer?.throughput ?? 0)
        #expect(throughput > 10e6 && throughput <= 20e6, "\(throughput) bit/s")
        // What the link carried toward the client each second, as its veth counted it (IP
        // packets and their Ethernet headers, of which tbf's rate counts the IP bytes): the
        // rate while the transfer runs, within what a busy VM's seconds allow.
        let carried = NetemHost.timeline(try output() + "/netem-accuracy").compactMap { record -> (Double, Int64)? in
            guard case .carried(let carried) = record.event, carried.link == "shaped", let down = carried.down else { return nil }
            return (record.time.seconds, down)
        }
        let steady = carried.filter { (3...17).contains($0.0) }.map { Double($0.1) }.sorted()
        #expect(steady.count >= 12, "\(carried)")
        let median = steady.isEmpty ? 0 : steady[steady.count / 2]
        #expect(median > 18e6 && median < 21e6, "carried \(median) bit/s of 20 Mbit/s: \(carried)")
    }

    @Test func signalsTearEverythingDownAndKeepTheReport() throws {
        let directory = try output()
        for (signal, code) in [("INT", "130"), ("TERM", "143")] {
            #expect(NetemHost.text(directory + "/signal-\(signal)/exit").trimmingCharacters(in: .whitespacesAndNewlines) == code)
            #expect(NetemHost.text(directory + "/signal-\(signal)/leftovers").isEmpty)
            #expect(NetemHost.summary(directory + "/signal-\(signal)")?.cancelled == true)
        }
    }

    @Test func cleanupRemovesWhatAKilledRunLeft() throws {
        let directory = try output() + "/sigkill"
        #expect(!NetemHost.text(directory + "/before-cleanup").isEmpty, "the killed run left its namespaces")
        #expect(NetemHost.text(directory + "/cleanup-exit").trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        #expect(NetemHost.text(directory + "/cleanup").contains("removed namespace roam-"))
        #expect(NetemHost.text(directory + "/after-cleanup").isEmpty)
    }

    /// As `nobody`, in a user namespace of the run's own: netem works there (the user namespace
    /// owns the nodes' network namespaces, so it may set their qdiscs), and the report is the
    /// user's.
    @Test func aRootlessRunPlaysNetem() throws {
        let directory = try output()
        let exit = NetemHost.text(directory + "/rootless-netem/exit").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(exit == "0", "exit '\(exit)': \(NetemHost.text(directory + "/rootless-netem.console"))")
        let summary = try #require(NetemHost.summary(directory + "/rootless-netem"))
        #expect(summary.backend == "netem")
        #expect(NetemHost.text(directory + "/rootless-netem/owner").trimmingCharacters(in: .whitespacesAndNewlines) == "nobody")
    }

    /// `roam attach` on namespaces and veth pairs made with `ip`: once the fixture's last change
    /// is in force, the kernel holds the same qdiscs, with the same parameters, on every
    /// interface of both nodes as under `roam run`; stopped (SIGTERM) or at its end, every
    /// interface is as it was (up, its addresses and routes back after the carrier loss, the
    /// default qdisc).
    @Test func attachSetsTheQdiscsRunSetsAndLeavesTheInterfacesAsTheyWere() throws {
        let directory = try output()
        let attached = NetemHost.text(directory + "/attach/qdiscs"), ran = NetemHost.text(directory + "/attach-run/qdiscs")
        #expect(attached == ran, "attach:\n\(attached)\nrun:\n\(ran)\n\(NetemHost.text(directory + "/attach.console"))")
        // Both nodes, both links, the fixture's last conditions: nothing compared is empty.
        for expected in ["# phone", "# server", "dev wifi root limit 1000 delay 80ms  2ms loss 3%", "dev wifi parent 1:1 rate 2Mbit",
                         "dev cell root limit 1000 delay 60ms duplicate 1%", "fq_codel 3: dev cell parent 2:1 limit 100p"] {
            #expect(attached.contains(expected), "\(expected) in\n\(attached)")
        }
        #expect(attached.components(separatedBy: "fq_codel").count == 3, "on both nodes' cell")
        // Stopped by SIGTERM, as roam run is: 143, the report written, every change applied.
        for name in ["attach", "attach-run"] {
            #expect(NetemHost.text("\(directory)/\(name)/exit").trimmingCharacters(in: .whitespacesAndNewlines) == "143")
            let summary = try #require(NetemHost.summary("\(directory)/\(name)"))
            #expect(summary.cancelled && summary.timeline.failed.isEmpty && summary.timeline.changes >= 4)
        }
        let before = NetemHost.text(directory + "/attach/interfaces-before")
        #expect(before.contains("inet6 fd00:11::2/64") && before.contains("198.19.200.0/24 via 198.18.11.1 dev cell") && before.contains("noqueue"))
        #expect(NetemHost.text(directory + "/attach/interfaces-after") == before)

        // As a sidecar (uid 0 with CAP_NET_ADMIN alone, in the phone's namespace): the phone's half.
        let sidecar = NetemHost.text(directory + "/attach-sidecar/qdiscs")
        #expect(NetemHost.text(directory + "/attach-sidecar/exit").trimmingCharacters(in: .whitespacesAndNewlines) == "143",
                "\(NetemHost.text(directory + "/attach-sidecar.console"))")
        #expect(!sidecar.isEmpty && ran.hasPrefix(sidecar), "sidecar:\n\(sidecar)")

        // A sidecar of a pod on the node's network, on a kernel that does not number the host's
        // namespace, with PID 1 its container's: refused before anything changed (issue 56, case 10).
        let hostNetwork = directory + "/hostnet-sidecar"
        #expect(NetemHost.text(hostNetwork + "/exit").trimmingCharacters(in: .whitespacesAndNewlines) == "2")
        #expect(NetemHost.text(hostNetwork + ".console").contains("is the host's network namespace, which roam attach never changes"),
                "\(NetemHost.text(hostNetwork + ".console"))")
        #expect(NetemHost.text(hostNetwork + "/qdiscs-after") == NetemHost.text(hostNetwork + "/qdiscs-before"))

        // The Kubernetes export's sidecar command, run as its pod would run it: the phone's half,
        // stopped by SIGTERM to its shell (exit 0), roam's status noted (143), its report written.
        let k8s = directory + "/k8s-sidecar"
        #expect(NetemHost.text(k8s + "/qdiscs") == sidecar, "\(NetemHost.text(k8s + ".console"))")
        #expect(NetemHost.text(k8s + "/exit-sh").trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        #expect(NetemHost.text(k8s + "/report/exit").trimmingCharacters(in: .whitespacesAndNewlines) == "143")
        let podSummary = try #require(NetemHost.summary(k8s + "/report/phone"))
        #expect(podSummary.cancelled && podSummary.timeline.failed.isEmpty)
        #expect(NetemHost.text(k8s + "/interfaces-after") == before)

        // walk-out-of-home played to its end on them, the server's end found by a process in it.
        let walk = directory + "/attach-walk"
        #expect(NetemHost.text(walk + "/exit").trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(NetemHost.text(walk + ".console"))")
        let summary = try #require(NetemHost.summary(walk))
        #expect(summary.backend == "netem" && !summary.cancelled && summary.timeline.failed.isEmpty)
        #expect(summary.backendReason.contains("server/wifi (pid "))
        #expect(summary.timeline.changes > 10)
        #expect(NetemHost.text(walk + "/interfaces-after") == before)
        // What each link carried, counted on the attached interfaces: both ends of both links.
        let carried = NetemHost.timeline(walk).compactMap { record -> RunEvent.Carried? in
            if case .carried(let carried) = record.event { return carried } else { return nil }
        }
        #expect(Set(carried.map(\.link)) == ["wifi", "cell"] && carried.allSatisfy { $0.up != nil && $0.down != nil }, "\(carried.prefix(6))")
    }

    /// Every bundled scenario roam attach can play (no networks or radio states; a trace's rate
    /// stepped, at the run's own speed), played
    /// to the end of its timeline and held there, by `roam run --hold` (the runs of
    /// ``bundledScenarioPasses(_:)``) and by `roam attach --hold` on namespaces and veth pairs the
    /// check made with `ip`: every interface's qdiscs, as the kernel shows them (`tc -d qdisc
    /// show`), are the same; the attached interfaces are as they were afterwards.
    @Test func attachEqualsRunAtTheEndOfEveryBundledScenarioItCanPlay() throws {
        let directory = try output()
        let attachable = try FileManager.default.contentsOfDirectory(atPath: NetemHost.root + "/scenarios").filter { $0.hasSuffix(".yaml") }.sorted()
            .filter { file in
                ScenarioReader.read(contentsOf: NetemHost.root + "/scenarios/" + file).scenario.map { ScenarioAttacher.problems($0).isEmpty } == true
            }
            // What netem-check skips, saying why (a `# netem-check: skip: REASON` line).
            .filter { file in
                !NetemHost.text(NetemHost.root + "/scenarios/" + file).split(separator: "\n").contains { $0.hasPrefix("# netem-check: skip: ") }
            }
            .map { String($0.dropLast(5)) }
        #expect(attachable.count >= 9, "\(attachable)")
        let compared = ((try? FileManager.default.contentsOfDirectory(atPath: directory + "/attach-all")) ?? []).filter { !$0.hasSuffix(".console") }.sorted()
        #expect(compared == attachable, "the check compared \(compared)")
        for name in attachable {
            let base = directory + "/attach-all/" + name
            let ran = NetemHost.text(directory + "/\(name)/qdiscs"), attached = NetemHost.text(base + "/qdiscs")
            #expect(ran.hasPrefix("# ") && ran.contains("netem"), "\(name): run's qdiscs \(ran)\n\(NetemHost.text(directory + "/\(name).console"))")
            #expect(attached == ran, "\(name): attach:\n\(attached)\nrun:\n\(ran)\n\(NetemHost.text(base + ".console"))")
            // Held, then stopped by SIGTERM: 143, the report written, every change applied.
            #expect(NetemHost.text(base + "/exit").trimmingCharacters(in: .whitespacesAndNewlines) == "143", "\(name)")
            let summary = try #require(NetemHost.summary(base))
            #expect(summary.cancelled && summary.timeline.failed.isEmpty, "\(name)")
            let before = NetemHost.text(base + "/interfaces-before")
            #expect(before.contains("noqueue") && NetemHost.text(base + "/interfaces-after") == before, "\(name)")
        }
    }

    /// The bundled scenarios ran three at a time: every one of them, each batch's runs with IDs
    /// of their own (``bundledScenarioPasses(_:)`` checks that each played whole).
    @Test func concurrentRunsDoNotCollideAndTheRootNamespaceIsUntouched() throws {
        let directory = try output()
        let batches = NetemHost.text(directory + "/batches").split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(batches.flatMap { $0 }.sorted() == Self.scenarios.sorted(), "every bundled scenario netem plays, in one batch")
        #expect(batches.contains { $0.count > 1 }, "runs at once")
        for batch in batches {
            let identifiers = batch.map { NetemHost.summary(directory + "/" + $0)?.runID }
            #expect(!identifiers.contains(nil) && Set(identifiers).count == batch.count, "\(batch): \(identifiers)")
        }
        #expect(NetemHost.text(directory + "/leftover-namespaces").isEmpty)
        let before = NetemHost.text(directory + "/root-before"), after = NetemHost.text(directory + "/root-after")
        #expect(!before.isEmpty && before == after)
    }
}
