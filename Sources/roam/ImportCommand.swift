import ArgumentParser
import Glibc
import Simulator

/// `roam import mahimahi`: traces made into a link profile.
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Make mahimahi delivery traces into a link profile for a scenario's profiles: section.",
        discussion: """
            A mahimahi trace lists, one per line, the millisecond of each 1500-byte delivery opportunity, and \
            repeats. mahimahi records one per direction (NAME.up from the phone, NAME.down to it). The output is \
            a profiles: block to add to a scenario, with each trace's figures as comments; links then use \
            profile: NAME. The trace paths in it are relative to the output file's directory (-o), or as given.
            """
    )

    enum Source: String, ExpressibleByArgument, CaseIterable {
        case mahimahi
    }

    @Argument(help: "The kind of trace.")
    var source: Source

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

    func run() throws {
        guard let first = name.first, first.isLetter, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            throw ValidationError("--name \(name): start with a letter and use letters, digits, '-', '_'")
        }
        if let type, !["wifi", "cellular", "wiredEthernet", "wired", "other"].contains(type) {
            throw ValidationError("--type \(type): expected wifi, cellular, wiredEthernet or other")
        }
        var oneWay: Duration?
        if let delay {
            guard case .success(let value) = Units.duration(delay) else { throw ValidationError("--delay \(delay): expected a duration such as 20ms") }
            oneWay = value
        }
        var lossFraction: Double?
        if let loss {
            guard case .success(let value) = Units.percentage(loss), value <= 1 else { throw ValidationError("--loss \(loss): expected a percentage such as 0.5%") }
            lossFraction = value
        }
        do throws(SimulatorError) {
            let upTrace = try MahimahiImport.read(up), downTrace = try MahimahiImport.read(down)
            let upSummary = MahimahiImport.summarize(upTrace), downSummary = MahimahiImport.summarize(downTrace)
            let yaml = MahimahiImport.profileYAML(
                name: name, upPath: relative(up), downPath: relative(down), up: upSummary, down: downSummary, type: type,
                delay: oneWay, loss: lossFraction, sources: (up, down))
            printError("up:   \(upSummary)")
            printError("down: \(downSummary)")
            if let output {
                try writeTextFile(yaml, to: output)
                writeLine("\(output): profile '\(name)'; add it to a scenario's profiles: and use profile: \(name) on a link")
            } else {
                writeLine(yaml)
            }
        } catch {
            printError("roam import: \(error.message)")
            throw ExitCode.badInput
        }
    }

    /// `path` as the output file's directory sees it.
    private func relative(_ path: String) -> String {
        guard let output, !path.hasPrefix("/") else { return path }
        let directory = output.contains("/") ? String(output[..<output.lastIndex(of: "/")!]) : "."
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
