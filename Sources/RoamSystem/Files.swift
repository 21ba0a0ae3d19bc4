import CRoamLinux
import Glibc
import SystemPackage

/// Writes `bytes` to `descriptor` whole: short writes continue where they stopped, `EINTR`
/// is retried.
package func writeAll(_ bytes: some Collection<UInt8>, to descriptor: FileDescriptor) throws(Errno) {
    do {
        _ = try descriptor.writeAll(bytes)
    } catch let error as Errno {
        throw error
    } catch {
        throw Errno.ioError
    }
}
