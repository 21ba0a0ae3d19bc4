import CRoamProcess
import Glibc
import Synchronization
import SystemPackage

/// Kills the process groups of a run's commands if the run itself dies without warning (the OOM
/// killer, SIGKILL), when nothing in Roam is left to stop them: a child process of its own
/// (`roam-watchdog`) that waits on a pipe and, when the pipe's last writer is gone, sends
/// SIGKILL to every group it still watches. A run that ends normally stops its commands first
/// and then ``stop()``s the watchdog, which then has nothing to kill.
package final class ProcessGroupWatchdog: Sendable {
    private struct State {
        var writer: FileDescriptor?
        var pid: pid_t = 0
        var watched = 0
    }
    private let state = Mutex(State())

    public init() {}

    deinit { stop() }

    /// Watches process group `group` from now, starting the watchdog on first use. False when
    /// it could not be watched (no watchdog could be started, or too many groups): the caller
    /// decides whether to run the group unwatched.
    @discardableResult
    public func watch(_ group: pid_t) -> Bool {
        guard group > 0 else { return false }
        return state.withLock { state in
            guard Self.start(&state) else { return false }
            guard state.watched < Int(ROAM_WATCHDOG_GROUPS), let writer = state.writer else { return false }
            guard send(group, to: writer) else { return false }
            state.watched += 1
            return true
        }
    }

    /// Starts the watchdog now rather than on the first ``watch(_:)``, so that a group is
    /// watched a pipe write after it is spawned, not a fork later: a run killed in between would
    /// leave it running. False when it could not be started.
    @discardableResult
    public func start() -> Bool {
        state.withLock { Self.start(&$0) }
    }

    private static func start(_ state: inout State) -> Bool {
        guard state.writer == nil else { return true }
        var writer: Int32 = -1
        var pid: pid_t = 0
        guard roam_watchdog_start(&writer, &pid) == 0 else { return false }
        state.writer = FileDescriptor(rawValue: writer)
        state.pid = pid
        return true
    }

    /// Stops watching `group` (it ended, and its id may be reused).
    public func forget(_ group: pid_t) {
        guard group > 0 else { return }
        state.withLock { state in
            guard let writer = state.writer, send(-group, to: writer) else { return }
            state.watched -= 1
        }
    }

    /// Ends the watchdog: it kills what it still watches (nothing, when the run stopped its
    /// commands) and exits; waits for it.
    public func stop() {
        let (writer, pid) = state.withLock { state -> (FileDescriptor?, pid_t) in
            defer { state = State() }
            return (state.writer, state.pid)
        }
        guard let writer else { return }
        try? writer.close()
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// The watchdog's pid, once started.
    public var pid: pid_t? { state.withLock { $0.writer == nil ? nil : $0.pid } }

    private func send(_ record: Int32, to writer: FileDescriptor) -> Bool {
        var value = record
        return withUnsafeBytes(of: &value) { bytes in
            (try? writeAll(bytes, to: writer)) != nil
        }
    }
}
