import CRoamLinux
import Glibc
import PathMonitor
import RoamReport
import RoamControl
import RoamCore
import RoamSystem
import ScenarioModel
import Simulator
import Synchronization
import SystemPackage
import Yams
import LinkEmulation

/// The fuzz targets of Roam's input readers: each takes arbitrary bytes, runs them through a
/// reader as `roam` would, and checks what must hold whatever the input. A violation stops the
/// process (`preconditionFailure`), which a fuzzer reports as a crash; so does any trap inside
/// the readers. `Fuzz/` builds one libFuzzer binary per target, and the test suite replays the
/// committed corpus and every crash found (`Fuzz/Corpus`, `Fuzz/Regressions`).
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// A scenario file (`roam validate`, `roam run`), and, when valid, what is made from it:
    /// the timeline's expansion and the Chaos Mesh export.
    case scenario
    /// A mahimahi delivery trace (`trace:`, `roam import`), and its summary.
    case trace
    /// An interfaces file (`roam monitor --interfaces`), alias tags, and the same text as a
    /// per-program policy file (`roam daemon --cgroup-policy`).
    case interfaces
    /// The JSON reader (`roam report`).
    case json
    /// A run's `summary.json` and `timeline.jsonl` (`roam report`), rendered to HTML. The input
    /// holds both, split at the first NUL byte.
    case report
    /// A scenario exported to Chaos Mesh (`roam export`): the YAML reads back, its notes are
    /// bounded, and its size is bounded by the timeline's changes, not by the input's tricks.
    case export
    /// `roam import mahimahi`: a trace's file name and its text, split at the first NUL byte,
    /// made into a profile that reads back as exactly one profile (no YAML of the name's making).
    case `import`
    /// IRTT's JSON output (`roam import irtt`): read or refused with a message; what is read
    /// becomes windows and a scenario the reader accepts, its size bounded by the windows.
    case irtt
    /// A G-NetTrack Pro log (`roam import gnettrack`): read or refused with a line number; what
    /// is read becomes a scenario the reader accepts, its size bounded by its windows.
    case gnettrack
    /// Lumos5G's CSV (`roam import lumos5g`): read or refused with a line number; every run read
    /// becomes a scenario the reader accepts, its size bounded by its windows, and a track the
    /// track reader accepts.
    case lumos5g
    /// An MP-Traces pair (`roam import mp-traces`): two files split at the first NUL byte, read
    /// or refused with a line number; what is read becomes a two-link scenario the reader
    /// accepts, its size bounded by its windows.
    case mptraces
    /// A recording of `roam record` (`roam import recording`): read or refused with a line
    /// number; what is read becomes a scenario the reader accepts, its size bounded by its
    /// windows, and every sample written again reads back as itself.
    case recording
    /// Two runs compared in one page (`roam report A B`): summary, timeline, summary, timeline,
    /// split at NUL bytes; one script, the page's own, and a size bounded by the input's.
    case compare
    /// The scenario reader's diagnostics: however many problems and however long the lines,
    /// at most 100 are kept (and a count of the rest), and what they print is bounded by a
    /// constant, whatever the input.
    case diagnostics
    /// What a connectivity probe gets back (`roam monitor --validate`), and probe URLs: an
    /// answer parses within its bounds (a head of 8 KiB, a body of 16 KiB, a printable
    /// `Location` of 2 KiB) and is judged, and read as a captive-portal API's JSON (RFC 8908);
    /// a URL parses or is refused, never trapped on.
    case probe
    /// A change sent to a run's control API (`roam run --control`): the first byte chooses the
    /// link, the time and whether the run is open-ended, the rest is the body. It is read
    /// against a fixed scenario or refused with at most 100 diagnostics; what it expands to
    /// stays within the timeline's bound, acts on the link named, and resolves from the links'
    /// state.
    case live
    /// A packet a TUN interface with offloads hands the userspace emulator (what any program in
    /// a node can make the kernel send): a `virtio_net_hdr` (the first 10 bytes) and the packet.
    /// It is cut into wire packets or refused, never trapped on; never more than the limit of
    /// segments, none longer than the packet, each IPv4 header's checksum complete; what the
    /// emulator would merge of them on the way out cuts back into the same packets.
    case segment
    /// Movement and radio (`mobility:`), built from the bytes as the scenario reader would let
    /// them be (coordinates within a thousand kilometres, speeds 0.01-350 m/s, areas as small
    /// as floating point allows, obstacles and transmitters anywhere): a derivation whose counted
    /// work is within `MobilityDerivation.maximumWork` ends, its walkers' loops within their
    /// bound, every position in its area and every event within the run.
    case mobility
    /// A request to a run's control API (`roam run --control`): method, target (path and
    /// query), `Last-Event-ID`, `Authorization` and body, split at NUL bytes, answered by the API
    /// before the run starts and after it ends. Exactly one answer, at once, with a known status;
    /// every number range-checked (a 400, never a trap); an answer's size bounded whatever the
    /// request; the token compared whole.
    case control
    /// A body of a run's toxiproxy API (`roam run --toxiproxy-port`): the first byte chooses
    /// what it is (a proxy, an update to one, a toxic, an update to one, a populate list, or the
    /// bytes of a connection through a proxy's HTTP toxics), the rest is the body. Read or refused with at most 100 diagnostics; what is read is within
    /// its bounds (names, ports, toxicity, attributes, counts), and shown in toxiproxy's form it
    /// reads back as the same value.
    case proxy
    /// A request to `roam daemon`'s path service: method, target, `Last-Event-ID`, the peer's
    /// user (its first byte: 0 root, 1 the daemon's, another one else) and a path's JSON (as
    /// `roam monitor --daemon` and clients decode it), split at NUL bytes. Exactly one answer,
    /// at once, with a known status, bounded whatever the request; only the daemon's user and
    /// root change anything; a path that decodes encodes back to itself.
    case daemon

    /// Runs one input through the target.
    public func run(_ bytes: UnsafeRawBufferPointer) {
        let text = String(decoding: bytes, as: UTF8.self)
        switch self {
        case .scenario: Self.scenario(text)
        case .trace: Self.trace(text)
        case .interfaces: Self.interfaces(text)
        case .json: Self.json(text)
        case .report: Self.report(bytes)
        case .export: Self.export(text)
        case .import: Self.importProfile(bytes)
        case .irtt: Self.irtt(bytes)
        case .gnettrack: Self.gnettrack(bytes)
        case .lumos5g: Self.lumos5g(bytes)
        case .mptraces: Self.mptraces(bytes)
        case .recording: Self.recording(bytes)
        case .compare: Self.compare(bytes)
        case .diagnostics: Self.diagnostics(text)
        case .probe: Self.probe(bytes)
        case .live: Self.live(bytes)
        case .segment: Self.segment(bytes)
        case .mobility: Self.mobility(bytes)
        case .control: Self.control(bytes)
        case .proxy: Self.proxy(bytes)
        case .daemon: Self.daemon(bytes)
        }
    }

    /// Runs one input given as an array.
    public func run(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { run($0) }
    }

    static let liveScenario: Scenario = {
        let text = """
            name: live
            duration: 60s
            nodes: {phone: {}, server: {}}
            profiles:
              slow: {delay: 300ms, rate: 256kbit}
            links:
              - {name: wifi, between: [phone, server], type: wifi, delay: 10ms, rate: 50mbit, loss: 1%}
              - {name: cell, between: [phone, server], type: cellular, delay: 40ms}
            """
        guard let scenario = ScenarioReader.parse(text, file: "live.yaml").scenario else { preconditionFailure("the live target's scenario reads") }
        return scenario
    }()

    static func live(_ bytes: UnsafeRawBufferPointer) {
        guard let first = bytes.first else { return }
        let link = ["wifi", "cell", "wlan0"][Int(first >> 1) % 3]
        let at = Duration.milliseconds(Int(first) * 250)
        let outcome = LiveChange.read(String(decoding: bytes.dropFirst(), as: UTF8.self), target: .link(link), scenario: liveScenario,
                                      at: at, open: first & 1 == 1)
        precondition(outcome.diagnostics.count <= 101, "diagnostics are bounded")
        guard let events = outcome.events else {
            precondition(!outcome.errors.isEmpty, "a refused change says why")
            return
        }
        precondition(events.allSatisfy { $0.link == link && $0.at >= at }, "a change acts on its link, from now")
        let count = events.reduce(0) { $0 + TimelineSchedule.changeCount(of: $1) }
        precondition(count <= ScenarioLimits.maximumChanges, "a change expands within the bound")
        let state = Dictionary(uniqueKeysWithValues: liveScenario.links.map { link in
            (link.name, [TrafficDirection.up: LinkConditions(impairment: link.up), .down: LinkConditions(impairment: link.down)])
        })
        let changes = TimelineSchedule.liveChanges(events, scenario: liveScenario, from: state)
        precondition(changes.count <= 2 * ScenarioLimits.maximumChanges && changes.allSatisfy { $0.live && $0.link == link },
                     "live changes are marked and bounded")
        precondition(changes.allSatisfy { change in
            if case .conditions(_, let conditions) = change.change { conditions.flows.count <= ScenarioLimits.maximumFlows } else { true }
        }, "a direction holds at most the bound of flows")
    }

    static func scenario(_ text: String) {
        // Traces named by the input resolve against a directory that holds none.
        let outcome = ScenarioReader.parse(text, file: "fuzz.yaml", baseDirectory: "/nonexistent-roam-fuzz")
        for (index, diagnostic) in outcome.diagnostics.enumerated() {
            let first = diagnostic.description.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)[0]
            precondition(!diagnostic.message.contains("\n") && !diagnostic.message.contains("\r"), "a diagnostic message spans lines")
            // Past the first 100, the rest are counted in one last note about the file, with no place.
            if index == outcome.diagnostics.count - 1, diagnostic.line == 0, diagnostic.message.hasSuffix("fix these and read the file again") {
                precondition(first.hasPrefix("fuzz.yaml: error: ") && outcome.diagnostics.count > 100, "a note of problems not shown: \(first)")
                continue
            }
            precondition(diagnostic.line >= 1 && diagnostic.column >= 1, "a diagnostic has no place: \(first)")
            precondition(first.hasPrefix("fuzz.yaml:\(diagnostic.line):\(diagnostic.column): "), "not FILE:LINE:COL: \(first)")
        }
        guard let scenario = outcome.scenario else {
            precondition(!outcome.errors.isEmpty, "no scenario and no error")
            return
        }
        // What the reader accepts, the runner accepts.
        precondition(scenario.problems.isEmpty, "the reader accepted what the runner refuses: \(scenario.problems)")
        let schedule = TimelineSchedule(scenario: scenario)
        precondition(schedule.changes.count <= 2 * ScenarioLimits.maximumChanges, "the timeline expanded past its bound")
        precondition(schedule.changes.allSatisfy { change in
            if case .conditions(_, let conditions) = change.change { conditions.flows.count <= ScenarioLimits.maximumFlows } else { true }
        } && schedule.initial.allSatisfy { $0.conditions.flows.count <= ScenarioLimits.maximumFlows }, "a direction holds at most the bound of flows")
        // Every link is a device of its own by default, so the export refuses nothing read
        // (networks included: what it cannot play is in its notes).
        precondition((try? ChaosMeshExport.export(scenario)) != nil, "the export refused a scenario with default devices")
        _ = scenario.timeScaled(by: 0.5)
    }

    static func probe(_ bytes: UnsafeRawBufferPointer) {
        if let response = ProbeResponse(parsing: bytes) {
            precondition((0...999).contains(response.status), "a status of more than three digits")
            precondition(response.body.count <= ConnectivityProbe.maximumAnswer, "a body past the probe's limit")
            if let location = response.location {
                precondition(location.utf8.count <= 2048 && location.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f }, "an unprintable or long Location")
            }
            let judged = ConnectivityProbe.judge(response, ConnectivityValidation(url: "http://connectivity.roam.test/generate_204"), url: "http://x/")
            precondition(judged.state != .unknown, "an answer judged unknown")
            // The same answer as a captive-portal API's (RFC 8908): taken within its bounds, or refused saying why.
            switch PortalAPIAnswer.parse(response) {
            case .success(let answer):
                if let url = answer.userPortalURL {
                    precondition(url.utf8.count <= 2048 && url.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f }, "an unprintable or long user-portal-url")
                }
                if let seconds = answer.secondsRemaining {
                    precondition((0...PortalAPIAnswer.maximumSeconds).contains(seconds), "seconds-remaining out of range")
                }
            case .failure(let error):
                precondition(!error.description.isEmpty && error.description.utf8.count <= 400, "a refusal without a bounded reason")
            }
        }
        let text = String(decoding: bytes.prefix(4096), as: UTF8.self)
        if case .success(let target) = ConnectivityValidation(url: text).target() {
            precondition(!target.host.isEmpty && target.port > 0 && target.path.hasPrefix("/"), "a probe URL parsed into nothing")
        }
    }

    static func trace(_ text: String) {
        guard case .success(let trace) = DeliveryTrace.parse(text) else { return }
        precondition(trace.period >= 1 && trace.period <= DeliveryTrace.maximumMillisecond, "period out of range")
        _ = MahimahiImport.summarize(trace)
        let end = trace.period * 1_000_000 * 3
        let index = trace.index(atOrAfter: end / 2)
        precondition(trace.time(ofIndex: index) >= end / 2, "the opportunity found is before the time asked")
    }

    static func interfaces(_ text: String) {
        if let rules = try? InterfaceRules(parsing: text, source: "fuzz") {
            for name in ["wlan0", "eth0", "wwan0", "lo", String(text.prefix(15))] { _ = rules.attributes(forInterfaceNamed: name) }
        }
        // The same text as `roam daemon --cgroup-policy`'s file: refused with at most 21 lines, or
        // read into groups whose nftables rules are one line each (no group's name adds a line
        // or leaves its string).
        do throws(CgroupPolicies.ParseError) {
            let policies = try CgroupPolicies(parsing: text, source: "fuzz")
            precondition(policies.entries.count <= CgroupPolicies.maximumEntries)
            let path = NetworkPath(status: .unsatisfied, unsatisfiedReason: .noUsableInterface, availableInterfaces: [], primaryInterface: nil,
                                   isExpensive: false, isConstrained: false, supportsIPv4: false, supportsIPv6: false, supportsDNS: false, gateways: [])
            let tables = CgroupPolicyPlan.tables(policies, path: path, routes: [])
            let ruleset = CgroupPolicyPlan.ruleset(tables, present: Set(policies.entries.map(\.cgroup)))
            let empty = CgroupPolicyPlan.ruleset([], present: [])
            precondition(ruleset.split(separator: "\n").count == empty.split(separator: "\n").count + policies.entries.count, "a group added lines")
            precondition(ruleset.filter { $0 == "\"" }.count == 2 * policies.entries.count, "a group's name left its string")
        } catch {
            precondition(error.description.split(separator: "\n").count <= 21, "too many lines refusing a policy")
        }
        for line in textLines(text).prefix(64) {
            let attributes = InterfaceTag.attributes(fromAlias: String(line))
            _ = InterfaceTag.problems(inAlias: String(line))
            // What a tag says, written back as a tag, says the same.
            precondition(InterfaceTag.attributes(fromAlias: InterfaceTag.alias(for: attributes)) == attributes, "tag round trip differs")
        }
    }

    static func json(_ text: String) {
        guard let value = try? JSONValue.parse(text) else { return }
        // What the reader reads, the writer writes back to the same value.
        guard let again = try? JSONValue.parse(value.serialized) else {
            preconditionFailure("the JSON writer wrote what the reader refuses: \(value.serialized.prefix(200))")
        }
        precondition(again == value, "JSON round trip differs")
    }

    static func report(_ bytes: UnsafeRawBufferPointer) {
        let split = bytes.firstIndex(of: 0) ?? bytes.count
        let summary = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<split]), as: UTF8.self)
        let timeline = split < bytes.count ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[(split + 1)...]), as: UTF8.self) : ""
        streamedLinesMatch(timeline, pieceBytes: 1 + Int(bytes.count % 7))
        guard let run = try? RecordedRun.parse(directory: "fuzz", summary: summary, timeline: timeline) else { return }
        let html = HTMLReport.render(run)
        precondition(html.hasPrefix("<!DOCTYPE html>") || html.hasPrefix("<!doctype html>"), "the report is not a page")
        _ = HTMLReport.render(comparing: run, run)
    }

    /// The lines `roam report` reads from a timeline a piece at a time are the lines of the
    /// timeline read whole, whatever the pieces cut (a CR LF pair, a multi-byte line break).
    static func streamedLinesMatch(_ timeline: String, pieceBytes: Int) {
        let fd = roam_memfd_create("roam-fuzz-timeline")
        precondition(fd >= 0, "memfd_create: \(errno)")
        let file = FileDescriptor(rawValue: fd)
        defer { try? file.close() }
        _ = try? file.writeAll(timeline.utf8)
        _ = try? file.seek(offset: 0, from: FileDescriptor.SeekOrigin.start)
        var streamed: [Substring] = []
        do throws(ReportError) {
            try TimelineStream.forEachLine(of: file, display: "fuzz", maximumBytes: 1 << 30, pieceBytes: pieceBytes) { streamed.append($0) }
        } catch {
            preconditionFailure("streaming a timeline failed: \(error.message)")
        }
        let whole = textLines(timeline)
        precondition(streamed.elementsEqual(whole, by: { Array($0.utf8) == Array($1.utf8) }),
                     "streamed lines differ from the whole text's: \(streamed.count) against \(whole.count)")
    }

    /// `bytes` split at NUL bytes into at most `count` texts.
    static func parts(_ bytes: UnsafeRawBufferPointer, _ count: Int) -> [String] {
        bytes.split(separator: 0, maxSplits: count - 1, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    static func export(_ text: String) {
        guard let scenario = ScenarioReader.parse(text, file: "fuzz.yaml", baseDirectory: "/nonexistent-roam-fuzz").scenario,
              let result = try? ChaosMeshExport.export(scenario) else { return }
        let changes = TimelineSchedule(scenario: scenario).changes.count
        // A step is a few hundred bytes; a link's objects a few kilobytes.
        let bound = 4096 * (changes + 2 * scenario.links.count + 4)
        precondition(result.yaml.utf8.count <= bound, "the export is \(result.yaml.utf8.count) bytes for \(changes) changes")
        precondition(result.notes.count <= 101, "\(result.notes.count) notes")
        for line in result.yaml.split(separator: "\n") where line.hasPrefix("#") {
            precondition(!line.contains("\r") && !line.unicodeScalars.contains { $0.value == 0x85 || $0.value == 0x2028 || $0.value == 0x2029 },
                         "a comment line breaks: \(line.prefix(200))")
        }
        // What it writes, YAML reads back: as many documents as it says.
        guard let documents = try? Yams.load_all(yaml: result.yaml) else {
            preconditionFailure("the export is not YAML: \(result.yaml.prefix(300))")
        }
        precondition(documents.reduce(0) { count, _ in count + 1 } == result.manifests, "the export's documents differ from its count")
    }

    static func importProfile(_ bytes: UnsafeRawBufferPointer) {
        let split = parts(bytes, 2)
        let name = split[0], traceText = split.count > 1 ? split[1] : ""
        guard case .success(let trace) = DeliveryTrace.parse(Array(traceText.utf8)) else { return }
        let summary = MahimahiImport.summarize(trace)
        let yaml = MahimahiImport.profileYAML(name: "lab", upPath: "up.trace", downPath: "down.trace", up: summary, down: summary, type: "cellular",
                                              delay: .milliseconds(20), loss: 0.01, sources: (name, name))
        guard let document = try? Yams.load(yaml: yaml) as? [String: Any] else {
            preconditionFailure("the profile is not a YAML mapping: \(yaml.prefix(300))")
        }
        precondition(Array(document.keys) == ["profiles"], "the profile holds keys of the file name's making: \(document.keys.sorted())")
        precondition((document["profiles"] as? [String: Any])?.keys.sorted() == ["lab"], "more than one profile")
    }

    static func irtt(_ bytes: UnsafeRawBufferPointer) {
        guard case .success(let recording) = IRTTImport.parse(Array(bytes)) else { return }
        let width = Duration.seconds(1)
        // As `roam import irtt` refuses more windows than this.
        guard (recording.roundTrips.map(\.at).max() ?? .zero) / width < 50_000 else { return }
        let (windows, _, notes) = IRTTImport.windows(recording, width: width)
        precondition(!windows.isEmpty && windows.count <= 50_000, "\(windows.count) windows")
        let yaml = IRTTImport.scenarioYAML(name: "imported", windows: windows, type: "cellular", recording: recording, notes: notes, source: "f.json")
        let errors = ScenarioReader.parse(yaml, file: "imported.yaml").errors
        precondition(errors.isEmpty, "the scenario does not validate: \(errors.prefix(3).map(\.message)) in \(yaml.prefix(600))")
        precondition(yaml.utf8.count <= 4096 + 200 * windows.count, "\(yaml.utf8.count) bytes for \(windows.count) windows")
    }

    /// A scenario from recorded interfaces: the reader accepts it, and its size is bounded by
    /// its windows (each window at most one event a direction and link).
    static func checkRecordingScenario(_ interfaces: [RateRecording.Interface], header: [String], notes: [String]) {
        let width = Duration.seconds(1)
        let count = RateRecording.windowCount(interfaces, width: width)
        // As `roam import` refuses more.
        guard count <= RateRecording.maximumWindows else { return }
        let yaml = RateRecording.scenarioYAML(name: "imported", interfaces: interfaces, width: width, start: .seconds(1), header: header, notes: notes)
        let errors = ScenarioReader.parse(yaml, file: "imported.yaml").errors
        precondition(errors.isEmpty, "the scenario does not validate: \(errors.prefix(3).map(\.message)) in \(yaml.prefix(600))")
        precondition(yaml.utf8.count <= 8192 + 2 * interfaces.count * 120 * count, "\(yaml.utf8.count) bytes for \(count) windows")
    }

    static func gnettrack(_ bytes: UnsafeRawBufferPointer) {
        guard case .success(let log) = GNetTrackImport.parse(Array(bytes)) else { return }
        precondition(!log.rows.isEmpty && log.rows.allSatisfy { $0.at >= .zero && $0.at <= ScenarioLimits.maximumDuration }, "rows outside the day")
        precondition(zip(log.rows, log.rows.dropFirst()).allSatisfy { $0.at <= $1.at }, "rows not in time order")
        let (interface, notes) = GNetTrackImport.interface(log)
        checkRecordingScenario([interface], header: GNetTrackImport.header(log, source: "f.csv", width: .seconds(1)), notes: notes)
    }

    static func lumos5g(_ bytes: UnsafeRawBufferPointer) {
        guard case .success(let runs) = Lumos5GImport.parse(Array(bytes)) else { return }
        precondition(!runs.isEmpty && runs.allSatisfy { !$0.rows.isEmpty }, "a run without rows")
        for run in runs.prefix(4) {
            precondition(zip(run.rows, run.rows.dropFirst()).allSatisfy { $0.second <= $1.second }, "rows not in time order")
            let (interface, notes) = Lumos5GImport.interface(run, delay: .milliseconds(10))
            checkRecordingScenario([interface], header: Lumos5GImport.header(run, source: "f.csv", width: .seconds(1)), notes: notes)
            if let track = Lumos5GImport.track(run), track.utf8.count <= RecordedTrack.maximumFileSize,
               track.split(separator: "\n").count <= RecordedTrack.maximumPoints {
                // A run that spans more than the map (1,000 km from its first fix) is refused
                // where the scenario reads the track, with its line.
                if case .failure(let error) = RecordedTrack.parse(Array(track.utf8)) {
                    precondition("\(error)".contains("more than 1,000 km"), "the track does not read back (\(error)): \(track.prefix(600))")
                }
            }
        }
    }

    static func mptraces(_ bytes: UnsafeRawBufferPointer) {
        let split = parts(bytes, 2)
        guard split.count == 2, case .success(let wifi) = MPTracesImport.parse(Array(split[0].utf8)),
              case .success(let cellular) = MPTracesImport.parse(Array(split[1].utf8)) else { return }
        let (interfaces, notes) = MPTracesImport.interfaces(wifi: wifi, cellular: cellular, wifiDelay: .milliseconds(5), cellularDelay: nil)
        checkRecordingScenario(interfaces, header: MPTracesImport.header(wifi: wifi, cellular: cellular, sources: ("w.csv", "c.csv"), width: .seconds(1)), notes: notes)
    }

    static func recording(_ bytes: UnsafeRawBufferPointer) {
        guard case .success(let recording) = DeviceRecording.parse(Array(bytes)) else { return }
        precondition(!recording.samples.isEmpty && recording.samples.allSatisfy { $0.at >= .zero && $0.at <= DeviceRecording.maximumSpan }, "samples outside the day")
        // What roam record writes of what was read reads back as the same recording.
        let text = ([DeviceRecording.headerLine(recording)] + recording.samples.map(DeviceRecording.line)).joined(separator: "\n")
        guard case .success(let again) = DeviceRecording.parse(Array(text.utf8)) else { preconditionFailure("a recording written again does not read back: \(text.prefix(600))") }
        precondition(again.interfaces == recording.interfaces && again.samples.count == recording.samples.count, "written again, it reads back otherwise")
        let (interfaces, notes) = DeviceRecording.interfaces(recording)
        checkRecordingScenario(interfaces, header: DeviceRecording.header(recording, source: "r.jsonl", width: .seconds(1)), notes: notes)
    }

    static func compare(_ bytes: UnsafeRawBufferPointer) {
        let split = parts(bytes, 4)
        guard split.count == 4,
              let a = try? RecordedRun.parse(directory: "a", summary: split[0], timeline: split[1]),
              let b = try? RecordedRun.parse(directory: "b", summary: split[2], timeline: split[3]) else { return }
        let html = HTMLReport.render(comparing: a, b)
        precondition(html.components(separatedBy: "<script").count == 2, "a script of the data's making")
        // Escaping at most multiplies by six (`&quot;`); charts and tables add a bounded amount per value.
        precondition(html.utf8.count <= 64 * bytes.count + 256 * 1024, "the page is \(html.utf8.count) bytes for \(bytes.count) of input")
    }

    static func diagnostics(_ text: String) {
        let outcome = ScenarioReader.parse(text, file: "fuzz.yaml", baseDirectory: "/nonexistent-roam-fuzz")
        precondition(outcome.diagnostics.count <= 101, "\(outcome.diagnostics.count) diagnostics kept")
        let printed = outcome.diagnostics.reduce(0) { $0 + $1.description.utf8.count }
        // 101 diagnostics of at most a 4 KiB message, a 120-character window and a caret each.
        precondition(printed <= 101 * (4096 * 4 + 1024), "the diagnostics print \(printed) bytes")
        for diagnostic in outcome.diagnostics {
            precondition((diagnostic.sourceLine?.unicodeScalars.count ?? 0) <= 200, "a diagnostic holds \(diagnostic.sourceLine?.count ?? 0) characters of its line")
        }
    }

    static func segment(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= VirtioNetHeader.size else { return }
        let header = VirtioNetHeader(bytes)
        let packet = UnsafeRawBufferPointer(rebasing: bytes[VirtioNetHeader.size...])
        var output: [[UInt8]] = []
        guard (try? Segmenter.segment(header, packet, into: &output)) != nil else { return }
        precondition(!output.isEmpty && output.count <= Segmenter.maximumSegments, "segments bounded")
        precondition(output.allSatisfy { $0.count <= packet.count }, "no segment longer than the packet")
        precondition(Segmenter.wirePackets(header, packet) == output.count || header.gsoType == 0, "wire packets counted as cut")
        // What the emulator merges again on the way out cuts back into the same wire packets.
        var position = 0
        while position < output.count {
            let end = Coalescer.run(output, from: position, udp: true)
            precondition(end > position && end <= output.count, "a run ends within the packets")
            if end - position > 1 {
                let (merged, packet) = Coalescer.merge(output[position..<end])
                var again: [[UInt8]] = []
                let cut: Void? = packet.withUnsafeBytes { try? Segmenter.segment(merged, $0, into: &again) }
                precondition(cut != nil && again.elementsEqual(output[position..<end]), "a merged run cuts back into its packets")
            }
            position = end
        }
        if header.gsoType != 0 {
            for segment in output where segment.first.map({ $0 >> 4 == 4 }) == true {
                let length = Int(segment[0] & 0x0f) * 4
                let sum = segment.withUnsafeBytes { Checksum.sum(UnsafeRawBufferPointer(rebasing: $0[..<length])) }
                precondition(Checksum.finish(sum, udp: false) == 0, "every cut IPv4 header's checksum is complete")
            }
        }
    }

    /// Reads the fuzzer's bytes in order; zeros once they run out.
    struct ByteReader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0
        mutating func byte() -> UInt8 {
            guard offset < bytes.count else { return 0 }
            defer { offset += 1 }
            return bytes[offset]
        }
        mutating func double() -> Double {
            var bits: UInt64 = 0
            for _ in 0..<8 { bits = bits << 8 | UInt64(byte()) }
            return Double(bitPattern: bits)
        }
    }

    static func mobility(_ bytes: UnsafeRawBufferPointer) {
        var reader = ByteReader(bytes: bytes)
        func coordinate() -> Double {
            let value = reader.double()
            return value.isFinite ? min(max(value, -1e6), 1e6) : 0
        }
        func position() -> Position { Position(coordinate(), coordinate()) }
        func speed() -> Double {
            let value = abs(reader.double())
            return value.isFinite ? min(max(value, 0.01), 350) : 1
        }
        func pause() -> Duration {
            // Whole tenths of a second, or a few attoseconds (what a file could never say, but
            // what rounding can leave).
            let byte = reader.byte()
            return byte & 1 == 0 ? .milliseconds(Int64(byte) * 100) : Duration(secondsComponent: 0, attosecondsComponent: Int64(byte))
        }
        let kind = reader.byte() % 3
        let step = Duration.milliseconds(100 * (1 + Int64(reader.byte() % 20)))
        let duration = Duration.seconds(1 + Int64(reader.byte()) / 4)
        let area = PhoneMovement.Area(from: position(), to: position())
        let model: PhoneMovement.Model
        var legCount = 0
        switch kind {
        case 0:
            let low = speed(), high = speed()
            let first = pause(), second = pause()
            model = .randomWaypoint(area: area, speed: min(low, high)...max(low, high), pause: min(first, second)...max(first, second))
        case 1:
            model = .gaussMarkov(area: area, speed: speed(), alpha: Double(reader.byte()) / 255)
        default:
            legCount = Int(reader.byte() % 16)
            let start = position()
            model = .waypoints(start: start, legs: (0..<legCount).map { _ in reader.byte() & 1 == 0 ? .pause(pause()) : .move(to: position(), speed: speed()) })
        }
        let phones = 1 + Int(reader.byte() % 3)
        let accessPoints = (0..<(1 + Int(reader.byte() % 4))).map { AccessPoint(name: "ap\($0)", network: "wifi", position: position()) }
        let cells = (0..<Int(reader.byte() % 3)).map { CellSite(name: "cell\($0)", network: "lte", position: position()) }
        let obstacles = (0..<Int(reader.byte() % 8)).map { Obstacle(name: "o\($0)", from: position(), to: position(), attenuation: Double(reader.byte())) }
        let names = (0..<phones).map { "p\($0)" }
        let mobility = Mobility(accessPoints: accessPoints, cellSites: cells, obstacles: obstacles,
                                phones: names.map { PhoneMovement(node: $0, model: model) }, step: step)
        let derivation = MobilityDerivation(mobility: mobility, duration: duration, seed: UInt64(reader.byte()),
                                            networks: [.init(name: "wifi", isCellular: false, members: names),
                                                       .init(name: "lte", isCellular: true, members: names)])
        guard derivation.workUnits <= MobilityDerivation.maximumWork, derivation.sampleCount <= MobilityDerivation.maximumSamples else { return }
        let result = derivation.derive()
        let steps = Int(duration / step)
        precondition(result.movementTurns <= phones * ((steps + 1) * MobilityDerivation.maximumTurnsPerStep + legCount),
                     "the walkers took \(result.movementTurns) turns for \(phones) phones × \(steps + 1) steps")
        precondition(result.samples.count == phones * (steps + 1) * (cells.isEmpty ? 1 : 2), "one sample a step, phone and network")
        if kind != 2 {
            precondition(result.samples.allSatisfy { $0.position.x >= area.from.x && $0.position.x <= area.to.x
                    && $0.position.y >= area.from.y && $0.position.y <= area.to.y }, "a phone left its area")
        }
        precondition(result.samples.allSatisfy { $0.position.x.isFinite && $0.position.y.isFinite }, "a position is not a number")
        precondition(result.events.allSatisfy { $0.at >= .zero && $0.at <= duration }, "an event outside the run")
        precondition(zip(result.events, result.events.dropFirst()).allSatisfy { $0.at <= $1.at }, "events out of time order")
    }

    static let controlToken = String(repeating: "5a", count: 32)

    static func daemon(_ bytes: UnsafeRawBufferPointer) {
        let fields = parts(bytes, 5) + Array(repeating: "", count: 5)
        let (method, target, lastEventID, peerField, json) = (fields[0], fields[1], fields[2], fields[3], fields[4])
        let peer: uid_t? = peerField.utf8.first.map { $0 == 0 ? 0 : $0 == 1 ? 1000 : 1001 }
        let asked = Atomic<Int>(0)
        let service = PathService(owner: 1000, revalidate: { _ in asked.add(1, ordering: .relaxed) })
        let decoded = (try? JSONValue.parse(json)).flatMap(NetworkPath.init(json:))
        if let decoded {
            precondition(NetworkPath(json: decoded.json(time: "t")) == decoded, "a decoded path encodes back to another")
            service.publish(decoded, time: "t")
        }
        let answers = Mutex<[ControlAPI.Answer]>([])
        service.handle(ServiceRequest(method: method, target: target, lastEventID: lastEventID.isEmpty ? nil : lastEventID, peerUID: peer)) { answer in
            answers.withLock { $0.append(answer) }
        }
        let given = answers.withLock { $0 }
        precondition(given.count == 1, "\(given.count) answers to one request")
        switch given[0] {
        case .json(let status, let value):
            precondition([200, 202, 400, 403, 404, 405, 503].contains(status), "status \(status)")
            precondition(status != 202 || peer == 0 || peer == 1000, "a change by another user")
            precondition(status != 200 || decoded != nil, "a path before any was published")
            if status != 200 { precondition(value.serialized.utf8.count <= 2_048, "an answer of \(value.serialized.utf8.count) bytes") }
        case .events(let source, let from):
            precondition(from >= 0 && from <= ControlAPI.maximumSequenceNumber + 1, "from \(from) out of range")
            let batch = source.next(from, 16)
            precondition(batch.lines.count <= 16 && batch.first >= 0, "a batch past its limit")
        }
        precondition(asked.load(ordering: .relaxed) <= 1, "one request, at most one check")
    }

    static func control(_ bytes: UnsafeRawBufferPointer) {
        let fields = parts(bytes, 5) + Array(repeating: "", count: 5)
        let (method, target, lastEventID, authorization, body) = (fields[0], fields[1], fields[2], fields[3], Array(fields[4].utf8))
        let ended = ControlAPI(finish: {})
        ended.ended(.object([("reportDirectory", "roam-reports/fuzz"), ("passed", true)]))
        for api in [ControlAPI(finish: {}), ended] {
            let answers = Mutex<[ControlAPI.Answer]>([])
            api.handle(method: method, target: target, body: body, lastEventID: lastEventID.isEmpty ? nil : lastEventID) { answer in
                answers.withLock { $0.append(answer) }
            }
            let given = answers.withLock { $0 }
            precondition(given.count == 1, "\(given.count) answers to one request")
            guard case .json(let status, let value) = given[0] else { preconditionFailure("an event stream without a run") }
            precondition([400, 404, 405, 410, 503].contains(status), "status \(status)")
            // Whatever the request's size, its answer is bounded (names and values are cut short in messages).
            precondition(value.serialized.utf8.count <= 2_048, "an answer of \(value.serialized.utf8.count) bytes")
        }
        let (_, query) = ControlAPI.split(target)
        if case .start(let from, _) = ControlAPI.eventsStart(query: query, lastEventID: lastEventID.isEmpty ? nil : lastEventID) {
            precondition(from >= 0 && from <= ControlAPI.maximumSequenceNumber + 1, "from \(from) out of range")
        }
        if let number = ControlAPI.sequenceNumber(lastEventID) {
            precondition((0...ControlAPI.maximumSequenceNumber).contains(number) && Int(lastEventID) == number, "'\(lastEventID)' read as \(number)")
        }
        precondition(ControlListeners.authorizes(authorization, token: controlToken) == (authorization == "Bearer " + controlToken),
                     "the token compared other than whole")
    }

    static let proxyBase = ProxySpec(name: "base", listen: ProxyEndpoint(host: "web", port: 8080), upstream: ProxyEndpoint(host: "web", port: 80),
                                     toxics: [Toxic(.latency(latency: .milliseconds(100), jitter: .milliseconds(10)))])

    static func proxy(_ bytes: UnsafeRawBufferPointer) {
        guard let first = bytes.first else { return }
        let body = String(decoding: bytes.dropFirst(), as: UTF8.self)
        let nodes: Set<String> = ["web", "phone"]
        func valid(_ toxic: Toxic) -> Bool {
            guard ProxySpec.isName(toxic.name), (0...1).contains(toxic.toxicity), let bounds = Toxic.Kind.attributeBounds(of: toxic.kind.typeName) else { return false }
            return toxic.kind.attributes.allSatisfy { attribute in bounds.first { $0.name == attribute.0 }?.range.contains(attribute.1) == true }
        }
        func valid(_ proxy: ProxySpec) -> Bool {
            ProxySpec.isName(proxy.name) && proxy.upstream.port != 0 && (proxy.listen.port != 0 || proxy.listen.isLoopback)
                && (proxy.listen.isLoopback || nodes.contains(proxy.listen.host)) && (proxy.upstream.isLoopback || nodes.contains(proxy.upstream.host))
                && proxy.toxics.count <= ProxySpec.maximumToxics && proxy.toxics.allSatisfy(valid) && Set(proxy.toxics.map(\.name)).count == proxy.toxics.count
        }
        func checkBounded(_ diagnostics: [ScenarioDiagnostic], read: Bool) {
            precondition(diagnostics.count <= 101, "diagnostics are bounded")
            precondition(read || diagnostics.contains { $0.severity == .error }, "a refused body says why")
        }
        switch first % 7 {
        case 5, 6:
            proxyStream(Array(bytes.dropFirst()), requests: first % 7 == 5, seed: UInt64(first))
        case 0, 1:
            let outcome = ProxyRequest.proxy(body, nodes: nodes, base: first % 5 == 1 ? proxyBase : nil)
            checkBounded(outcome.diagnostics, read: outcome.value != nil)
            guard let proxy = outcome.value else { return }
            precondition(valid(proxy), "a proxy out of its bounds: \(proxy)")
            precondition(ProxyRequest.proxy(proxy.json.serialized, nodes: nodes).value == proxy, "\(proxy.json.serialized) reads back otherwise")
        case 2, 3:
            let outcome = ProxyRequest.toxic(body, base: first % 5 == 3 ? proxyBase.toxics[0] : nil)
            checkBounded(outcome.diagnostics, read: outcome.value != nil)
            guard let toxic = outcome.value else { return }
            precondition(valid(toxic), "a toxic out of its bounds: \(toxic)")
            let again = ProxyRequest.toxic(toxic.json.serialized).value
            precondition(again?.kind == toxic.kind && again?.stream == toxic.stream && again?.name == toxic.name
                         && again.map { abs($0.toxicity - toxic.toxicity) < 1e-9 } == true, "\(toxic.json.serialized) reads back otherwise")
        default:
            let outcome = ProxyRequest.populate(body, nodes: nodes)
            checkBounded(outcome.diagnostics, read: outcome.value != nil)
            guard let proxies = outcome.value else { return }
            precondition(proxies.count <= ProxySpec.maximumProxies && proxies.allSatisfy(valid) && Set(proxies.map(\.name)).count == proxies.count,
                         "populate out of its bounds")
        }
    }

    /// What a program in a node sends through a proxy's HTTP toxics, in pieces the input's
    /// bytes choose: what passes is always a prefix of what came, in order; none chosen, it is
    /// all of it but a head still incomplete at the end; at most one answer of the proxy's.
    static func proxyStream(_ bytes: [UInt8], requests: Bool, seed: UInt64) {
        let origin = MonotonicInstant(nanoseconds: 1_000_000_000)
        for percent in [0, 100] {
            let toxic = requests ? Toxic(.httpStatus(status: 503, percent: percent), stream: .upstream) : Toxic(.httpTruncate(bytes: 7, percent: percent))
            var chain = ToxicChain(toxics: [toxic], stream: requests ? .upstream : .downstream, now: origin, seed: seed)
            var passed: [UInt8] = []
            var answers = 0
            var offset = 0
            var cut = 1 + Int(seed % 13)
            while offset < bytes.count {
                let piece = Array(bytes[offset..<min(bytes.count, offset + cut)])
                offset += piece.count
                cut = cut * 7 % 97 + 1
                for item in chain.receive(piece, at: origin) {
                    switch item.output {
                    case .data(let data): passed += data
                    case .answer: answers += 1
                    case .end: preconditionFailure("an end without one")
                    }
                }
            }
            precondition(passed.count <= bytes.count && Array(bytes.prefix(passed.count)) == passed, "what passed is not what came, in order")
            precondition(answers <= 1, "\(answers) answers")
            if percent == 0 {
                precondition(answers == 0 && bytes.count - passed.count <= 64 * 1024 + 1, "\(bytes.count - passed.count) bytes held with no toxic chosen")
            }
        }
    }
}
