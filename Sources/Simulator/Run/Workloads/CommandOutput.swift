import Glibc
import Netlink
import RoamSystem
import SystemPackage

/// A command's standard output and error, read from pipes and written into the report under the
/// run's `OutputBudget`: what goes past it is read and dropped (so that the command never
/// blocks on a full pipe), and the file is noted as cut. One thread per command.
final class CommandOutput: Sendable {
    /// One stream: the pipe's read end, the report file, and the file's name.
    struct Stream: Sendable {
        var pipe: FileDescriptor
        var file: FileDescriptor
        var name: String
    }

    private let thread: PinnedThread
    private let finishing: EventSignal

    /// Starts copying `streams`; it takes over their descriptors.
    init(_ streams: [Stream], budget: OutputBudget) throws(SimulatorError) {
        let finishing: EventSignal
        do { finishing = try EventSignal() } catch { throw SimulatorError("cannot copy a command's output: eventfd", error) }
        self.finishing = finishing
        do {
            thread = try PinnedThread(name: "roam-output") { Self.copy(streams, budget: budget, finishing: finishing) }
        } catch {
            for stream in streams {
                try? stream.pipe.close()
                try? stream.file.close()
            }
            throw SimulatorError("start copying a command's output", error)
        }
    }

    /// Waits until every writer of the pipes is gone (the command's whole group has ended), or
    /// ``grace`` after this call at the latest (a process that left the group may hold a pipe).
    func finish() {
        finishing.signal()
        thread.join()
    }

    /// How long the copy goes on after ``finish()`` for writers that outlive the group.
    static let grace = Duration.seconds(1)

    private static func copy(_ streams: [Stream], budget: OutputBudget, finishing: EventSignal) {
        var open = streams
        var written = Array(repeating: Int64(0), count: streams.count)
        var cut = Array(repeating: false, count: streams.count)
        var indices = Array(streams.indices)
        var buffer = [UInt8](repeating: 0, count: 65536)
        var deadline: MonotonicInstant?
        while !indices.isEmpty {
            var entries = indices.map { pollfd(fd: open[$0].pipe.rawValue, events: Int16(POLLIN), revents: 0) }
            if deadline == nil { entries.append(finishing.pollEntry) }
            guard (try? waitForEvents(&entries, until: deadline)) != nil else { break }
            if deadline == nil, entries.last!.revents != 0 { deadline = .now + grace }
            if let deadline, deadline <= .now { break }
            var ended: [Int] = []
            for (position, index) in indices.enumerated() where entries[position].revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(open[index].pipe.rawValue, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR || errno == EAGAIN { continue }
                guard count > 0 else {
                    ended.append(index)
                    continue
                }
                let granted = budget.take(upTo: count, written: written[index])
                if granted > 0 {
                    try? writeAll(buffer[..<granted], to: open[index].file)
                    written[index] += Int64(granted)
                }
                if granted < count, !cut[index] {
                    cut[index] = true
                    budget.noteCut(open[index].name)
                }
            }
            indices.removeAll { ended.contains($0) }
        }
        for stream in open {
            try? stream.pipe.close()
            try? stream.file.close()
        }
        open = []
    }
}
