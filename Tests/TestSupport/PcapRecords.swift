import Foundation

/// The packets of a pcap file a run's `capture: true` wrote (nanosecond timestamps,
/// LINKTYPE_RAW: IPv4 or IPv6 with no link header), for a test to say what a link delivered
/// and when.
public enum PcapRecords {
    /// One captured packet.
    public struct Record: CustomStringConvertible, Sendable {
        /// Seconds after the run started.
        public var at: Double
        public var bytes: [UInt8]

        /// "7.213 s: 76 bytes, IPv6 fd72:...::2 > fd72:...::1, protocol 58".
        public var description: String {
            let head = String(format: "%.3f s: %d bytes", at, bytes.count)
            guard let version = bytes.first.map({ $0 >> 4 }) else { return head }
            if version == 4, bytes.count >= 20 {
                let address = { (offset: Int) in bytes[offset..<offset + 4].map(String.init).joined(separator: ".") }
                return head + ", IPv4 \(address(12)) > \(address(16)), protocol \(bytes[9])"
            }
            if version == 6, bytes.count >= 40 {
                let address = { (offset: Int) in
                    stride(from: offset, to: offset + 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":")
                }
                return head + ", IPv6 \(address(8)) > \(address(24)), next header \(bytes[6])"
            }
            return head + ", IP version \(version)"
        }
    }

    public struct Malformed: Error, CustomStringConvertible {
        public var description: String
    }

    /// The records of the file at `path`, each timed from `started` (a run summary's ISO 8601
    /// start, such as 2026-12-06T16:14:59.974258Z).
    public static func read(_ path: String, since started: String) throws -> [Record] {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        guard let start = formatter.date(from: started)?.timeIntervalSince1970 else {
            throw Malformed(description: "\(started) is not an ISO 8601 time")
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw Malformed(description: "\(path): cannot be read") }
        let bytes = [UInt8](data)
        func u32(_ offset: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * $1) } }
        guard bytes.count >= 24, u32(0) == 0xa1b2_3c4d, u32(20) == 101 else {
            throw Malformed(description: "\(path): not a nanosecond pcap of raw IP")
        }
        var records: [Record] = []
        var offset = 24
        while offset + 16 <= bytes.count {
            let length = Int(u32(offset + 8))
            guard offset + 16 + length <= bytes.count else { throw Malformed(description: "\(path): a record at \(offset) runs past the end") }
            let time = Double(u32(offset)) + Double(u32(offset + 4)) / 1e9
            records.append(Record(at: time - start, bytes: Array(bytes[(offset + 16)..<(offset + 16 + length)])))
            offset += 16 + length
        }
        guard offset == bytes.count else { throw Malformed(description: "\(path): ends inside a record header") }
        return records
    }
}
