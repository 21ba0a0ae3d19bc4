import Glibc
import RoamSystem
import SystemPackage

import Synchronization

/// The one unnamed file a run's record spills share (``RecordSpill``): made in the run's report
/// directory the first time any of them writes (``RoamSystem/SecureDirectory/createUnnamedFile()``),
/// each spill's chunks appended where the file ends and found again by their offsets. A run of
/// a thousand workloads thus takes one descriptor for every spill, not up to three a workload.
/// Nil directory: no file, and every spill keeps its records in memory.
final class SpillFile: Sendable {
    private struct State {
        var file: FileDescriptor?
        var failed = false
        var end: Int64 = 0
    }
    private let directory: SecureDirectory?
    private let state = Mutex(State())

    init(directory: SecureDirectory?) {
        self.directory = directory
    }

    deinit {
        state.withLock { try? $0.file?.close() }
    }

    /// Whether the file was made (only once a spill wrote a chunk).
    var exists: Bool { state.withLock { $0.file != nil } }

    /// Writes `bytes` where the file ends: their offset, or nil when the file cannot be made or
    /// written (from then on every spill keeps its records in memory).
    func append(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        state.withLock { state -> Int64? in
            guard !state.failed, let directory else { return nil }
            if state.file == nil { state.file = directory.createUnnamedFile() }
            guard let file = state.file, (try? file.writeAll(toAbsoluteOffset: state.end, bytes)) != nil else {
                state.failed = true
                return nil
            }
            defer { state.end += Int64(bytes.count) }
            return state.end
        }
    }

    /// Reads up to `bytes.count` bytes at `offset`: how many were read (fewer on an I/O error
    /// on the file Roam itself wrote).
    func read(into bytes: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int {
        guard let source = state.withLock({ $0.file }) else { return 0 }
        var done = 0
        while done < bytes.count {
            let got = pread(source.rawValue, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if got > 0 { done += got; continue }
            if got < 0 && errno == EINTR { continue }
            break
        }
        return done
    }
}

/// Fixed-size records a run appends as it goes (applied changes, published paths, gaps in a
/// flow, the addresses it connected from), held in bounded memory however long the run lasts:
/// the latest ``chunkBytes`` of them in memory, the older ones in the run's ``SpillFile``, an
/// unnamed file in the run's report directory that disappears with its descriptor, so that
/// even a killed run leaves nothing behind. Without such a file (a log held in memory, a file
/// system without unnamed files, a write that failed) the records stay in memory from then on.
/// Read back whole by ``all()`` at the run's end, when its expectations are checked and its
/// report written.
///
/// Not thread-safe: its owner holds it under its lock.
final class RecordSpill<Element: BitwiseCopyable> {
    /// How many bytes of records are held in memory before they are written out.
    static var chunkBytes: Int { 4096 }
    private static var chunk: Int { max(1, chunkBytes / MemoryLayout<Element>.stride) }

    /// Where chunks are written, shared with the run's other spills; nil: memory only.
    private let file: SpillFile?
    private var writable: Bool
    /// Where each chunk written out is in the file, and how many records it holds, in order.
    private var chunks: [(offset: Int64, count: Int)] = []
    /// The latest records, not yet written.
    private var held: [Element] = []
    /// How many records the file holds (the first ones).
    private(set) var spilled = 0

    /// Records spilled to `file`, or held in memory when it is nil.
    init(file: SpillFile?) {
        self.file = file
        writable = file != nil
    }

    /// Records spilled to a file of their own in `directory` (memory when nil).
    convenience init(directory: SecureDirectory?) {
        self.init(file: directory.map { SpillFile(directory: $0) })
    }

    var count: Int { spilled + held.count }
    /// Whether this spill wrote records out (its file then exists).
    var hasFile: Bool { !chunks.isEmpty }
    /// How many records are held in memory (at most a chunk's worth while the file takes them).
    var heldCount: Int { held.count }

    func append(_ element: Element) {
        held.append(element)
        guard held.count >= Self.chunk, writable, let file else { return }
        guard let offset = held.withUnsafeBytes({ file.append($0) }) else {
            // Kept in memory from here on; what was written stays readable.
            writable = false
            return
        }
        chunks.append((offset, held.count))
        spilled += held.count
        held.removeAll(keepingCapacity: true)
    }

    /// Every record, in the order appended.
    func all() -> [Element] {
        var result: [Element] = []
        result.reserveCapacity(count)
        for chunk in chunks { result += read(chunk) }
        return result + held
    }

    /// The records of one chunk in the file. Records that cannot be read back (an I/O error on
    /// the file Roam itself wrote) are left out.
    private func read(_ chunk: (offset: Int64, count: Int)) -> [Element] {
        guard chunk.count > 0, let file else { return [] }
        let stride = MemoryLayout<Element>.stride
        return [Element](unsafeUninitializedCapacity: chunk.count) { buffer, initialized in
            initialized = file.read(into: UnsafeMutableRawBufferPointer(buffer), at: chunk.offset) / stride
        }
    }
}
