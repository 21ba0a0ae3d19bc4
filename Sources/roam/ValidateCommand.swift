import ArgumentParser
import ScenarioModel
import Simulator

/// `roam validate FILE...`: check scenario files without running them.
struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check scenario files: YAML syntax, keys, types, units, ranges and references.",
        discussion: "Every problem is printed as FILE:LINE:COL: error: MESSAGE with the offending line. Exit 0 when all files are valid, 2 otherwise."
    )

    @Argument(help: ArgumentHelp("Scenario files.", valueName: "file"))
    var files: [String]

    @Flag(help: "Also print the timeline that a scenario's mobility: derives (each phone's signal, roams, coverage), one event a line.")
    var explain = false

    func validate() throws {
        if files.isEmpty { throw ValidationError("name at least one scenario file") }
    }

    func run() throws {
        var failed = false
        for file in files {
            let outcome = ScenarioReader.read(contentsOf: file)
            for diagnostic in outcome.diagnostics { printError(diagnostic.description) }
            if let scenario = outcome.scenario {
                let derived = scenario.mobility == nil ? "" : " (\(Self.derived(scenario).count) derived from mobility)"
                writeLine("\(file): valid: '\(scenario.name)', \(scenario.duration.roamDescription), \(scenario.nodes.count) nodes, "
                    + "\(scenario.links.count) links, \(scenario.timeline.count) events\(derived), \(scenario.workloads.count) workloads, "
                    + "\(scenario.expectations.count) expectations")
                if explain { explainMobility(of: scenario) }
            } else {
                failed = true
            }
        }
        if failed { throw ExitCode.badInput }
    }

    /// The events `mobility:` derived: they carry the line of `mobility:` and name access links.
    static func derived(_ scenario: Scenario) -> [TimelineEvent] {
        guard let mobility = scenario.mobility else { return [] }
        return scenario.timeline.filter { $0.line == mobility.line }
    }

    /// Each phone's movement, then the derived timeline: `12.5s office.phone set 42.3mbit`.
    private func explainMobility(of scenario: Scenario) {
        guard let mobility = scenario.mobility else {
            writeLine("  no mobility: nothing is derived")
            return
        }
        writeLine("  mobility: \(mobility.accessPoints.count) access points, \(mobility.cellSites.count) cell sites, "
            + "\(mobility.phones.count) moving phones, a step of \(mobility.step.roamDescription)")
        for event in Self.derived(scenario) {
            let direction = event.direction == .both ? "" : event.direction == .down ? " (downlink)" : " (uplink)"
            let action: String = switch event.action {
            case .set(let impairment): "set \(LinkConditions(impairment: impairment).summary)"
            case .down: "down (roam or handover)"
            case .up: "up"
            case .membership(true): "join"
            case .membership(false): "leave (out of reach)"
            default: "\(event.action)"
            }
            writeLine("  \(event.at.roamDescription) \(event.link)\(direction) \(action)")
        }
    }
}
