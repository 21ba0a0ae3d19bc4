import ArgumentParser
import Glibc
import Netlink
import PathMonitor
import RoamReport
import RoamCore
import RoamSystem
import ScenarioModel
import Simulator

/// `roam import`: recordings of real networks made into what a scenario plays.
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Make recordings of real networks into what a scenario plays: mahimahi traces, IRTT round trips, G-NetTrack Pro logs, Lumos5G runs, MP-Traces pairs.",
        subcommands: [ImportMahimahiCommand.self, ImportIRTTCommand.self, ImportGNetTrackCommand.self, ImportLumos5GCommand.self, ImportMPTracesCommand.self, ImportRecordingCommand.self]
    )
}

/// `roam import mahimahi`: traces made into a link profile.
struct ImportMahimahiCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mahimahi",
        abstract: "Make mahimahi delivery traces into a link profile for a scenario's profiles: section.",
        discussion: """
            A mahimahi trace lists, one per line, the millisecond of each 1500-byte delivery opportunity, and \
            repeats. mahimahi records one per direction (NAME.up from the phone, NAME.down to it). The output is \
            a profiles: block to add to a scenario, with each trace's figures as comments; links then use \
            profile: NAME. The trace paths in it are relative to the output file's directory (-o), or to the current \
            directory when it goes to standard output, as scenarios name traces relative to their own directory.
            """
    )

    @Option(help: ArgumentHelp("The uplink trace (from the first node of the link).", valueName: "file"))
    var up: String

    @Option(help: ArgumentHelp("The downlink trace (to the first node).", valueName: "file"))
    var down: String

    @Option(help: "The profile's name (letters, digits, '-', '_').")
    var name: String

    @Option(help: "The interface type links with this profile get: wifi, cellular, wiredEthernet, other.")
    var type: String?

    @Option(help: ArgumentHelp("One-way delay to add to both directions (mahimahi's traces carry none), e.g. 20ms.", valueName: "duration"))
    var delay: String?

    @Option(help: ArgumentHelp("Random loss in both directions, e.g. 0.5%.", valueName: "percentage"))
    var loss: String?

    @Option(name: [.short, .long], help: ArgumentHelp("Write the profile here instead of standard output.", valueName: "file"))
    var output: String?

    /// Checks every option as a scenario's reader would check the profile it becomes.
    func validate() throws {
        guard ScenarioReader.isProfileName(name) else {
            throw ValidationError("--name \(escapedForMessage(name)): start with a letter and use letters, digits, '-', '_' (at most 64)")
        }
        if LinkProfile.named(name) != nil {
            throw ValidationError("--name \(name) is a built-in profile; choose another name (built-in: \(LinkProfile.all.map(\.name).joined(separator: ", ")))")
        }
        if let type {
            guard let interfaceType = InterfaceType(name: type), interfaceType != .loopback else {
                throw ValidationError("--type \(escapedForMessage(type)): expected wifi, cellular, wiredEthernet (or wired), other")
            }
        }
        if let delay {
            guard case .success(let value) = Units.duration(delay), value >= .zero, value <= ScenarioLimits.maximumDelay else {
                throw ValidationError("--delay \(escapedForMessage(delay)): expected a one-way delay from 0ms to \(ScenarioLimits.maximumDelay.roamDescription), such as 20ms")
            }
        }
        if let loss {
            guard case .success(let value) = Units.percentage(loss), (0...1).contains(value) else {
                throw ValidationError("--loss \(escapedForMessage(loss)): expected a percentage from 0% to 100%, such as 0.5%")
            }
        }
    }

    func run() throws {
        let canonicalType = type.flatMap { InterfaceType(name: $0) }.map(\.rawValue)
        let oneWay = delay.flatMap { try? Units.duration($0).get() }
        let lossFraction = loss.flatMap { try? Units.percentage($0).get() }
        try importing {
            let upTrace = try MahimahiImport.read(up), downTrace = try MahimahiImport.read(down)
            let upSummary = MahimahiImport.summarize(upTrace), downSummary = MahimahiImport.summarize(downTrace)
            let yaml = MahimahiImport.profileYAML(
                name: name, upPath: relative(up), downPath: relative(down), up: upSummary, down: downSummary, type: canonicalType,
                delay: oneWay, loss: lossFraction, sources: (up, down))
            // What it writes must be what a scenario accepts: read it back as the reader would.
            let directory = output.map { output in
            guard let slash = output.lastIndex(of: "/") else { return "." }
            return slash == output.startIndex ? "/" : String(output[..<slash])
        } ?? "."
            let problems = MahimahiImport.problems(ofProfile: yaml, named: name, baseDirectory: directory.isEmpty ? "/" : directory)
            guard problems.isEmpty else {
                throw ScenarioError("the profile would not validate in a scenario: " + problems.joined(separator: "; "))
            }
            printError("up:   \(upSummary)")
            printError("down: \(downSummary)")
            if let output {
                try writeTextFile(yaml, to: output)
                writeLine("\(output): profile '\(name)'; add it to a scenario's profiles: and use profile: \(name) on a link")
            } else {
                writeLine(yaml)
            }
        }
    }

    /// `path` as the output file's directory (the current one, for standard output) sees it: a
    /// scenario names its traces relative to its own directory.
    private func relative(_ path: String) -> String {
        let directory = output.map { output in
            guard let slash = output.lastIndex(of: "/") else { return "." }
            return slash == output.startIndex ? "/" : String(output[..<slash])
        } ?? "."
        let absolute = { (text: String) -> [Substring] in
            let base = text.hasPrefix("/") ? text : currentDirectory() + "/" + text
            var parts: [Substring] = []
            for part in base.split(separator: "/") {
                if part == "." { continue }
                if part == ".." { _ = parts.popLast(); continue }
                parts.append(part)
            }
            return parts
        }
        let from = absolute(directory), to = absolute(path)
        var common = 0
        while common < from.count, common < to.count, from[common] == to[common] { common += 1 }
        return (Array(repeating: "..", count: from.count - common) + to[common...].map(String.init)).joined(separator: "/")
    }
}

private func currentDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    guard getcwd(&buffer, buffer.count) != nil else { return "." }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
