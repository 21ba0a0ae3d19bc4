import Netlink
@testable import PathMonitor
import Testing

/// The responses a client's lookups read: answers taken with their names compressed or not,
/// and every malformed message refused without reading past its end.
@Suite struct DNSMessageTests {
    /// A response to `DNSMessage.query(name, id:, type:)` with `answers` (type, rdata), the first
    /// answer's name written out, the others pointing at the question's.
    static func response(to name: String, id: UInt16, code: UInt8 = 0, answers: [(UInt16, [UInt8])]) -> [UInt8] {
        var bytes = DNSMessage.query(name, id: id, type: 1)
        bytes[2] |= 0x80
        bytes[3] = 0x80 | code
        bytes[7] = UInt8(answers.count)
        for (index, (type, data)) in answers.enumerated() {
            if index == 0 {
                for label in name.split(separator: ".") { bytes += [UInt8(label.utf8.count)] + Array(label.utf8) }
                bytes.append(0)
            } else {
                bytes += [0xc0, 12]
            }
            bytes += [UInt8(type >> 8), UInt8(type & 0xff), 0, 1, 0, 0, 0, 60, 0, UInt8(data.count)] + data
        }
        return bytes
    }

    @Test func answersAreReadWithAndWithoutCompression() throws {
        let v6 = try #require(IPAddress("fd72:6f61:6e64::c613:ff02"))
        let bytes = Self.response(to: "api.example.test", id: 0x1234, answers: [
            (1, [198, 19, 255, 2]), (5, [3, 0x61, 0x70, 0x69, 0]), (28, v6.bytes), (1, [198, 19, 255, 3]),
        ])
        let message = try #require(DNSMessage(parsing: bytes))
        #expect(message.id == 0x1234 && message.responseCode == 0)
        #expect(message.addresses == [IPAddress("198.19.255.2"), v6, IPAddress("198.19.255.3")])
        let failure = try #require(DNSMessage(parsing: Self.response(to: "x.test", id: 7, code: 3, answers: [])))
        #expect(failure.responseCode == 3 && failure.addresses.isEmpty)
    }

    @Test func malformedMessagesAreRefused() {
        let good = Self.response(to: "api.example.test", id: 1, answers: [(1, [198, 19, 255, 2])])
        // Cut anywhere: refused, or (cut after the last answer) read whole.
        for length in 0..<good.count { #expect(DNSMessage(parsing: good[..<length]) == nil, "cut at \(length)") }
        // A query (no response bit) is not an answer.
        var query = good
        query[2] &= 0x7f
        #expect(DNSMessage(parsing: query) == nil)
        // An answer that claims more data than is left; more answers than there are.
        var long = good
        long[long.count - 5] = 200
        #expect(DNSMessage(parsing: long) == nil)
        var many = good
        many[7] = 255
        #expect(DNSMessage(parsing: many) == nil)
        // A name of more labels than a name can have, and a label with the reserved bits.
        let labels = [UInt8](repeating: 0, count: 12) + Array(repeating: [1, 0x61], count: 200).flatMap { $0 } + [0, 0, 1, 0, 1]
        var endless = labels
        endless[2] = 0x80
        endless[5] = 1
        #expect(DNSMessage(parsing: endless) == nil)
        var reserved = good
        reserved[12] = 0x80
        #expect(DNSMessage(parsing: reserved) == nil)
    }
}
