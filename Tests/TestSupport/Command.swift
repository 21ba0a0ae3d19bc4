import Foundation
import Glibc

/// A child process whose output a test reads line by line.
public final class RunningCommand: @unchecked Sendable {
    public let process = Process()
    public let lines = Recorder<String>()
    public let errors = Recorder<String>()
    /// When each line of ``lines`` was read (the wall clock, Unix seconds), at the same index:
    /// for latencies from a time another process wrote.
    public let arrivals = Recorder<Double>()
    private let stdout = Pipe()
    private let stderr = Pipe()

    /// The ending signals a test process ignores put back at their defaults, once, before its
    /// first child: an ignored signal is inherited across exec, so a test binary started under
    /// `nohup` (SIGHUP) or in a script's background (SIGINT) would start every command ignoring
    /// it, and `roam ctl events --follow`, which ends by the signal's default action, would not
    /// end. `swift test` starts the binary with every signal at its default; `make test` runs the
    /// binary itself. SIGPIPE stays as it is.
    private static let defaultEndingSignals: Void = {
        for signal in [SIGHUP, SIGINT, SIGTERM, SIGQUIT] {
            var current = sigaction()
            if sigaction(signal, nil, &current) == 0, unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == 1 {
                Glibc.signal(signal, SIG_DFL)
            }
        }
    }()

    public init(_ executable: String, _ arguments: [String]) throws {
        _ = Self.defaultEndingSignals
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        RunningCommand.collectLines(from: stdout.fileHandleForReading, into: lines, arrivals: arrivals)
        RunningCommand.collectLines(from: stderr.fileHandleForReading, into: errors)
        try process.run()
        try? stdout.fileHandleForWriting.close()
        try? stderr.fileHandleForWriting.close()
    }

    /// Reads `handle` on a thread of its own until end of file, recording each line.
    private static func collectLines(from handle: FileHandle, into recorder: Recorder<String>, arrivals: Recorder<Double>? = nil) {
        let buffer = LineBuffer()
        let descriptor = handle.fileDescriptor
        Thread.detachNewThread {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(descriptor, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                buffer.append(Data(chunk[..<count]), into: recorder, arrivals: arrivals)
            }
            buffer.flush(into: recorder)
            // Closed at the end of the output, not when Foundation lets the Process go (it may
            // keep it for the life of the test process): a suite runs hundreds of commands, and
            // the leak checks count the process's descriptors.
            try? handle.close()
        }
    }

    /// Sends `signal` and waits for the process to end; returns its exit status (the signal's
    /// number when a signal ended it, as Foundation's `terminationStatus`).
    public func stop(with signal: Int32 = SIGINT) -> Int32 {
        kill(process.processIdentifier, signal)
        return waitForExit()
    }

    /// Waits for the process to end, at most `timeout` seconds (-1 then): Foundation's reaper, or
    /// waitpid should that miss its SIGCHLD (seen once in CI: a run killed with SIGKILL stayed a
    /// zombie Foundation never reaped, and `waitUntilExit` hung the suite).
    public func waitForExit(timeout: TimeInterval = 60) -> Int32 {
        let pid = process.processIdentifier
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if !process.isRunning { return process.terminationStatus }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                return status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
            }
            usleep(5_000)
        }
        return -1
    }

    /// Runs a command to completion and returns its status, standard output and standard error.
    /// A command still running after `timeout` seconds is killed, and its status is then -9.
    public static func run(_ executable: String, _ arguments: [String], timeout: TimeInterval = 30) throws -> (status: Int32, output: String, error: String) {
        let command = try RunningCommand(executable, arguments)
        let exited = DispatchSemaphore(value: 0)
        command.process.terminationHandler = { _ in exited.signal() }
        if command.process.isRunning, exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(command.process.processIdentifier, SIGKILL)
            _ = command.waitForExit()
            return (-9, command.lines.values.joined(separator: "\n"), command.errors.values.joined(separator: "\n"))
        }
        let status = command.waitForExit()
        // Output may still be in flight to the readability handlers; wait for both ends to close.
        command.lines.waitUntilClosed(timeout: 5)
        command.errors.waitUntilClosed(timeout: 5)
        return (status, command.lines.values.joined(separator: "\n"), command.errors.values.joined(separator: "\n"))
    }
}

private final class LineBuffer: @unchecked Sendable {
    private var pending = Data()
    private let lock = NSLock()

    func append(_ data: Data, into recorder: Recorder<String>, arrivals: Recorder<Double>? = nil) {
        let now = Date().timeIntervalSince1970
        lock.withLock {
            pending.append(data)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                arrivals?.append(now)
                recorder.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                pending = Data(pending[(newline + 1)...])
            }
        }
    }

    func flush(into recorder: Recorder<String>) {
        lock.withLock {
            if !pending.isEmpty { recorder.append(String(decoding: pending, as: UTF8.self)) }
            pending = Data()
            recorder.close()
        }
    }
}
