import Netlink
import RoamSystem
import Synchronization

/// A monitor's connectivity validation: its ``ConnectivityTracker`` (used on the monitor's
/// thread only) and the probes in flight, each on a thread of its own, whose outcomes wake the
/// monitor's loop through ``signal``.
final class ConnectivityValidator {
    private var tracker: ConnectivityTracker
    private let target: ProbeTarget
    /// Each interface's portal API, where its network announced one.
    private let portalAPIs: [String: ProbeTarget]
    private let namespace: NetworkNamespace
    private let origin = MonotonicInstant.now
    /// Readable while outcomes wait to be collected.
    let signal: EventSignal
    /// Ends the probes in flight (the monitor is cancelled).
    private let stop: EventSignal
    private let outcomes = Outcomes()
    private var threads: [UInt64: PinnedThread] = [:]

    init(_ validation: ConnectivityValidation, namespace: NetworkNamespace) throws(PathMonitorError) {
        switch validation.target() {
        case .success(let target): self.target = target
        case .failure(let error): throw error
        }
        switch validation.portalAPITargets() {
        case .success(let targets): portalAPIs = targets
        case .failure(let error): throw error
        }
        tracker = ConnectivityTracker(configuration: validation)
        self.namespace = namespace
        do {
            signal = try EventSignal()
            stop = try EventSignal()
        } catch {
            throw PathMonitorError(.io, "cannot make the connectivity probes' signals: \(error)")
        }
    }

    private var now: Duration { MonotonicInstant.now - origin }

    /// Each interface's connectivity, by index.
    var connectivity: [Int32: InterfaceConnectivity] { tracker.connectivity }

    /// Takes the interfaces a probe can go out of now, and starts the probes that are due. Returns
    /// how many started, and whether an interface's connectivity changed (a new or renumbered
    /// interface is unknown again).
    func update(_ interfaces: [NetworkInterface], resolvers: [IPAddress]) -> (started: Int, changed: Bool) {
        let before = tracker.connectivity
        let probes = tracker.update(interfaces, at: now)
        launch(probes, resolvers: resolvers)
        return (probes.count, tracker.connectivity != before)
    }

    /// Starts the probes that are due; returns how many.
    func runDue(resolvers: [IPAddress]) -> Int {
        let probes = tracker.due(at: now)
        launch(probes, resolvers: resolvers)
        return probes.count
    }

    /// Checks the interfaces named (all when nil) again now; returns how many probes started.
    func revalidate(_ names: Set<String>?, resolvers: [IPAddress]) -> Int {
        let probes = tracker.revalidate(names, at: now)
        launch(probes, resolvers: resolvers)
        return probes.count
    }

    /// How long until the next probe is due, if one waits.
    var timeUntilNextProbe: Duration? { tracker.nextDue.map { max(.zero, $0 - now) } }

    /// Applies the outcomes that arrived; true when an interface's connectivity changed.
    func collect() -> Bool {
        signal.reset()
        let arrived = outcomes.list.withLock { list in
            defer { list = [] }
            return list
        }
        var changed = false
        for (probe, found) in arrived {
            threads.removeValue(forKey: probe.id)?.join()
            if tracker.finished(probe, found, at: now) { changed = true }
        }
        return changed
    }

    /// Ends every probe in flight and waits for their threads.
    func cancel() {
        stop.signal()
        for thread in threads.values { thread.join() }
        threads = [:]
    }

    private func launch(_ probes: [ConnectivityTracker.Probe], resolvers: [IPAddress]) {
        let target = self.target, validation = tracker.configuration, namespace = self.namespace, stop = self.stop, signal = self.signal
        let outcomes = self.outcomes, portalAPIs = self.portalAPIs
        for probe in probes {
            let thread = try? PinnedThread(name: "roam-probe") {
                let servers = validation.interfaceResolvers[probe.interface] ?? resolvers
                let found = ConnectivityProbe.run(target, validation, interface: probe.interface, namespace: namespace, resolvers: servers, stop: stop,
                                                 portalAPI: portalAPIs[probe.interface])
                outcomes.list.withLock { $0.append((probe, found)) }
                signal.signal()
            }
            if let thread {
                threads[probe.id] = thread
            } else {
                // No thread: the interface waits for its next turn, as after a probe that found nothing.
                outcomes.list.withLock { $0.append((probe, InterfaceConnectivity(state: .limited, reason: "cannot start a probe thread"))) }
                signal.signal()
            }
        }
    }
}

/// The probes' outcomes, shared with their threads.
private final class Outcomes: Sendable {
    let list = Mutex<[(probe: ConnectivityTracker.Probe, found: InterfaceConnectivity)]>([])
}
