import Glibc
import RoamSystem
import SystemPackage

/// An append-only file written through a buffer, flushed when the buffer fills and on close.
package final class BufferedFile: @unchecked Sendable {
    private let descriptor: FileDescriptor
    private var buffer: [UInt8] = []
    private let capacity = 1 << 16

    package init(path: String) throws(LinkEmulationError) {
        do {
            descriptor = try createFile(atPath: path)
        } catch {
            throw LinkEmulationError("cannot write \(path): \(error)")
        }
        buffer.reserveCapacity(capacity)
    }

    deinit { close() }

    package func append(_ bytes: some Collection<UInt8>) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= capacity { flush() }
    }

    package func append(_ text: String) { append(Array(text.utf8)) }

    package func flush() {
        try? writeAll(buffer, to: descriptor)
        buffer.removeAll(keepingCapacity: true)
    }

    private var isClosed = false
    package func close() {
        guard !isClosed else { return }
        isClosed = true
        flush()
        try? descriptor.close()
    }
}
