import Foundation
import Glibc
import Netlink
import Synchronization

/// What the machine running the tests allows.
public enum TestEnvironment {
    /// Root, so namespaces can be made. Kernel tests are enabled only then.
    public static let isRoot = geteuid() == 0

    /// The `roam` executable built next to the test bundle, if it was built.
    public static var roamExecutable: String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let exe = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let directory = (exe as NSString).deletingLastPathComponent
        for candidate in [directory + "/roam", (directory as NSString).deletingLastPathComponent + "/roam"] where access(candidate, X_OK) == 0 {
            return candidate
        }
        return nil
    }

    /// A fresh directory of the caller's own under /tmp (`mkdtemp`: never one another user made
    /// first, so removing it afterwards cannot be redirected).
    public static func scratchDirectory(_ prefix: String) throws -> String {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        guard made else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// A ``scratchDirectory(_:)`` that lives as long as the process: removed with what is in
    /// it when the process exits (for output that several tests read, made once).
    public static func processScratchDirectory(_ prefix: String) throws -> String {
        let directory = try scratchDirectory(prefix)
        let first = processScratch.withLock { directories -> Bool in
            directories.append(directory)
            return directories.count == 1
        }
        if first {
            atexit {
                for directory in TestEnvironment.processScratch.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: directory) }
            }
        }
        return directory
    }

    private static let processScratch = Mutex<[String]>([])
}

/// A network namespace made for one test, named `roam-test-PID-N`, and deleted when the test
/// ends, passed or failed. Namespaces left by test processes that died are removed the first
/// time one is made.
public final class TestNamespace: @unchecked Sendable {
    public let namespace: NetworkNamespace
    public let socket: NetlinkSocket
    public var name: String { namespace.name! }

    nonisolated(unsafe) private static var counter = 0
    private static let lock = NSLock()
    nonisolated(unsafe) private static var sweptStale = false

    public init() throws {
        let name = TestNamespace.lock.withLock { () -> String in
            if !TestNamespace.sweptStale {
                TestNamespace.sweptStale = true
                TestNamespace.removeStale()
            }
            TestNamespace.counter += 1
            return "roam-test-\(getpid())-\(TestNamespace.counter)"
        }
        namespace = try NetworkNamespace.create(named: name)
        do {
            socket = try NetlinkSocket(.route, in: namespace)
            try socket.setLink(index: try socket.link(named: "lo")!.index, up: true)
        } catch {
            try? namespace.delete()
            throw error
        }
    }

    deinit {
        try? namespace.delete()
    }

    /// Runs `body` with a fresh namespace and deletes the namespace afterwards, whatever happens.
    public static func with<T>(_ body: (TestNamespace) async throws -> T) async throws -> T {
        let test = try TestNamespace()
        defer { try? test.namespace.delete() }
        return try await body(test)
    }

    /// The index of interface `name`, failing the test when it is absent.
    public func index(of name: String) throws -> Int32 {
        guard let link = try socket.link(named: name) else {
            throw NetlinkError(.errno(ENODEV), operation: "find \(name) in \(self.name)")
        }
        return link.index
    }

    /// Adds a veth pair inside the namespace, sets both ends up, gives `name` an address
    /// `198.18.S.2/24` and a default route through `198.18.S.1` with `metric`, and tags it with `alias`.
    @discardableResult
    public func addUplink(_ name: String, subnet: UInt8, metric: UInt32, alias: String?) throws -> (index: Int32, peer: Int32) {
        try socket.createVethPair(name, peer: name + "p")
        let index = try self.index(of: name)
        let peer = try self.index(of: name + "p")
        try socket.setLink(index: index, up: true, alias: alias)
        try socket.setLink(index: peer, up: true)
        // The kernel makes a veth operationally up in its linkwatch work, after the request that
        // set it up has returned: a monitor started at once could still dump it without its
        // carrier (seen once in CI, under load). The uplink is ready when the kernel says so.
        let deadline = ContinuousClock.now + .seconds(5)
        while try socket.link(index: index)?.isRunning != true, ContinuousClock.now < deadline {
            usleep(1_000)
        }
        try socket.addAddress(IPPrefix("198.18.\(subnet).2/24")!, interfaceIndex: index)
        try socket.addRoute(.defaultRoute(via: IPAddress("198.18.\(subnet).1")!, interfaceIndex: index, metric: metric))
        return (index, peer)
    }

    private static func removeStale() {
        for name in NetworkNamespace.list() where name.hasPrefix("roam-test-") {
            let parts = name.split(separator: "-")
            guard parts.count == 4, let pid = Int32(parts[2]) else { continue }
            if pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH {
                try? NetworkNamespace.named(name).delete()
            }
        }
    }
}

/// The links, addresses, routes and rules of the host's namespace, to check that tests left it as it was.
public struct HostNetworkState: Equatable {
    public var links: [String]
    public var addresses: [String]
    public var routes: [String]
    public var rules: [String]
    public var qdiscs: [String]

    public static func capture() throws -> HostNetworkState {
        let socket = try NetlinkSocket(.route)
        return HostNetworkState(
            links: try socket.links().map { "\($0.index) \($0.name) \($0.flags.rawValue) \($0.alias ?? "")" }.sorted(),
            addresses: try socket.addresses().map { "\($0.interfaceIndex) \($0.prefix)" }.sorted(),
            routes: try socket.routes().map { "\($0.table) \($0.destination) \($0.interfaceIndices) \($0.metric)" }.sorted(),
            rules: try socket.rules().map { "\($0)" }.sorted(),
            qdiscs: try socket.qdiscs().map { "\($0.interfaceIndex) \($0.handle) \($0.parent) \($0.kind)" }.sorted())
    }
}
