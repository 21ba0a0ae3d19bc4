import Netlink
import RoamDecisions

/// The one error Multipath throws: the racer, ``HandoverConnection`` and
/// ``AsyncHandoverConnection``, and ``MPTCPPathManager`` all throw it. Its ``code`` says what
/// failed in terms an app can act on, and the fields that go with that code say more.
///
/// A struct with a code rather than an enum (as SwiftNIO's errors are), so that a new kind of
/// failure is not a breaking change for code that switches over them:
///
/// ```swift
/// do {
///     let connection = try racer.connect(to: [server], port: 443, over: path)
///     print("connected in", connection.metrics.duration)
/// } catch where error.code == .noPermittedPath && error.refusal?.onlyUltraConstrained == true {
///     print("only a satellite link: wait for a better network")
/// } catch {
///     print(error)                        // "every attempt failed (last: Connection refused)"
/// }
/// ```
public struct MultipathError: Error, CustomStringConvertible {
    /// What kind of failure it was.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The policy permits none of the path's interfaces (or there is no path); ``MultipathError/refusal``
        /// says why (only expensive paths, only a constrained one, ...).
        public static let noPermittedPath = Code("noPermittedPath")
        /// A race made no connection: ``MultipathError/raceFailure`` says why, and
        /// ``MultipathError/metrics`` how each attempt went.
        public static let connectFailed = Code("connectFailed")
        /// The app's resume hook threw (``HandoverConnection``; the error is
        /// ``MultipathError/underlying``); the connection was abandoned.
        public static let resume = Code("resume")
        /// ``HandoverConnection/interrupt()`` was called, or the task of an
        /// ``AsyncHandoverConnection`` call was cancelled.
        public static let interrupted = Code("interrupted")
        /// The system refused what Multipath needed (a socket, a thread, an eventfd, a netlink
        /// request of the path manager): ``MultipathError/operation`` says what it was doing, and
        /// ``MultipathError/netlinkError`` the kernel's answer.
        public static let system = Code("system")

        public var description: String { name }
    }

    /// What kind of failure it was.
    public var code: Code
    /// Why no interface was permitted (``Code/noPermittedPath``).
    public var refusal: PathRefusal?
    /// Why the race failed (``Code/connectFailed``).
    public var raceFailure: RaceFailure?
    /// How each attempt of the race went (``Code/connectFailed``).
    public var metrics: ConnectionMetrics?
    /// What the resume hook threw (``Code/resume``).
    public var underlying: (any Error)?
    /// What was being done (``Code/system``).
    public var operation: String?
    /// The kernel's answer, when there was one (``Code/system``).
    public var netlinkError: NetlinkError?

    private init(_ code: Code) { self.code = code }

    /// The policy permits none of the path's interfaces.
    ///
    /// - Parameter refusal: Why each available interface was refused (none: there was no path).
    /// - Returns: An error with ``Code/noPermittedPath`` and ``refusal``.
    public static func noPermittedPath(_ refusal: PathRefusal) -> MultipathError {
        var error = MultipathError(.noPermittedPath)
        error.refusal = refusal
        return error
    }

    /// A race made no connection.
    ///
    /// - Parameters:
    ///   - failure: Why the race failed.
    ///   - metrics: How each attempt went.
    /// - Returns: An error with ``Code/connectFailed``, ``raceFailure`` and ``metrics``.
    public static func connectFailed(_ failure: RaceFailure, _ metrics: ConnectionMetrics) -> MultipathError {
        var error = MultipathError(.connectFailed)
        error.raceFailure = failure
        error.metrics = metrics
        return error
    }

    /// The app's resume hook threw `underlying`.
    ///
    /// - Parameter underlying: What the hook threw.
    /// - Returns: An error with ``Code/resume`` and ``underlying``.
    public static func resume(_ underlying: any Error) -> MultipathError {
        var error = MultipathError(.resume)
        error.underlying = underlying
        return error
    }

    /// The connection was interrupted.
    public static var interrupted: MultipathError { MultipathError(.interrupted) }

    /// The system refused `operation`.
    ///
    /// - Parameters:
    ///   - operation: What Multipath was doing, in a few words.
    ///   - netlinkError: The kernel's answer, when there was one.
    /// - Returns: An error with ``Code/system``, ``operation`` and ``netlinkError``.
    public static func system(operation: String, _ netlinkError: NetlinkError?) -> MultipathError {
        var error = MultipathError(.system)
        error.operation = operation
        error.netlinkError = netlinkError
        return error
    }

    public var description: String {
        switch code {
        case .noPermittedPath: refusal.map { "\($0)" } ?? "no permitted path"
        case .connectFailed: raceFailure.map { "\($0)" } ?? "the connection failed"
        case .resume: "the resume hook failed: \(underlying.map { "\($0)" } ?? "?")"
        case .interrupted: "interrupted"
        case .system: netlinkError.map { "\(operation ?? "?"): \($0)" } ?? operation ?? "a system call failed"
        default: code.description
        }
    }
}
