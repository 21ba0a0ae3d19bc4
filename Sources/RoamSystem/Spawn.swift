import CRoamLinux
import CRoamRootless
import Glibc
import SystemPackage

/// The path of `name` in this process's `PATH` (executable by it), or nil: where
/// ``spawnProcess(_:environment:standardOutput:standardError:newProcessGroup:inheriting:contained:)``
/// would find it, for a command to say a program is missing before it starts anything.
package func findProgram(_ name: String) -> String? {
    let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
    for directory in path.split(separator: ":") where !directory.isEmpty {
        let candidate = "\(directory)/\(name)"
        if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
}

/// Starts programs the careful way, for every place Roam runs one (a scenario's `command`
/// workloads, RoamTesting's `NodeHandle.run`).
///
/// - The child's standard input is `/dev/null`; its output and errors go to the descriptors
///   given (dup'd onto 1 and 2, which clears their close-on-exec there).
/// - Every signal is unblocked in the child (roam blocks SIGINT and SIGTERM for its signal
///   thread, and a blocked mask is inherited across exec), and SIGINT, SIGTERM, SIGPIPE and
///   SIGHUP are at their default actions.
/// - With `newProcessGroup`, the child leads its own process group, so that signalling the
///   group reaches the programs it starts too.
/// - The program is looked up in the `PATH` of the calling process.
///
/// - With `contained`, in root's `--rootless` run (`Rootless/containedIdentity`), the program
///   runs as the run's unprivileged identity: no supplementary groups, only the network
///   capabilities of the run's user namespace, no_new_privs (see `CRoamRootless.h`). Elsewhere
///   `contained` changes nothing: a user's rootless run already runs as that user.
///
/// Descriptors that the caller wants only the child to have must be close-on-exec in the
/// parent (``makePipe()`` makes them so), so that programs spawned at the same time from other
/// threads do not inherit them. Throws the error `posix_spawnp` returned (`ENOENT`: no such
/// program).
package func spawnProcess(_ arguments: [String], environment: [String], standardOutput: FileDescriptor,
                          standardError: FileDescriptor, newProcessGroup: Bool, inheriting: [(FileDescriptor, Int32)] = [],
                          contained: Bool = false) throws(Errno) -> pid_t {
    precondition(!arguments.isEmpty, "a program to run")
    if contained && Rootless.containedIdentity != nil {
        return try spawnContained(arguments, environment: environment, standardOutput: standardOutput, standardError: standardError,
                                  newProcessGroup: newProcessGroup, inheriting: inheriting)
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, standardOutput.rawValue, 1)
    posix_spawn_file_actions_adddup2(&actions, standardError.rawValue, 2)
    // Descriptors the program is given at fixed numbers (a configuration at /dev/fd/3).
    for (descriptor, number) in inheriting { posix_spawn_file_actions_adddup2(&actions, descriptor.rawValue, number) }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
    if newProcessGroup {
        flags |= POSIX_SPAWN_SETPGROUP
        posix_spawnattr_setpgroup(&attributes, 0)
    }
    posix_spawnattr_setflags(&attributes, Int16(flags))
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in [SIGINT, SIGTERM, SIGPIPE, SIGHUP] { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)

    let argv = arguments.map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    var pid: pid_t = 0
    let result = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
    guard result == 0 else { throw Errno(rawValue: result) }
    return pid
}

/// ``spawnProcess(_:environment:standardOutput:standardError:newProcessGroup:inheriting:contained:)``
/// as the contained identity of root's `--rootless` run: fork and exec in C, since posix_spawn
/// cannot change identities.
private func spawnContained(_ arguments: [String], environment: [String], standardOutput: FileDescriptor, standardError: FileDescriptor,
                            newProcessGroup: Bool, inheriting: [(FileDescriptor, Int32)]) throws(Errno) -> pid_t {
    let argv = arguments.map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    let from = inheriting.map { $0.0.rawValue }, to = inheriting.map(\.1)
    var pid: pid_t = 0
    let result = roam_rootless_spawn_contained(arguments[0], argv, envp, standardOutput.rawValue, standardError.rawValue,
                                               newProcessGroup ? 1 : 0, from, to, Int32(inheriting.count), &pid)
    guard result == 0 else { throw Errno(rawValue: result) }
    return pid
}

/// A file in memory holding `contents` (close-on-exec), for a program to read at `/dev/fd/N`.
package func makeMemoryFile(named name: String, contents: String) throws(Errno) -> FileDescriptor {
    let descriptor = FileDescriptor(rawValue: try systemCall { roam_memfd_create(name) })
    do throws(Errno) {
        try writeAll(Array(contents.utf8), to: descriptor)
        _ = try systemCall { lseek(descriptor.rawValue, 0, SEEK_SET) }
    } catch {
        try? descriptor.close()
        throw error
    }
    return descriptor
}

/// In the calling thread alone (a thread made for it): a mount namespace of its own, with the
/// file at `source` bound over `target`; programs it starts see that file there. `source` must
/// be in a directory only the caller can change.
package func bindInThread(_ source: String, over target: String) throws(Errno) {
    _ = try systemCall { roam_bind_over(source, target) }
}

/// A pipe whose two ends are close-on-exec from the start (`pipe2`), so that a program spawned
/// from another thread at the same moment cannot inherit them.
package func makePipe() throws(Errno) -> (readEnd: FileDescriptor, writeEnd: FileDescriptor) {
    var fds: [Int32] = [-1, -1]
    try systemCall { pipe2(&fds, O_CLOEXEC) }
    return (FileDescriptor(rawValue: fds[0]), FileDescriptor(rawValue: fds[1]))
}

/// How a child process ended, from a `waitpid` status.
package struct TerminationStatus: Sendable, Hashable {
    /// The exit code, or nil when a signal ended it.
    package var code: Int32?
    /// The signal that ended it, if one did.
    package var signal: Int32?

    package init(waitStatus status: Int32) {
        let exited = status & 0x7f == 0
        code = exited ? (status >> 8) & 0xff : nil
        signal = exited ? nil : status & 0x7f
    }
}

/// Waits for `pid` to end (retrying `EINTR`) and returns how it ended.
package func waitForExit(_ pid: pid_t) throws(Errno) -> TerminationStatus {
    var status: Int32 = 0
    try systemCall { waitpid(pid, &status, 0) }
    return TerminationStatus(waitStatus: status)
}

/// Whether the child `pid` has ended, without reaping it (`waitid` with `WNOWAIT`): whoever waits
/// for it still gets its status. False while it runs, and when it is not this process's child.
package func hasExited(_ pid: pid_t) -> Bool {
    var info = siginfo_t()
    while true {
        if waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 {
            // WNOHANG with nothing to report leaves si_pid zero.
            return info._sifields._kill.si_pid == pid
        }
        if errno != EINTR { return false }
    }
}
