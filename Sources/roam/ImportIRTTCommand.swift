import ArgumentParser
import RoamCore
import RoamReport
import RoamSystem
import ScenarioModel

/// `roam import irtt`: an IRTT recording made into a scenario.
struct ImportIRTTCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "irtt",
        abstract: "Make an IRTT recording (irtt client -o FILE.json) into a scenario whose link plays its delays and losses.",
        discussion: """
            IRTT sends a small UDP packet on a fixed interval and records each round trip: its one-way delays (when \
            the server stamps its packets and the two clocks are in step), its round-trip time and whether it was \
            lost, and which way. The scenario has one link between phone and server; each window (--window, 1 s \
            by default) sets each direction's delay to the window's median and its loss to the share lost that way. \
            What could not be carried over (reordering, the variation within a window, losses IRTT could not \
            place) is said in comments at the top. Add workloads to play something across it.
            """
    )

    @Argument(help: ArgumentHelp("IRTT's JSON output (irtt client -o FILE.json; gunzip a .json.gz first).", valueName: "file"))
    var file: String

    @Option(help: "The scenario's name (letters, digits, '-', '_').")
    var name: String

    @Option(help: ArgumentHelp("Each window's length: the resolution of what the link plays (100ms to 60s).", valueName: "duration"))
    var window: String = "1s"

    @Option(help: ArgumentHelp("When the recording's first round trip falls in the scenario (the link holds the first window's conditions until then: time for its programs to start).", valueName: "duration"))
    var start: String = "0s"

    @Option(help: "The interface type of the link: wifi, cellular, wiredEthernet, other.")
    var type: String?

    @Option(name: [.short, .long], help: ArgumentHelp("Write the scenario here instead of standard output.", valueName: "file"))
    var output: String?

    func validate() throws {
        guard ScenarioReader.isProfileName(name) else {
            throw ValidationError("--name \(escapedForMessage(name)): start with a letter and use letters, digits, '-', '_' (at most 64)")
        }
        guard case .success(let width) = Units.duration(window), width >= .milliseconds(100), width <= .seconds(60) else {
            throw ValidationError("--window \(escapedForMessage(window)): expected a duration from 100ms to 60s, such as 1s")
        }
        guard case .success(let offset) = Units.duration(start), offset >= .zero, offset <= .seconds(3600) else {
            throw ValidationError("--start \(escapedForMessage(start)): expected a duration from 0s to 1h, such as 2s")
        }
        if let type {
            guard let interfaceType = InterfaceType(name: type), interfaceType != .loopback else {
                throw ValidationError("--type \(escapedForMessage(type)): expected wifi, cellular, wiredEthernet (or wired), other")
            }
        }
    }

    func run() throws {
        let width = (try? Units.duration(window).get()) ?? .seconds(1)
        let offset = (try? Units.duration(start).get()) ?? .zero
        try importing {
            let recording = try IRTTImport.read(file)
            let span = recording.roundTrips.map(\.at).max() ?? .zero
            guard span / width < 50_000 else {
                throw ScenarioError("\(span.roamDescription) in windows of \(width.roamDescription) is more than 50,000 windows: choose a wider --window")
            }
            let (windows, _, notes) = IRTTImport.windows(recording, width: width)
            let yaml = IRTTImport.scenarioYAML(name: name, windows: windows, type: type.flatMap { InterfaceType(name: $0) }.map(\.rawValue),
                                               recording: recording, notes: notes, source: file, start: offset)
            try writeImportedScenario(yaml, name: name, notes: notes, output: output, summary: "\(windows.count) windows of \(width.roamDescription)")
        }
    }
}
