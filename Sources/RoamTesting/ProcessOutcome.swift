import Glibc

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
        var output: [Int32] = [0, 0], errors: [Int32] = [0, 0]
        guard pipe(&output) == 0 else { throw RoamTestingError("pipe: \(String(cString: strerror(errno)))") }
        guard pipe(&errors) == 0 else {
            close(output[0]); close(output[1])
            throw RoamTestingError("pipe: \(String(cString: strerror(errno)))")
        }
        // Close-on-exec, so that programs spawned at the same time from other threads do not
        // hold these pipes open (the dup2 below clears it on the child's copies).
        for fd in output + errors { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let result = posix_spawnp(&pid, arguments[0], &actions, nil, argv, envp)
        close(output[1])
        close(errors[1])
        guard result == 0 else {
            close(output[0]); close(errors[0])
            throw RoamTestingError("cannot run \(arguments[0]): \(String(cString: strerror(result)))")
        }
        // Read both pipes to their ends (poll, so that neither fills while the other is read).
        var collected: [[UInt8]] = [[], []]
        var open = [output[0], errors[0]]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while open.contains(where: { $0 >= 0 }) {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            for index in 0..<2 where open[index] >= 0 && fds[index].revents != 0 {
                let count = read(open[index], &buffer, buffer.count)
                if count > 0 {
                    collected[index].append(contentsOf: buffer[0..<count])
                } else if count == 0 || errno != EINTR {
                    close(open[index])
                    open[index] = -1
                }
            }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = status & 0x7f == 0
        return ProcessOutcome(exitCode: exited ? (status >> 8) & 0xff : nil, signal: exited ? nil : status & 0x7f,
                              standardOutput: String(decoding: collected[0], as: UTF8.self),
                              standardError: String(decoding: collected[1], as: UTF8.self))
    }
}
