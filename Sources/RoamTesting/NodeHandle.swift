import Glibc
import Netlink
import PathMonitor
import RoamSystem
import Simulator
import Synchronization
import SystemPackage

/// One node of a running scenario, as code under test sees it: its addresses, its path, and
/// ways to run code inside its network namespace.
public struct NodeHandle: Sendable {
    public let name: String
    /// The node's network namespace, for APIs that take one (a `ConnectionRacer`, an
    /// `MPTCPPathManager`, `NetworkPathMonitor(namespace:)`); valid while the scenario runs.
    public let namespace: NetworkNamespace
    let plan: TopologyPlan.Node
    let network: RunningNetwork

    /// The node's service address (IPv4): reachable from every other node over whichever of
    /// its links is up, as a server on the Internet is. A phone whose every link is a
    /// network's has none configured (its addresses are its networks': ``address(on:)``),
    /// as a real phone has no address but the ones its networks give.
    public var address: String { plan.serviceIPv4.description }
    /// The node's IPv6 service address.
    public var address6: String { plan.serviceIPv6.description }

    /// The node's own IPv4 address on `link`.
    ///
    /// - Parameter link: A link of the scenario (`wifi`), or a network's link to the node.
    /// - Returns: The address, or nil when the node has no such link (or no IPv4 on it).
    public func address(on link: String) -> String? {
        plan.interfaces.first { $0.link == link }?.address(.ipv4)?.address.description
    }

    /// The node's own IPv6 address on `link`.
    ///
    /// - Parameter link: A link of the scenario, or a network's link to the node.
    /// - Returns: The address, or nil when the node has no such link (or no IPv6 on it).
    public func address6(on link: String) -> String? {
        plan.interfaces.first { $0.link == link }?.address(.ipv6)?.address.description
    }

    /// The path the node's monitor sees now.
    public var path: NetworkPath? { network.currentPath(of: name) }

    /// The node's path monitor (its updates are the ones in the report), to follow the path
    /// from the code under test.
    public var monitor: NetworkPathMonitor? { network.monitor(of: name) }

    /// Runs `body` inside the node's network namespace and returns its result.
    ///
    /// `body` runs on a thread of its own that lives in the namespace (as the task executor
    /// preference of the task), so every socket it opens, directly or from the nonisolated
    /// async functions it calls, belongs to the node; so do threads it starts. Code isolated to
    /// an actor with its own executor (the main actor, a custom executor) runs there instead,
    /// outside the node; unstructured tasks (`Task {}`) do not inherit the preference.
    ///
    /// - Parameter body: The code to run in the node.
    /// - Returns: What `body` returned.
    /// - Throws: A ``RoamTestingError`` when the node's thread cannot be made or `body` did not
    ///   run on it; else what `body` threw.
    public func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        let executor: NamespaceExecutor
        do {
            executor = try NamespaceExecutor(namespace: namespace, name: "roam-\(name)")
        } catch {
            throw RoamTestingError("enter node '\(name)': \(error)")
        }
        defer { executor.shutdown() }
        let expected = try namespaceIdentity(of: namespace)
        return try await withTaskExecutorPreference(executor) {
            guard currentThreadNamespace() == expected else {
                throw RoamTestingError("the code for node '\(name)' did not run on the node's thread; "
                    + "call run(_:) from a nonisolated context (not the main actor)")
            }
            return try await body()
        }
    }

    /// Runs a program inside the node's namespace and waits for it: its exit status and what
    /// it wrote. The environment gets `ROAM_NODE` and the scenario's addresses, as a `command`
    /// workload's does.
    ///
    /// - Parameters:
    ///   - arguments: The program and its arguments.
    ///   - environment: Variables added to the environment.
    /// - Returns: Its exit status and what it wrote to standard output and standard error.
    /// - Throws: A ``RoamTestingError`` when no program is given or the node cannot be entered;
    ///   the system's error when the program cannot be started.
    public func spawn(_ arguments: [String], environment: [String: String] = [:]) async throws -> ProcessOutcome {
        guard !arguments.isEmpty else { throw RoamTestingError("spawn needs a program to run") }
        var values = processEnvironment()
        for (key, value) in network.environment { values[key] = value }
        values["ROAM_NODE"] = name
        for (key, value) in environment { values[key] = value }
        let finalEnvironment = values
        let namespace = namespace
        return try await withCheckedThrowingContinuation { continuation in
            // The continuation is resumed from a thread outside the node's namespace: resuming
            // wakes the task pool, and Dispatch may start a pool thread from the resuming one,
            // which would inherit the node's namespace (see NetworkNamespace.spawnThread).
            let outcome = Mutex<Result<ProcessOutcome, any Error>?>(nil)
            do {
                let thread = try namespace.spawnThread(name: "roam-spawn") { entered in
                    switch entered {
                    case .failure(let error):
                        outcome.withLock { $0 = .failure(RoamTestingError("enter node: \(error)")) }
                    case .success:
                        let result = Result { try ProcessOutcome.run(arguments, environment: finalEnvironment) }
                        outcome.withLock { $0 = result.mapError { $0 } }
                    }
                }
                let waiter = try PinnedThread(name: "roam-spawn-wait") {
                    thread.join()
                    continuation.resume(with: outcome.withLock { $0 } ?? .failure(RoamTestingError("the node's program ended without a result")))
                }
                waiter.detach()
            } catch {
                continuation.resume(throwing: RoamTestingError("enter node: \(error)"))
            }
        }
    }

    /// Writes a `mark` into the run's timeline, shown in the HTML report next to the links' changes.
    ///
    /// - Parameter text: The mark's text.
    public func mark(_ text: String) {
        network.mark(text, node: name)
    }
}

/// The inode of a namespace file, which identifies the namespace.
func namespaceIdentity(of namespace: NetworkNamespace) throws -> UInt64 {
    var info = stat()
    guard let path = namespace.path, stat(path, &info) == 0 else {
        throw RoamTestingError("cannot read the node's namespace: \(Errno.current.description)")
    }
    return UInt64(info.st_ino)
}

func currentThreadNamespace() -> UInt64? {
    var info = stat()
    guard stat("/proc/thread-self/ns/net", &info) == 0 else { return nil }
    return UInt64(info.st_ino)
}
