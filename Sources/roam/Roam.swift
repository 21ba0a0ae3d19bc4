import ArgumentParser
import Glibc
import Logging
import RoamCore
import RoamSystem
import SystemPackage

/// The `roam` command: network mobility simulation and path monitoring on Linux.
@main
struct Roam: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roam",
        abstract: "Watch network paths and simulate network mobility on Linux.",
        discussion: """
            Exit codes: 0 success, 1 an expectation failed, 2 bad input or an environment that cannot run the command.

            Diagnostics of Roam's libraries (a path monitor that lost notifications, an emulator that could not keep up) go to standard error at level warning and above; ROAM_LOG_LEVEL=trace|debug|info|notice|warning|error|critical changes the level.
            """,
        subcommands: [RunCommand.self, AttachCommand.self, CtlCommand.self, ExecCommand.self, ValidateCommand.self, ReportCommand.self, ExportCommand.self, ImportCommand.self, RecordCommand.self, MonitorCommand.self, DaemonCommand.self, CleanupCommand.self]
    )

    /// Parses and runs, mapping every failure to Roam's exit codes: usage errors and bad input
    /// exit 2 (ArgumentParser's default would be 64).
    static func main() {
        // A run's threads share one arena, so that its memory stays flat for a day (the soak).
        FreedMemory.useOneArena()
        bootstrapLogging()
        do {
            var command = try parseAsRoot()
            // Before the command starts any thread, so that every thread inherits the mask: a
            // command that stops on signals takes them on a thread of its own; any other gets
            // them at their dispositions, whatever mask its parent left blocked.
            if command is SignalHandlingCommand { CommandSignals.prepare() } else { CommandSignals.unblock() }
            // A rootless `roam run` enters its user namespace in `run()`, before anything starts
            // a thread (a user namespace admits only a one-thread process).
            try command.run()
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Glibc.exit(0)
            }
            if let explicit = error as? ExitCode {
                Glibc.exit(explicit.rawValue)
            }
            // ArgumentParser quotes what it was given (an unknown option, a bad value) as it came:
            // its control characters are escaped here, line by line, so that no argument can
            // rewrite the terminal or forge a line of output.
            let message = fullMessage(for: error).split(separator: "\n", omittingEmptySubsequences: false)
                .map { escapedForMessage($0, maximumLength: 4096) }.joined(separator: "\n")
            if !message.isEmpty { printError(message) }
            Glibc.exit(ExitCode.badInput.rawValue)
        }
    }
}

/// Sends the libraries' swift-log messages to standard error, at the level `ROAM_LOG_LEVEL`
/// names (warning by default), so that standard output stays the command's own.
private func bootstrapLogging() {
    var level = Logger.Level.warning
    if let name = getenv("ROAM_LOG_LEVEL").map({ String(cString: $0) }), !name.isEmpty {
        guard let named = Logger.Level(rawValue: name.lowercased()) else {
            let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
            printError("Error: ROAM_LOG_LEVEL is '\(escapedForMessage(name, maximumLength: 40))', which is not a log level: use one of \(levels).")
            Glibc.exit(ExitCode.badInput.rawValue)
        }
        level = named
    }
    let chosen = level
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = chosen
        return handler
    }
}

extension ExitCode {
    /// An expectation of a scenario failed.
    static let expectationFailed = ExitCode(1)
    /// Bad input, missing privileges or an environment that cannot run the command.
    static let badInput = ExitCode(2)
    /// `roam run --strict-fidelity`: the run did not play what its scenario asked.
    static let unfaithful = ExitCode(3)
}

/// Writes a line to standard error.
func printError(_ message: String) {
    writeLine(message, to: STDERR_FILENO)
}

/// Writes a line to a file descriptor in one unbuffered write, so that lines from several
/// threads never interleave and a reader of a pipe sees each line as soon as it is written.
func writeLine(_ message: String, to descriptor: Int32 = STDOUT_FILENO) {
    var bytes = Array(message.utf8)
    if bytes.last != UInt8(ascii: "\n") { bytes.append(UInt8(ascii: "\n")) }
    do {
        try writeAll(bytes, to: FileDescriptor(rawValue: descriptor))
    } catch {
        // The reader of the command's output went away (`| head -1`): it stops, with its cleanup.
        if descriptor == STDOUT_FILENO || descriptor == STDERR_FILENO, error == .brokenPipe { CommandSignals.outputClosed() }
    }
}
