import RoamCore
import SystemPackage

/// Turns the lines of a `timeline.jsonl` into events, one at a time, as ``RecordedRun`` reads
/// them: an empty line is skipped; a line that is not JSON is an error naming it, unless it is
/// the last non-empty line (a run killed while writing it), which is left out with a note
/// (``finish()``); an event without what its type needs is an error naming its line.
struct TimelineDecoder {
    let directory: String
    /// Lines seen so far.
    private var number = 0
    private var decoded = 0
    /// A line that was not JSON: an error if any non-empty line follows it.
    private var cutShort: (number: Int, error: JSONParseError)?

    init(directory: String) {
        self.directory = directory
    }

    /// The event on the next line (nil: the line is empty, or not JSON and maybe the last).
    mutating func decode(_ line: some StringProtocol) throws(ReportError) -> RecordedEvent? {
        number += 1
        guard !line.isEmpty else { return nil }
        if let cutShort { throw ReportError("\(directory)/timeline.jsonl line \(cutShort.number): \(cutShort.error)") }
        let object: JSONValue
        do throws(JSONParseError) {
            object = try JSONValue.parse(String(line))
        } catch {
            cutShort = (number, error)
            return nil
        }
        do throws(ReportError) {
            let event = try RecordedEvent(json: object)
            decoded += 1
            return event
        } catch {
            throw ReportError("\(directory)/timeline.jsonl line \(number): \(error.message)")
        }
    }

    /// After the last line: the note about a last line cut short, if there was one.
    func finish() -> String? {
        guard let cutShort else { return nil }
        return "\(directory)/timeline.jsonl: the last line (\(cutShort.number)) is cut short (\(cutShort.error)); "
            + "the run was probably killed while writing it; read the \(decoded) complete events before it"
    }
}

/// Reads a `timeline.jsonl` a piece at a time, for a run too long to hold whole: its lines split
/// as ``RoamCore/textLines(_:)`` splits them (LF, CR LF, CR, NEL, LS, PS), each at most
/// ``maximumLineBytes`` long, so that what is held in memory is one piece and one line,
/// whatever the file's size.
package struct TimelineStream {
    /// The longest line read: no event Roam writes comes near it.
    package static let maximumLineBytes = 16 << 20

    /// Calls `body` with each line of `file` (the text of `display`) in order, the last one
    /// included even when empty (as `textLines` does).
    /// `pieceBytes`: how much is read at a time (smaller in tests, to split breaks across pieces).
    package static func forEachLine(of file: FileDescriptor, display: String, maximumBytes: Int, pieceBytes: Int = 1 << 20,
                                    _ body: (Substring) throws(ReportError) -> Void) throws(ReportError) {
        var buffer: [UInt8] = []
        var piece = [UInt8](repeating: 0, count: max(1, pieceBytes))
        var total = 0
        var atEnd = false
        var lineNumber = 0
        func tooLong(_ number: Int) -> ReportError {
            ReportError("\(display) line \(number) is longer than \(byteCountDescription(maximumLineBytes)); no event Roam writes is that long")
        }
        while true {
            if !atEnd {
                let count: Int
                do {
                    count = try piece.withUnsafeMutableBytes { bytes in try file.read(into: bytes, retryOnInterrupt: true) }
                } catch {
                    throw ReportError("cannot read \(display): \(error)")
                }
                total += count
                if total > maximumBytes {
                    throw ReportError("\(display) is larger than \(byteCountDescription(maximumBytes)), the most Roam reads of a timeline")
                }
                if count == 0 { atEnd = true } else { buffer.append(contentsOf: piece[..<count]) }
            }
            // Every complete line in the buffer; a break that may continue in the next piece
            // (CR, or the first bytes of NEL, LS, PS) waits for it.
            var start = 0
            var index = 0
            scan: while index < buffer.count {
                let byte = buffer[index]
                var length = 0
                switch byte {
                case 0x0A:
                    length = 1
                case 0x0D:
                    if index + 1 < buffer.count { length = buffer[index + 1] == 0x0A ? 2 : 1 } else if atEnd { length = 1 } else { break scan }
                case 0xC2, 0xE2:
                    let needed = byte == 0xC2 ? 2 : 3
                    if index + needed > buffer.count {
                        // Too few bytes left to tell: wait for the next piece (at the end, not a break).
                        if !atEnd { break scan }
                    } else if byte == 0xC2 {
                        if buffer[index + 1] == 0x85 { length = 2 }
                    } else if buffer[index + 1] == 0x80, buffer[index + 2] == 0xA8 || buffer[index + 2] == 0xA9 {
                        length = 3
                    }
                default:
                    break
                }
                if length > 0 {
                    lineNumber += 1
                    if index - start > maximumLineBytes { throw tooLong(lineNumber) }
                    try body(Substring(decoding: buffer[start..<index], as: UTF8.self))
                    index += length
                    start = index
                } else {
                    index += 1
                }
            }
            buffer.removeSubrange(0..<start)
            if buffer.count > maximumLineBytes { throw tooLong(lineNumber + 1) }
            if atEnd {
                try body(Substring(decoding: buffer, as: UTF8.self))
                return
            }
        }
    }
}
