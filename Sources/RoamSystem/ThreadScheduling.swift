import Glibc

/// The calling thread's scheduling class: the kernel's real-time class at its lowest priority
/// (`SCHED_FIFO`, priority 1), which runs before every ordinary thread on the machine, or the
/// ordinary class (`SCHED_OTHER`). The emulator's threads and the timeline's player use it, so
/// that a packet or a change that is due happens when it is due however busy the cores are.
package enum ThreadScheduling {
    /// Moves the calling thread into the real-time class. Returns false where the process may
    /// not (`EPERM`: neither root nor an `RLIMIT_RTPRIO` above zero); the thread then stays as
    /// it was.
    @discardableResult
    package static func enterRealtimeClass() -> Bool {
        var parameters = sched_param(sched_priority: 1)
        return pthread_setschedparam(pthread_self(), SCHED_FIFO, &parameters) == 0
    }

    /// Moves the calling thread back into the ordinary class; returns whether it moved.
    @discardableResult
    package static func enterOrdinaryClass() -> Bool {
        var parameters = sched_param(sched_priority: 0)
        return pthread_setschedparam(pthread_self(), SCHED_OTHER, &parameters) == 0
    }
}
