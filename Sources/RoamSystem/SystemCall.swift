import CRoamLinux
import Glibc
import SystemPackage

/// Runs a system call that returns -1 and sets `errno` on failure, retrying `EINTR`, and throws
/// the error as an `Errno`.
@inline(__always)
@discardableResult
package func systemCall<T: FixedWidthInteger>(_ body: () -> T) throws(Errno) -> T {
    while true {
        let result = body()
        if result == -1 {
            let code = errno
            if code == EINTR { continue }
            throw Errno(rawValue: code)
        }
        return result
    }
}

extension Errno {
    /// The error `errno` holds now.
    package static var current: Errno { Errno(rawValue: errno) }
}
