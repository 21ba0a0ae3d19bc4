import Glibc
import RoamSystem
import SystemPackage

/// An append-only file written through a buffer, flushed when the buffer fills and on close.
final class BufferedFile: @unchecked Sendable {
    private let descriptor: FileDescriptor
    private var buffer: [UInt8] = []
    private let capacity = 1 << 16

    init(path: String) throws(SimulatorError) {
        do {
            descriptor = try createFile(atPath: path)
        } catch {
            throw SimulatorError("cannot write \(path)", error)
        }
        buffer.reserveCapacity(capacity)
    }

    deinit { close() }

    func append(_ bytes: some Collection<UInt8>) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= capacity { flush() }
    }

    func append(_ text: String) { append(Array(text.utf8)) }

    func flush() {
        try? writeAll(buffer, to: descriptor)
        buffer.removeAll(keepingCapacity: true)
    }

    private var isClosed = false
    func close() {
        guard !isClosed else { return }
        isClosed = true
        flush()
        try? descriptor.close()
    }
}
