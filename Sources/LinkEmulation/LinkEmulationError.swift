/// The one error type of LinkEmulation: the machine refused what the emulator needed (a TUN
/// interface, an eventfd, its thread, a file for a capture or a decision log). The message says
/// what and why, for a user to act on.
public struct LinkEmulationError: Error, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
