import Glibc
import RoamSystem

/// Runs a system call, retrying on `EINTR`, and throws a ``NetlinkError`` naming `operation`
/// when it returns -1.
@inline(__always)
@discardableResult
func systemCall<T: FixedWidthInteger>(_ operation: @autoclosure () -> String, _ body: () -> T) throws(NetlinkError) -> T {
    do {
        return try RoamSystem.systemCall(body)
    } catch {
        throw NetlinkError.posix(operation(), errno: error.rawValue)
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

/// Reads a whole regular file as UTF-8 text, retrying `EINTR`, reading at most `maximumBytes`.
///
/// Input from outside (scenarios, traces, reports, interfaces files) goes through here, so that
/// a device, a pipe or a huge file is refused at once instead of being read without end:
/// anything but a regular file fails with `EINVAL`, and a file longer than `maximumBytes` with
/// `EFBIG`, each with a ``NetlinkError/hint`` that says so. The file is opened non-blocking, so
/// that a FIFO without a writer does not hang the open.
public func readTextFile(atPath path: String, maximumBytes: Int) throws(NetlinkError) -> String {
    let fd = try systemCall("open(\(path))") { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
    defer { close(fd) }
    var status = stat()
    try systemCall("fstat(\(path))") { fstat(fd, &status) }
    let kind = status.st_mode & S_IFMT
    guard kind == S_IFREG else {
        let what = switch kind {
        case S_IFDIR: "a directory"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFIFO: "a pipe"
        case S_IFSOCK: "a socket"
        default: "not a plain file"
        }
        throw NetlinkError(.errno(EINVAL), operation: "read(\(path))", hint: "\(path) is \(what); only regular files are read")
    }
    let limit = max(0, maximumBytes)
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let wanted = min(chunk.count, limit + 1 - bytes.count)
        let count = try systemCall("read(\(path))") { read(fd, &chunk, wanted) }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[..<count])
        if bytes.count > limit {
            throw NetlinkError(.errno(EFBIG), operation: "read(\(path))",
                               hint: "\(path) is larger than \(byteCountDescription(limit)), the most Roam reads from such a file")
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}
