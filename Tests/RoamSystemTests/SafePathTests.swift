import Glibc
@testable import RoamSystem
import SystemPackage
import Testing

/// A directory of the test's own under /tmp, removed with everything in it.
final class Scratch {
    let path: String

    init() throws {
        var template = Array("/tmp/roam-safepath-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Errno.current }
        path = String(cString: made)
        chmod(path, 0o755)
    }

    deinit {
        // Links and FIFOs are removed, not followed.
        let status = system("rm -rf '\(path)'")
        _ = status
    }

    func file(_ name: String, _ text: String) {
        let fd = open(path + "/" + name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
        close(fd)
    }

    func read(_ name: String) -> String? {
        let fd = open(path + "/" + name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = Glibc.read(fd, &buffer, buffer.count)
        return String(decoding: buffer[..<max(0, count)], as: UTF8.self)
    }
}

/// The safe-path layer as an attacker meets it: links, FIFOs and hard links planted where Roam
/// writes; and as a user meets it: what it makes, replaces and refuses, and what it says.
@Suite struct SafePathTests {
    @Test func replacingAFileWritesAFreshFileAtomically() throws {
        let scratch = try Scratch()
        let directory = try SecureDirectory.open(scratch.path)
        try directory.replaceFile(named: "out.txt", contents: Array(String(repeating: "long line\n", count: 100).utf8))
        try directory.replaceFile(named: "out.txt", contents: Array("short\n".utf8))
        #expect(scratch.read("out.txt") == "short\n")
        // No temporary file is left behind.
        #expect(try directory.entries() == ["out.txt"])
    }

    @Test func aLinkPlantedAtTheOutputIsRefusedAndItsTargetUntouched() throws {
        let scratch = try Scratch()
        scratch.file("victim", "precious\n")
        #expect(symlink(scratch.path + "/victim", scratch.path + "/out.txt") == 0)
        let directory = try SecureDirectory.open(scratch.path)
        #expect(throws: SafePathError.self) { try directory.replaceFile(named: "out.txt", contents: Array("x".utf8)) }
        #expect(throws: SafePathError.self) { _ = try directory.createFile(named: "out.txt") }
        do throws(SafePathError) {
            try directory.replaceFile(named: "out.txt", contents: Array("x".utf8))
        } catch {
            #expect(error.code == .notRegularFile)
            #expect(error.message == "\(scratch.path)/out.txt is a symbolic link; Roam writes only regular files and replaces nothing else: remove it, or write elsewhere")
        }
        #expect(scratch.read("victim") == "precious\n")
    }

    @Test func aFIFOAtTheOutputIsRefusedAtOnce() throws {
        let scratch = try Scratch()
        #expect(mkfifo(scratch.path + "/out.txt", 0o666) == 0)
        let directory = try SecureDirectory.open(scratch.path)
        // A blocking open would wait for a reader without end.
        #expect(throws: SafePathError.self) { try directory.replaceFile(named: "out.txt", contents: Array("x".utf8)) }
        #expect(throws: SafePathError.self) { _ = try directory.createFile(named: "out.txt") }
        #expect(throws: SafePathError.self) { _ = try directory.readFile(named: "out.txt", maximumBytes: 10) }
    }

    @Test func aFileRewrittenInPlaceKeepsItsInodeAndNothingElseIsWritten() throws {
        let scratch = try Scratch()
        scratch.file("resolv.conf", "nameserver 192.168.0.1\n")
        var before = stat()
        #expect(stat(scratch.path + "/resolv.conf", &before) == 0)
        let directory = try SecureDirectory.open(scratch.path)
        try directory.rewriteFile(named: "resolv.conf", contents: Array("nameserver fd72::1\n".utf8))
        var after = stat()
        #expect(stat(scratch.path + "/resolv.conf", &after) == 0)
        #expect(after.st_ino == before.st_ino && scratch.read("resolv.conf") == "nameserver fd72::1\n")
        // A link, a FIFO (at once, with no reader) and a second name of another file are refused.
        scratch.file("victim", "precious\n")
        #expect(symlink(scratch.path + "/victim", scratch.path + "/link") == 0)
        #expect(link(scratch.path + "/victim", scratch.path + "/hard") == 0)
        #expect(mkfifo(scratch.path + "/fifo", 0o666) == 0)
        for name in ["link", "hard", "fifo", "missing"] {
            #expect(throws: SafePathError.self) { try directory.rewriteFile(named: name, contents: Array("x".utf8)) }
        }
        #expect(scratch.read("victim") == "precious\n")
    }

    @Test func aHardLinkAtTheOutputIsReplacedNotWrittenThrough() throws {
        let scratch = try Scratch()
        scratch.file("victim", "precious\n")
        #expect(link(scratch.path + "/victim", scratch.path + "/timeline.jsonl") == 0)
        let directory = try SecureDirectory.open(scratch.path)
        let file = try directory.createFile(named: "timeline.jsonl")
        try writeAll(Array("new\n".utf8), to: file)
        try file.close()
        #expect(scratch.read("victim") == "precious\n")
        #expect(scratch.read("timeline.jsonl") == "new\n")
        try directory.replaceFile(named: "timeline.jsonl", contents: Array("again\n".utf8))
        #expect(scratch.read("victim") == "precious\n")
    }

    /// Every directory's descriptor is close-on-exec, those opened inside another too (they
    /// were `dup`ed without it, and a program a run started inherited them).
    @Test func directoryDescriptorsAreCloseOnExec() throws {
        let scratch = try Scratch()
        let top = try SecureDirectory.open(scratch.path)
        let inner = try top.directory(named: "inner", creating: 0o700)
        let deeper = try inner.directory(named: "deeper", creating: 0o700)
        for directory in [top, inner, deeper] {
            let flags = fcntl(directory.rawDescriptor, F_GETFD)
            #expect(flags >= 0 && flags & FD_CLOEXEC != 0, "\(directory.path)")
        }
    }

    @Test func missingDirectoriesAreMadeAndExistingOnesOpened() throws {
        let scratch = try Scratch()
        let made = try SecureDirectory.open(scratch.path + "/a/b/c", creating: 0o755)
        #expect(made.wasCreated)
        #expect(made.owner == geteuid())
        let again = try SecureDirectory.open(scratch.path + "/a/b/c", creating: 0o755)
        #expect(!again.wasCreated)
        #expect(again.inode == made.inode)
        #expect(throws: SafePathError.self) { _ = try SecureDirectory.open(scratch.path + "/missing") }
        scratch.file("plain", "x")
        do throws(SafePathError) {
            _ = try SecureDirectory.open(scratch.path + "/plain/below", creating: 0o755)
            Issue.record("a directory was made below a file")
        } catch {
            #expect(error.code == .notDirectory)
        }
    }

    @Test func theCallersOwnLinksAreFollowed() throws {
        let scratch = try Scratch()
        _ = try SecureDirectory.open(scratch.path + "/real", creating: 0o755)
        #expect(symlink("real", scratch.path + "/alias") == 0)
        let directory = try SecureDirectory.open(scratch.path + "/alias/sub", creating: 0o755)
        try directory.replaceFile(named: "f", contents: Array("through\n".utf8))
        #expect(scratch.read("real/sub/f") == "through\n")
        // A loop ends with an error, not a hang.
        #expect(symlink("loop", scratch.path + "/loop") == 0)
        do throws(SafePathError) {
            _ = try SecureDirectory.open(scratch.path + "/loop")
            Issue.record("a link loop opened")
        } catch {
            #expect(error.code == .tooManyLinks)
        }
    }

    @Test(arguments: [uid_t(0), uid_t(1000)])
    func linksAreTrustedByTheirOwnerAndTheirDirectory(caller: uid_t) {
        var link = stat(), directory = stat()
        directory.st_uid = 4242
        directory.st_mode = S_IFDIR | 0o1777
        link.st_mode = S_IFLNK | 0o777
        link.st_uid = caller
        #expect(SecureDirectory.trusts(link: link, in: directory, caller: caller), "the caller's own link")
        link.st_uid = 0
        #expect(SecureDirectory.trusts(link: link, in: directory, caller: caller), "root's link")
        link.st_uid = 4242
        directory.st_uid = link.st_uid
        #expect(!SecureDirectory.trusts(link: link, in: directory, caller: caller), "another user's link in a directory anyone can write (/tmp)")
        directory.st_mode = S_IFDIR | 0o755
        // A user's link in the user's own directory: the user may follow their own; root never.
        #expect(SecureDirectory.trusts(link: link, in: directory, caller: caller) == (caller != 0),
                "the directory owner's link where only they write, followed by uid \(caller)")
        directory.st_uid = 1
        #expect(!SecureDirectory.trusts(link: link, in: directory, caller: caller), "another user's link in a third user's directory")
    }

    @Test func requirementsAreCheckedOnTheDescriptor() throws {
        let scratch = try Scratch()
        let open = try SecureDirectory.open(scratch.path + "/registry", creating: 0o755)
        #expect(open.mode & 0o077 != 0)
        do throws(SafePathError) {
            _ = try SecureDirectory.open(scratch.path + "/registry", requirement: .privateToCaller)
            Issue.record("a directory others can read passed as private")
        } catch {
            #expect(error.code == .writableByOthers)
            #expect(error.message.contains("chmod go-rwx"))
        }
        chmod(scratch.path + "/registry", 0o700)
        #expect((try? SecureDirectory.open(scratch.path + "/registry", requirement: .privateToCaller)) != nil)
    }

    @Test func namesThatAreNotFileNamesAreRefused() throws {
        let scratch = try Scratch()
        let directory = try SecureDirectory.open(scratch.path)
        for name in ["", ".", "..", "a/b", "nul\u{0}name", String(repeating: "n", count: 256)] {
            #expect(throws: SafePathError.self) { try directory.replaceFile(named: name, contents: [UInt8]()) }
        }
        do throws(SafePathError) {
            _ = try SecureDirectory.parent(ofFile: scratch.path + "/")
            Issue.record("a directory was taken for a file")
        } catch {
            #expect(error.code == .invalidName)
        }
    }

    @Test func readsAreBoundedAndRegularOnly() throws {
        let scratch = try Scratch()
        scratch.file("small", "12345")
        let directory = try SecureDirectory.open(scratch.path)
        #expect(try directory.readFile(named: "small", maximumBytes: 5) == Array("12345".utf8))
        do throws(SafePathError) {
            _ = try directory.readFile(named: "small", maximumBytes: 4)
            Issue.record("a file past the bound was read")
        } catch {
            #expect(error.code == .tooLarge)
        }
        #expect(symlink("small", scratch.path + "/link") == 0)
        #expect(throws: SafePathError.self) { _ = try directory.readFile(named: "link", maximumBytes: 5) }
        #expect(throws: SafePathError.self) { _ = try readTextFile(atPath: "/dev/zero", maximumBytes: 5) }
    }

    /// As root: another user's directories and links, as an attacker on a shared machine plants them.
    @Test(.enabled(if: geteuid() == 0, "needs root to make files of another user"))
    func anotherUsersLinksAndDirectoriesAreRefused() throws {
        let scratch = try Scratch()
        chmod(scratch.path, 0o1777)
        // nobody's link in a sticky, world-writable directory, pointing at root's directory.
        _ = try SecureDirectory.open(scratch.path + "/root-only", creating: 0o700)
        #expect(symlink(scratch.path + "/root-only", scratch.path + "/roam-reports") == 0)
        #expect(lchown(scratch.path + "/roam-reports", 65534, 65534) == 0)
        do throws(SafePathError) {
            _ = try SecureDirectory.open(scratch.path + "/roam-reports/run", creating: 0o755)
            Issue.record("another user's link in a world-writable directory was followed")
        } catch {
            #expect(error.code == .untrustedLink)
            #expect(error.message.contains("is a symbolic link of uid 65534"))
        }
        #expect(access(scratch.path + "/root-only/run", F_OK) != 0, "nothing was made through the link")
        // nobody's directory where a private one of the caller's is expected.
        #expect(mkdir(scratch.path + "/roam-0", 0o700) == 0)
        #expect(chown(scratch.path + "/roam-0", 65534, 65534) == 0)
        do throws(SafePathError) {
            _ = try SecureDirectory.open(scratch.path + "/roam-0", creating: 0o700, requirement: .privateToCaller)
            Issue.record("another user's directory passed as the caller's")
        } catch {
            #expect(error.code == .foreignOwner)
            #expect(error.message.contains("belongs to uid 65534"))
        }
    }
}

@Suite struct ProcessIdentityTests {
    @Test func notesParseStrictly() {
        #expect(ProcessIdentity(note: "123 456\n") == ProcessIdentity(pid: 123, startTime: 456))
        #expect(ProcessIdentity(note: "123 456") == ProcessIdentity(pid: 123, startTime: 456))
        for bad in ["0 5\n", "-1 5\n", "123\n", "123 456 7\n", "4194305 1\n", " 1 2\n", "1  2\n", "+1 2\n", "1 2\n\n", "", "1 99999999999999999999999\n"] {
            #expect(ProcessIdentity(note: bad) == nil, "\(bad.debugDescription) parsed")
        }
        let current = ProcessIdentity.current
        #expect(current.pid == getpid() && current.startTime > 0)
        #expect(ProcessIdentity(note: current.note) == current)
    }

    @Test func aPinnedProcessIsThatProcessAndNoOther() throws {
        var pid: pid_t = 0
        var arguments: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("30"), nil]
        defer { for pointer in arguments { free(pointer) } }
        #expect(posix_spawn(&pid, "/bin/sleep", nil, nil, &arguments, nil) == 0)
        let identity = try #require(ProcessIdentity.of(pid))
        // The same pid with another start time is another process: not pinned.
        #expect(PinnedProcess.pin(ProcessIdentity(pid: pid, startTime: identity.startTime + 1)) == nil)
        let pinned = try #require(PinnedProcess.pin(identity))
        #expect(pinned.isAlive)
        #expect(pinned.owner == getuid())
        #expect(pinned.signal(SIGKILL))
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        #expect(!pinned.isAlive)
        #expect(PinnedProcess.pin(identity) == nil)
        #expect(PinnedProcess.pin(ProcessIdentity(pid: 0, startTime: 0)) == nil)
    }
}

@Suite struct RunRegistryTests {
    @Test func notesAreTrustedOnlyForALiveProcessOfTheOwner() throws {
        let scratch = try Scratch()
        let registry = RunRegistry(directory: try SecureDirectory.open(scratch.path + "/runs", creating: 0o700, requirement: .privateToCaller),
                                   owner: geteuid())
        try registry.register("a1b2c3")
        #expect(registry.note(of: "a1b2c3").process?.identity == .current)
        #expect(throws: SafePathError.self) { try registry.register("a1b2c3") }
        #expect(throws: SafePathError.self) { try registry.register("../etc") }
        // Planted notes: pid 0, -1, a pid alone, garbage, a link, a dead process.
        scratch.file("runs/000000", "0 0\n")
        scratch.file("runs/ffffff", "-1 0\n")
        scratch.file("runs/abcdef", "\(getpid())\n")
        scratch.file("runs/badbad", "TOP-SECRET\n")
        #expect(symlink("/etc/passwd", scratch.path + "/runs/cafe00") == 0)
        scratch.file("runs/dead00", "1 999999999999\n")
        scratch.file("runs/notes.txt", "keep me\n")
        for run in ["000000", "ffffff", "abcdef", "badbad", "cafe00"] {
            guard case .invalid = registry.note(of: run) else {
                Issue.record("note \(run) was not refused")
                continue
            }
        }
        guard case .ended = registry.note(of: "dead00") else {
            Issue.record("a note naming init with a wrong start time was trusted")
            return
        }
        #expect(registry.liveRuns() == ["a1b2c3"])
        // Cleaning removes regular files of ended or invalid runs only: not the link, not other names.
        #expect(registry.removeEnded().sorted() == ["000000", "abcdef", "badbad", "dead00", "ffffff"])
        #expect(scratch.read("runs/notes.txt") == "keep me\n")
        var status = stat()
        #expect(lstat(scratch.path + "/runs/cafe00", &status) == 0)
        #expect(try registry.directory.entries() == ["a1b2c3", "cafe00", "notes.txt"])
        registry.unregister("a1b2c3")
        #expect(registry.liveRuns().isEmpty)
    }

    @Test func aRunIDIsSixLowercaseHexDigits() {
        #expect(RunRegistry.isRunID("0a1b2c"))
        for bad in ["0A1B2C", "0a1b2", "0a1b2c3", "0a1b2g", "０a1b2c", "", "../../"] {
            #expect(!RunRegistry.isRunID(bad))
        }
    }
}

@Suite struct OutputBudgetTests {
    @Test func filesAndTheRunAreBounded() {
        let budget = OutputBudget(perFile: 10, total: 15)
        #expect(budget.take(6, written: 0))
        #expect(!budget.take(6, written: 6), "past the file's bound")
        #expect(budget.take(upTo: 100, written: 6) == 4)
        #expect(budget.take(upTo: 100, written: 0) == 5, "what is left of the run's bound")
        #expect(budget.take(upTo: 1, written: 0) == 0)
        #expect(!budget.take(1, written: 0))
        #expect(budget.bytesWritten == 15)
        budget.noteCut("a.stdout")
        budget.noteCut("a.stdout")
        #expect(budget.filesCut == ["a.stdout"])
    }
}

@Suite struct ProcessGroupWatchdogTests {
    /// Starts `sleep 60` leading a process group of its own.
    private func sleeper() throws -> pid_t {
        var pid: pid_t = 0
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        var arguments: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("60"), nil]
        defer { for pointer in arguments { free(pointer) } }
        let result = posix_spawn(&pid, "/bin/sleep", nil, &attributes, &arguments, nil)
        guard result == 0 else { throw Errno(rawValue: result) }
        return pid
    }

    @Test func whenItsRunIsGoneItKillsTheGroupsItStillWatches() throws {
        let watchdog = ProcessGroupWatchdog()
        let watched = try sleeper(), forgotten = try sleeper()
        defer {
            kill(-forgotten, SIGKILL)
            var status: Int32 = 0
            waitpid(forgotten, &status, 0)
        }
        #expect(watchdog.watch(watched))
        #expect(watchdog.watch(forgotten))
        watchdog.forget(forgotten)
        let watchdogPID = try #require(watchdog.pid)
        // The run's end, as a killed run's would be: the pipe's writer closes.
        watchdog.stop()
        var status: Int32 = 0
        #expect(waitpid(watched, &status, 0) == watched)
        #expect(status & 0x7f == SIGKILL, "the watched group was killed")
        #expect(kill(forgotten, 0) == 0, "a forgotten group is left alone")
        #expect(kill(watchdogPID, 0) != 0, "the watchdog exited and was reaped")
    }
}
