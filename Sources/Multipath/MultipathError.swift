import Netlink

/// The one error Multipath throws: the racer, ``HandoverConnection`` and
/// ``AsyncHandoverConnection``, and ``MPTCPPathManager`` all throw it, each case saying what
/// failed in terms an app can act on.
///
/// ```swift
/// do {
///     let connection = try racer.connect(to: [server], port: 443, over: path)
/// } catch .noPermittedPath(let refusal) where refusal.onlyUltraConstrained {
///     deferUntilABetterNetwork()          // only a satellite link: wait
/// } catch {
///     print(error)                        // "every attempt failed (last: Connection refused)"
/// }
/// ```
public enum MultipathError: Error, CustomStringConvertible {
    /// The policy permits none of the path's interfaces (or there is no path); the refusal
    /// says why (only expensive paths, only a constrained one, ...).
    case noPermittedPath(PathRefusal)
    /// A race made no connection: why, and how each attempt went.
    case connectFailed(RaceFailure, ConnectionMetrics)
    /// The app's resume hook threw (``HandoverConnection``); the connection was abandoned.
    case resume(any Error)
    /// ``HandoverConnection/interrupt()`` was called, or the task of an
    /// ``AsyncHandoverConnection`` call was cancelled.
    case interrupted
    /// The system refused what Multipath needed (a socket, a thread, an eventfd, a netlink
    /// request of the path manager): what it was doing, and the kernel's answer.
    case system(operation: String, NetlinkError?)

    public var description: String {
        switch self {
        case .noPermittedPath(let refusal): "\(refusal)"
        case .connectFailed(let failure, _): "\(failure)"
        case .resume(let error): "the resume hook failed: \(error)"
        case .interrupted: "interrupted"
        case let .system(operation, error?): "\(operation): \(error)"
        case let .system(operation, nil): operation
        }
    }
}
