import Foundation
import PathMonitor
import RoamSystem
import Testing
import TestSupport
@testable import Simulator

/// What a run records as it goes is held in bounded memory: older records go to a file with no
/// name in the report directory and come back whole, in order, at the end.
struct RecordSpillTests {
    private struct Record: Equatable {
        var at: Duration
        var value: Int32
    }

    @Test func recordsSpillToAnUnnamedFileAndComeBackInOrder() throws {
        let path = try TestEnvironment.scratchDirectory("roam-spill")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try SecureDirectory.open(path)
        let probe = directory.createUnnamedFile()
        try? probe?.close()
        try #require(probe != nil, "this file system has unnamed files (O_TMPFILE)")
        let spill = RecordSpill<Record>(directory: directory)
        for index in 0..<10 { spill.append(Record(at: .seconds(index), value: 0)) }
        #expect(!spill.hasFile, "a few records take no file, and no descriptor")
        #expect(spill.all().count == 10)
        let spill2 = RecordSpill<Record>(directory: directory)
        let records = (0..<10_000).map { Record(at: .milliseconds($0 * 7), value: Int32($0 % 97)) }
        for record in records {
            spill2.append(record)
            #expect(spill2.heldCount * MemoryLayout<Record>.stride <= RecordSpill<Record>.chunkBytes, "memory holds at most a chunk")
        }
        #expect(spill2.count == records.count && spill2.hasFile)
        #expect(spill2.spilled > records.count - RecordSpill<Record>.chunkBytes / MemoryLayout<Record>.stride)
        #expect(spill2.all() == records)
        #expect(try directory.entries().isEmpty, "the file has no name: nothing is left in the directory")
        spill2.append(Record(at: .zero, value: -1))
        #expect(spill2.all().last == Record(at: .zero, value: -1) && spill2.all().count == records.count + 1)
    }

    /// A run's spills share one file: fifty spills, their chunks interleaved, take one
    /// descriptor, and each gives back its own records, in order.
    @Test func spillsShareOneFileAndOneDescriptor() throws {
        let path = try TestEnvironment.scratchDirectory("roam-spill-shared")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try SecureDirectory.open(path)
        let file = SpillFile(directory: directory)
        let descriptors = { ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).count }
        let before = descriptors()
        let spills = (0..<50).map { _ in RecordSpill<Record>(file: file) }
        let perSpill = 3 * RecordSpill<Record>.chunkBytes / MemoryLayout<Record>.stride
        for index in 0..<perSpill {
            for (number, spill) in spills.enumerated() { spill.append(Record(at: .milliseconds(index), value: Int32(number))) }
        }
        #expect(file.exists && spills.allSatisfy(\.hasFile))
        #expect(descriptors() - before == 1, "one descriptor for every spill")
        for (number, spill) in spills.enumerated() {
            let records = spill.all()
            #expect(records.count == perSpill && spill.spilled > 0)
            #expect(records == (0..<perSpill).map { Record(at: .milliseconds($0), value: Int32(number)) })
        }
        #expect(try directory.entries().isEmpty, "the file has no name")
    }

    @Test func withoutAFileRecordsStayInMemory() {
        let spill = RecordSpill<Record>(directory: nil)
        let records = (0..<1_000).map { Record(at: .seconds($0), value: Int32($0)) }
        for record in records { spill.append(record) }
        #expect(spill.spilled == 0 && spill.heldCount == records.count)
        #expect(spill.all() == records)
    }

    /// A run's log spills its published paths and gives them back as they were recorded.
    @Test func aLogInADirectorySpillsItsPaths() throws {
        let scratch = try TestEnvironment.scratchDirectory("roam-spill-log")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let directory = try SecureDirectory.open(scratch)
        let log = try RunLog(start: .now, directory: directory)
        func path(_ satisfied: Bool) -> NetworkPath {
            NetworkPath(status: satisfied ? .satisfied : .unsatisfied, unsatisfiedReason: nil, availableInterfaces: [], primaryInterface: nil,
                        isExpensive: false, isConstrained: satisfied, supportsIPv4: satisfied, supportsIPv6: false, supportsDNS: false, gateways: [])
        }
        let start = log.start
        for index in 0..<2_000 {
            log.path(path(index % 3 == 0), node: index % 2 == 0 ? "phone" : "laptop", at: start + .milliseconds(index))
        }
        #expect(log.spilledCounts.paths > 1_500, "most paths are out of memory")
        let paths = log.paths
        #expect(paths.count == 2_000)
        for (index, record) in paths.enumerated() {
            #expect(record.at == .milliseconds(index))
            #expect(record.node == (index % 2 == 0 ? "phone" : "laptop"))
            #expect(record.path.status == (index % 3 == 0 ? .satisfied : .unsatisfied))
        }
        #expect(log.distinctCounts.paths == 2)
        #expect(try directory.entries() == ["timeline.jsonl"], "only the timeline has a name")
    }
}
