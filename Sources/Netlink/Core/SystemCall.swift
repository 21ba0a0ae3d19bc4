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

