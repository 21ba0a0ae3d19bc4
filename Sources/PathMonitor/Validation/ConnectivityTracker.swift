import Netlink

/// When each interface is probed and what its connectivity is, on a clock of the caller's (a
/// `Duration` since the monitor started; a manual one in tests). No I/O: the caller runs the
/// probes it asks for and hands their outcomes back.
///
/// An interface is probed when it appears and when its addresses change (its last verdict kept
/// until the new probe answers); while validated, every ``ConnectivityValidation/interval``;
/// while not, after ``ConnectivityValidation/retryDelay``, doubling up to the maximum. One probe at
/// a time per interface: an outcome for an interface since gone or changed is ignored.
package struct ConnectivityTracker: Sendable {
    /// A probe to run: its identifier, and the interface to send it from.
    package struct Probe: Sendable, Hashable {
        package var id: UInt64
        package var index: Int32
        package var interface: String
    }

    private struct Entry {
        var name: String
        var addresses: [IPPrefix]
        var connectivity = InterfaceConnectivity()
        /// Probes in a row that found nothing.
        var failures = 0
        var retry: Duration
        var due: Duration?
        var inFlight: UInt64?
        /// Asked to check again while a probe was in flight: due as soon as it ends.
        var again = false
    }

    /// How long after a portal session's announced end it is checked again (the API's seconds
    /// are whole, and the portal's clock is not the monitor's).
    static let sessionMargin = Duration.seconds(1)

    package let configuration: ConnectivityValidation
    private var entries: [Int32: Entry] = [:]
    private var nextID: UInt64 = 1
    /// Probes asked for so far (statistics).
    package private(set) var probesStarted = 0

    package init(configuration: ConnectivityValidation) {
        self.configuration = configuration
    }

    /// Each interface's connectivity now, by index.
    package var connectivity: [Int32: InterfaceConnectivity] { entries.mapValues(\.connectivity) }

    /// The interfaces that can be probed now (up, with an address, not loopback): new ones, and
    /// ones whose addresses changed, are probed at once; gone ones are forgotten. Returns the
    /// probes to start.
    package mutating func update(_ interfaces: [NetworkInterface], at now: Duration) -> [Probe] {
        let present = Set(interfaces.map(\.index))
        for index in entries.keys where !present.contains(index) { entries[index] = nil }
        for interface in interfaces {
            let addresses = interface.addresses.filter { !$0.address.isLinkLocal }.sorted { $0.description < $1.description }
            if var entry = entries[interface.index], entry.name == interface.name {
                guard entry.addresses != addresses else { continue }
                // New addresses on the same interface (a renewed lease, a renumbering): checked
                // again at once, or as soon as the probe in flight ends, its verdict kept meanwhile
                // (Android keeps a network's validation across address changes; NetworkManager
                // checks again).
                entry.addresses = addresses
                entry.failures = 0
                entry.retry = configuration.retryDelay
                if entry.inFlight != nil { entry.again = true } else { entry.due = now }
                entries[interface.index] = entry
                continue
            }
            entries[interface.index] = Entry(name: interface.name, addresses: addresses, retry: configuration.retryDelay, due: now)
        }
        return due(at: now)
    }

    /// The probes due at `now` (one per interface at most).
    package mutating func due(at now: Duration) -> [Probe] {
        var probes: [Probe] = []
        for index in entries.keys.sorted() {
            guard var entry = entries[index], entry.inFlight == nil, let due = entry.due, due <= now else { continue }
            let probe = Probe(id: nextID, index: index, interface: entry.name)
            nextID += 1
            probesStarted += 1
            entry.inFlight = probe.id
            entry.due = nil
            entries[index] = entry
            probes.append(probe)
        }
        return probes
    }

    /// Has the interfaces named in `names` (all when nil) checked again now, as after a login:
    /// Android's `reportNetworkConnectivity`, NetworkManager's `CheckConnectivity`. An interface
    /// with a probe in flight gets another once it ends. Returns the probes to start.
    package mutating func revalidate(_ names: Set<String>?, at now: Duration) -> [Probe] {
        for (index, entry) in entries where names?.contains(entry.name) ?? true {
            var entry = entry
            if entry.inFlight != nil { entry.again = true } else { entry.due = now }
            entry.retry = configuration.retryDelay
            entries[index] = entry
        }
        return due(at: now)
    }

    /// When the next probe is due, if one is waiting.
    package var nextDue: Duration? {
        entries.values.compactMap { $0.inFlight == nil ? $0.due : nil }.min()
    }

    /// What `probe` found, at `now`. True when the interface's connectivity changed.
    package mutating func finished(_ probe: Probe, _ found: InterfaceConnectivity, at now: Duration) -> Bool {
        guard var entry = entries[probe.index], entry.inFlight == probe.id else { return false }
        entry.inFlight = nil
        let before = entry.connectivity
        switch found.state {
        case .validated:
            entry.connectivity = found
            entry.failures = 0
            entry.retry = configuration.retryDelay
            // A session the portal API said ends is checked again just after it does.
            entry.due = now + min(configuration.interval, found.sessionRemaining.map { $0 + Self.sessionMargin } ?? configuration.interval)
        case .portal:
            entry.connectivity = found
            entry.failures = 0
            entry.due = now + entry.retry
            entry.retry = min(entry.retry * 2, configuration.maximumRetryDelay)
        case .limited, .unknown:
            entry.failures += 1
            if before.state != .limited, entry.failures < configuration.failuresBeforeLimited {
                // One probe that found nothing (a query lost on a lossy radio) is not yet a
                // verdict: ask again soon.
                entry.due = now + configuration.retryDelay
            } else {
                entry.connectivity = InterfaceConnectivity(state: .limited, reason: found.reason)
                entry.due = now + entry.retry
                entry.retry = min(entry.retry * 2, configuration.maximumRetryDelay)
            }
        }
        if entry.again {
            entry.again = false
            entry.due = now
        }
        entries[probe.index] = entry
        return entry.connectivity != before
    }
}
