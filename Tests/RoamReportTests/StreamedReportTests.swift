import Foundation
import RoamCore
@testable import RoamReport
import RoamSystem
import SystemPackage
import Testing

/// `report.html` is drawn from the timeline read a piece at a time (a day's run writes hundreds of
/// megabytes of it): the lines, the events, the notes and the page are those of the timeline
/// read whole.
@Suite struct StreamedReportTests {
    /// A scratch report directory holding `summary` and `timeline`, removed after `body`.
    static func withReportDirectory<T>(summary: String, timeline: String, _ body: (String) throws -> T) throws -> T {
        var template = Array("/tmp/roam-streamed-report-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        try #require(made)
        let directory = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try summary.write(toFile: directory + "/summary.json", atomically: false, encoding: .utf8)
        try timeline.write(toFile: directory + "/timeline.jsonl", atomically: false, encoding: .utf8)
        return try body(directory)
    }

    /// The lines of `text` read `pieceBytes` at a time.
    static func streamedLines(_ text: String, pieceBytes: Int, maximumBytes: Int = 1 << 30) throws(ReportError) -> [String] {
        let fd = fileno(tmpfile())
        let file = FileDescriptor(rawValue: dup(fd))
        defer { try? file.close() }
        _ = try? file.writeAll(text.utf8)
        _ = try? file.seek(offset: 0, from: .start)
        var lines: [String] = []
        try TimelineStream.forEachLine(of: file, display: "t", maximumBytes: maximumBytes, pieceBytes: pieceBytes) { lines.append(String($0)) }
        return lines
    }

    /// Every kind of line break, cut by every size of piece, gives the lines `textLines` gives.
    @Test func linesReadInPiecesAreTheLinesOfTheWholeText() throws {
        let breaks = ["\n", "\r\n", "\r", "\u{85}", "\u{2028}", "\u{2029}"]
        var generator = SystemRandomNumberGenerator()
        for round in 0..<200 {
            var text = ""
            for _ in 0..<Int(generator.next() % 12) {
                text += String(repeating: "é{x}", count: Int(generator.next() % 4))
                text += breaks[Int(generator.next() % UInt64(breaks.count))]
            }
            if round % 3 == 0 { text += "tail\u{C2}" }
            let whole = textLines(text).map(String.init)
            for piece in 1...9 {
                #expect(try Self.streamedLines(text, pieceBytes: piece) == whole, "round \(round), pieces of \(piece): \(text.debugDescription)")
            }
        }
    }

    @Test func aTimelineOverItsBoundOrWithAHugeLineIsRefused() {
        #expect(throws: ReportError.self) { try Self.streamedLines(String(repeating: "x\n", count: 100), pieceBytes: 16, maximumBytes: 150) }
        let huge = String(repeating: "x", count: TimelineStream.maximumLineBytes + 10)
        do throws(ReportError) {
            _ = try Self.streamedLines(huge + "\n", pieceBytes: 1 << 20)
            Issue.record("a line over the bound was read")
        } catch {
            #expect(error.message.contains("line 1 is longer than 16 MiB"), "\(error.message)")
        }
    }

    /// A timeline larger than the most that is drawn is refused before it is read (a sparse
    /// file: no disk is used).
    @Test func aTimelineLargerThanTheBoundIsRefusedAtOnce() throws {
        try Self.withReportDirectory(summary: #"{"scenario":"s","durationSeconds":10}"#, timeline: "") { directory in
            #expect(truncate(directory + "/timeline.jsonl", off_t(HTMLReport.maximumTimelineSize) + 1) == 0)
            do throws(ReportError) {
                _ = try HTMLReport.page(directories: [directory])
                Issue.record("a timeline over the bound was drawn")
            } catch {
                #expect(error.message.contains("larger than 4096 MiB, the most Roam reads of a timeline"), "\(error.message)")
            }
        }
    }

    /// The page drawn from the timeline read in pieces is the page drawn from it read whole.
    @Test func theStreamedPageIsThePageOfTheWholeTimeline() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/report").path
        let summary = try String(contentsOfFile: fixture + "/summary.json", encoding: .utf8)
        let timeline = try String(contentsOfFile: fixture + "/timeline.jsonl", encoding: .utf8)
        let hour = try LongRunReportTests.hourOfFlapsTexts()
        for (summary, timeline) in [(summary, timeline), hour] {
            try Self.withReportDirectory(summary: summary, timeline: timeline) { directory in
                let whole = HTMLReport.render(try RecordedRun.load(directory: directory))
                let streamed = try HTMLReport.page(directories: [directory])
                #expect(streamed.notes.isEmpty)
                #expect(streamed.html == whole)
                let compared = try HTMLReport.page(directories: [directory, directory]).html
                #expect(compared == HTMLReport.render(comparing: try RecordedRun.load(directory: directory), try RecordedRun.load(directory: directory)))
                try HTMLReport.write(directory: directory)
                #expect(try String(contentsOfFile: directory + "/report.html", encoding: .utf8) == whole)
            }
        }
    }

    /// A last line cut short is left out with the note a whole read gives; damage before the
    /// last line is the same error.
    @Test func aCutShortLastLineIsNotedAndDamageElsewhereRefused() throws {
        let summary = #"{"scenario":"s","durationSeconds":10}"#
        let cut = "{\"t\":1,\"type\":\"mark\",\"text\":\"x\"}\n\n{\"t\":2,\"ty"
        try Self.withReportDirectory(summary: summary, timeline: cut) { directory in
            let whole = try RecordedRun.load(directory: directory)
            let streamed = try HTMLReport.page(directories: [directory])
            #expect(streamed.notes.count == 1 && streamed.notes == whole.notes)
            #expect(streamed.notes.first?.contains("the last line (3) is cut short") == true, "\(streamed.notes)")
        }
        let damaged = "{\"t\":1,\"ty\n{\"t\":2,\"type\":\"mark\",\"text\":\"x\"}\n"
        try Self.withReportDirectory(summary: summary, timeline: damaged) { directory in
            var wholeError: String?, streamedError: String?
            do throws(ReportError) { _ = try RecordedRun.load(directory: directory) } catch { wholeError = error.message }
            do throws(ReportError) { _ = try HTMLReport.page(directories: [directory]) } catch { streamedError = error.message }
            #expect(wholeError != nil && wholeError == streamedError)
            #expect(streamedError?.contains("timeline.jsonl line 1:") == true, "\(streamedError ?? "-")")
        }
    }
}
