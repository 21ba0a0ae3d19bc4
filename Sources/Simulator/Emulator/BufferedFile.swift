import Glibc

/// An append-only file written through a buffer, flushed when the buffer fills and on close.
final class BufferedFile: @unchecked Sendable {
    private let descriptor: Int32
    private var buffer: [UInt8] = []
    private let capacity = 1 << 16

    init(path: String) throws(SimulatorError) {
        descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw SimulatorError(.environment, "cannot write \(path): \(String(cString: strerror(errno)))") }
        buffer.reserveCapacity(capacity)
    }

    deinit { close() }

    func append(_ bytes: some Collection<UInt8>) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= capacity { flush() }
    }

    func append(_ text: String) { append(Array(text.utf8)) }

    func flush() {
        var offset = 0
        while offset < buffer.count {
            let written = buffer[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                break
            }
            offset += written
        }
        buffer.removeAll(keepingCapacity: true)
    }

    private var isClosed = false
    func close() {
        guard !isClosed else { return }
        isClosed = true
        flush()
        Glibc.close(descriptor)
    }
}
