import Glibc
@testable import RoamSystem
import Synchronization
import SystemPackage
import Testing

/// The OS layer: root-free, on real descriptors and real child processes.
@Suite struct EventSignalTests {
    @Test func aSignalStaysUntilResetAndWakesAWaiterBeforeItsDeadline() throws {
        let signal = try EventSignal()
        #expect(!signal.isSignalled)
        signal.signal()
        #expect(signal.isSignalled)
        // Already signalled: the wait ends at once, saying it was signalled (false).
        #expect(signal.wait(until: .now + .seconds(30)) == false)
        #expect(signal.reset())
        #expect(!signal.isSignalled)
        #expect(!signal.reset())
        // Not signalled: the deadline passes (true).
        #expect(signal.wait(for: .milliseconds(5)) == true)
    }

    @Test func aSignalFromAnotherThreadEndsAWaitWithoutEnd() async throws {
        let signal = try EventSignal()
        let waiter = Task.detached { signal.wait(until: .now + .seconds(3600)) }
        signal.signal()
        #expect(await waiter.value == false)
    }

    @Test func aReadyDescriptorEndsTheWaitAsTheDeadlineDoes() throws {
        let signal = try EventSignal()
        let other = try EventSignal()
        other.signal()
        #expect(signal.wait(until: .now + .seconds(3600), wakingOn: [other.pollEntry]) == true)
    }
}

@Suite struct EventPollTests {
    @Test func onlyTheReadyDescriptorsAreReportedByTheirTagsAndAgainUntilRead() throws {
        let signals = try (0..<5).map { _ in try EventSignal() }
        var poll = try EventPoll()
        for (index, signal) in signals.enumerated() { try poll.add(signal.descriptor.rawValue, tag: 10 + index) }
        // Nothing ready: a passed deadline returns at once, a near one once it has passed.
        var ready: [Int] = []
        #expect(try poll.wait(until: .now + .seconds(-1)) { ready.append($0) } == 0)
        let deadline = MonotonicInstant.now + .milliseconds(20)
        #expect(try poll.wait(until: deadline) { ready.append($0) } == 0)
        #expect(MonotonicInstant.now >= deadline)
        #expect(ready.isEmpty)
        signals[1].signal()
        signals[3].signal()
        #expect(try poll.wait(until: .now + .seconds(3600)) { ready.append($0) } == 2)
        #expect(ready.sorted() == [11, 13])
        // Level-triggered: still readable, so reported again; once read, not.
        ready = []
        #expect(try poll.wait(until: .now) { ready.append($0) } == 2)
        signals[1].reset()
        ready = []
        #expect(try poll.wait(until: .now) { ready.append($0) } == 1)
        #expect(ready == [13])
        // Every one at once, past the room the first ones were added with.
        for signal in signals { signal.signal() }
        ready = []
        #expect(try poll.wait(until: .now) { ready.append($0) } == 5)
        #expect(ready.sorted() == [10, 11, 12, 13, 14])
    }

    @Test func aSignalFromAnotherThreadEndsAWaitWithoutEnd() async throws {
        let signal = try EventSignal()
        let waiter = Task.detached { () throws -> [Int] in
            var poll = try EventPoll()
            try poll.add(signal.descriptor.rawValue, tag: 7)
            var ready: [Int] = []
            try poll.wait(until: nil) { ready.append($0) }
            return ready
        }
        signal.signal()
        #expect(try await waiter.value == [7])
    }

    @Test func aDescriptorThatIsNotOpenIsRefused() throws {
        var poll = try EventPoll()
        #expect(throws: Errno.badFileDescriptor) { try poll.add(1_000_000, tag: 0) }
    }
}

@Suite struct DeadlineWaitTests {
    @Test func aPassedDeadlineReturnsAtOnceWithNothingReady() throws {
        let signal = try EventSignal()
        var entries = [signal.pollEntry]
        #expect(try waitForEvents(&entries, until: .now + .seconds(-1)) == 0)
        #expect(try waitForEvents(&entries, timeout: .seconds(-5)) == 0)
    }

    @Test func theWaitLastsUntilTheDeadlineNotLess() throws {
        let signal = try EventSignal()
        var entries = [signal.pollEntry]
        let deadline = MonotonicInstant.now + .milliseconds(20)
        #expect(try waitForEvents(&entries, until: deadline) == 0)
        #expect(MonotonicInstant.now >= deadline)
    }

    @Test func aClosedDescriptorIsAnErrorNotAHang() throws {
        // POLLNVAL is an event, not an error: the wait returns with the entry marked.
        var entries = [pollfd(fd: 1_000_000, events: Int16(POLLIN), revents: 0)]
        #expect(try waitForEvents(&entries, timeout: .seconds(5)) == 1)
        #expect(entries[0].revents & Int16(POLLNVAL) != 0)
    }
}

@Suite struct WriteAllTests {
    /// More than a pipe holds (64 KiB), so that writes come back short while the reader drains.
    @Test func everyByteArrivesThroughShortWrites() throws {
        let pipe = try makePipe()
        let size = 1 << 20
        let received = Mutex<[UInt8]>([])
        let reader = Thread_ { 
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(pipe.readEnd.rawValue, &buffer, buffer.count)
                if count <= 0 { break }
                received.withLock { $0 += buffer[0..<count] }
            }
        }
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try writeAll(bytes, to: pipe.writeEnd)
        try pipe.writeEnd.close()
        reader.join()
        try pipe.readEnd.close()
        #expect(received.withLock { $0 } == bytes)
    }

    @Test func aWriteToAClosedPipeThrowsEPIPE() throws {
        signal(SIGPIPE, SIG_IGN)
        let pipe = try makePipe()
        try pipe.readEnd.close()
        #expect(throws: Errno.brokenPipe) { try writeAll([1, 2, 3], to: pipe.writeEnd) }
        try pipe.writeEnd.close()
    }
}

@Suite struct SpawnTests {
    /// Runs `script` under /bin/sh and returns what it printed and how it ended.
    private func run(_ script: String, newProcessGroup: Bool = true) throws -> (output: String, status: TerminationStatus) {
        let pipe = try makePipe()
        let pid: pid_t
        do {
            defer { try? pipe.writeEnd.close() }
            pid = try spawnProcess(["/bin/sh", "-c", script], environment: ["PATH=/usr/bin:/bin"], standardOutput: pipe.writeEnd,
                                   standardError: pipe.writeEnd, newProcessGroup: newProcessGroup)
        }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(pipe.readEnd.rawValue, &buffer, buffer.count)
            if count <= 0 { break }
            output += buffer[0..<count]
        }
        try pipe.readEnd.close()
        return (String(decoding: output, as: UTF8.self), try waitForExit(pid))
    }

    @Test func pipesAreCloseOnExecFromTheStart() throws {
        let pipe = try makePipe()
        defer { try? pipe.readEnd.close(); try? pipe.writeEnd.close() }
        #expect(fcntl(pipe.readEnd.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(pipe.writeEnd.rawValue, F_GETFD) & FD_CLOEXEC != 0)
    }

    @Test func theChildHasNoBlockedSignalsEvenWhenTheParentThreadBlocksThem() throws {
        var blocked = sigset_t(), previous = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGINT)
        sigaddset(&blocked, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let (output, status) = try run("grep '^SigBlk' /proc/self/status")
        #expect(status.code == 0)
        #expect(output.trimmingSuffix() == "SigBlk:\t0000000000000000")
    }

    @Test func aNewProcessGroupIsLedByTheChild() throws {
        // In /proc/self/stat, the fields after the command are: state, ppid, pgrp.
        let script = "read -r line < /proc/self/stat; set -- ${line##*) }; echo $$ $3"
        let (output, _) = try run(script)
        let fields = output.trimmingSuffix().split(separator: " ")
        #expect(fields.count == 2 && fields[0] == fields[1])
        let (inherited, _) = try run(script, newProcessGroup: false)
        #expect(inherited.trimmingSuffix().split(separator: " ").last.map(String.init) == String(getpgrp()))
    }

    @Test func stdinIsDevNullAndTheEnvironmentIsWhatWasGiven() throws {
        let (output, _) = try run("readlink /proc/self/fd/0; echo \"$PATH\"; echo \"${HOME-unset}\"")
        #expect(output == "/dev/null\n/usr/bin:/bin\nunset\n")
    }

    @Test func exitCodesAndSignalsAreTold() throws {
        #expect(try run("exit 7").status == TerminationStatus(waitStatus: 7 << 8))
        #expect(try run("exit 7").status.code == 7)
        let killed = try run("kill -9 $$").status
        #expect(killed.code == nil && killed.signal == SIGKILL)
    }

    @Test func aMissingProgramIsENOENT() throws {
        let pipe = try makePipe()
        defer { try? pipe.readEnd.close(); try? pipe.writeEnd.close() }
        #expect(throws: Errno.noSuchFileOrDirectory) {
            try spawnProcess(["roam-no-such-program"], environment: [], standardOutput: pipe.writeEnd, standardError: pipe.writeEnd,
                             newProcessGroup: false)
        }
    }
}

/// A joinable thread, without Foundation.
private final class Thread_: @unchecked Sendable {
    private var thread = pthread_t()
    private let body: () -> Void

    init(_ body: @escaping () -> Void) {
        self.body = body
        let context = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { context in
            let me = Unmanaged<Thread_>.fromOpaque(context!).takeRetainedValue()
            me.body()
            return nil
        }, context)
    }

    func join() { pthread_join(thread, nil) }
}

extension String {
    fileprivate func trimmingSuffix() -> String {
        var result = self
        while result.last == "\n" { result.removeLast() }
        return result
    }
}

@Suite struct FreedMemoryTests {
    /// This process's anonymous resident memory (`RssAnon`), in kilobytes.
    static func anonymousKilobytes() -> Int {
        let descriptor = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return -1 }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        let status = String(decoding: bytes.prefix(max(0, count)), as: UTF8.self)
        let line = status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") } ?? ""
        return Int(String(line.filter(\.isNumber))) ?? -1
    }

    /// 64 MB freed in 4 KB blocks below one still held: malloc keeps it all (the held block
    /// stops the arena from shrinking at its top); ``FreedMemory/release()`` gives it back.
    @Test func givesBackWhatMallocKeptBelowABlockStillHeld() {
        let count = 16_384, size = 4096
        var blocks: [UnsafeMutableRawPointer] = []
        blocks.reserveCapacity(count)
        for _ in 0..<count {
            let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            block.initializeMemory(as: UInt8.self, repeating: 1, count: size)
            blocks.append(block)
        }
        let held = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        held.initializeMemory(as: UInt8.self, repeating: 1, count: size)
        defer { held.deallocate() }
        for block in blocks { block.deallocate() }
        let kept = Self.anonymousKilobytes()
        #expect(FreedMemory.release())
        let after = Self.anonymousKilobytes()
        #expect(kept > 0 && after > 0)
        #expect(kept - after >= count * size / 1024 / 2, "resident anonymous memory \(kept) kB before, \(after) kB after")
    }
}
