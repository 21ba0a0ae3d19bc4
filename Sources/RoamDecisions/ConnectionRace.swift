import RoamCore

/// Happy Eyeballs (RFC 8305) across interfaces and address families, as a state machine: events
/// in, actions out, time passed in with every event (durations since the race began), so that
/// every timer and ordering rule is tested with a manual clock. `ConnectionRacer` drives it
/// with real sockets.
///
/// - Resolution: AAAA and A are asked for at once; attempts start when AAAA answers, or when A
///   has answered and the resolution delay (50 ms) has passed without AAAA.
/// - Order: interfaces in the path's order of preference (free before costly), and on each the
///   first address of each family, families interleaved (IPv6 first); then the other addresses
///   the same way: Wi-Fi IPv6, Wi-Fi IPv4, cellular IPv6, cellular IPv4. So a Wi-Fi whose IPv6 is
///   broken still gets its IPv4 tried before the expensive cellular, an IPv4-only Wi-Fi comes
///   before an IPv6-only cellular (the family never outranks the interface), and a Wi-Fi that
///   is up but passes nothing costs one attempt delay per family it has before cellular is
///   tried (Wi-Fi Assist), not a connect timeout.
/// - Staggering: a new attempt every attempt delay (default 250 ms, 10 ms to 2 s) while none
///   has connected; an attempt that fails starts the next at once. The first to connect wins;
///   the others are cancelled.
public struct ConnectionRace: Sendable {
    public struct Configuration: Sendable, Hashable {
        public var attemptDelay: Duration
        public var resolutionDelay: Duration

        /// A race's timing, as RFC 8305 names it.
        ///
        /// - Parameters:
        ///   - attemptDelay: How long an attempt has before the next starts beside it (kept
        ///     within 10 ms and 2 s).
        ///   - resolutionDelay: How long IPv4 answers wait for IPv6's before the race starts
        ///     without them.
        public init(attemptDelay: Duration = .milliseconds(250), resolutionDelay: Duration = .milliseconds(50)) {
            self.attemptDelay = min(.seconds(2), max(.milliseconds(10), attemptDelay))
            self.resolutionDelay = resolutionDelay
        }
    }

    /// An interface an attempt can go out of, with its source addresses.
    public struct Route: Sendable, Hashable {
        public var interface: String
        public var index: Int32
        public var type: InterfaceType
        public var isExpensive: Bool
        public var ipv4: IPAddress?
        public var ipv6: IPAddress?

        /// A route out of one interface.
        ///
        /// - Parameters:
        ///   - interface: The interface's name.
        ///   - index: Its index, which an attempt binds to.
        ///   - type: What kind of network it is.
        ///   - isExpensive: Whether it costs money.
        ///   - ipv4: Its IPv4 source address, if it has one.
        ///   - ipv6: Its IPv6 source address (not link-local), if it has one.
        public init(interface: String, index: Int32, type: InterfaceType, isExpensive: Bool = false, ipv4: IPAddress? = nil, ipv6: IPAddress? = nil) {
            self.interface = interface
            self.index = index
            self.type = type
            self.isExpensive = isExpensive
            self.ipv4 = ipv4
            self.ipv6 = ipv6
        }

        /// The routes of the interfaces a policy permits on a path, in its order.
        ///
        /// - Parameter interfaces: The permitted interfaces (`PathPolicy/permittedInterfaces(of:)`).
        /// - Returns: A route for each, with its first IPv4 address and its first IPv6 address
        ///   that is not link-local.
        public static func routes(of interfaces: [NetworkInterface]) -> [Route] {
            interfaces.map { interface in
                Route(interface: interface.name, index: interface.index, type: interface.type, isExpensive: interface.isExpensive,
                      ipv4: interface.addresses.first { $0.address.family == .inet }?.address,
                      ipv6: interface.addresses.first { $0.address.family == .inet6 && !$0.address.isLinkLocal }?.address)
            }
        }

        func source(for destination: IPAddress) -> IPAddress? { destination.family == .inet ? ipv4 : ipv6 }
    }

    /// One way to connect: an interface, its source address, a destination.
    public struct Candidate: Sendable, Hashable, CustomStringConvertible {
        public var route: Route
        public var source: IPAddress
        public var destination: IPAddress
        public var description: String { "\(destination) via \(route.interface) from \(source)" }

        /// One way to connect.
        ///
        /// - Parameters:
        ///   - route: The interface to go out of.
        ///   - source: The source address, of the destination's family.
        ///   - destination: The address to connect to.
        public init(route: Route, source: IPAddress, destination: IPAddress) {
            self.route = route
            self.source = source
            self.destination = destination
        }
    }

    public enum Event: Sendable {
        case resolved(AddressFamily, [IPAddress])
        case resolutionFailed(AddressFamily)
        /// The timer the last ``Action/scheduleTimer(at:)`` asked for has fired.
        case timer
        case connected(attempt: Int)
        case failed(attempt: Int, error: Int32)
    }

    public enum Action: Sendable, Hashable {
        case startAttempt(Int, Candidate)
        case cancelAttempt(Int)
        /// Call back with ``Event/timer`` at this time (replacing any earlier request).
        case scheduleTimer(at: Duration)
        case succeed(attempt: Int)
        case fail(RaceFailure)
    }

    /// What happened to one attempt.
    public struct Attempt: Sendable, Hashable {
        public enum Outcome: Sendable, Hashable { case pending, connected, failed(Int32), cancelled }
        public var id: Int
        public var candidate: Candidate
        public var started: Duration
        public var ended: Duration?
        public var outcome: Outcome
    }

    private enum Phase: Sendable, Hashable {
        case resolving
        case waitingForAAAA(until: Duration)
        case racing
        case done
    }

    public let configuration: Configuration
    public let routes: [Route]
    private var phase = Phase.resolving
    private var pendingFamilies: Set<AddressFamily> = [.inet, .inet6]
    private var addresses: [AddressFamily: [IPAddress]] = [:]
    private var tried: Set<Candidate> = []
    private var nextAttemptAt: Duration?
    public private(set) var attempts: [Attempt] = []

    /// A race that has not started: it waits for the destination's addresses
    /// (``Event/resolved(_:_:)``).
    ///
    /// - Parameters:
    ///   - routes: The interfaces to race over, in the order of preference.
    ///   - configuration: The race's timing.
    public init(routes: [Route], configuration: Configuration = Configuration()) {
        self.routes = routes
        self.configuration = configuration
    }

    /// Whether the race has ended (won or failed).
    public var isFinished: Bool { phase == .done }

    /// Candidates in the order to try them: each route in turn with the first address of each
    /// family it has a source for (IPv6 first), then the remaining addresses, families
    /// interleaved, each over every route in turn.
    ///
    /// - Parameters:
    ///   - routes: The interfaces, in the order of preference.
    ///   - ipv6: The destination's IPv6 addresses, in the resolver's order.
    ///   - ipv4: Its IPv4 addresses, in the resolver's order.
    /// - Returns: Every candidate a source address allows, in the order to try them.
    public static func order(routes: [Route], ipv6: [IPAddress], ipv4: [IPAddress]) -> [Candidate] {
        var interleaved: [IPAddress] = []
        for index in 0..<max(ipv6.count, ipv4.count) {
            if index < ipv6.count { interleaved.append(ipv6[index]) }
            if index < ipv4.count { interleaved.append(ipv4[index]) }
        }
        let firsts = Set([ipv6.first, ipv4.first].compactMap { $0 })
        func candidates(_ route: Route, _ destinations: [IPAddress]) -> [Candidate] {
            destinations.compactMap { destination in route.source(for: destination).map { Candidate(route: route, source: $0, destination: destination) } }
        }
        let first = routes.flatMap { candidates($0, interleaved.filter(firsts.contains)) }
        let rest = interleaved.filter { !firsts.contains($0) }.flatMap { destination in routes.flatMap { candidates($0, [destination]) } }
        return first + rest
    }

    private var remaining: [Candidate] {
        Self.order(routes: routes, ipv6: addresses[.inet6] ?? [], ipv4: addresses[.inet] ?? []).filter { !tried.contains($0) }
    }

    private var inFlight: [Int] { attempts.filter { $0.outcome == .pending }.map(\.id) }

    /// Takes in what happened and says what to do next.
    ///
    /// - Parameters:
    ///   - event: An answer of the resolver, the timer, or an attempt's outcome.
    ///   - now: The time, on the caller's clock.
    /// - Returns: The actions to carry out, in order: attempts to start or cancel, the next
    ///   timer, the race won or failed. After the race ended, a late winner is cancelled.
    public mutating func handle(_ event: Event, at now: Duration) -> [Action] {
        guard phase != .done else {
            // A late winner after the race ended is closed.
            if case .connected(let id) = event { return [.cancelAttempt(id)] }
            return []
        }
        switch event {
        case .resolved(let family, let found):
            pendingFamilies.remove(family)
            addresses[family, default: []] += found
            switch phase {
            case .resolving:
                if family == .inet6 || !pendingFamilies.contains(.inet6) { return beginRacing(at: now) }
                let until = now + configuration.resolutionDelay
                phase = .waitingForAAAA(until: until)
                return [.scheduleTimer(at: until)]
            case .waitingForAAAA:
                return beginRacing(at: now)
            case .racing:
                // Late answers join the race; with nothing in flight they start at once.
                return inFlight.isEmpty ? startNext(at: now) : []
            case .done:
                return []
            }
        case .resolutionFailed(let family):
            pendingFamilies.remove(family)
            switch phase {
            case .resolving, .waitingForAAAA:
                if !pendingFamilies.isEmpty, phase == .resolving { return [] }
                if addresses.values.allSatisfy(\.isEmpty) {
                    if pendingFamilies.isEmpty { return finish(.fail(.resolutionFailed)) }
                    return []
                }
                return beginRacing(at: now)
            case .racing:
                return failIfExhausted()
            case .done:
                return []
            }
        case .timer:
            switch phase {
            case .waitingForAAAA(let until) where now >= until:
                return beginRacing(at: now)
            case .racing:
                if let due = nextAttemptAt, now >= due { return startNext(at: now) }
                return nextAttemptAt.map { [.scheduleTimer(at: $0)] } ?? []
            default:
                return []
            }
        case .connected(let id):
            guard let index = attempts.firstIndex(where: { $0.id == id && $0.outcome == .pending }) else { return [] }
            attempts[index].outcome = .connected
            attempts[index].ended = now
            var actions: [Action] = []
            for other in attempts.indices where attempts[other].outcome == .pending {
                attempts[other].outcome = .cancelled
                attempts[other].ended = now
                actions.append(.cancelAttempt(attempts[other].id))
            }
            phase = .done
            return actions + [.succeed(attempt: id)]
        case .failed(let id, let error):
            guard let index = attempts.firstIndex(where: { $0.id == id && $0.outcome == .pending }) else { return [] }
            attempts[index].outcome = .failed(error)
            attempts[index].ended = now
            // Fail fast: the next candidate goes at once, without waiting for the delay.
            return remaining.isEmpty ? failIfExhausted() : startNext(at: now)
        }
    }

    private mutating func beginRacing(at now: Duration) -> [Action] {
        phase = .racing
        if remaining.isEmpty {
            return pendingFamilies.isEmpty ? finish(.fail(routes.isEmpty ? .noRoute : .noUsableAddress)) : []
        }
        return startNext(at: now)
    }

    private mutating func startNext(at now: Duration) -> [Action] {
        guard let candidate = remaining.first else {
            nextAttemptAt = nil
            return failIfExhausted()
        }
        tried.insert(candidate)
        let id = attempts.count + 1
        attempts.append(Attempt(id: id, candidate: candidate, started: now, ended: nil, outcome: .pending))
        let due = now + configuration.attemptDelay
        nextAttemptAt = remaining.isEmpty ? nil : due
        return [.startAttempt(id, candidate)] + (nextAttemptAt.map { [.scheduleTimer(at: $0)] } ?? [])
    }

    private mutating func failIfExhausted() -> [Action] {
        guard inFlight.isEmpty, remaining.isEmpty, pendingFamilies.isEmpty else { return [] }
        if attempts.isEmpty {
            if addresses.values.allSatisfy(\.isEmpty) { return finish(.fail(.resolutionFailed)) }
            return finish(.fail(routes.isEmpty ? .noRoute : .noUsableAddress))
        }
        let errors = attempts.compactMap { attempt -> Int32? in
            if case .failed(let code) = attempt.outcome { return code }
            return nil
        }
        return finish(.fail(.allAttemptsFailed(lastError: errors.last ?? 0)))
    }

    private mutating func finish(_ action: Action) -> [Action] {
        phase = .done
        return [action]
    }
}

/// Why a race found no connection.
public enum RaceFailure: Sendable, Hashable, CustomStringConvertible {
    /// Neither A nor AAAA gave an address.
    case resolutionFailed
    /// No permitted interface.
    case noRoute
    /// Addresses were found, but no permitted interface has an address of their family.
    case noUsableAddress
    /// Every attempt failed; the last one with this errno.
    case allAttemptsFailed(lastError: Int32)
    /// The race took longer than its deadline.
    case timedOut

    public var description: String {
        switch self {
        case .resolutionFailed: "the name did not resolve (neither A nor AAAA)"
        case .noRoute: "no permitted interface to connect from"
        case .noUsableAddress: "no permitted interface has an address of the destination's family"
        case .allAttemptsFailed(let code): "every attempt failed (last: errno \(code))"
        case .timedOut: "no attempt connected in time"
        }
    }
}
