import RoamCore

/// A TCP proxy of a run (`proxies:` in a scenario, or made through the run's toxiproxy API),
/// with toxiproxy's model: it listens at ``listen``, connects each client it accepts to
/// ``upstream``, and passes the bytes of both through its ``toxics``.
///
/// Where a proxy is: ``listen`` names a node of the scenario (the proxy listens on every address
/// the node has, in its namespace) or the host's loopback (`127.0.0.1`, `localhost`, `[::1]`:
/// the machine that runs Roam, for programs outside the scenario). ``upstream`` is reached from
/// where the proxy listens: a node's name is that node's address (its service address where it
/// has one), `localhost` that namespace's loopback. A proxy on the host's loopback whose
/// upstream is a node reaches it from inside that node.
public struct ProxySpec: Sendable, Hashable {
    public var name: String
    public var listen: ProxyEndpoint
    public var upstream: ProxyEndpoint
    /// A disabled proxy does not listen, and has no connections.
    public var enabled: Bool
    /// In the order they act on the bytes (toxiproxy's order: the order they were added).
    public var toxics: [Toxic]

    public init(name: String, listen: ProxyEndpoint, upstream: ProxyEndpoint, enabled: Bool = true, toxics: [Toxic] = []) {
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = enabled
        self.toxics = toxics
    }

    /// The most proxies a run holds, toxics a proxy holds, and connections a proxy keeps open
    /// at once (past that it refuses new ones until one ends).
    public static let maximumProxies = 64
    public static let maximumToxics = 32
    public static let maximumConnections = 256
    /// The longest name of a proxy or a toxic.
    public static let maximumNameLength = 64

    /// Whether `text` may name a proxy or a toxic: 1 to 64 letters, digits, `_`, `-` and `.`,
    /// not starting with `.` or `-` (toxiproxy's names, such as `redis_master` or
    /// `latency_downstream`, pass; a name never holds a `/` or a space).
    public static func isName(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, first != ".", first != "-", text.unicodeScalars.count <= maximumNameLength else { return false }
        return text.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" || $0 == "."
        }
    }

    /// The proxy as toxiproxy's API shows it: `name`, `listen`, `upstream`, `enabled`, `toxics`.
    public var json: JSONValue {
        .object([("name", .string(name)), ("listen", .string(listen.description)), ("upstream", .string(upstream.description)),
                 ("enabled", .bool(enabled)), ("toxics", .array(toxics.map(\.json)))])
    }
}

/// `HOST:PORT` as toxiproxy writes a proxy's `listen` and `upstream`: a node's name, an IP
/// address (IPv6 in brackets) or `localhost`, and a port (0 in `listen`: any free port, which
/// the proxy then shows).
public struct ProxyEndpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Whether the host is the loopback of where the name is read: `localhost`, `127.0.0.1`
    /// (any of 127/8), `::1`, or the unspecified address that toxiproxy's users write for "here".
    public var isLoopback: Bool {
        let lowered = host.lowercased()
        return lowered == "localhost" || lowered == "::1" || lowered == "0.0.0.0" || lowered == "::" || lowered.hasPrefix("127.")
    }

    /// Reads `HOST:PORT` (`[V6]:PORT` for an IPv6 address). Nil when it is not one.
    public init?(_ text: String) {
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, host.utf8.count <= 253, !portText.isEmpty, portText.utf8.count <= 5,
              portText.allSatisfy({ $0.isASCII && $0.isNumber }), let port = UInt16(portText) else { return nil }
        guard host.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.:".unicodeScalars.contains($0)) }) else {
            return nil
        }
        self.host = String(host)
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// One of toxiproxy's toxics: what it does to the bytes of one direction of each connection,
/// with toxiproxy's names, units and defaults (`docs/from-toxiproxy.md`).
public struct Toxic: Sendable, Hashable {
    /// Which bytes: toxiproxy's `upstream` (client to server) or `downstream` (server to client).
    public enum Stream: String, Sendable, Hashable, CaseIterable {
        case upstream
        case downstream
    }

    /// What the toxic does, with toxiproxy's attributes.
    public enum Kind: Sendable, Hashable {
        /// Each chunk waits `latency` ± up to `jitter` (uniform) from when it came, in order.
        case latency(latency: Duration, jitter: Duration)
        /// At most `kilobytesPerSecond` KB/s (1,000 bytes); 0 is no limit.
        case bandwidth(kilobytesPerSecond: Int)
        /// The close (FIN) waits `delay` after the last byte.
        case slowClose(delay: Duration)
        /// Nothing passes; the connection is closed `timeout` after the toxic began on it (0: never).
        case timeout(timeout: Duration)
        /// The connection is reset (RST to both ends) `timeout` after the toxic began on it.
        case resetPeer(timeout: Duration)
        /// The connection is closed once `bytes` have passed.
        case limitData(bytes: Int64)
        /// Chunks are cut into pieces of `averageSize` ± `sizeVariation` bytes, `delay` apart.
        case slicer(averageSize: Int, sizeVariation: Int, delay: Duration)
        /// Roam's, for HTTP/1.x (toxiproxy has none): `percent` of the requests (upstream) are
        /// answered by the proxy with `status` and an empty body, and the connection is closed;
        /// the server never sees them.
        case httpStatus(status: Int, percent: Int)
        /// Roam's: `percent` of the responses (downstream) have their body cut after `bytes`,
        /// and the connection is closed there.
        case httpTruncate(bytes: Int64, percent: Int)
        /// Roam's: the server's first bytes on each connection (a TLS handshake's first flight)
        /// are held until `delay` after the connection began (or the toxic began on it).
        case tlsStall(delay: Duration)
    }

    public var name: String
    public var kind: Kind
    public var stream: Stream
    /// The chance that the toxic acts on a given connection, drawn once per connection.
    public var toxicity: Double

    public init(name: String? = nil, _ kind: Kind, stream: Stream = .downstream, toxicity: Double = 1) {
        self.kind = kind
        self.stream = stream
        self.toxicity = toxicity
        self.name = name ?? "\(kind.typeName)_\(stream.rawValue)"
    }

    /// Toxiproxy's type names, in its documentation's order.
    public static let typeNames = ["latency", "bandwidth", "slow_close", "timeout", "reset_peer", "limit_data", "slicer",
                                   "http_status", "http_truncate", "tls_stall"]

    /// The toxics of Roam's own, which toxiproxy does not have, and the stream each acts on.
    public static let roamTypes: [String: Stream] = ["http_status": .upstream, "http_truncate": .downstream, "tls_stall": .downstream]

    /// The toxic as toxiproxy's API shows it: `name`, `type`, `stream`, `toxicity`, `attributes`.
    public var json: JSONValue {
        .object([("name", .string(name)), ("type", .string(kind.typeName)), ("stream", .string(stream.rawValue)),
                 ("toxicity", toxicity == 1 ? .int(1) : toxicity == 0 ? .int(0) : .double(toxicity)),
                 ("attributes", .object(kind.attributes.map { ($0.0, .int($0.1)) }))])
    }
}

extension Toxic.Kind {
    /// Toxiproxy's `type`.
    public var typeName: String {
        switch self {
        case .latency: "latency"
        case .bandwidth: "bandwidth"
        case .slowClose: "slow_close"
        case .timeout: "timeout"
        case .resetPeer: "reset_peer"
        case .limitData: "limit_data"
        case .slicer: "slicer"
        case .httpStatus: "http_status"
        case .httpTruncate: "http_truncate"
        case .tlsStall: "tls_stall"
        }
    }

    /// Toxiproxy's `attributes`, in its units (milliseconds, KB/s, bytes; the slicer's `delay` in
    /// microseconds).
    public var attributes: [(String, Int64)] {
        func milliseconds(_ duration: Duration) -> Int64 { duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000 }
        switch self {
        case let .latency(latency, jitter): return [("latency", milliseconds(latency)), ("jitter", milliseconds(jitter))]
        case .bandwidth(let rate): return [("rate", Int64(rate))]
        case .slowClose(let delay): return [("delay", milliseconds(delay))]
        case .timeout(let timeout): return [("timeout", milliseconds(timeout))]
        case .resetPeer(let timeout): return [("timeout", milliseconds(timeout))]
        case .limitData(let bytes): return [("bytes", bytes)]
        case let .slicer(size, variation, delay):
            return [("average_size", Int64(size)), ("size_variation", Int64(variation)),
                    ("delay", delay.components.seconds * 1_000_000 + delay.components.attoseconds / 1_000_000_000_000)]
        case let .httpStatus(status, percent): return [("status", Int64(status)), ("percent", Int64(percent))]
        case let .httpTruncate(bytes, percent): return [("bytes", bytes), ("percent", Int64(percent))]
        case .tlsStall(let delay): return [("delay", milliseconds(delay))]
        }
    }

    /// The attributes each type knows, with their bounds (toxiproxy's names; unset ones are 0).
    public static func attributeBounds(of type: String) -> [(name: String, range: ClosedRange<Int64>)]? {
        let milliseconds: ClosedRange<Int64> = 0...3_600_000
        switch type {
        case "latency": return [("latency", milliseconds), ("jitter", milliseconds)]
        case "bandwidth": return [("rate", 0...100_000_000)]
        case "slow_close": return [("delay", milliseconds)]
        case "timeout", "reset_peer": return [("timeout", milliseconds)]
        case "limit_data": return [("bytes", 0...(1 << 40))]
        case "slicer": return [("average_size", 0...(1 << 20)), ("size_variation", 0...(1 << 20)), ("delay", 0...60_000_000)]
        case "http_status": return [("status", 100...599), ("percent", 0...100)]
        case "http_truncate": return [("bytes", 0...(1 << 40)), ("percent", 0...100)]
        case "tls_stall": return [("delay", 1...3_600_000)]
        default: return nil
        }
    }

    /// The kind of `type` with `attributes` (each within ``attributeBounds(of:)``; missing ones 0).
    public init?(type: String, attributes: [String: Int64]) {
        func value(_ name: String) -> Int64 { attributes[name] ?? 0 }
        switch type {
        case "latency": self = .latency(latency: .milliseconds(value("latency")), jitter: .milliseconds(value("jitter")))
        case "bandwidth": self = .bandwidth(kilobytesPerSecond: Int(value("rate")))
        case "slow_close": self = .slowClose(delay: .milliseconds(value("delay")))
        case "timeout": self = .timeout(timeout: .milliseconds(value("timeout")))
        case "reset_peer": self = .resetPeer(timeout: .milliseconds(value("timeout")))
        case "limit_data": self = .limitData(bytes: value("bytes"))
        case "slicer":
            self = .slicer(averageSize: Int(value("average_size")), sizeVariation: Int(value("size_variation")), delay: .microseconds(value("delay")))
        // Unset: every request answered 503, every response cut at its first body byte.
        case "http_status": self = .httpStatus(status: Int(attributes["status"] ?? 503), percent: Int(attributes["percent"] ?? 100))
        case "http_truncate": self = .httpTruncate(bytes: value("bytes"), percent: Int(attributes["percent"] ?? 100))
        case "tls_stall": self = .tlsStall(delay: .milliseconds(attributes["delay"] ?? 10_000))
        default: return nil
        }
    }
}

/// A change to a proxy on the timeline: `{at: 5s, proxy: api, toxic: {...}}` adds a toxic (or
/// replaces the one of its name), `remove: NAME` removes one, `enabled: false` takes the proxy
/// down (its connections end) and `enabled: true` brings it back. A toxic with `for:` is removed
/// again when that span ends (the timeline then holds both events).
public struct ProxyEvent: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        case addToxic(Toxic)
        case removeToxic(String)
        case enabled(Bool)
    }

    public var at: Duration
    public var proxy: String
    public var action: Action

    public init(at: Duration, proxy: String, _ action: Action) {
        self.at = at
        self.proxy = proxy
        self.action = action
    }

    /// The most proxy events a timeline holds.
    public static let maximumEvents = 10_000

    /// What it does, in the words of the run's timeline.
    public var summary: String {
        switch action {
        case .addToxic(let toxic): "toxic \(toxic.name) (\(toxic.kind.typeName) \(toxic.stream.rawValue))"
        case .removeToxic(let name): "remove toxic \(name)"
        case .enabled(let on): on ? "enabled" : "disabled"
        }
    }
}
