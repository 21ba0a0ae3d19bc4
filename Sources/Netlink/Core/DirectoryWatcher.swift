import CRoamLinux
import Glibc
import RoamSystem

/// Watches directories for files in them being written, created, replaced or removed (inotify).
package final class DirectoryWatcher {
    /// The descriptor to wait on.
    public let fileDescriptor: OwnedFileDescriptor
    /// The directories watched.
    public let directories: [String]

    public init(directories: [String]) throws(NetlinkError) {
        let fd = try systemCall("inotify_init1") { inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)) }
        fileDescriptor = OwnedFileDescriptor(owning: fd)
        self.directories = directories
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM)
        for directory in directories {
            try systemCall("inotify_add_watch(\(directory))") { inotify_add_watch(fd, directory, mask) }
        }
    }

    /// The names of the files that changed since the last call; empty when nothing did, nil
    /// when the kernel's event queue overflowed and any file may have changed.
    public func changedNames() -> Set<String>? {
        var names: Set<String> = []
        var overflowed = false
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = read(fileDescriptor.rawValue, &buffer, buffer.count)
            if count <= 0 { return overflowed ? nil : names }
            var offset = 0
            let headerSize = MemoryLayout<inotify_event>.size
            while offset + headerSize <= count {
                let mask = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self) }
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { overflowed = true }
                let length = buffer.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)) }
                let nameBytes = buffer[(offset + headerSize)..<min(count, offset + headerSize + length)]
                let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                if !name.isEmpty { names.insert(name) }
                offset += headerSize + length
            }
        }
    }
}
