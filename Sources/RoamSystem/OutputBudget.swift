import Synchronization

/// How much a run may write besides its own record: each file (a command's output, a decision
/// log, a capture) at most ``perFile`` bytes, all of them together at most ``total``. Writers
/// take bytes before writing them and stop where the budget ends, so that a command printing
/// without end, or a capture of a flood, fills neither the disk nor the report.
package final class OutputBudget: Sendable {
    /// The most one file may hold.
    public let perFile: Int64
    /// The most every file together may hold.
    public let total: Int64
    private let used = Atomic<Int64>(0)
    private let cutFiles = Mutex<[String]>([])

    /// 64 MiB a file, 1 GiB a run.
    public static let defaultPerFile: Int64 = 64 << 20
    public static let defaultTotal: Int64 = 1 << 30

    public init(perFile: Int64 = defaultPerFile, total: Int64 = defaultTotal) {
        self.perFile = max(0, perFile)
        self.total = max(0, total)
    }

    /// Takes `count` bytes for a file that holds `written` so far: true when they may all be
    /// written (a record is written whole or not at all).
    public func take(_ count: Int, written: Int64) -> Bool {
        let count = Int64(count)
        guard written + count <= perFile else { return false }
        var current = used.load(ordering: .relaxed)
        while true {
            guard current + count <= total else { return false }
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + count, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    /// Takes up to `count` bytes for a stream that holds `written` so far: how many may be
    /// written (0 once the file or the run is full).
    public func take(upTo count: Int, written: Int64) -> Int {
        let wanted = Int64(max(0, min(Int64(count), perFile - written)))
        guard wanted > 0 else { return 0 }
        var current = used.load(ordering: .relaxed)
        while true {
            let granted = min(wanted, total - current)
            guard granted > 0 else { return 0 }
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + granted, ordering: .relaxed)
            if exchanged { return Int(granted) }
            current = original
        }
    }

    /// Bytes taken so far.
    public var bytesWritten: Int64 { used.load(ordering: .relaxed) }

    /// Notes that `file` was cut short (once per file).
    public func noteCut(_ file: String) {
        cutFiles.withLock { if !$0.contains(file) { $0.append(file) } }
    }

    /// The files cut short, in the order they were.
    public var filesCut: [String] { cutFiles.withLock { $0 } }
}
