import SystemPackage

/// Why Roam would not open, create, read or write a path: a link or an owner it does not
/// trust, something other than a regular file where it reads or writes one, or the system
/// call that failed. The message names the path and says what to do.
public struct SafePathError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of refusal. An extensible set: new codes may be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// A symbolic link that another user could have planted (see `SafePath`).
        public static let untrustedLink = Code("untrustedLink")
        /// More links than Linux follows in one path (40).
        public static let tooManyLinks = Code("tooManyLinks")
        /// A directory was expected.
        public static let notDirectory = Code("notDirectory")
        /// A regular file was expected (a pipe, a device, a socket, a link or a directory was there).
        public static let notRegularFile = Code("notRegularFile")
        /// The file or directory belongs to another user.
        public static let foreignOwner = Code("foreignOwner")
        /// The directory can be written by users other than its owner.
        public static let writableByOthers = Code("writableByOthers")
        /// The name is empty, `.`, `..`, or holds a `/` or a NUL.
        public static let invalidName = Code("invalidName")
        /// The file is larger than the reader's bound.
        public static let tooLarge = Code("tooLarge")
        /// A system call failed; ``SafePathError/errno`` says why.
        public static let system = Code("system")
    }

    public var code: Code
    /// The path, as the caller named it (or as far as it was resolved).
    public var path: String
    /// The error of the system call, for ``Code/system`` (and where one was the cause).
    public var errno: Errno?
    /// A sentence naming the path, what is wrong, and what to do.
    public var message: String

    public init(_ code: Code, path: String, errno: Errno? = nil, message: String) {
        self.code = code
        self.path = path
        self.errno = errno
        self.message = message
    }

    /// A failed system call on `path`: `OPERATION PATH: ERROR`.
    static func system(_ operation: String, _ path: String, _ errno: Errno) -> SafePathError {
        SafePathError(.system, path: path, errno: errno, message: "cannot \(operation) \(path): \(errno)")
    }

    public var description: String { message }

    /// Why, without the path: the system's words for a failed call (`No such file or
    /// directory`), the message otherwise. For callers that name the file themselves.
    public var reason: String {
        if code == .system, let errno { return "\(errno)" }
        return message
    }
}
