import ArgumentParser
import Glibc
import Netlink
import RoamSystem
import Synchronization

/// A command that stops on a signal with its cleanup (a run, an attach, a monitor), rather than
/// dying where it stands.
protocol SignalHandlingCommand {}

/// How every long-running command of `roam` ends on a signal, set up in one place.
///
/// SIGINT, SIGTERM and SIGHUP are blocked in the main thread by ``prepare()`` before the command
/// starts any thread, so that every thread inherits the block (SwiftNIO's event loops, the
/// emulator's, the monitor's), and one thread takes them with `sigwait` (``watch(_:_:)``): the
/// command stops, cleans up, writes its report, and exits 128 + the signal (130, 143, 129).
/// SIGPIPE is blocked too: a write to a standard output whose reader went away (`roam run … |
/// head -1`) fails with EPIPE instead of killing the process, and ends the command the same way
/// (141). Programs Roam starts get every signal back at its default (``spawnProcess``).
enum CommandSignals {
    /// The signals that end a command.
    static let ending: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    /// The first signal that ended the command (SIGPIPE for a closed standard output); 0 if none.
    static let received = Atomic<Int32>(0)
    /// What stops the command (set by ``watch(_:_:)``).
    private static let stop = Mutex<(@Sendable () -> Void)?>(nil)

    private static var endingSet: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in ending { sigaddset(&set, signal) }
        return set
    }

    /// Blocks the signals in the calling thread (the main thread, while it is the only one).
    static func prepare() {
        var set = endingSet
        sigaddset(&set, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        // A handler that never runs (the signals are blocked and taken by sigwait), so that they
        // are delivered at all when roam is a PID namespace's first process, as in a container:
        // a namespace's init gets only the signals it has a handler for.
        for signal in ending { Glibc.signal(signal) { _ in } }
    }

    /// Unblocks the signals a parent may have left blocked (a mask is inherited across exec), so
    /// that a command without cleanup of its own ends on them as any program does.
    static func unblock() {
        var set = endingSet
        sigaddset(&set, SIGPIPE)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Starts the thread that takes the signals: each calls `stop`; the first is said on standard
    /// error as `roam COMMAND: interrupted; WHAT` (nothing when `what` is nil: a command that is
    /// meant to end on a signal, as `roam monitor` is).
    static func watch(_ command: String, _ what: String?, stop: @escaping @Sendable () -> Void) {
        Self.stop.withLock { $0 = stop }
        let set = endingSet
        let thread = try? PinnedThread(name: "roam-signals") {
            var waited = set
            var signal: Int32 = 0
            while sigwait(&waited, &signal) == 0 {
                if received.compareExchange(expected: 0, desired: signal, ordering: .relaxed).exchanged, let what {
                    printError("\nroam \(command): \(name(of: signal)); \(what)")
                }
                stop()
            }
        }
        thread?.detach()
    }

    /// Standard output's reader has gone: the command stops as on a signal.
    static func outputClosed() {
        guard received.compareExchange(expected: 0, desired: SIGPIPE, ordering: .relaxed).exchanged else { return }
        stop.withLock { $0 }?()
    }

    /// Throws the exit code of the signal that ended the command, if one did.
    static func throwIfSignalled() throws {
        let signal = received.load(ordering: .relaxed)
        if signal != 0 { throw ExitCode(128 + signal) }
    }

    static func name(of signal: Int32) -> String {
        switch signal {
        case SIGINT: "interrupted"
        case SIGTERM: "terminated"
        case SIGHUP: "hung up"
        case SIGPIPE: "standard output closed"
        default: "signal \(signal)"
        }
    }
}
