import Logging
import Dispatch
import Glibc
import Netlink
import Synchronization

/// Watches the network path of one network namespace and publishes it whenever it changes: the
/// Linux counterpart of Network.framework's `NWPathMonitor`.
///
/// The monitor follows rtnetlink on a thread of its own, pinned to the namespace. It keeps a
/// snapshot of links, addresses and the routes that matter, derives a `NetworkPath` after
/// every burst of notifications, and publishes it only when it differs from the last one. When
/// the kernel drops notifications (the socket's receive buffer overflowed), it dumps everything
/// again, so the last path published always matches the kernel once the burst is over.
///
/// ```swift
/// let monitor = NetworkPathMonitor(namespace: try .named("phone"))
/// try monitor.start()
/// for await path in monitor.paths {
///     print(path.status, path.primaryInterface?.name ?? "-", path.isExpensive)
/// }
/// ```
///
/// Paths reach you three ways: ``paths`` (an `AsyncSequence` that starts with the current path
/// and keeps only the newest when you fall behind), ``onUpdate(queue:_:)`` (a callback, cancelled
/// through the returned subscription) and ``currentPath``. A cancelled monitor stays cancelled;
/// start a new one to watch again.
public final class NetworkPathMonitor: Sendable {
    /// How a monitor watches.
    public struct Configuration: Sendable {
        /// What the path may use. By default everything, whatever its connectivity
        /// (`PathPolicy/validation` `.ignore`, as `NWPathMonitor` without requirements):
        /// set `.prefer` for the path a flow would use, `.require` for validated interfaces only.
        public var policy: PathPolicy
        /// Interfaces-file rules that override classification.
        public var interfaceRules: InterfaceRules
        /// The resolver file for `NetworkPath.supportsDNS`; nil picks the namespace's
        /// (`/etc/netns/NAME/resolv.conf` if present, else `/etc/resolv.conf`).
        public var resolverConfigurationPath: String?
        /// How long to wait after a notification for more before publishing. Zero publishes as
        /// soon as the queued notifications are read, which already merges a burst the kernel
        /// sends at once.
        public var coalescingDelay: Duration
        /// The netlink receive buffer. Larger buffers overflow later in storms; an overflow is
        /// recovered from by a full dump either way.
        public var receiveBufferSize: Int
        /// Where device facts come from; nil reads sysfs (a private `/sys` for another namespace).
        public var deviceFacts: (any DeviceFactsSource)?
        /// How often the link quality of Wi-Fi interfaces is read again from the kernel
        /// (nl80211), while the namespace has any: a signal fades without an rtnetlink
        /// notification. It is also read at every path evaluation. Zero never reads it, and
        /// leaves Wi-Fi quality to tags and interfaces files.
        public var wirelessPollInterval: Duration
        /// Where the monitor reports what it recovered from, through swift-log, so that an app
        /// routes it with its own logs: lost notifications (`warning`), a settling round cut
        /// short by an endless storm (`notice`), the dumps that resynchronise its snapshot
        /// (`debug`), and a monitor that stopped (`error`). Each message carries the namespace
        /// as `netns` metadata. By default a logger labelled `roam.path-monitor`, which goes
        /// wherever the app bootstrapped `LoggingSystem`.
        public var logger: Logger
        /// Whether and how the monitor checks that each interface reaches the internet (off by
        /// default): each interface's `NetworkInterface.connectivity` and the path's follow
        /// its probes, validated interfaces come first, and `PathPolicy/validation` says which
        /// others the path leaves out.
        public var validation: ConnectivityValidation?
        /// Whether the resolver file is watched with inotify (false: it is read again every
        /// second, as it is when no inotify instance can be had; for tests).
        package var watchesResolverFile = true

        /// A configuration; validation is set apart (``validation``).
        ///
        /// - Parameters:
        ///   - policy: What the path may use.
        ///   - interfaceRules: The interfaces file's rules.
        ///   - resolverConfigurationPath: The resolver file to follow (nil: the namespace's).
        ///   - coalescingDelay: How long changes are gathered before a path is published.
        ///   - receiveBufferSize: The netlink socket's receive buffer, in bytes.
        ///   - deviceFacts: Where device facts come from (nil: sysfs).
        ///   - wirelessPollInterval: How often a Wi-Fi link's quality is read from nl80211.
        ///   - logger: Where the monitor logs.
        public init(policy: PathPolicy = PathPolicy(validation: .ignore), interfaceRules: InterfaceRules = InterfaceRules(),
                    resolverConfigurationPath: String? = nil, coalescingDelay: Duration = .zero,
                    receiveBufferSize: Int = 4 << 20, deviceFacts: (any DeviceFactsSource)? = nil,
                    wirelessPollInterval: Duration = .seconds(2), logger: Logger = Logger(label: "roam.path-monitor")) {
            self.policy = policy
            self.interfaceRules = interfaceRules
            self.resolverConfigurationPath = resolverConfigurationPath
            self.coalescingDelay = coalescingDelay
            self.receiveBufferSize = receiveBufferSize
            self.deviceFacts = deviceFacts
            self.wirelessPollInterval = wirelessPollInterval
            self.logger = logger
        }
    }

    /// Counters of what a monitor did, for tests and benchmarks.
    public struct Statistics: Sendable, Hashable {
        /// Paths published (the first one included).
        public var pathsPublished = 0
        /// rtnetlink notifications read.
        public var notificationsReceived = 0
        /// Times the kernel reported dropped notifications (`ENOBUFS`).
        public var overruns = 0
        /// Full dumps of links, addresses and routes, the initial one included.
        public var fullDumps = 0
        /// Route-only dumps after an interface went down or away.
        public var routeDumps = 0
        /// Readings of a Wi-Fi interface's link quality from nl80211.
        public var wirelessReadings = 0
        /// Connectivity probes sent (``Configuration/validation``).
        public var connectivityProbes = 0
    }

    /// The namespace watched.
    public let namespace: NetworkNamespace
    /// The configuration.
    public let configuration: Configuration
    private let core: MonitorCore

    /// A monitor of `namespace` under `configuration`; nothing is watched until ``start()``.
    ///
    /// - Parameters:
    ///   - namespace: The namespace to watch (the calling thread's by default).
    ///   - configuration: The policy, rules, resolver file, timing and validation.
    public init(namespace: NetworkNamespace = .current, configuration: Configuration = Configuration()) {
        self.namespace = namespace
        self.configuration = configuration
        self.core = MonitorCore()
    }

    /// A monitor that uses only interfaces of `requiredInterfaceType`, as `NWPathMonitor(requiredInterfaceType:)`.
    ///
    /// - Parameters:
    ///   - requiredInterfaceType: The only type of interface the path may use.
    ///   - namespace: The namespace to watch.
    public convenience init(requiredInterfaceType: InterfaceType, namespace: NetworkNamespace = .current) {
        self.init(namespace: namespace, configuration: Configuration(policy: PathPolicy(requiredInterfaceType: requiredInterfaceType, validation: .ignore)))
    }

    /// A monitor that uses no interface of the given types, as `NWPathMonitor(prohibitedInterfaceTypes:)`.
    ///
    /// - Parameters:
    ///   - prohibitedInterfaceTypes: Types of interface the path may not use.
    ///   - namespace: The namespace to watch.
    public convenience init(prohibitedInterfaceTypes: Set<InterfaceType>, namespace: NetworkNamespace = .current) {
        self.init(namespace: namespace, configuration: Configuration(policy: PathPolicy(prohibitedInterfaceTypes: prohibitedInterfaceTypes, validation: .ignore)))
    }

    deinit {
        core.cancel()
    }

    /// Starts watching. Returns once the first path is known (``currentPath`` is set).
    ///
    /// - Throws: ``PathMonitorError`` when the namespace does not exist, the process lacks the
    ///   privilege to enter it, netlink fails, or the monitor was started before.
    public func start() throws(PathMonitorError) {
        try core.start(namespace: namespace, configuration: configuration)
    }

    /// Stops watching: no more updates are delivered, every ``paths`` sequence ends, and the
    /// monitor's thread and sockets are gone when this returns (unless called from an update
    /// handler running on the monitor's thread, which then ends right after the handler).
    public func cancel() {
        core.cancel()
    }

    /// Starts watching and runs until the calling task is cancelled, then cancels the monitor.
    ///
    /// - Throws: ``PathMonitorError`` as ``start()`` does.
    public func run() async throws {
        try start()
        let paths = self.paths
        await withTaskCancellationHandler {
            for await _ in paths {}
        } onCancel: {
            self.cancel()
        }
    }

    /// The path of `namespace` now, derived from a fresh dump of its links, addresses and routes
    /// under `configuration`, exactly as a monitor started now would publish it first.
    ///
    /// For a one-off question (`roam monitor --once`), and to check a running monitor against
    /// the kernel: once the kernel stops changing, a monitor's ``currentPath`` equals this.
    ///
    /// - Parameters:
    ///   - namespace: The namespace to look at.
    ///   - configuration: The policy, rules and resolver file to derive the path under.
    /// - Returns: The path.
    /// - Throws: ``PathMonitorError`` as ``start()`` does.
    public static func evaluate(namespace: NetworkNamespace = .current, configuration: Configuration = Configuration()) throws(PathMonitorError) -> NetworkPath {
        let loop = MonitorLoop(core: MonitorCore(), namespace: namespace, configuration: configuration, wakeup: nil)
        do throws(NetlinkError) {
            return try loop.evaluateOnce()
        } catch {
            throw PathMonitorError(starting: namespace, error)
        }
    }

    /// Checks the connectivity of `interface` (of every interface when nil) again now, when the
    /// monitor validates connectivity (``Configuration/validation``; otherwise nothing happens):
    /// for an app that knows something changed that the monitor cannot see, as after the user
    /// logged into a captive portal (Android's `reportNetworkConnectivity`, NetworkManager's
    /// `CheckConnectivity`). An interface with a probe in flight is probed again once it ends.
    ///
    /// - Parameter interface: The interface to check, or nil for every one.
    public func revalidate(interface: String? = nil) {
        core.requestRevalidation(of: interface)
    }

    /// Classifies interfaces by `rules` instead of the configuration's ``Configuration/interfaceRules``
    /// from now on: every interface is classified again and the path published if it changed.
    /// For attributes that come from elsewhere while the monitor runs (`roam daemon` adds
    /// NetworkManager's metered flags before the interfaces file's rules).
    ///
    /// - Parameter rules: The rules, in the interfaces file's order (a later match overrides).
    public func updateInterfaceRules(_ rules: InterfaceRules) {
        core.requestInterfaceRules(rules)
    }

    /// The last path published; nil before ``start()``.
    public var currentPath: NetworkPath? { core.currentPath }

    /// Why the monitor stopped by itself, if it did (netlink failed after it started); every
    /// ``paths`` sequence has then ended. Nil while running and after ``cancel()``.
    public var failure: PathMonitorError? { core.failure }

    /// Counters of what the monitor did so far.
    public var statistics: Statistics { core.statistics }

    /// The paths, starting with the current one (once started) and then each change. When the
    /// consumer falls behind, only the newest path waits for it. Ends when the monitor is cancelled.
    public var paths: AsyncStream<NetworkPath> { core.makeStream() }

    /// Calls `handler` with the current path (once started) and with every change, in order.
    ///
    /// - Parameters:
    ///   - queue: where to call `handler`; nil calls it on the monitor's own thread, which runs
    ///     in the namespaces of the thread that called ``start()`` (it reaches the watched one
    ///     only through sockets and a sysfs mount opened there) and delivers to one handler at a
    ///     time, as soon as it has derived the path. A handler there that blocks delays the
    ///     others and the monitor's reading of the kernel (should the socket's buffer overflow
    ///     meanwhile, the monitor dumps the kernel's state again: the final path is never lost,
    ///     intermediate ones may be); give a queue to handlers that may block.
    ///   - handler: called with each path.
    /// - Returns: a subscription; cancel it, or let it go, to stop the calls.
    public func onUpdate(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (NetworkPath) -> Void) -> PathUpdateSubscription {
        core.subscribe(queue: queue, handler)
    }
}

/// A registration for path updates; updates stop when it is cancelled or released.
public final class PathUpdateSubscription: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>

    init(_ onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Mutex(onCancel)
    }

    /// Stops the updates. Idempotent.
    public func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    deinit {
        cancel()
    }
}
