import ArgumentParser
import RoamCore
import RoamReport
import ScenarioModel
import Simulator

/// What `roam run` and `roam attach` share, written once: reading the scenario, saying why a
/// run failed, and the exit code a finished run ends with.
enum ScenarioCommand {
    /// The scenario in `file`, its diagnostics on standard error; exit 2 when it cannot be read.
    static func read(_ file: String) throws -> Scenario {
        let outcome = ScenarioReader.read(contentsOf: file)
        for diagnostic in outcome.diagnostics { printError(diagnostic.description) }
        guard let scenario = outcome.scenario else { throw ExitCode.badInput }
        return scenario
    }

    /// Says why `roam COMMAND` failed: a refusal of the scenario itself is placed in `file` (and
    /// its line, when known), as the reader's diagnostics are; anything else follows
    /// `roam COMMAND: error:`. Returns the exit code to end with (2).
    static func failure(_ error: SimulatorError, command: String, file: String) -> ExitCode {
        if error.code == .invalidScenario {
            let place = escapedForMessage(file, maximumLength: 256).replacingOccurrences(of: ":", with: "\\:") + (error.line.map { ":\($0)" } ?? "")
            printError("\(place): error: \(error.message)")
        } else {
            printError("roam \(command): error: \(error.message)")
        }
        return .badInput
    }

    /// The end of a run or an attach that finished: its table on standard output, then the exit
    /// code: the signal's that stopped it (128 + N), 2 when a change of its timeline could not
    /// be applied, 1 when an expectation failed, 3 when it was not faithful and `strictFidelity`.
    static func finish(_ result: RunReport, strictFidelity: Bool = false) throws {
        writeLine(RunTable.render(result))
        try CommandSignals.throwIfSignalled()
        if !result.failedChanges.isEmpty { throw ExitCode.badInput }
        if !result.passed { throw ExitCode.expectationFailed }
        if strictFidelity && !result.cancelled && !result.fidelity.faithful { throw ExitCode.unfaithful }
    }
}
