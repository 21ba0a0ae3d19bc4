import Glibc

/// A file descriptor shared by reference and closed when the last reference goes away: a
/// namespace's file, a sysfs mount, a directory watch that several owners hold.
public final class OwnedFileDescriptor: Sendable {
    /// The raw descriptor; valid while this object lives.
    public let rawValue: Int32

    public init(owning rawValue: Int32) {
        self.rawValue = rawValue
    }

    deinit {
        _ = Glibc.close(rawValue)
    }
}
