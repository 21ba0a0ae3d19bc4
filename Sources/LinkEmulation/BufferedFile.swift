import Glibc
import RoamSystem
import SystemPackage

/// An append-only file written through a buffer, flushed when the buffer fills and on close.
/// What it may hold is bounded by an `OutputBudget`: a record (one ``append(_:)``) that does
/// not fit is left out, and so is everything after it, so that the file ends at a whole record.
package final class BufferedFile: @unchecked Sendable {
    private let descriptor: FileDescriptor
    private let name: String
    private let budget: OutputBudget
    private var buffer: [UInt8] = []
    private let capacity = 1 << 16
    private var written: Int64 = 0
    /// Whether a record was left out for the budget.
    package private(set) var isCut = false

    /// Creates `name` in `directory` (a new file, see `SecureDirectory/createFile(named:mode:replacing:)`).
    package init(directory: SecureDirectory, name: String, budget: OutputBudget) throws(LinkEmulationError) {
        do {
            descriptor = try directory.createFile(named: name, mode: RunReportFiles.mode)
        } catch {
            throw LinkEmulationError(error.message)
        }
        self.name = name
        self.budget = budget
        buffer.reserveCapacity(capacity)
    }

    deinit { close() }

    package func append(_ bytes: some Collection<UInt8>) {
        guard !isCut else { return }
        guard budget.take(bytes.count, written: written) else {
            isCut = true
            budget.noteCut(name)
            return
        }
        written += Int64(bytes.count)
        buffer.append(contentsOf: bytes)
        if buffer.count >= capacity { flush() }
    }

    package func append(_ text: String) { append(Array(text.utf8)) }

    package func flush() {
        try? writeAll(buffer, to: descriptor)
        buffer.removeAll(keepingCapacity: true)
    }

    private var isClosed = false
    package func close() {
        guard !isClosed else { return }
        isClosed = true
        flush()
        try? descriptor.close()
    }
}
