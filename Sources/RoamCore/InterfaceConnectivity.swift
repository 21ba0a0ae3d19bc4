/// Whether an interface reaches the internet, as a connectivity probe found out: Android's
/// `NET_CAPABILITY_VALIDATED` and `CAPTIVE_PORTAL`, NetworkManager's connectivity states.
public struct InterfaceConnectivity: Sendable, Hashable, CustomStringConvertible {
    public enum State: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// Not checked (yet): validation is off, or the first probe has not answered.
        case unknown
        /// The probe got the answer it expects: the internet is there.
        case validated
        /// Something answered the probe in its place (a redirect, or a page of its own): a
        /// captive portal, until the user logs in.
        case portal
        /// Nothing answered (no route, a timeout, a reset, a name that does not resolve) or an
        /// error came back: connected, but no internet.
        case limited

        public var description: String { rawValue }
    }

    public var state: State
    /// For a portal: where it sends a browser (its redirect's `Location`), if it said.
    public var portalURL: String?
    /// What the last probe found, in a few words (`HTTP 302 to http://…`, `no answer in 5s`).
    public var reason: String?
    /// How long the session the user logged into has left, when the network's portal API said
    /// (RFC 8908's `seconds-remaining`, as of the probe): the monitor checks again once it has
    /// passed.
    public var sessionRemaining: Duration?

    public init(state: State = .unknown, portalURL: String? = nil, reason: String? = nil) {
        self.state = state
        self.portalURL = portalURL
        self.reason = reason
    }

    public var description: String {
        var text = state.rawValue
        if let portalURL { text += " (\(portalURL))" }
        return text
    }
}
