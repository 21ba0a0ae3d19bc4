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

/// A pcap file of raw IP packets (link type 101, nanosecond timestamps), as tshark and
/// Wireshark read it.
final class PcapWriter: @unchecked Sendable {
    private let file: BufferedFile

    init(path: String) throws(SimulatorError) {
        file = try BufferedFile(path: path)
        var header: [UInt8] = []
        header += Self.little(UInt32(0xa1b2_3c4d))   // nanosecond-resolution magic
        header += Self.little(UInt16(2)) + Self.little(UInt16(4))
        header += Self.little(UInt32(0)) + Self.little(UInt32(0))
        header += Self.little(UInt32(65535))         // snapshot length
        header += Self.little(UInt32(101))           // LINKTYPE_RAW: IPv4 or IPv6, no link header
        file.append(header)
    }

    static func little<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    /// Records `packet` with the wall-clock time now.
    func record(_ packet: [UInt8]) {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        let length = UInt32(min(packet.count, 65535))
        file.append(Self.little(UInt32(truncatingIfNeeded: time.tv_sec)) + Self.little(UInt32(truncatingIfNeeded: time.tv_nsec))
                    + Self.little(length) + Self.little(UInt32(packet.count)))
        file.append(packet.prefix(Int(length)))
    }

    func close() { file.close() }
}
