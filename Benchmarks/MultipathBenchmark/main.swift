// Multipath benchmark: each acceptance case of the multipath module played with `mode: none`
// (plain single-path TCP, the kernel's routes) and with `mode: handover` (application-level,
// what `--multipath auto` uses, and over MPTCP where the kernel has it), side by side in one
// run, on the backend `auto` picks (netem where the kernel has it, the userspace emulator
// otherwise). Wi-Fi: 5 ms each way, 50 Mbit/s; cellular (expensive): 30 ms each way, 20 Mbit/s.
// Then `mode: aggregate` (MPTCP) against `none` over two 10 Mbit/s links.
//
//   swift build -c release --product MultipathBenchmark && .build/release/MultipathBenchmark
//   options: --quick (the first case only, to check that it runs)
//
// Needs root.
import Foundation
import Glibc
import Multipath
import Simulator

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("MultipathBenchmark: \(message)\n".utf8))
    exit(2)
}
guard geteuid() == 0 else { fail("needs root (it creates network namespaces)") }
let quick = CommandLine.arguments.contains("--quick")

let links = """
    nodes: { phone: {}, server: {} }
    links:
      - { name: wifi, between: [phone, server], type: wifi, delay: 5ms, rate: 50mbit }
      - { name: cell, between: [phone, server], type: cellular, expensive: true, delay: 30ms, rate: 20mbit }

    """

struct Outcome {
    var report: RunReport
    var events: [[String: Any]]
    var workload: WorkloadResult { report.workloads[0] }

    func linkEvent(_ link: String, _ matches: ([String: Any]) -> Bool) -> Double? {
        events.first { $0["type"] as? String == "link" && $0["link"] as? String == link && $0["planned"] != nil && matches($0) }?["actual"] as? Double
    }
}

/// A mode as the table shows it: `handover` is application-level, `handover (MPTCP)` the
/// kernel's backup subflows.
func play(_ name: String, mode label: String, _ body: String, links: String = links) -> Outcome {
    let mode = String(label.prefix { $0 != " " })
    let yaml = "name: \(name)\nseed: 1\n" + links + body.replacingOccurrences(of: "MODE", with: mode)
    let parsed = ScenarioReader.parse(yaml, file: "\(name).yaml")
    guard let scenario = parsed.scenario else { fail(parsed.diagnostics.map(\.description).joined(separator: "\n")) }
    var options = RunOptions()
    options.multipath = label.contains("MPTCP") ? .mptcp : .auto
    options.reportDirectory = "/tmp/roam-multipath-bench-\(getpid())/\(name)-\(label.replacingOccurrences(of: " ", with: "-"))"
    do {
        let report = try ScenarioRunner(scenario: scenario, options: options).run()
        let text = (try? String(contentsOfFile: report.reportDirectory + "/timeline.jsonl", encoding: .utf8)) ?? ""
        let events = text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        return Outcome(report: report, events: events)
    } catch {
        fail("\(name) (\(label)): \(error)")
    }
}

func ms(_ duration: Duration?) -> String {
    guard let duration else { return "-" }
    let value = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    return String(format: "%.0f ms", value)
}

var rows: [[String]] = []
var backend = ""
let mptcp = MPTCP.availability() == .available
/// The handover variants this kernel can run.
let handovers = mptcp ? ["handover", "handover (MPTCP)"] : ["handover"]

// 1. Wi-Fi carrier lost mid-stream.
let stream = """
    workloads:
      - { name: video, kind: stream, from: server, to: phone, bitrate: 4mbit, mode: MODE }

    """
for mode in ["none"] + (quick ? ["handover"] : handovers) {
    let outcome = play("carrier-lost", mode: mode, "duration: 10s\ntimeline:\n  - { at: 4s, link: wifi, down: true }\n" + stream)
    backend = outcome.report.backend.kind.rawValue
    let gap = outcome.workload.longestGap
    rows.append(["Wi-Fi carrier lost mid-stream", mode, "longest gap in data \(ms(gap?.length))",
                 "playout stalls \(outcome.workload.stream?.stalls.count ?? 0), longest \(ms(outcome.workload.stream?.longestStall))",
                 mode.hasPrefix("handover") ? "≤ 100 ms + cellular RTT (60 ms) = 160 ms" : ""])
}

// 2. Wi-Fi blackholed mid-stream (up, passing nothing) from 4 s to 9 s.
for mode in ["none"] + handovers where !quick {
    let outcome = play("blackholed", mode: mode,
                       "duration: 12s\ntimeline:\n  - { at: 4s, link: wifi, blackhole: true }\n  - { at: 9s, link: wifi, blackhole: false }\n" + stream)
    rows.append(["Wi-Fi blackholed mid-stream (5 s)", mode, "longest gap in data \(ms(outcome.workload.longestGap?.length))",
                 "playout stalls \(outcome.workload.stream?.stalls.count ?? 0), longest \(ms(outcome.workload.stream?.longestStall))",
                 mode.hasPrefix("handover") ? "≤ 1.5 s" : ""])
}

// 3. Connecting while Wi-Fi is blackholed.
for mode in ["none", "handover"] where !quick {
    let outcome = play("connect-blackholed", mode: mode, """
        duration: 8s
        timeline:
          - { at: 0s, link: wifi, blackhole: true }
        workloads:
          - { name: api, kind: requests, from: server, to: phone, size: 10kb, interval: 3s, count: 2, start: 1s, mode: MODE }

        """)
    let requests = outcome.workload.requests
    let first = outcome.events.first { $0["type"] as? String == "request" }
    let measured: String
    if let ttfb = first?["ttfbMs"] as? Double, first?["ok"] as? Bool == true {
        measured = String(format: "first request: first byte after %.0f ms", ttfb)
    } else {
        measured = "first request failed: \(first?["reason"] as? String ?? "?")"
    }
    rows.append(["Connecting while Wi-Fi is blackholed", mode, measured,
                 "\(requests?.succeeded ?? 0) of \(requests?.sent ?? 0) answered",
                 mode == "handover" ? "≤ 250 ms + cellular connect (60 ms) + the answer (60 ms)" : ""])
}

// 4. Wi-Fi back after an outage (down 3 s to 6 s).
for mode in ["none"] + handovers where !quick {
    let outcome = play("wifi-back", mode: mode, "duration: 12s\ntimeline:\n  - { at: 3s, link: wifi, down: true }\n  - { at: 6s, link: wifi, up: true }\n" + stream)
    let up = outcome.linkEvent("wifi") { $0["carrier"] as? String == "up" } ?? 6
    // Back on Wi-Fi: a new connection over it, or (MPTCP) a new subflow over it.
    let back = outcome.events.first { event in
        ["connect", "subflow"].contains(event["type"] as? String ?? "") && event["interface"] as? String == "wifi" && (event["t"] as? Double ?? 0) > up
    }?["t"] as? Double
    let cellular = outcome.workload.bytesByInterface["cell"].map { String(format: "%.1f MB over cellular", Double($0) / 1e6) }
        ?? (mode == "none" ? "local addresses \(outcome.workload.localAddresses.joined(separator: ", "))" : "-")
    let measured = mode == "none" ? "the flow died with Wi-Fi: longest gap in data \(ms(outcome.workload.longestGap?.length))"
        : back.map { String(format: "back on Wi-Fi %.2f s after it returned", $0 - up) } ?? "stayed on cellular"
    rows.append(["Wi-Fi back after an outage (3 s)", mode, measured,
                 "playout stalls \(outcome.workload.stream?.stalls.count ?? 0); \(cellular)", mode.hasPrefix("handover") ? "within a few seconds, no stall" : ""])
}

// 5. Aggregate: one bulk transfer over two 10 Mbit/s links, against one link's worth.
let twoLinks = """
    nodes: { phone: {}, server: {} }
    links:
      - { name: wifi, between: [phone, server], type: wifi, delay: 10ms, rate: 10mbit }
      - { name: cell, between: [phone, server], type: cellular, delay: 20ms, rate: 10mbit }

    """
var single: Double?
for mode in ["none"] + (mptcp ? ["aggregate", "interactive"] : []) where !quick {
    let outcome = play("aggregate", mode: mode, "duration: 10s\nworkloads:\n  - { name: download, kind: bulk, from: server, to: phone, mode: MODE }\n", links: twoLinks)
    let bits = outcome.workload.throughput?.bitsPerSecond ?? 0
    if mode == "none" { single = bits }
    let ratio = single.map { String(format: "%.2f× one link", bits / $0) } ?? "-"
    let split = outcome.workload.bytesByInterface.sorted { $0.key > $1.key }.map { String(format: "%@ %.1f MB", $0.key, Double($0.value) / 1e6) }
    rows.append(["Bulk over two 10 Mbit/s links (10 s)", mode, String(format: "%.1f Mbit/s, %@", bits / 1e6, ratio),
                 "\(outcome.workload.transport); " + (split.isEmpty ? "one path" : split.joined(separator: ", ")),
                 mode == "aggregate" ? "≥ 1.6× one link" : ""])
}

print("Multipath acceptance, backend \(backend), MPTCP \(mptcp ? "available" : "unavailable"): each case with mode none and the multipath modes in one run")
print("")
print("| case | mode | measured | also | target |")
print("|---|---|---|---|---|")
for row in rows { print("| " + row.joined(separator: " | ") + " |") }
if !mptcp { print("\naggregate over two links: not measured, this kernel has no MPTCP") }
