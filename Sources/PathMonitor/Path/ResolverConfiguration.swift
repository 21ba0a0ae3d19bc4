import Glibc
import Netlink
import RoamCore
import RoamSystem

/// The DNS resolvers of a namespace, from a `resolv.conf` file.
public struct ResolverConfiguration: Sendable, Hashable {
    /// One `nameserver` line.
    public struct Nameserver: Sendable, Hashable {
        public var address: IPAddress
        /// The interface of a link-local IPv6 server (`fe80::1%eth0`).
        public var interfaceName: String?
        /// A nameserver.
        ///
        /// - Parameters:
        ///   - address: Its address.
        ///   - interfaceName: The interface of a link-local IPv6 server.
        public init(address: IPAddress, interfaceName: String? = nil) {
            self.address = address
            self.interfaceName = interfaceName
        }
    }

    public var nameservers: [Nameserver]

    /// A configuration of these nameservers.
    ///
    /// - Parameter nameservers: The nameservers, in the file's order.
    public init(nameservers: [Nameserver] = []) {
        self.nameservers = nameservers
    }

    /// Parses `resolv.conf` text; lines other than valid `nameserver` lines are ignored, as the resolver does.
    ///
    /// - Parameter text: The file's text.
    public init(parsing text: String) {
        var servers: [Nameserver] = []
        for line in textLines(text) {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count >= 2, words[0] == "nameserver" else { continue }
            let parts = words[1].split(separator: "%", maxSplits: 1)
            if let address = IPAddress(parts[0]) {
                servers.append(Nameserver(address: address, interfaceName: parts.count == 2 ? String(parts[1]) : nil))
            }
        }
        self.init(nameservers: servers)
    }

    /// The resolver file that programs in `namespace` see: `/etc/netns/NAME/resolv.conf` when it
    /// exists (which `ip netns exec` bind-mounts over `/etc/resolv.conf`), else `/etc/resolv.conf`.
    ///
    /// - Parameter namespace: The namespace, named or not.
    /// - Returns: The file's path.
    public static func path(for namespace: NetworkNamespace) -> String {
        if let name = namespace.name {
            let specific = "/etc/netns/\(name)/resolv.conf"
            if access(specific, R_OK) == 0 { return specific }
        }
        return "/etc/resolv.conf"
    }

    /// Reads a resolver file; a missing or unreadable file means no resolvers.
    ///
    /// - Parameter path: The file, read up to 1 MiB.
    /// - Returns: Its nameservers.
    public static func load(path: String) -> ResolverConfiguration {
        guard let text = try? readTextFile(path, maximumBytes: 1 << 20) else { return ResolverConfiguration() }
        return ResolverConfiguration(parsing: text)
    }
}
