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

    func validate() throws {
        if files.isEmpty { throw ValidationError("name at least one scenario file") }
    }

    func run() throws {
        var failed = false
        for file in files {
            let outcome = ScenarioReader.read(contentsOf: file)
            for diagnostic in outcome.diagnostics { printError(diagnostic.description) }
            if let scenario = outcome.scenario {
                writeLine("\(file): valid: '\(scenario.name)', \(scenario.duration.roamDescription), \(scenario.nodes.count) nodes, "
                    + "\(scenario.links.count) links, \(scenario.timeline.count) events, \(scenario.workloads.count) workloads, "
                    + "\(scenario.expectations.count) expectations")
            } else {
                failed = true
            }
        }
        if failed { throw ExitCode.badInput }
    }
}
