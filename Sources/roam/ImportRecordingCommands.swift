import ArgumentParser
import RoamCore
import RoamReport
import RoamSystem
import ScenarioModel

/// What every `roam import` subcommand does with a reader's refusal: one line on standard
/// error and exit 2.
func importing(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as ScenarioError {
        printError("roam import: \(error.message)")
        throw ExitCode.badInput
    } catch let error as ReportError {
        printError("roam import: \(error.message)")
        throw ExitCode.badInput
    }
}

/// The scenario whose links play `interfaces` a window of `width` at a time (refused when
/// there are more windows than a timeline holds), and a summary of it: "N windows of W on
/// link 'cell'". Every recording import makes its scenario here.
func rateScenario(_ interfaces: [RateRecording.Interface], name: String, width: Duration, start: Duration, header: [String],
                  notes: [String]) throws(ScenarioError) -> (yaml: String, summary: String) {
    let count = RateRecording.windowCount(interfaces, width: width)
    guard count <= RateRecording.maximumWindows else {
        throw ScenarioError("\(count) windows of \(width.roamDescription): more than \(RateRecording.maximumWindows) (a timeline's bound); choose a wider --window")
    }
    let yaml = RateRecording.scenarioYAML(name: name, interfaces: interfaces, width: width, start: start, header: header, notes: notes)
    let links = interfaces.map { "'\($0.link)'" }.joined(separator: interfaces.count == 2 ? " and " : ", ")
    return (yaml, "\(count) windows of \(width.roamDescription) on link\(interfaces.count == 1 ? "" : "s") \(links)")
}

/// Checks that `yaml` is a scenario the reader accepts, says the notes, and writes it to
/// `output` or standard output.
func writeImportedScenario(_ yaml: String, name: String, notes: [String], output: String?, summary: String) throws {
    let problems = ScenarioReader.parse(yaml, file: "\(name).yaml").errors
    guard problems.isEmpty else {
        throw ScenarioError("the scenario would not validate: " + problems.prefix(3).map(\.message).joined(separator: "; "))
    }
    for note in notes { printError("roam import: note: \(note)") }
    if let output {
        try writeTextFile(yaml, to: output)
        writeLine("\(output): scenario '\(name)', \(summary); add workloads to play across its links")
    } else {
        writeLine(yaml)
    }
}

/// Writes what an import made: the scenario (``writeImportedScenario(_:name:notes:output:summary:)``)
/// and, where `--track` named a file, the positions as a track. A track asked of a recording
/// without positions is refused before anything is written.
///
/// - Parameters:
///   - track: `--track`'s file, if given.
///   - trackText: The track file's text, or nil when the recording has no positions.
///   - noPositions: Why there is none, for the refusal.
///   - whose: Whose track it is, for the line that names the file ("the drive's").
func writeImportedScenario(_ yaml: String, name: String, notes: [String], output: String?, summary: String,
                           track: String?, trackText: @autoclosure () -> String?, noPositions: String, whose: String) throws {
    var text: String?
    if track != nil {
        guard let made = trackText() else { throw ScenarioError("--track: \(noPositions)") }
        text = made
    }
    try writeImportedScenario(yaml, name: name, notes: notes, output: output, summary: summary)
    if let track, let text {
        try writeTextFile(text, to: track)
        writeLine("\(track): \(whose) track, \(text.split(separator: "\n").count - 1) positions; name it relative to the scenario in mobility: phones: {phone: {track: FILE}}")
    }
}

/// The options every recording import shares: the scenario's name, the windows, the start.
struct RecordingImportOptions: ParsableArguments {
    @Option(help: "The scenario's name (letters, digits, '-', '_').")
    var name: String

    @Option(help: ArgumentHelp("Each window's length: the resolution of what the links play (1s to 60s).", valueName: "duration"))
    var window: String = "1s"

    @Option(help: ArgumentHelp("When the recording's first second falls in the scenario (the links hold their first window's conditions until then: time for its programs to start).", valueName: "duration"))
    var start: String = "0s"

    @Option(name: [.short, .long], help: ArgumentHelp("Write the scenario here instead of standard output.", valueName: "file"))
    var output: String?

    func validate() throws {
        guard ScenarioReader.isProfileName(name) else {
            throw ValidationError("--name \(escapedForMessage(name)): start with a letter and use letters, digits, '-', '_' (at most 64)")
        }
        guard case .success(let width) = Units.duration(window), width >= .seconds(1), width <= .seconds(60) else {
            throw ValidationError("--window \(escapedForMessage(window)): expected a duration from 1s to 60s, such as 1s (the recordings have a sample a second)")
        }
        guard case .success(let offset) = Units.duration(start), offset >= .zero, offset <= .seconds(3600) else {
            throw ValidationError("--start \(escapedForMessage(start)): expected a duration from 0s to 1h, such as 2s")
        }
    }

    var width: Duration { (try? Units.duration(window).get()) ?? .seconds(1) }
    var offset: Duration { (try? Units.duration(start).get()) ?? .zero }
}

/// `roam import gnettrack`: a G-NetTrack Pro log made into a scenario.
struct ImportGNetTrackCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gnettrack",
        abstract: "Make a G-NetTrack Pro log (a phone's drive test, as in Raca et al.'s 5G dataset) into a scenario whose cellular link plays its rates.",
        discussion: """
            G-NetTrack Pro logs, about once a second, what the phone's radio and the test app saw: the downlink and \
            uplink rates it measured (DL_bitrate, UL_bitrate, kbit/s), whether the app was downloading (State D) or \
            idle (I), pings, the cell and network mode, the position. The scenario has one cellular link between \
            phone and server whose downlink rate follows the rates measured while downloading (an idle phone's rate \
            says nothing of the link; the uplink's is the download's acknowledgements and is not played), a rate of \
            zero passing nothing, and whose delay follows half the pings' round trips (for pings taken while \
            downloading, the least of the 10 s before: the replay's own traffic builds the queue again). What \
            could not be carried over (position, the radio's figures, cell changes) is said in comments at the \
            top. Add workloads to play something across it.
            """
    )

    @Argument(help: ArgumentHelp("The log (a CSV file whose header starts Timestamp,Longitude,Latitude,...).", valueName: "file"))
    var file: String

    @OptionGroup var options: RecordingImportOptions

    @Option(help: ArgumentHelp("The State values whose rates are the link's capacity, comma-separated.", valueName: "states"))
    var states: String = "D"

    @Option(help: "The link's name.")
    var link: String = "cell"

    @Option(help: ArgumentHelp("Also write the log's GPS fixes here, as a track for mobility: (phones: {phone: {track: FILE}}; SECONDS,X,Y in metres).", valueName: "file"))
    var track: String?

    func validate() throws {
        guard ScenarioReader.isProfileName(link) else {
            throw ValidationError("--link \(escapedForMessage(link)): start with a letter and use letters, digits, '-', '_' (at most 64)")
        }
        let values = states.split(separator: ",").map { String($0.filter { $0 != " " }) }
        guard !values.isEmpty, values.count <= 16, values.allSatisfy({ !$0.isEmpty && $0.count <= 8 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }) else {
            throw ValidationError("--states \(escapedForMessage(states)): expected State values separated by commas, such as D or D,VD")
        }
    }

    func run() throws {
        try importing {
            let log = try GNetTrackImport.read(file)
            let wanted = Set(states.split(separator: ",").map { String($0.filter { $0 != " " }) })
            let (interface, notes) = GNetTrackImport.interface(log, link: link, states: wanted)
            let made = try rateScenario([interface], name: options.name, width: options.width, start: options.offset,
                                        header: GNetTrackImport.header(log, source: file, width: options.width), notes: notes)
            try writeImportedScenario(made.yaml, name: options.name, notes: notes, output: options.output, summary: made.summary,
                                      track: track, trackText: GNetTrackImport.track(log),
                                      noPositions: "the log has no Latitude and Longitude to make a track of", whose: "the drive's")
        }
    }
}

/// `roam import lumos5g`: one run of the Lumos5G dataset made into a scenario.
struct ImportLumos5GCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lumos5g",
        abstract: "Make a run of the Lumos5G dataset (a phone on mmWave 5G, walking or driving a loop) into a scenario whose cellular link plays its throughput.",
        discussion: """
            Lumos5G's CSV has a row a second of each run: the TCP downlink iPerf measured (Throughput, Mbit/s), \
            whether the phone was on 5G (nrStatus CONNECTED) or LTE, the radio's figures, the position and speed. \
            The scenario has one cellular link between phone and server whose downlink rate follows the run's \
            Throughput (a second of 0 passes nothing); the dataset has no uplink rate and no delay: the uplink is \
            left unlimited, and --delay gives the link one. The file holds many runs: choose one with --run (and \
            --mobility, --direction where a number names several); a file of one run needs none. What could not \
            be carried over is said in comments at the top.
            """
    )

    @Argument(help: ArgumentHelp("The dataset's CSV (Lumos5G-v1.0.csv, or rows of it under its header).", valueName: "file"))
    var file: String

    @OptionGroup var options: RecordingImportOptions

    @Option(name: .customLong("run"), help: ArgumentHelp("The run's run_num.", valueName: "number"))
    var runNumber: Int?

    @Option(help: ArgumentHelp("The run's mobility_mode (walking, driving), where --run names several.", valueName: "mode"))
    var mobility: String?

    @Option(help: ArgumentHelp("The run's trajectory_direction (CW, ACW), where --run names several.", valueName: "direction"))
    var direction: String?

    @Option(help: ArgumentHelp("A one-way delay for the link, such as 15ms (the dataset measures none).", valueName: "duration"))
    var delay: String?

    @Option(help: "The link's name.")
    var link: String = "cell"

    @Option(help: ArgumentHelp("Also write the run's positions here, as a track for mobility: (phones: {phone: {track: FILE}}; SECONDS,X,Y in metres).", valueName: "file"))
    var track: String?

    func validate() throws {
        guard ScenarioReader.isProfileName(link) else {
            throw ValidationError("--link \(escapedForMessage(link)): start with a letter and use letters, digits, '-', '_' (at most 64)")
        }
        if let runNumber, !(0...1_000_000).contains(runNumber) {
            throw ValidationError("--run \(runNumber): expected a run_num from 0 to 1000000")
        }
        for (flag, value) in [("--mobility", mobility), ("--direction", direction)] {
            guard let value else { continue }
            guard !value.isEmpty, value.count <= 32, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
                throw ValidationError("\(flag) \(escapedForMessage(value)): expected a word as the file has it, such as walking or CW")
            }
        }
        if let delay {
            guard case .success(let value) = Units.duration(delay), value >= .zero, value <= ScenarioLimits.maximumDelay else {
                throw ValidationError("--delay \(escapedForMessage(delay)): expected a one-way delay from 0ms to \(ScenarioLimits.maximumDelay.roamDescription), such as 15ms")
            }
        }
    }

    func run() throws {
        try importing {
            let runs = try Lumos5GImport.read(file)
            let chosen = try Lumos5GImport.select(runs, number: runNumber, mobility: mobility, direction: direction)
            let (interface, notes) = Lumos5GImport.interface(chosen, link: link, delay: delay.flatMap { try? Units.duration($0).get() })
            let made = try rateScenario([interface], name: options.name, width: options.width, start: options.offset,
                                        header: Lumos5GImport.header(chosen, source: file, width: options.width), notes: notes)
            try writeImportedScenario(made.yaml, name: options.name, notes: notes, output: options.output, summary: "\(chosen.label): \(made.summary)",
                                      track: track, trackText: Lumos5GImport.track(chosen),
                                      noPositions: "\(chosen.label) has no latitude and longitude to make a track of", whose: "the run's")
        }
    }
}

/// `roam import mp-traces`: a pair of MP-Traces files made into a two-link scenario.
struct ImportMPTracesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mp-traces",
        abstract: "Make an MP-Traces pair (Wi-Fi and cellular recorded at the same time and place) into a scenario with a link for each.",
        discussion: """
            MP-Traces records, on a walk, what a download over the phone's Wi-Fi and one over its cellular link each \
            received every second (PATH_TRIAL_wifi.csv and PATH_TRIAL_cellular.csv, lines timeInSeconds,BytesPerSecond). \
            The scenario has a wifi and a cell link between phone and server on one clock, each link's downlink rate \
            following its recording (a second that received nothing passes nothing), so that a multipath or handover \
            client moves where the phone's Wi-Fi really collapsed. The recordings carry no delay: give each link's \
            with --wifi-delay and --cellular-delay.
            """
    )

    @Option(help: ArgumentHelp("The Wi-Fi recording (PATH_TRIAL_wifi.csv).", valueName: "file"))
    var wifi: String

    @Option(help: ArgumentHelp("The cellular recording (PATH_TRIAL_cellular.csv).", valueName: "file"))
    var cellular: String

    @OptionGroup var options: RecordingImportOptions

    @Option(name: .customLong("wifi-delay"), help: ArgumentHelp("The Wi-Fi's one-way delay, such as 5ms.", valueName: "duration"))
    var wifiDelay: String?

    @Option(name: .customLong("cellular-delay"), help: ArgumentHelp("The cellular link's one-way delay, such as 30ms.", valueName: "duration"))
    var cellularDelay: String?

    func validate() throws {
        for (flag, value) in [("--wifi-delay", wifiDelay), ("--cellular-delay", cellularDelay)] {
            guard let value else { continue }
            guard case .success(let delay) = Units.duration(value), delay >= .zero, delay <= ScenarioLimits.maximumDelay else {
                throw ValidationError("\(flag) \(escapedForMessage(value)): expected a one-way delay from 0ms to \(ScenarioLimits.maximumDelay.roamDescription), such as 20ms")
            }
        }
    }

    func run() throws {
        try importing {
            let wifiSeconds = try MPTracesImport.read(wifi), cellularSeconds = try MPTracesImport.read(cellular)
            let (interfaces, notes) = MPTracesImport.interfaces(wifi: wifiSeconds, cellular: cellularSeconds,
                                                                wifiDelay: wifiDelay.flatMap { try? Units.duration($0).get() },
                                                                cellularDelay: cellularDelay.flatMap { try? Units.duration($0).get() })
            let header = MPTracesImport.header(wifi: wifiSeconds, cellular: cellularSeconds, sources: (wifi, cellular), width: options.width)
            let made = try rateScenario(interfaces, name: options.name, width: options.width, start: options.offset, header: header, notes: notes)
            try writeImportedScenario(made.yaml, name: options.name, notes: notes, output: options.output, summary: made.summary)
        }
    }
}

/// `roam import recording`: what `roam record` measured made into a scenario.
struct ImportRecordingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recording",
        abstract: "Make a recording of roam record into a scenario with a link for each recorded interface.",
        discussion: """
            Each recorded interface becomes a link between phone and server, all on the recording's one clock: \
            its rate each way the Wi-Fi bitrates the radio used (of which 65% reaches the transport, as mobility: \
            derives it; not limited where none was recorded), its delay half the echoes' round trip, its loss the \
            share of echoes lost, and nothing at all while its carrier was down. What could not be carried over is \
            said in comments at the top. Add workloads to play something across it.
            """
    )

    @Argument(help: ArgumentHelp("The recording (roam record --output FILE).", valueName: "file"))
    var file: String

    @Option(help: "The scenario's name (letters, digits, '-', '_').")
    var name: String

    @Option(help: ArgumentHelp("Each window's length (100ms to 60s; the recording's interval by default).", valueName: "duration"))
    var window: String?

    @Option(help: ArgumentHelp("When the recording's first interval falls in the scenario (the links hold their first window's conditions until then: time for its programs to start).", valueName: "duration"))
    var start: String = "0s"

    @Option(name: [.short, .long], help: ArgumentHelp("Write the scenario here instead of standard output.", valueName: "file"))
    var output: String?

    @Option(help: ArgumentHelp("Also write the positions gpsd gave here, as a track for mobility: (phones: {phone: {track: FILE}}; SECONDS,X,Y in metres).", valueName: "file"))
    var track: String?

    func validate() throws {
        guard ScenarioReader.isProfileName(name) else {
            throw ValidationError("--name \(escapedForMessage(name)): start with a letter and use letters, digits, '-', '_' (at most 64)")
        }
        if let window {
            guard case .success(let width) = Units.duration(window), width >= .milliseconds(100), width <= .seconds(60) else {
                throw ValidationError("--window \(escapedForMessage(window)): expected a duration from 100ms to 60s, such as 1s")
            }
        }
        guard case .success(let offset) = Units.duration(start), offset >= .zero, offset <= .seconds(3600) else {
            throw ValidationError("--start \(escapedForMessage(start)): expected a duration from 0s to 1h, such as 2s")
        }
    }

    func run() throws {
        try importing {
            let recording = try DeviceRecording.read(file)
            let width = window.flatMap { try? Units.duration($0).get() } ?? recording.interval
            let made = try Self.scenario(recording, name: name, source: file, width: width, start: (try? Units.duration(start).get()) ?? .zero)
            try writeImportedScenario(made.yaml, name: name, notes: made.notes, output: output, summary: made.summary,
                                      track: track, trackText: DeviceRecording.track(recording),
                                      noPositions: "the recording has no positions (gpsd gave roam record none)", whose: "the recording's")
        }
    }

    /// The scenario that replays `recording`, what it could not carry over, and a summary.
    static func scenario(_ recording: DeviceRecording.Recording, name: String, source: String, width: Duration,
                         start: Duration) throws(ScenarioError) -> (yaml: String, notes: [String], summary: String) {
        let (interfaces, notes) = DeviceRecording.interfaces(recording)
        let made = try rateScenario(interfaces, name: name, width: width, start: start,
                                    header: DeviceRecording.header(recording, source: source, width: width), notes: notes)
        return (made.yaml, notes, made.summary)
    }
}
