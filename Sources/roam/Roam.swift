import ArgumentParser
import Glibc
import RoamSystem
import SystemPackage

/// The `roam` command: network mobility simulation and path monitoring on Linux.
@main
struct Roam: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roam",
        abstract: "Watch network paths and simulate network mobility on Linux.",
        discussion: "Exit codes: 0 success, 1 an expectation failed, 2 bad input or an environment that cannot run the command.",
        subcommands: [RunCommand.self, ValidateCommand.self, ReportCommand.self, ExportCommand.self, ImportCommand.self, MonitorCommand.self, CleanupCommand.self]
    )

    /// Parses and runs, mapping every failure to Roam's exit codes: usage errors and bad input
    /// exit 2 (ArgumentParser's default would be 64).
    static func main() {
        do {
            var command = try parseAsRoot()
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
            let message = fullMessage(for: error)
            if !message.isEmpty { printError(message) }
            Glibc.exit(ExitCode.badInput.rawValue)
        }
    }
}

extension ExitCode {
    /// An expectation of a scenario failed.
    static let expectationFailed = ExitCode(1)
    /// Bad input, missing privileges or an environment that cannot run the command.
    static let badInput = ExitCode(2)
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
    try? writeAll(bytes, to: FileDescriptor(rawValue: descriptor))
}
