import ArgumentParser
import Glibc
import Netlink
import PathMonitor
import RoamControl
import RoamCore
import RoamSystem
import ScenarioModel
import SystemPackage

/// `roam record`: what this device's interfaces carry, interval by interval, written as a
/// recording (``DeviceRecording``) that `roam import recording` makes into a scenario.
struct RecordCommand: ParsableCommand, SignalHandlingCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record what this device's interfaces carry (Wi-Fi and cellular signal, bitrates, round trips and loss) as a recording Roam replays.",
        discussion: """
            Every interval, for each --interface: its carrier; on a Wi-Fi client, the access point, its signal and \
            the bitrates toward it and from it (nl80211, as iw's station dump); on a cellular interface whose modem \
            ModemManager drives, its access technology, signal quality and LTE or 5G RSRP, RSRQ and SNR (ModemManager's \
            D-Bus API, as mmcli shows them; its signal polling is turned on while recording where it was off); and \
            --echoes ICMP echoes sent \
            through it to the target, spread over the interval's first half, of which those answered within the \
            interval are timed (a later answer counts as lost). \
            With --throughput URL, the URL is downloaded through each interface for the whole recording (curl, \
            started again whenever it ends) and what it received is counted every interval: the downlink a TCP flow \
            got, which the replay plays as the link's rate. \
            Where gpsd runs (--gpsd), the device's latest position fix of each interval is recorded too. \
            The target is each interface's own default gateway unless --target names a host: roam record never \
            probes an address you did not give it or your network did not. One JSON line per interface and \
            interval is written to --output as it is measured, so an interrupted recording keeps what it had. \
            With --scenario, the scenario that replays it is written too (as roam import recording makes it).
            """
    )

    @Option(name: .customLong("interface"), help: ArgumentHelp("An interface to record, NAME or NAME=TYPE (wifi, cellular, wired, other; by default what the path monitor classifies it as). Repeatable.", valueName: "name"))
    var interfaces: [String] = []

    @Option(help: ArgumentHelp("Where the echoes go: 'gateway' (each interface's own default gateway) or an IP address you may probe.", valueName: "address"))
    var target: String = "gateway"

    @Option(help: ArgumentHelp("How long to record (1s to 24h); until interrupted without it.", valueName: "duration"))
    var duration: String?

    @Option(help: ArgumentHelp("The interval of a sample (100ms to 60s).", valueName: "duration"))
    var interval: String = "1s"

    @Option(help: ArgumentHelp("Echoes an interval and interface (0 to 100; 0 records the radio alone).", valueName: "count"))
    var echoes: Int = 5

    @Option(name: [.short, .long], help: ArgumentHelp("The recording (JSON Lines), written as it is measured.", valueName: "file"))
    var output: String

    @Option(help: ArgumentHelp("Also write the scenario that replays the recording here (its name is the file's, without .yaml).", valueName: "file"))
    var scenario: String?

    @Option(help: ArgumentHelp("Also measure each interface's downlink: a URL (http:// or https://, of a large file or an endless stream on a server you may load) downloaded through each interface for the whole recording, and what it received counted every interval.", valueName: "url"))
    var throughput: String?

    @Option(help: ArgumentHelp("Where gpsd is, for the device's position: 'auto' (127.0.0.1 port 2947, if it answers), 'off', or ADDRESS:PORT ([ADDRESS]:PORT for IPv6).", valueName: "address"))
    var gpsd: String = "auto"

    func validate() throws {
        guard !interfaces.isEmpty else { throw ValidationError("name an --interface to record (ip link lists them)") }
        guard interfaces.count <= DeviceRecording.maximumInterfaces else {
            throw ValidationError("\(interfaces.count) interfaces: at most \(DeviceRecording.maximumInterfaces)")
        }
        var names = Set<String>()
        for entry in interfaces {
            let (name, type) = Self.split(entry)
            guard DeviceRecording.isInterfaceName(name) else {
                throw ValidationError("--interface \(escapedForMessage(entry)): not an interface name (1 to 15 letters, digits, '-', '_', '.')")
            }
            if let type {
                guard let kind = InterfaceType(name: type), kind != .loopback else {
                    throw ValidationError("--interface \(escapedForMessage(entry)): the type is wifi, cellular, wired (wiredEthernet) or other")
                }
            }
            guard names.insert(name).inserted else { throw ValidationError("--interface \(escapedForMessage(name)) twice") }
        }
        guard target == "gateway" || IPAddress(target) != nil else {
            throw ValidationError("--target \(escapedForMessage(target)): 'gateway' or an IP address (a name is not looked up: say which address you may probe)")
        }
        if let duration {
            guard case .success(let length) = Units.duration(duration), length >= .seconds(1), length <= .seconds(86_400) else {
                throw ValidationError("--duration \(escapedForMessage(duration)): expected a duration from 1s to 24h, such as 60s")
            }
        }
        guard case .success(let every) = Units.duration(interval), every >= .milliseconds(100), every <= .seconds(60) else {
            throw ValidationError("--interval \(escapedForMessage(interval)): expected a duration from 100ms to 60s, such as 1s")
        }
        guard (0...100).contains(echoes) else { throw ValidationError("--echoes \(echoes): from 0 to 100") }
        if let throughput, !ThroughputDownload.isURL(throughput) {
            throw ValidationError("--throughput \(escapedForMessage(throughput, maximumLength: 100)): expected an http:// or https:// URL (no spaces, no user name or password, at most 2048 characters)")
        }
        guard gpsd == "auto" || gpsd == "off" || Self.endpoint(gpsd) != nil else {
            throw ValidationError("--gpsd \(escapedForMessage(gpsd)): 'auto', 'off', or ADDRESS:PORT such as 127.0.0.1:2947 ([ADDRESS]:PORT for IPv6; a name is not looked up)")
        }
        if let scenario {
            guard ScenarioReader.isProfileName(Self.scenarioName(scenario)) else {
                throw ValidationError("--scenario \(escapedForMessage(scenario)): the file's name, without .yaml, is the scenario's: start it with a letter and use letters, digits, '-', '_'")
            }
        }
    }

    static func split(_ entry: String) -> (name: String, type: String?) {
        guard let equals = entry.firstIndex(of: "=") else { return (entry, nil) }
        return (String(entry[..<equals]), String(entry[entry.index(after: equals)...]))
    }

    /// `ADDRESS:PORT` or `[ADDRESS]:PORT`.
    static func endpoint(_ text: String) -> (address: IPAddress, port: UInt16)? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]), port > 0 else { return nil }
        var host = text[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return IPAddress(String(host)).map { ($0, port) }
    }

    static func scenarioName(_ path: String) -> String {
        let base = path.split(separator: "/").last.map(String.init) ?? path
        return base.hasSuffix(".yaml") ? String(base.dropLast(5)) : base
    }

    /// One interface as recorded.
    private struct Recorded {
        var name: String
        var index: Int32
        var type: InterfaceType
        var wireless: Bool
        var probe: EchoProbe?
        /// Its modem's object path, for a cellular interface ModemManager drives.
        var modem: String?
        var sent = 0
        var roundTrips: [Duration] = []
    }

    func run() throws {
        do {
            try record()
        } catch let error as RecordError {
            printError("roam record: \(error.message)")
            throw ExitCode.badInput
        }
    }

    private func record() throws {
        let every = (try? Units.duration(interval).get()) ?? .seconds(1)
        let length = duration.flatMap { try? Units.duration($0).get() }
        let route: NetlinkSocket, generic: NetlinkSocket?
        do {
            route = try NetlinkSocket(.route)
            generic = try? NetlinkSocket(.generic)
        } catch {
            throw RecordError("cannot read this namespace's interfaces: \(error)")
        }
        let routes = (try? route.routes()) ?? []
        let classifier = InterfaceClassifier()
        let facts = SysfsDeviceFacts()
        var recorded: [Recorded] = []
        for (position, entry) in interfaces.enumerated() {
            let (name, given) = Self.split(entry)
            let link: Link?
            do {
                link = try route.link(named: name)
            } catch {
                throw RecordError("cannot read interface \(name): \(error)")
            }
            guard let link else { throw RecordError("there is no interface \(name) here (ip link lists those there are)") }
            let type = given.flatMap { InterfaceType(name: $0) } ?? classifier.classify(link, facts: facts.facts(forInterfaceNamed: name)).type
            let wireless = generic.map { (try? $0.wirelessInterfaceMode(interfaceIndex: link.index))?.isClient == true } ?? false
            var probe: EchoProbe?
            if echoes > 0 {
                let address: IPAddress
                if let given = IPAddress(target) {
                    address = given
                } else {
                    // The interface's own default gateway, IPv4 first, the lowest metric.
                    let gateways = routes.filter { $0.isDefault && $0.interfaceIndices.contains(link.index) }
                        .sorted { ($0.family == .inet ? 0 : 1, $0.metric) < ($1.family == .inet ? 0 : 1, $1.metric) }
                        .compactMap(\.gateway)
                    guard let gateway = gateways.first else {
                        throw RecordError("\(name) has no default gateway to send echoes to: name one with --target ADDRESS, or record the radio alone with --echoes 0")
                    }
                    address = gateway
                }
                probe = try EchoProbe(target: address, interface: name, identifier: UInt16(truncatingIfNeeded: getpid()) &+ UInt16(position))
            }
            recorded.append(Recorded(name: name, index: link.index, type: type == .loopback ? .other : type, wireless: wireless, probe: probe))
        }

        // Cellular interfaces: their modems, as ModemManager knows them. Without it the rest is
        // recorded, and said.
        var radio: ModemManagerRadio?
        let cellular = recorded.indices.filter { recorded[$0].type == .cellular }
        if !cellular.isEmpty {
            do {
                let modems = try ModemManagerRadio()
                let byInterface = try modems.modemsByInterface()
                for index in cellular {
                    guard let path = byInterface[recorded[index].name] else {
                        printError("roam record: \(byInterface.isEmpty ? "ModemManager is not running, or has no modem" : "ModemManager has no modem whose network port is \(recorded[index].name)"): \(recorded[index].name)'s radio is not recorded")
                        continue
                    }
                    recorded[index].modem = path
                    if !modems.startSignalPolling(path, every: every) {
                        printError("roam record: \(recorded[index].name)'s modem has no signal interface (Modem.Signal): its RSRP is not recorded")
                    }
                }
                radio = modems
            } catch {
                printError("roam record: ModemManager cannot be read (\(error)): the cellular interfaces' radio is not recorded")
            }
        }
        defer { radio?.stop() }

        // The device's position, from gpsd where it runs.
        var positions: GPSDFeed?
        if gpsd != "off" {
            let (address, port) = Self.endpoint(gpsd) ?? (IPAddress("127.0.0.1")!, 2947)
            do {
                positions = try GPSDFeed(address: address, port: port)
            } catch {
                guard gpsd == "auto" else { throw error }
                printError("roam record: no gpsd at \(address) port \(port) (\(error.message)): no position is recorded")
            }
        }

        let header = DeviceRecording.Recording(
            interval: every, interfaces: recorded.map { DeviceRecording.Interface(name: $0.name, type: $0.type.rawValue, target: $0.probe?.target) })
        // Before the recording's file is made: a missing curl leaves nothing behind.
        if throughput != nil, findProgram("curl") == nil {
            throw RecordError(ThroughputDownload.curlMissing)
        }
        let file: FileDescriptor
        do throws(SafePathError) {
            let (directory, name) = try SecureDirectory.parent(ofFile: output)
            file = try directory.createFile(named: name)
        } catch {
            throw RecordError("cannot write the recording: \(error.message)")
        }
        defer { try? file.close() }
        try write(DeviceRecording.headerLine(header), to: file)
        var samples = 0

        let stopped: EventSignal
        do {
            stopped = try EventSignal()
        } catch {
            throw RecordError("cannot wait for a signal: \(error)")
        }
        CommandSignals.watch("record", nil) { stopped.signal() }
        // The downloads, one an interface, once the recording's file is open.
        let downloads = throughput.map { url in recorded.map { ThroughputDownload(url: url, interface: $0.name) } } ?? []
        defer { for download in downloads { download.stop() } }
        printError("roam record: recording \(recorded.map { "\($0.name) (\($0.type.rawValue)\($0.probe.map { ", echoes to \($0.target)" } ?? ""))" }.joined(separator: ", "))\(throughput.map { ", downloading \(escapedForMessage($0, maximumLength: 200)) through each" } ?? "")\(positions.map { " and gpsd's position (\($0.address) port \($0.port))" } ?? "") every \(every.roamDescription)\(length.map { " for \($0.roamDescription)" } ?? " until interrupted") into \(output)")

        let start = MonotonicInstant.now
        var tick = 0
        var running = true
        while running {
            let begins = start + every * tick
            let ends = start + every * (tick + 1)
            // The echoes of the interval, spread evenly over its first half, and their answers
            // as they come: each has at least half the interval to come back.
            var due: [(at: MonotonicInstant, interface: Int)] = []
            for index in recorded.indices where recorded[index].probe != nil {
                for echo in 0..<echoes { due.append((begins + every * echo / (2 * echoes), index)) }
            }
            due.sort { $0.at < $1.at }
            for download in downloads { try download.startIfIdle(at: MonotonicInstant.now) }
            var next = 0
            while true {
                let now = MonotonicInstant.now
                while next < due.count, due[next].at <= now {
                    recorded[due[next].interface].probe?.send(at: now)
                    recorded[due[next].interface].sent += 1
                    next += 1
                }
                if now >= ends { break }
                let wake = next < due.count ? min(due[next].at, ends) : ends
                let entries = recorded.compactMap { $0.probe?.pollEntry } + (positions.map { [$0.pollEntry] } ?? []) + downloads.flatMap(\.pollEntries)
                if !stopped.wait(until: wake, wakingOn: entries) {
                    running = false
                    break
                }
                let arrived = MonotonicInstant.now
                positions?.receive()
                for download in downloads { download.receive() }
                for index in recorded.indices {
                    if let probe = recorded[index].probe { recorded[index].roundTrips += probe.receive(at: arrived) }
                }
            }
            guard running else { break }
            // The interval's sample of each interface.
            let at = every * (tick + 1)
            for download in downloads { download.receive() }
            for index in recorded.indices {
                var sample = DeviceRecording.Sample(at: at, interface: recorded[index].name, sent: recorded[index].sent,
                                                    received: recorded[index].roundTrips.count)
                sample.carrier = (try? route.link(index: recorded[index].index))?.map(\.isRunning)
                if !recorded[index].roundTrips.isEmpty {
                    sample.roundTrip = recorded[index].roundTrips.reduce(.zero, +) / recorded[index].roundTrips.count
                    sample.roundTripMinimum = recorded[index].roundTrips.min()
                }
                if recorded[index].wireless, let generic, let station = (try? generic.wirelessStations(interfaceIndex: recorded[index].index))?.first {
                    sample.bssid = station.address.count == 6 ? station.address.map { byte in
                        let hex = String(byte, radix: 16)
                        return hex.count == 1 ? "0" + hex : hex
                    }.joined(separator: ":") : nil
                    sample.signal = station.signal.map { min(0, max(-150, $0)) }
                    sample.transmitBitrate = station.transmitBitrate
                    sample.receiveBitrate = station.receiveBitrate
                }
                if index < downloads.count { sample.throughput = downloads[index].take(intervalStart: begins, interval: every) }
                if let path = recorded[index].modem, let reading = try? radio?.read(path) {
                    sample.technology = reading.technology
                    sample.quality = reading.quality
                    sample.rsrp = reading.rsrp.map { min(0, max(-200, $0)) }
                    sample.rsrq = reading.rsrq.map { min(20, max(-50, $0)) }
                    sample.snr = reading.snr.map { min(60, max(-50, $0)) }
                }
                try write(DeviceRecording.line(sample), to: file)
                samples += 1
                recorded[index].probe?.forgetOutstanding()
                recorded[index].sent = 0
                recorded[index].roundTrips.removeAll(keepingCapacity: true)
            }
            positions?.receive()
            if let fix = positions?.take() {
                try write(DeviceRecording.line(DeviceRecording.Fix(at: at, latitude: fix.latitude, longitude: fix.longitude, speed: fix.speed)), to: file)
            }
            tick += 1
            if let length, every * tick >= length { running = false }
        }
        for download in downloads { download.stop() }
        for download in downloads where download.ends > 0 {
            printError("roam record: \(download.interface)'s download ended \(download.ends) time\(download.ends == 1 ? "" : "s") and was started again (the first: \(download.firstEnd ?? "?")); the intervals it did not cover have no throughput")
        }
        writeLine("\(output): \(samples / max(recorded.count, 1)) intervals of \(every.roamDescription) on \(recorded.map(\.name).joined(separator: ", "))")
        if let scenario {
            guard samples > 0 else { throw RecordError("nothing was recorded (interrupted before the first interval ended): no scenario written") }
            // As `roam import recording` makes it, from the file as written.
            try importing {
                let recording = try DeviceRecording.read(output)
                let made = try ImportRecordingCommand.scenario(recording, name: Self.scenarioName(scenario), source: output, width: every, start: .zero)
                try writeImportedScenario(made.yaml, name: Self.scenarioName(scenario), notes: made.notes, output: scenario, summary: made.summary)
            }
        }
        // Interrupted is how a recording without --duration is meant to end (exit 0).
        if CommandSignals.received.load(ordering: .relaxed) == SIGPIPE { throw ExitCode(128 + SIGPIPE) }
    }

    private func write(_ line: String, to file: FileDescriptor) throws(RecordError) {
        do {
            try writeAll(Array((line + "\n").utf8), to: file)
        } catch {
            throw RecordError("cannot write the recording \(output): \(error)")
        }
    }
}
