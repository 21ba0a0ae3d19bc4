import ScenarioModel

/// A cellular link's RRC state (`RadioStates`), shared by its two directions: pure state
/// advanced by the caller's clock (nanoseconds), no timers. Before a packet enters either
/// direction's pipeline the emulator asks ``admit(at:uplink:busy:lastTransmission:)`` when it may
/// move: at once while connected; after the promotion (and, for a packet to the phone, the next
/// paging occasion) while idle.
package struct RadioStateMachine: Sendable {
    /// RRC_IDLE, promoting, or RRC_CONNECTED.
    public enum State: Sendable, Hashable {
        /// RRC_IDLE: the next packet starts a promotion.
        case idle
        /// Connecting: every packet waits until `readyAt`.
        case promoting(readyAt: Int64)
        /// RRC_CONNECTED: packets move at once.
        case connected
    }

    /// `RadioStates`' promotion, tail and paging cycle in nanoseconds.
    public let promotion: Int64
    /// See ``promotion``.
    public let tail: Int64
    /// See ``promotion``.
    public let pagingCycle: Int64
    /// Paging occasions fall every ``pagingCycle`` from here (the emulator's start).
    public let origin: Int64
    /// Where the radio is, as of the last ``admit(at:uplink:busy:lastTransmission:)``.
    public private(set) var state: State = .idle
    /// The last moment the radio was busy: a packet admitted, or one leaving a transmitter.
    private var lastActivity: Int64 = .min

    /// Promotions so far, by the direction whose packet started them (up: the phone's).
    public private(set) var promotions: (up: Int, down: Int) = (0, 0)

    /// A radio with `states`, idle, whose paging occasions start at `origin`.
    public init(_ states: RadioStates, origin: Int64) {
        promotion = states.promotion.nanoseconds
        tail = states.tail.nanoseconds
        pagingCycle = states.pagingCycle.nanoseconds
        self.origin = origin
    }

    /// When a packet that arrived at `now` may move. `uplink`: the phone sent it. `busy`: a
    /// packet is still waiting for a transmitter in either direction (the radio is in use).
    /// `lastTransmission`: the latest time a packet left either direction's transmitter.
    public mutating func admit(at now: Int64, uplink: Bool, busy: Bool, lastTransmission: Int64) -> Int64 {
        lastActivity = max(lastActivity, lastTransmission)
        switch state {
        case .promoting(let ready) where now < ready:
            return ready
        case .promoting(let ready):
            state = .connected
            lastActivity = max(lastActivity, ready)
        case .connected, .idle:
            break
        }
        if state == .connected, !busy, lastActivity != .min, now - lastActivity >= tail {
            state = .idle
        }
        guard state == .idle else {
            lastActivity = max(lastActivity, now)
            return now
        }
        let start = uplink ? now : nextPagingOccasion(atOrAfter: now)
        let ready = start + promotion
        state = .promoting(readyAt: ready)
        lastActivity = max(lastActivity, ready)
        if uplink { promotions.up += 1 } else { promotions.down += 1 }
        return ready
    }

    /// The carrier came back (the phone found coverage again): the radio starts idle.
    public mutating func reset() {
        state = .idle
        lastActivity = .min
    }

    private func nextPagingOccasion(atOrAfter time: Int64) -> Int64 {
        guard pagingCycle > 0, time > origin else { return max(time, origin) }
        let elapsed = time - origin
        let cycles = (elapsed + pagingCycle - 1) / pagingCycle
        return origin + cycles * pagingCycle
    }
}
