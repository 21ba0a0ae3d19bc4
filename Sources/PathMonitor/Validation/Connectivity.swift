import Netlink

/// How a monitor checks that its interfaces reach the internet (off unless set): a probe like
/// NetworkManager's and Android's, an HTTP GET of ``url`` sent from each interface (bound to it,
/// in the monitor's namespace, the name looked up through that interface), expecting
/// ``expectedStatus`` (and ``expectedBody``, when set). Any other answer below 400 is a portal; no
/// answer, or an error status, is `limited`.
///
/// Each interface is checked when it appears or its addresses change, again every
/// ``interval`` while validated, and, while not, after ``retryDelay`` doubling up to
/// ``maximumRetryDelay``; never more than one probe at a time per interface. A validated
/// interface turns `limited` only after ``failuresBeforeLimited`` probes in a row found nothing
/// (a portal's answer counts at once).
public struct ConnectivityValidation: Sendable, Hashable {
    /// `http://HOST[:PORT]/PATH`: plain HTTP, as portals intercept it (HTTPS is not probed).
    public var url: String
    /// The status the URL answers with when nothing is in the way: 204, as Android's
    /// `generate_204`, or 200 with ``expectedBody``, as NetworkManager's check.
    public var expectedStatus: Int
    /// The body the answer starts with, when the status alone does not prove it (NetworkManager's
    /// `response`).
    public var expectedBody: String?
    /// How long one probe may take, lookup and connection included.
    public var timeout: Duration
    /// How often a validated interface is checked again (NetworkManager's default: 300 s).
    public var interval: Duration
    /// The first wait before checking again an interface that is not validated; it doubles.
    public var retryDelay: Duration
    public var maximumRetryDelay: Duration
    /// Probes in a row that found nothing before a validated interface is `limited`.
    public var failuresBeforeLimited: Int
    /// The name servers a probe from an interface asks, by interface name, where each network
    /// has its own (Android asks each network's): an interface not listed asks those of the
    /// monitor's `resolv.conf`, through itself.
    public var interfaceResolvers: [String: [IPAddress]] = [:]
    /// The captive-portal API (RFC 8908) each interface's network announced, by interface name:
    /// the URI a DHCP client got in option 114 or an RA's option 37 (RFC 8910), handed over by
    /// whoever runs that client. A probe from a listed interface asks the API first: `captive:
    /// true` is a portal (its `user-portal-url` the page); otherwise the probe goes on, and a
    /// validated interface whose session has a `seconds-remaining` is checked again once it has
    /// passed. An API that does not answer, or answers something other than its JSON, is noted in
    /// the reason and the probe decides alone. Plain `http://` only: RFC 8908 asks for HTTPS,
    /// which a probe here cannot speak (Roam's own portals serve it over HTTP).
    public var interfacePortalAPIs: [String: String] = [:]

    /// A validation, with NetworkManager's and Android's intervals by default.
    ///
    /// - Parameters:
    ///   - url: `http://HOST[:PORT]/PATH` to fetch.
    ///   - expectedStatus: The status it answers with when nothing is in the way.
    ///   - expectedBody: The body it answers with, when that is checked too.
    ///   - timeout: How long a probe waits for an answer.
    ///   - interval: How often a validated interface is checked again.
    ///   - retryDelay: The first wait before checking again an interface that is not validated.
    ///   - maximumRetryDelay: The longest such wait, doubling from `retryDelay`.
    ///   - failuresBeforeLimited: Probes in a row that must find nothing before a validated
    ///     interface turns `limited`.
    public init(url: String, expectedStatus: Int = 204, expectedBody: String? = nil, timeout: Duration = .seconds(5),
                interval: Duration = .seconds(300), retryDelay: Duration = .seconds(1), maximumRetryDelay: Duration = .seconds(60),
                failuresBeforeLimited: Int = 2) {
        self.url = url
        self.expectedStatus = expectedStatus
        self.expectedBody = expectedBody
        self.timeout = timeout
        self.interval = interval
        self.retryDelay = retryDelay
        self.maximumRetryDelay = maximumRetryDelay
        self.failuresBeforeLimited = failuresBeforeLimited
    }

    /// The parts of ``url``: host, port and path (with its query), or why it is not a URL a
    /// probe can fetch.
    ///
    /// - Returns: The probe's target, or a ``PathMonitorError`` with
    ///   ``PathMonitorError/Code/invalidConfiguration`` that says what is wrong with the URL.
    public func target() -> Result<ProbeTarget, PathMonitorError> {
        ProbeTarget.parse(url)
    }

    /// The portal API of each interface that has one, parsed, or why one is not a URL a probe
    /// can fetch.
    func portalAPITargets() -> Result<[String: ProbeTarget], PathMonitorError> {
        var targets: [String: ProbeTarget] = [:]
        for (interface, url) in interfacePortalAPIs {
            switch ProbeTarget.parse(url, what: "captive-portal API URL of \(escapedForMessage(interface, maximumLength: 16))") {
            case .success(let target): targets[interface] = target
            case .failure(let error): return .failure(error)
            }
        }
        return .success(targets)
    }
}

/// Where a connectivity probe goes.
public struct ProbeTarget: Sendable, Hashable {
    public var host: String
    public var port: UInt16
    /// The path and query, `/generate_204`.
    public var path: String

    /// The target as a URL again: `http://HOST[:PORT]PATH`.
    public var url: String {
        "http://\(host.contains(":") ? "[\(host)]" : host)\(port == 80 ? "" : ":\(port)")\(path)"
    }

    /// Parses `http://HOST[:PORT][/PATH]`; the host is a name, an IPv4 address or a bracketed
    /// IPv6 address.
    static func parse(_ url: String, what: String = "connectivity probe URL") -> Result<ProbeTarget, PathMonitorError> {
        func refuse(_ why: String) -> Result<ProbeTarget, PathMonitorError> {
            .failure(PathMonitorError(.invalidConfiguration, "\(what) '\(escapedForMessage(url, maximumLength: 200))': \(why)"))
        }
        guard url.utf8.count <= 2048 else { return refuse("longer than 2048 bytes") }
        guard url.lowercased().hasPrefix("http://") else { return refuse("only http:// is probed (a portal intercepts plain HTTP)") }
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return refuse("spaces and control or non-ASCII characters are not allowed") }
        let rest = url.dropFirst(7)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        let path = slash == rest.endIndex ? "/" : String(rest[slash...])
        guard !authority.contains("@") else { return refuse("user information is not allowed") }
        var host = Substring(authority)
        var port: UInt16 = 80
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return refuse("an IPv6 address needs its closing ']'") }
            let after = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = UInt16(after.dropFirst()), number > 0 else { return refuse("the port must be 1 to 65535") }
                port = number
            }
        } else if let colon = host.lastIndex(of: ":") {
            guard let number = UInt16(host[host.index(after: colon)...]), number > 0 else { return refuse("the port must be 1 to 65535") }
            port = number
            host = host[..<colon]
        }
        guard !host.isEmpty, host.utf8.count <= 253 else { return refuse("the host must be 1 to 253 characters") }
        guard host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":" }) else {
            return refuse("the host has characters a host name cannot")
        }
        return .success(ProbeTarget(host: String(host), port: port, path: path))
    }
}
