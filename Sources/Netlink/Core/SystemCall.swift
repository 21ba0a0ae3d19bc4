import Glibc

/// Runs a system call, retrying on `EINTR`, and throws a ``NetlinkError`` naming `operation`
/// when it returns -1.
@inline(__always)
@discardableResult
func systemCall<T: FixedWidthInteger>(_ operation: @autoclosure () -> String, _ body: () -> T) throws(NetlinkError) -> T {
    while true {
        let result = body()
        if result == -1 {
            let code = errno
            if code == EINTR { continue }
            throw NetlinkError.posix(operation(), errno: code)
        }
        return result
    }
}

/// Runs a libnl call that returns a negative `NLE_*` code on failure.
@inline(__always)
@discardableResult
func libnlCall(_ operation: @autoclosure () -> String, _ body: () -> Int32) throws(NetlinkError) -> Int32 {
    let result = body()
    if result < 0 {
        throw NetlinkError.libnl(result, operation())
    }
    return result
}

/// An owned file descriptor, closed when the last reference goes away.
public final class FileDescriptor: Sendable {
    /// The raw descriptor; valid while this object lives.
    public let rawValue: Int32

    public init(owning rawValue: Int32) {
        self.rawValue = rawValue
    }

    deinit {
        _ = Glibc.close(rawValue)
    }
}

/// Reads a whole file as UTF-8 text, retrying `EINTR`.
public func readTextFile(atPath path: String) throws(NetlinkError) -> String {
    let fd = try systemCall("open(\(path))") { open(path, O_RDONLY | O_CLOEXEC) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = try systemCall("read(\(path))") { read(fd, &chunk, chunk.count) }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
}
