import CRoamLinux
import Glibc
import SystemPackage

/// Creates (or truncates) the file at `path`, mode 0644, for writing; close-on-exec.
package func createFile(atPath path: String) throws(Errno) -> FileDescriptor {
    FileDescriptor(rawValue: try systemCall { open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) })
}

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

/// Writes `text` as the whole content of the file at `path` (created or truncated).
package func writeFile(atPath path: String, contents text: String) throws(Errno) {
    let descriptor = try createFile(atPath: path)
    defer { try? descriptor.close() }
    try writeAll(text.utf8, to: descriptor)
}
