import Glibc
import RoamSystem

/// A pcap file of raw IP packets (link type 101, nanosecond timestamps), as tshark and
/// Wireshark read it.
package final class PcapWriter: @unchecked Sendable {
    private let file: BufferedFile

    package init(directory: SecureDirectory, name: String, budget: OutputBudget) throws(LinkEmulationError) {
        file = try BufferedFile(directory: directory, name: name, budget: budget)
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
    package func record(_ packet: [UInt8]) {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        let length = UInt32(min(packet.count, 65535))
        // One record, header and packet, appended whole: a budget that ends cuts between records.
        file.append(Self.little(UInt32(truncatingIfNeeded: time.tv_sec)) + Self.little(UInt32(truncatingIfNeeded: time.tv_nsec))
                    + Self.little(length) + Self.little(UInt32(packet.count)) + packet.prefix(Int(length)))
    }

    package func close() { file.close() }
}
