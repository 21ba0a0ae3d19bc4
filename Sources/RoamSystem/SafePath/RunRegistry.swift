import RoamCore
import Glibc
import SystemPackage

/// Where runs note the process that owns them, so that `roam exec` finds a run's namespaces and
/// `roam cleanup` tells a crashed run's leftovers from a live run's network.
///
/// A note is a file named after the run id (six lowercase hex digits) holding `PID STARTTIME`
/// (`ProcessIdentity`). It is trusted only when every one of these holds: the registry is
/// the expected owner's and nobody else can write it; the note is a regular file of that owner,
/// not a link; it parses strictly; the process it names still runs with the same start time
/// (held by a pidfd from then on); and that process is the registry owner's. Anything else is
/// a note of a run that ended, or not a note at all.
///
/// Two registries:
/// - root's runs, built in the host's namespaces: ``rootDirectory`` (root's, mode 0755, so
///   that anyone can list them);
/// - each user's rootless runs: ``rootlessDirectory`` (the user's, mode 0700).
package final class RunRegistry: Sendable {
    /// The directory, held open.
    public let directory: SecureDirectory
    /// The uid every note and every noted process belongs to.
    public let owner: uid_t

    /// A registry in `directory`, whose notes and processes must be `owner`'s (tests make one in a
    /// directory of their own).
    package init(directory: SecureDirectory, owner: uid_t) {
        self.directory = directory
        self.owner = owner
    }

    /// What a note says.
    public enum Note: Sendable {
        /// No note of that run.
        case missing
        /// The run's process still runs; it is held until this value goes.
        case live(PinnedProcess)
        /// The process it names has ended (or is another process by now).
        case ended(ProcessIdentity)
        /// Not a note Roam wrote: why.
        case invalid(String)

        /// The process, when the run is live.
        public var process: PinnedProcess? {
            if case .live(let process) = self { return process }
            return nil
        }
    }

    /// Root's registry of runs built in the host's namespaces.
    public static let rootDirectory = "/run/roam/runs"

    /// Root's registry, made (by root) when `creating`.
    public static func root(creating: Bool) throws(SafePathError) -> RunRegistry {
        RunRegistry(directory: try SecureDirectory.open(rootDirectory, creating: creating ? 0o755 : nil, requirement: .ownedBy(0)),
                    owner: 0)
    }

    /// Where this user's rootless runs are noted:
    /// - for root on the host, `/run/roam/rootless` (never a world-writable base);
    /// - else `$XDG_RUNTIME_DIR/roam/runs`, when `$XDG_RUNTIME_DIR` is a directory of the
    ///   caller's that nobody else can reach (mode 0700);
    /// - else `/tmp/roam-UID/runs`, UID being the caller's uid on the host (or in the parent
    ///   user namespace, inside one), unless `/tmp/roam-UID` is there and is not a private
    ///   directory of the caller's (another user made it first);
    /// - then `~/.local/state/roam/runs` in the caller's home, a name nobody else can take.
    ///
    /// Every command works the choice out the same way from the same state, so a run and the
    /// commands that look for it (`roam exec`, `ctl`, `cleanup`) agree.
    public static var rootlessDirectory: String {
        if Rootless.isHostRoot { return "/run/roam/rootless" }
        if let runtime = privateRuntimeDirectory { return runtime + "/roam/runs" }
        if temporaryBaseIsUsable { return temporaryBase + "/runs" }
        return (homeDirectory ?? "~") + "/" + homeRegistryPath
    }

    /// `/tmp/roam-UID`.
    static var temporaryBase: String { "/tmp/roam-\(Rootless.outerUID)" }

    /// The registry's place under the home directory (XDG's state directory).
    static let homeRegistryPath = ".local/state/roam/runs"

    /// Whether `/tmp/roam-UID` is missing (this user may make it) or a directory, not a link, of
    /// the caller's that nobody else can reach.
    static var temporaryBaseIsUsable: Bool {
        var status = stat()
        guard lstat(temporaryBase, &status) == 0 else { return errno == ENOENT }
        return status.st_mode & S_IFMT == S_IFDIR && status.st_uid == geteuid() && status.st_mode & 0o077 == 0
    }

    /// The caller's home: `$HOME` when it is an absolute path, else the password database's.
    static var homeDirectory: String? {
        if let home = getenv("HOME").map({ String(cString: $0) }), home.hasPrefix("/"), home.count < 1024 { return home }
        guard let entry = getpwuid(Rootless.outerUID), let directory = entry.pointee.pw_dir else { return nil }
        let home = String(cString: directory)
        return home.hasPrefix("/") ? home : nil
    }

    /// `$XDG_RUNTIME_DIR` when it is an absolute path to a directory (not a link) of the
    /// caller's with mode 0700 or stricter.
    static var privateRuntimeDirectory: String? {
        guard let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/"), runtime.count < 1024 else { return nil }
        var status = stat()
        guard lstat(runtime, &status) == 0, status.st_mode & S_IFMT == S_IFDIR, status.st_uid == geteuid(), status.st_mode & 0o077 == 0 else {
            return nil
        }
        return runtime
    }

    /// This user's registry of rootless runs (``rootlessDirectory``), made when `creating`.
    /// Every directory from the private base down is checked to be the caller's and private.
    public static func rootless(creating: Bool) throws(SafePathError) -> RunRegistry {
        let mode: mode_t? = creating ? 0o700 : nil
        let runs: SecureDirectory
        if Rootless.isHostRoot {
            let roam = try SecureDirectory.open("/run/roam", creating: creating ? 0o755 : nil, requirement: .ownedBy(0))
            runs = try roam.directory(named: "rootless", creating: mode, requirement: .privateToCaller)
        } else if let runtime = privateRuntimeDirectory {
            let base = try SecureDirectory.open(runtime, requirement: .privateToCaller)
            let roam = try base.directory(named: "roam", creating: mode, requirement: .privateToCaller)
            runs = try roam.directory(named: "runs", creating: mode, requirement: .privateToCaller)
        } else if temporaryBaseIsUsable {
            let temporary = try SecureDirectory.open("/tmp")
            let base = try temporary.directory(named: "roam-\(Rootless.outerUID)", creating: mode, requirement: .privateToCaller)
            runs = try base.directory(named: "runs", creating: mode, requirement: .privateToCaller)
        } else {
            guard let home = homeDirectory else {
                throw SafePathError(.foreignOwner, path: temporaryBase, message: "\(temporaryBase) belongs to another user, and this user has no "
                    + "home directory to keep runs in; set XDG_RUNTIME_DIR to a directory of yours with mode 0700")
            }
            // The home and the XDG directories above the registry: the caller's, written by nobody else.
            var directory = try SecureDirectory.open(home, requirement: .ownedByCaller)
            let components = homeRegistryPath.split(separator: "/").map(String.init)
            for (index, name) in components.enumerated() {
                let last = index >= components.count - 2
                directory = try directory.directory(named: name, creating: mode, requirement: last ? .privateToCaller : .ownedByCaller)
            }
            runs = directory
        }
        return RunRegistry(directory: runs, owner: geteuid())
    }

    /// Whether `name` is a run id: six lowercase hex digits.
    public static func isRunID(_ name: some StringProtocol) -> Bool {
        name.utf8.count == 6 && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Notes that `identity` (this process by default) owns `runID`; a note of that run already
    /// there is an error.
    public func register(_ runID: String, as identity: ProcessIdentity = .current) throws(SafePathError) {
        guard Self.isRunID(runID) else {
            throw SafePathError(.invalidName, path: runID, message: "'\(escapedForMessage(runID))' is not a run id")
        }
        let file = try directory.createFile(named: runID, mode: 0o644, replacing: false)
        defer { try? file.close() }
        do {
            try writeAll(identity.note.utf8, to: file)
        } catch {
            throw .system("write", directory.child(runID), error)
        }
    }

    /// Removes the note of `runID`, through the directory's descriptor; names that are not run
    /// ids are never touched.
    public func unregister(_ runID: String) {
        guard Self.isRunID(runID) else { return }
        try? directory.removeFile(named: runID)
    }

    /// The run ids noted here; other names are left out.
    public func runIDs() -> [String] {
        ((try? directory.entries()) ?? []).filter { Self.isRunID($0) }
    }

    /// What the note of `runID` says, checked as the type's documentation says.
    public func note(of runID: String) -> Note {
        guard Self.isRunID(runID) else { return .invalid("'\(escapedForMessage(runID))' is not a run id") }
        guard let status = directory.status(of: runID) else { return .missing }
        guard status.mode & S_IFMT == S_IFREG, status.links == 1 else { return .invalid("\(directory.child(runID)) is not a regular file") }
        guard status.owner == owner else { return .invalid("\(directory.child(runID)) belongs to uid \(status.owner), not uid \(owner)") }
        guard let bytes = try? directory.readFile(named: runID, maximumBytes: 64),
              let identity = ProcessIdentity(note: String(decoding: bytes, as: UTF8.self)) else {
            return .invalid("\(directory.child(runID)) does not hold a process and its start time")
        }
        guard let process = PinnedProcess.pin(identity) else { return .ended(identity) }
        guard process.owner == owner else {
            return .invalid("\(directory.child(runID)) names process \(identity.pid), which belongs to uid \(process.owner), not uid \(owner)")
        }
        return .live(process)
    }

    /// The runs whose process still runs.
    public func liveRuns() -> [String] {
        runIDs().filter { note(of: $0).process != nil }
    }

    /// Removes the notes of runs that ended and notes that are not Roam's (only names that are
    /// run ids, only regular files, through the directory's descriptor); returns their names.
    public func removeEnded() -> [String] {
        var removed: [String] = []
        for runID in runIDs() {
            switch note(of: runID) {
            case .live, .missing: continue
            case .ended, .invalid:
                guard let status = directory.status(of: runID), status.mode & S_IFMT == S_IFREG else { continue }
                unregister(runID)
                removed.append(runID)
            }
        }
        return removed
    }
}
