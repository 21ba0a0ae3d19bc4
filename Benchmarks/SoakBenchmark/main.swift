// Soak benchmark: `roam run` of a long scenario that gives up, races, probes and supersedes
// connections all the time (Wi-Fi flapping every 2 s under a handover stream, handover requests
// every 200 ms and a plain bulk transfer, on the userspace backend), sampled every few seconds:
// the process's descriptors, threads and resident memory, and the TCP sockets in each of its
// namespaces. After the first minute, everything must stay flat.
//
//   swift build -c release --product roam --product SoakBenchmark
//   .build/release/SoakBenchmark --minutes 60        (the figures in the README)
//   options: --minutes N (default 60), --interval SECONDS (default 5), --quick (2 minutes),
//   --time-scale F (default 1): play minutes/F of the scenario in the minutes, through
//   `roam run --time-scale F` (0.041667 plays a day of flaps, requests and reconnections in
//   an hour)
//
// Needs root and /dev/net/tun. The roam binary is the one built next to this program.
import Foundation
import Glibc
import TestSupport

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("SoakBenchmark: \(message)\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments
func option(_ name: String) -> Double? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return Double(arguments[index + 1])
}
let minutes = arguments.contains("--quick") ? 2 : option("--minutes") ?? 60
let interval = option("--interval") ?? 5
let scale = option("--time-scale") ?? 1
guard minutes >= 1, minutes <= 24 * 60, interval >= 1, interval <= 600 else { fail("--minutes 1...1440, --interval 1...600") }
guard scale >= 0.01, scale <= 1 else { fail("--time-scale 0.01...1") }
guard geteuid() == 0 else { fail("needs root (it runs scenarios)") }
let roam = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("roam").path
guard access(roam, X_OK) == 0 else { fail("no roam next to this program: build it (swift build -c release --product roam)") }

guard let work = try? TestEnvironment.scratchDirectory("roam-soak-benchmark") else { fail("cannot make a directory under /tmp") }
let scenario = """
    name: soak
    duration: \(Int((minutes * 60 / scale).rounded()))s
    nodes: {phone: {}, server: {}}
    links:
      - {name: wifi, between: [phone, server], type: wifi, delay: 5ms, rate: 50mbit}
      - {name: cell, between: [phone, server], type: cellular, delay: 30ms, rate: 20mbit}
    timeline:
      - {at: 2s, link: wifi, flap: {period: 2s}}
    workloads:
      - {name: video, kind: stream, from: server, to: phone, bitrate: 2mbit, mode: handover}
      - {name: api, kind: requests, from: server, to: phone, interval: 200ms, size: 20kb, mode: handover}
      - {name: sync, kind: bulk, from: server, to: phone}

    """
try! scenario.write(toFile: work + "/soak.yaml", atomically: true, encoding: .utf8)

let existing = ResourceSampler.namespaces()
let command = try! RunningCommand(roam, ["run", work + "/soak.yaml", "--backend", "userspace", "--quiet", "--report", work + "/report",
                                                 "--time-scale", String(scale)])
let pid = command.process.processIdentifier
let start = Date()
// This run's namespaces are roam-RUNID-NODE: the ones that appear once it has started (other
// runs on the machine are left out).
var prefix: String?
var samples: [ResourceSample] = []
while command.process.isRunning {
    Thread.sleep(forTimeInterval: interval)
    guard command.process.isRunning else { break }
    if prefix == nil { prefix = ResourceSampler.runPrefix(node: "phone", since: existing) }
    let sample = ResourceSampler.sample(pid: pid, namespacePrefix: prefix ?? "roam-none-", since: start)
    if sample.descriptors > 0 { samples.append(sample) }
}
command.process.waitUntilExit()
let status = command.process.terminationStatus

// From the end of the first minute to the last sample before the scenario's end (after it the
// run stops its workloads and writes its report).
let warm = samples.filter { $0.time >= 60 && $0.time <= minutes * 60 - interval }
guard let first = warm.first, let last = warm.last else { fail("no samples after the first minute (run status \(status))") }
func row(_ sample: ResourceSample) -> String {
    String(format: "| %.0f s | %d | %d | %.1f MB | %.1f MB | %d | %d |", sample.time, sample.descriptors, sample.threads,
           Double(sample.residentKilobytes) / 1024, Double(sample.anonymousKilobytes) / 1024, sample.established, sample.lingering)
}
/// Least-squares slope of resident memory in MB per 10 minutes, and the half-width of its 95%
/// interval (from the residuals' spread, as for independent samples: neighbouring samples of
/// a process's memory are not, so the interval is if anything too narrow).
func slope(_ points: [ResourceSample], of kilobytes: KeyPath<ResourceSample, Int> = \.residentKilobytes) -> (slope: Double, interval: Double) {
    let n = Double(points.count)
    let memory = points.map { Double($0[keyPath: kilobytes]) / 1024 }
    let meanT = points.map(\.time).reduce(0, +) / n, meanM = memory.reduce(0, +) / n
    let covariance = zip(points, memory).map { ($0.time - meanT) * ($1 - meanM) }.reduce(0, +)
    let variance = points.map { ($0.time - meanT) * ($0.time - meanT) }.reduce(0, +)
    guard variance > 0, n > 2 else { return (0, .infinity) }
    let b = covariance / variance
    let residuals = zip(points, memory).map { $1 - (meanM + b * ($0.time - meanT)) }
    let standardError = (residuals.map { $0 * $0 }.reduce(0, +) / (n - 2) / variance).squareRoot()
    return (b * 600, 1.96 * standardError * 600)
}
print("Soak: \(Int(minutes)) min of Wi-Fi flapping every 2 s under a handover stream, handover requests every 200 ms and a bulk transfer"
    + (scale < 1 ? String(format: " at time scale %g (%.1f h of the scenario)", scale, minutes / 60 / scale) : ""))
print("(userspace backend; roam run exited \(status); \(samples.count) samples every \(Int(interval)) s)")
print("")
print("| at | descriptors | threads | resident | of which anonymous | established sockets | closing sockets |")
print("|---|---|---|---|---|---|---|")
print(row(first))
print(row(warm[warm.count / 2]))
print(row(last))
print("")
let descriptors = warm.map(\.descriptors), threads = warm.map(\.threads)
let trend = slope(warm)
print("After the first minute: descriptors \(descriptors.min()!)–\(descriptors.max()!), threads \(threads.min()!)–\(threads.max()!), "
    + String(format: "resident memory %+.3f ± %.3f MB per 10 min (least squares, 95%%), ", trend.slope, trend.interval)
    + "at most \(warm.map(\.established).max()!) established and \(warm.map(\.lingering).max()!) closing sockets in the namespaces")
// The second half alone: whether memory has settled once what fills to a bound has filled.
let settled = slope(Array(warm.suffix(from: warm.count / 2)))
print(String(format: "Second half alone: resident memory %+.3f ± %.3f MB per 10 min ", settled.slope, settled.interval)
    + (abs(settled.slope) <= settled.interval ? "(0 within the interval)" : "(0 outside the interval)"))
// Anonymous memory (heap, stacks) apart from mapped files, whose pages count once first touched.
let anonymous = slope(warm, of: \.anonymousKilobytes)
print(String(format: "Anonymous memory alone (heap, stacks; without the program's and libraries' pages): %+.3f ± %.3f MB per 10 min", anonymous.slope, anonymous.interval))
let reportSize = (try? FileManager.default.attributesOfItem(atPath: work + "/report/report.html")[.size] as? Int) ?? 0
print(String(format: "report.html of the run: %.0f KB", Double(reportSize) / 1024))
print(abs(trend.slope) <= trend.interval ? "Resident memory: no growth (0 is within the slope's 95% interval)"
      : "Resident memory: \(trend.slope > 0 ? "grows" : "shrinks") (0 is outside the slope's 95% interval)")
try? FileManager.default.removeItem(atPath: work)
exit(status == 0 || status == 1 ? 0 : 1)
