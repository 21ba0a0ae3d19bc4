import Glibc
import Logging
import Netlink
import RoamCore
import RoamSystem

/// The work of a monitor's thread: follow rtnetlink, keep the snapshot, publish paths.
///
/// The thread stays in the namespaces of whoever started the monitor, so that the paths it
/// hands to subscribers (and any Dispatch thread it starts by doing so) are there too. It reaches
/// the watched namespace through what it opened there: netlink sockets and a sysfs mount.
final class MonitorLoop {
    private let core: MonitorCore
    private let namespace: NetworkNamespace
    private let configuration: NetworkPathMonitor.Configuration
    private let wakeup: EventSignal?
    private var evaluator: PathEvaluator
    private let resolverPath: String
    private let logger: Logger
    private var factsSource: (any DeviceFactsSource)?
    /// The watched namespace's sysfs, which ``factsSource`` reads below, when the loop opened one.
    private var sysfs: OwnedFileDescriptor?
    private var snapshot = NetworkSnapshot()
    private var facts: [Int32: (name: String, facts: DeviceFacts)] = [:]
    /// The device facts the last evaluation used: ``facts`` with the Wi-Fi qualities read.
    private var deviceFacts: [Int32: DeviceFacts] = [:]
    private var resolvers = ResolverConfiguration()
    /// The quality nl80211 gives each Wi-Fi interface, and the socket that reads it (opened in
    /// the namespace the first time a Wi-Fi interface is seen).
    private var wirelessQualities: [Int32: LinkQuality] = [:]
    /// The Wi-Fi interfaces of the last evaluation, by what their device facts say.
    private var wirelessIndices: [Int32] = []
    /// Each interface's classification, with what it was derived from: parsing tags and
    /// matching rules again only when the interface's name, alias, kind or facts change keeps
    /// them off the path from a notification to its update.
    private var classifications: [Int32: (link: ClassifiedLink, facts: DeviceFacts, value: InterfaceClassifier.Classification)] = [:]
    /// What the last evaluation derived per interface: the next derives only those that changed.
    private var candidates = PathEvaluator.CandidateCache()
    /// What changed in the snapshot since the last evaluation.
    private var changes = PathEvaluator.Changes.everything
    /// Connectivity validation, when the configuration asks for it (made when the loop runs).
    private var validator: ConnectivityValidator?
    private var wireless: NetlinkSocket?
    private var wirelessUnavailable = false
    private var nextWirelessPoll = ContinuousClock.now
    /// Without an inotify instance (a user has 128 by default: a run of more nodes than that
    /// meets the limit), the resolver file is looked at every ``resolverPollInterval`` instead:
    /// when it is next due, and what it was (nil: the watcher tells).
    private var nextResolverPoll: ContinuousClock.Instant?
    private var resolverStamp: [Int] = []
    static let resolverPollInterval = Duration.seconds(1)

    // Work found while reading notifications, done before the next path is derived.
    private var needsFullDump = false
    private var needsRouteDump = false
    private var isDirty = false

    /// Settling stops after this many rounds of dump-and-drain even if the kernel keeps talking,
    /// so that a path is published during an endless storm too.
    private static let maximumSettleRounds = 8

    init(core: MonitorCore, namespace: NetworkNamespace, configuration: NetworkPathMonitor.Configuration, wakeup: EventSignal?) {
        self.core = core
        self.namespace = namespace
        self.configuration = configuration
        self.wakeup = wakeup
        self.evaluator = PathEvaluator(policy: configuration.policy, classifier: InterfaceClassifier(rules: configuration.interfaceRules))
        self.resolverPath = configuration.resolverConfigurationPath ?? ResolverConfiguration.path(for: namespace)
        self.factsSource = configuration.deviceFacts
        var logger = configuration.logger
        logger[metadataKey: "netns"] = "\(namespace)"
        self.logger = logger
    }

    /// Runs until the monitor is cancelled. Reports the outcome of setting up through `started`.
    func run(started: StartSignal) {
        let requests: NetlinkSocket
        let events: NetlinkSocket
        var watcher: DirectoryWatcher?
        if let validation = configuration.validation {
            do throws(PathMonitorError) {
                validator = try ConnectivityValidator(validation, namespace: namespace)
            } catch {
                started.finish(.failure(error))
                return
            }
        }
        defer { validator?.cancel() }
        do throws(NetlinkError) {
            prepareDeviceFacts()
            requests = try NetlinkSocket(.route, in: namespace)
            events = try NetlinkSocket(.route, in: namespace)
            try events.subscribe(to: [.link, .ipv4Address, .ipv6Address, .ipv4Route, .ipv6Route])
            try events.setNonBlocking()
            try? events.setReceiveBufferSize(configuration.receiveBufferSize)
            watcher = configuration.watchesResolverFile ? try? DirectoryWatcher(directories: resolverDirectories()) : nil
            if watcher == nil {
                logger.notice("no inotify instance for the resolver's file (fs.inotify.max_user_instances); it is read again every second instead",
                              metadata: ["namespace": "\(namespace.name ?? "host")"])
                resolverStamp = currentResolverStamp()
                nextResolverPoll = ContinuousClock.now.advanced(by: Self.resolverPollInterval)
            }
            reloadResolvers()
            try fullDump(requests)
        } catch {
            started.finish(.failure(PathMonitorError(starting: namespace, error)))
            return
        }
        core.publish(evaluate())
        started.finish(.success(()))

        do throws(NetlinkError) {
            try loop(events: events, requests: requests, watcher: watcher)
        } catch {
            // The kernel refused something it accepted at start: end the monitor visibly rather
            // than publish a path that may be stale.
            logger.error("path monitor stopped", metadata: ["error": "\(error)"])
            core.fail(PathMonitorError(.netlink, "the monitor of \(namespace) stopped: \(error)", underlying: error))
        }
    }

    /// The path of the namespace now, from a fresh dump, as ``run(started:)`` would publish it
    /// first.
    func evaluateOnce() throws(NetlinkError) -> NetworkPath {
        prepareDeviceFacts()
        let requests = try NetlinkSocket(.route, in: namespace)
        reloadResolvers()
        try fullDump(requests)
        return evaluate()
    }

    /// Picks sysfs for device facts when the configuration names no source.
    private func prepareDeviceFacts() {
        guard factsSource == nil else { return }
        // sysfs lists the namespace of whoever mounted it: another namespace needs its own.
        // Without one, classification falls back to what netlink says.
        guard let directory = try? namespace.openSysfs() else { return }
        sysfs = directory
        factsSource = SysfsDeviceFacts(root: "/proc/self/fd/\(directory.rawValue)/class/net")
    }

    private func loop(events: NetlinkSocket, requests: NetlinkSocket, watcher: DirectoryWatcher?) throws(NetlinkError) {
        guard let wakeup else { return }
        var descriptors = [events.fileDescriptor, wakeup.descriptor.rawValue]
        if let watcher { descriptors.append(watcher.fileDescriptor.rawValue) }
        let probesReady = validator.map { _ in descriptors.count }
        if let validator { descriptors.append(validator.signal.descriptor.rawValue) }
        let resolverNames = resolverFileNames()

        while !core.isCancelled {
            // Dumps left over from a storm that outlasted the settle rounds are done now, not
            // after the next notification, which may never come.
            let pending = needsFullDump || needsRouteDump
            let ready = try readable(descriptors, timeout: pending ? .zero : nextTimeout())
            // A due reading of Wi-Fi quality is an evaluation: it reads nl80211, and the path is
            // published only if it changed.
            if wirelessPollIsDue() { isDirty = true }
            if ready[1] {
                wakeup.reset()
                core.runPosted()
                if case .some(let names) = core.takeRevalidations(), let validator {
                    let started = validator.revalidate(names, resolvers: resolvers.nameservers.map(\.address))
                    core.updateStatistics { $0.connectivityProbes += started }
                }
                // New rules are an evaluation (which takes them); anything else waits again.
                guard core.hasInterfaceRules else { continue }
                isDirty = true
            }
            if ready[0] { try drain(events) }
            if let probesReady, ready[probesReady], let validator, validator.collect() { isDirty = true }
            if let validator, validator.timeUntilNextProbe == .zero {
                let started = validator.runDue(resolvers: resolvers.nameservers.map(\.address))
                core.updateStatistics { $0.connectivityProbes += started }
            }
            if ready.count > 2, probesReady != 2, ready[2], let watcher {
                // An overflowed inotify queue may have lost the resolver file's event: read it again.
                if let changed = watcher.changedNames(), changed.isDisjoint(with: resolverNames) {} else { reloadResolvers() }
            }
            if let due = nextResolverPoll, ContinuousClock.now >= due {
                nextResolverPoll = ContinuousClock.now.advanced(by: Self.resolverPollInterval)
                let stamp = currentResolverStamp()
                if stamp != resolverStamp {
                    resolverStamp = stamp
                    reloadResolvers()
                }
            }
            guard isDirty || needsFullDump || needsRouteDump else { continue }
            if configuration.coalescingDelay > .zero {
                try absorb(events, for: configuration.coalescingDelay)
            }
            try settle(events: events, requests: requests)
            if isDirty {
                isDirty = false
                let path = evaluate()
                logger.trace("evaluated", metadata: ["path": "\(path)"])
                core.publish(path)
            }
        }
    }

    /// Reads every queued notification into the snapshot.
    private func drain(_ events: NetlinkSocket) throws(NetlinkError) {
        var count = 0
        while true {
            let outcome = try events.receiveNotifications { notification in
                count += 1
                let effect = snapshot.apply(notification)
                logger.trace("notification", metadata: ["notification": "\(notification)", "effect": "\(effect)"])
                switch effect {
                case .unchanged: break
                case .changed:
                    isDirty = true
                    changes.record(notification)
                case .routesNeedResync:
                    isDirty = true
                    needsRouteDump = true
                    changes.record(notification)
                }
            }
            if outcome == .drained { break }
            // ENOBUFS: notifications were lost. Keep reading what is queued, then dump everything.
            core.updateStatistics { $0.overruns += 1 }
            // One message per recovery: overruns before the dump that repairs them add nothing.
            guard !needsFullDump else { continue }
            needsFullDump = true
            logger.warning("the kernel dropped rtnetlink notifications (receive buffer overrun); the monitor will dump links, addresses and routes again",
                           metadata: ["receiveBufferSize": "\(configuration.receiveBufferSize)"])
        }
        if count > 0 { core.updateStatistics { $0.notificationsReceived += count } }
    }

    /// Keeps reading notifications for `delay` after the first one, so that one path is
    /// published for a burst spread over time.
    private func absorb(_ events: NetlinkSocket, for delay: Duration) throws(NetlinkError) {
        let deadline = MonotonicInstant.now + delay
        while !core.isCancelled {
            guard MonotonicInstant.now < deadline, let wakeup else { return }
            let ready = try readable([events.fileDescriptor, wakeup.descriptor.rawValue], until: deadline)
            if ready[1] { return }
            if ready[0] { try drain(events) }
        }
    }

    /// Waits until one of `descriptors` is readable or until the deadline or timeout (`nil`:
    /// none), and says which are.
    private func readable(_ descriptors: [Int32], until deadline: MonotonicInstant?) throws(NetlinkError) -> [Bool] {
        var entries = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        do {
            try waitForEvents(&entries, until: deadline)
        } catch {
            throw NetlinkError.posix("poll", errno: error.rawValue)
        }
        return entries.map { $0.revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 }
    }

    private func readable(_ descriptors: [Int32], timeout: Duration?) throws(NetlinkError) -> [Bool] {
        try readable(descriptors, until: timeout.map { MonotonicInstant.now + $0 })
    }

    /// Does the dumps notifications asked for, and reads what arrived meanwhile, until quiet.
    private func settle(events: NetlinkSocket, requests: NetlinkSocket) throws(NetlinkError) {
        for _ in 0..<Self.maximumSettleRounds {
            if needsFullDump {
                logger.debug("resynchronising: full dump of links, addresses and routes")
                try fullDump(requests)
            } else if needsRouteDump {
                logger.debug("resynchronising: route dump after an interface went down or away")
                needsRouteDump = false
                snapshot.replaceRoutes(try requests.routes())
                isDirty = true
                changes.markEverythingChanged()
                core.updateStatistics { $0.routeDumps += 1 }
            } else {
                return
            }
            // Notifications that raced the dump are newer than or equal to it: apply them.
            try drain(events)
        }
        if needsFullDump || needsRouteDump {
            logger.notice("the kernel kept sending notifications through \(Self.maximumSettleRounds) dumps; publishing the path as it stands and dumping again after it")
        }
    }

    private func fullDump(_ requests: NetlinkSocket) throws(NetlinkError) {
        needsFullDump = false
        needsRouteDump = false
        let links = try requests.links()
        let addresses = try requests.addresses()
        let routes = try requests.routes()
        snapshot.replaceLinksAndAddresses(links: links, addresses: addresses)
        snapshot.replaceRoutes(routes)
        isDirty = true
        changes.markEverythingChanged()
        core.updateStatistics { $0.fullDumps += 1 }
    }

    private func evaluate() -> NetworkPath {
        if let rules = core.takeInterfaceRules() {
            // Every interface is classified again under them.
            evaluator.classifier.rules = rules
            classifications = [:]
            changes.markEverythingChanged()
        }
        // A device's hardware does not change: sysfs is read again only when an interface
        // comes, goes or is renamed, and the facts handed to the evaluator are rebuilt only
        // then or when a reading of Wi-Fi quality changed them (not on every notification).
        var factsChanged = false
        if let factsSource, !factsCover(snapshot.links, changes: changes) {
            var refreshed: [Int32: (name: String, facts: DeviceFacts)] = [:]
            for link in snapshot.links.values {
                if let known = facts[link.index], known.name == link.name {
                    refreshed[link.index] = known
                } else {
                    refreshed[link.index] = (link.name, factsSource.facts(forInterfaceNamed: link.name))
                }
            }
            facts = refreshed
            wirelessIndices = facts.compactMap { $0.value.facts.isWiFi ? $0.key : nil }
            factsChanged = true
        }
        let qualities = wirelessQualities
        refreshWirelessQualities()
        if factsChanged || qualities != wirelessQualities {
            var current = facts.mapValues(\.facts)
            for (index, quality) in wirelessQualities { current[index]?.linkQuality = quality }
            deviceFacts = current
            changes.markEverythingChanged()
        }
        let current = deviceFacts
        let classifier = evaluator.classifier
        let classify = { (link: Link, facts: DeviceFacts) -> InterfaceClassifier.Classification in
            if let known = self.classifications[link.index], known.link.matches(link), known.facts == facts {
                return known.value
            }
            let value = classifier.classify(link, facts: facts)
            self.classifications[link.index] = (ClassifiedLink(link), facts, value)
            return value
        }
        var (path, probeable) = evaluator.evaluate(snapshot, facts: current, resolvers: resolvers, connectivity: validator?.connectivity ?? [:],
                                                   cache: &candidates, changes: changes, classify: classify)
        changes = .none
        if let validator {
            // New and renumbered interfaces are probed now, and are unknown until they answer.
            let (started, changed) = validator.update(probeable, resolvers: resolvers.nameservers.map(\.address))
            if started > 0 { core.updateStatistics { $0.connectivityProbes += started } }
            if changed {
                (path, probeable) = evaluator.evaluate(snapshot, facts: current, resolvers: resolvers, connectivity: validator.connectivity,
                                                       cache: &candidates, changes: .none, classify: classify)
            }
        }
        // Every interface of the snapshot was classified: forget those that went.
        if classifications.count > snapshot.links.count {
            classifications = classifications.filter { snapshot.links[$0.key] != nil }
        }
        return path
    }

    /// Whether ``facts`` holds exactly the interfaces of `links`, under their names, given that
    /// it did before `changes`.
    private func factsCover(_ links: [Int32: Link], changes: PathEvaluator.Changes) -> Bool {
        guard facts.count == links.count else { return false }
        if changes.isEverything {
            for link in links.values where facts[link.index]?.name != link.name { return false }
        } else {
            for index in changes.interfaces where facts[index]?.name != links[index]?.name { return false }
        }
        return true
    }

    // MARK: - Wi-Fi link quality

    /// How long the loop may sleep: until Wi-Fi quality is due to be read, or a probe is due.
    private func nextTimeout() -> Duration? {
        let resolverPoll = nextResolverPoll.map { max(.zero, ContinuousClock.now.duration(to: $0)) }
        let times = [wirelessPollTimeout(), validator?.timeUntilNextProbe, resolverPoll].compactMap { $0 }
        return times.min()
    }

    /// What identifies the resolver file's contents without reading them: its inode, size and
    /// change time, and those of the file a link points to (empty when there is none).
    private func currentResolverStamp() -> [Int] {
        var stamp: [Int] = []
        for path in [resolverPath] + (realPath(resolverPath).map { [$0] } ?? []) {
            var info = stat()
            guard stat(path, &info) == 0 else { stamp += [-1]; continue }
            stamp += [Int(info.st_ino), Int(info.st_size), Int(info.st_ctim.tv_sec), Int(info.st_ctim.tv_nsec)]
        }
        return stamp
    }

    /// How long the loop may sleep before the next reading of Wi-Fi quality (-1: no Wi-Fi, or
    /// polling is off).
    /// How long until Wi-Fi quality is due to be read again; nil when it is not read.
    private func wirelessPollTimeout() -> Duration? {
        guard configuration.wirelessPollInterval > .zero, !wirelessUnavailable, !wirelessIndices.isEmpty else { return nil }
        return max(.zero, ContinuousClock.now.duration(to: nextWirelessPoll))
    }

    private func wirelessPollIsDue() -> Bool {
        configuration.wirelessPollInterval > .zero && !wirelessIndices.isEmpty && ContinuousClock.now >= nextWirelessPoll
    }

    /// Reads the quality of every Wi-Fi interface from nl80211. A kernel without cfg80211, or a
    /// failed read, leaves quality unknown rather than failing the monitor.
    private func refreshWirelessQualities() {
        guard configuration.wirelessPollInterval > .zero, !wirelessUnavailable else { return }
        let indices = wirelessIndices
        guard !indices.isEmpty else {
            wirelessQualities = [:]
            return
        }
        nextWirelessPoll = ContinuousClock.now.advanced(by: configuration.wirelessPollInterval)
        if wireless == nil {
            wireless = try? NetlinkSocket(.generic, in: namespace)
            if wireless?.hasWireless() != true {
                wireless = nil
                wirelessUnavailable = true
                return
            }
        }
        var updated: [Int32: LinkQuality] = [:]
        for index in indices {
            // A client's one station is its access point. An access point's own interface
            // talks to many, and has no one quality.
            guard (try? wireless?.wirelessInterfaceMode(interfaceIndex: index))?.isClient == true,
                  let stations = try? wireless?.wirelessStations(interfaceIndex: index), stations.count == 1 else { continue }
            let quality = LinkQuality(grading: stations[0])
            if quality != .unknown { updated[index] = quality }
        }
        core.updateStatistics { $0.wirelessReadings += indices.count }
        wirelessQualities = updated
    }

    private func reloadResolvers() {
        let loaded = ResolverConfiguration.load(path: resolverPath)
        guard loaded != resolvers else { return }
        resolvers = loaded
        let destinations = loaded.nameservers.map(\.address)
        if destinations != snapshot.trackedDestinations {
            snapshot.setTrackedDestinations(destinations)
            needsRouteDump = true
        }
        isDirty = true
    }

    private func resolverDirectories() -> [String] {
        var directories = [directoryName(resolverPath)]
        if let real = realPath(resolverPath) {
            let directory = directoryName(real)
            if !directories.contains(directory) { directories.append(directory) }
        }
        return directories
    }

    private func resolverFileNames() -> Set<String> {
        var names: Set<String> = [baseName(resolverPath)]
        if let real = realPath(resolverPath) { names.insert(baseName(real)) }
        return names
    }
}

private func directoryName(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

private func baseName(_ path: String) -> String {
    path.split(separator: "/").last.map(String.init) ?? path
}

private func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}

/// What an interface's classification depends on, besides its device facts.
private struct ClassifiedLink: Equatable {
    var name: String
    var alias: String?
    var kind: String?
    var hardwareType: HardwareType
    var isLoopback: Bool

    init(_ link: Link) {
        name = link.name
        alias = link.alias
        kind = link.kind
        hardwareType = link.hardwareType
        isLoopback = link.isLoopback
    }

    /// Whether `link` would classify as this one did (without making a copy to compare).
    func matches(_ link: Link) -> Bool {
        name == link.name && alias == link.alias && kind == link.kind && hardwareType == link.hardwareType && isLoopback == link.isLoopback
    }
}
