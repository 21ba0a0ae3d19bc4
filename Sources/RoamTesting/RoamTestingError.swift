/// What went wrong around the code under test (not in it): the scenario could not be read or
/// run, a node does not exist, the namespace could not be entered.
public struct RoamTestingError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// An error.
    ///
    /// - Parameter message: What went wrong, for a person.
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
