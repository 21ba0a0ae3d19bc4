/// The one error type of the ScenarioModel module: input that is not what Roam reads (a
/// scenario's diagnostics are `Diagnostic` values, gathered rather than thrown; this is for
/// what is read whole, such as a mahimahi trace).
public struct ScenarioError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A message a user can act on, naming the file and the line where there is one.
    public var message: String

    /// An error.
    ///
    /// - Parameter message: A message a user can act on.
    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
