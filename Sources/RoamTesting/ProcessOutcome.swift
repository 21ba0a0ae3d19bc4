import Glibc
import RoamSystem
import SystemPackage

/// How a program run with ``NodeHandle/spawn(_:environment:)`` ended and what it wrote.
public struct ProcessOutcome: Sendable, Hashable {
    /// The exit code, or nil when a signal ended it.
    public var exitCode: Int32?
    /// The signal that ended it, if one did.
    public var signal: Int32?
    public var standardOutput: String
    public var standardError: String

    /// The program exited with code 0.
    public var succeeded: Bool { exitCode == 0 }

    /// Spawns `arguments` (the first looked up in `PATH`) from the calling thread, which is in
    /// the namespace the program should run in, and waits for it.
    static func run(_ arguments: [String], environment: [String: String]) throws -> ProcessOutcome {
        let output: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
        let errors: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
        let pid: pid_t
        do {
            output = try makePipe()
        } catch {
            throw RoamTestingError("pipe: \(error)")
        }
        do {
            errors = try makePipe()
        } catch {
            try? output.readEnd.close(); try? output.writeEnd.close()
            throw RoamTestingError("pipe: \(error)")
        }
        do {
            defer { try? output.writeEnd.close(); try? errors.writeEnd.close() }
            pid = try spawnProcess(arguments, environment: environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" },
                                   standardOutput: output.writeEnd, standardError: errors.writeEnd, newProcessGroup: false)
        } catch {
            try? output.readEnd.close(); try? errors.readEnd.close()
            throw RoamTestingError("cannot run \(arguments[0]): \(error)")
        }
        // Read both pipes to their ends (poll, so that neither fills while the other is read).
        var collected: [[UInt8]] = [[], []]
        var open = [output.readEnd.rawValue, errors.readEnd.rawValue]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while open.contains(where: { $0 >= 0 }) {
            var entries = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard (try? waitForEvents(&entries, until: nil)) != nil else { break }
            for index in 0..<2 where open[index] >= 0 && entries[index].revents != 0 {
                let count = read(open[index], &buffer, buffer.count)
                if count > 0 {
                    collected[index].append(contentsOf: buffer[0..<count])
                } else if count == 0 || errno != EINTR {
                    close(open[index])
                    open[index] = -1
                }
            }
        }
        for descriptor in open where descriptor >= 0 { close(descriptor) }
        let status: TerminationStatus
        do {
            status = try waitForExit(pid)
        } catch {
            throw RoamTestingError("cannot wait for \(arguments[0]): \(error)")
        }
        return ProcessOutcome(exitCode: status.code, signal: status.signal,
                              standardOutput: String(decoding: collected[0], as: UTF8.self),
                              standardError: String(decoding: collected[1], as: UTF8.self))
    }
}
