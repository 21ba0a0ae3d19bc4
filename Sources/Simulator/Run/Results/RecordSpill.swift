import Glibc
import RoamSystem
import SystemPackage

/// Fixed-size records a run appends as it goes (applied changes, published paths, gaps in a
/// flow, the addresses it connected from), held in bounded memory however long the run lasts:
/// the latest ``chunkBytes`` of them in memory, the older ones in a file with no name in the
/// run's report directory (``RoamSystem/SecureDirectory/createUnnamedFile()``), which
/// disappears with its descriptor, so that even a killed run leaves nothing behind. Without
/// such a file (a log held in memory, a file system without unnamed files, a write that
/// failed) the records stay in memory from then on. Read back whole by ``all()`` at the run's
/// end, when its expectations are checked and its report written.
///
/// Not thread-safe: its owner holds it under its lock.
final class RecordSpill<Element: BitwiseCopyable> {
    /// How many bytes of records are held in memory before they are written out.
    static var chunkBytes: Int { 4096 }
    private static var chunk: Int { max(1, chunkBytes / MemoryLayout<Element>.stride) }

    /// Where the file is made, the first time records are written out (a short run never
    /// makes one, and takes no descriptor for it).
    private let directory: SecureDirectory?
    private var file: FileDescriptor?
    /// False once the file could not be made or written: records are held in memory from then on.
    private var writable: Bool
    /// The latest records, not yet written.
    private var held: [Element] = []
    /// How many records the file holds (the first ones).
    private(set) var spilled = 0

    /// Records spilled to an unnamed file in `directory`, or held in memory when it is nil.
    init(directory: SecureDirectory?) {
        self.directory = directory
        writable = directory != nil
    }

    deinit {
        try? file?.close()
    }

    var count: Int { spilled + held.count }
    /// Whether the file was made (only once a chunk's worth of records was written out).
    var hasFile: Bool { file != nil }
    /// How many records are held in memory (at most a chunk's worth while the file takes them).
    var heldCount: Int { held.count }

    func append(_ element: Element) {
        held.append(element)
        guard held.count >= Self.chunk, writable else { return }
        if file == nil { file = directory?.createUnnamedFile() }
        guard let file else {
            writable = false
            return
        }
        let written = held.withUnsafeBytes { bytes in
            (try? file.writeAll(toAbsoluteOffset: Int64(spilled * MemoryLayout<Element>.stride), bytes)) != nil
        }
        guard written else {
            // Kept in memory from here on; what was written stays readable.
            writable = false
            return
        }
        spilled += held.count
        held.removeAll(keepingCapacity: true)
    }

    /// Every record, in the order appended.
    func all() -> [Element] {
        read(at: 0, count: spilled) + held
    }

    /// Records `first..<first + count` of those in the file. Records that cannot be read back (an
    /// I/O error on the file Roam itself wrote) are left out.
    private func read(at first: Int, count: Int) -> [Element] {
        guard count > 0, let source = file else { return [] }
        let stride = MemoryLayout<Element>.stride
        return [Element](unsafeUninitializedCapacity: count) { buffer, initialized in
            let bytes = UnsafeMutableRawBufferPointer(buffer)
            var done = 0
            while done < bytes.count {
                let got = pread(source.rawValue, bytes.baseAddress! + done, bytes.count - done, off_t((first * stride) + done))
                if got > 0 { done += got; continue }
                if got < 0 && errno == EINTR { continue }
                break
            }
            initialized = done / stride
        }
    }
}
