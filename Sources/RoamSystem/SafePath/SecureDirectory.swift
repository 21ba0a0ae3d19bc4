import RoamCore
import CRoamLinux
import Glibc
import SystemPackage

/// A directory held open by descriptor, through which Roam creates, replaces, reads and removes
/// files without following a link that another user could have planted.
///
/// Roam runs as root and as ordinary users on shared machines, and writes reports, exports and
/// registry notes into places other users may write too (`/tmp`, a shared checkout). A path is
/// therefore never handed to `open` whole:
///
/// - it is resolved one component at a time from `/` (or the working directory), each opened
///   with `O_NOFOLLOW`; a symbolic link on the way is followed only when it is the caller's or
///   root's, or (for a caller other than root) its directory's owner made it in a directory
///   nobody else can write (so that a link planted in `/tmp` by another user is refused,
///   whatever `fs.protected_symlinks` says, and root follows no user's link at all);
/// - missing directories are made with `mkdirat` relative to their parent's descriptor, and the
///   directory opened afterwards is checked to be the caller's;
/// - owner and mode are checked on the opened descriptor, never on a path;
/// - a file is written as a new inode (`O_CREAT | O_EXCL | O_NOFOLLOW`), or as a temporary file
///   renamed over the old one, so that neither a symbolic nor a hard link at the name redirects
///   the write; anything but a regular file at the name (a link, a FIFO, a device, a directory)
///   is refused rather than replaced or opened;
/// - files are read non-blocking, without following a link, and only if regular.
///
/// Modelled on runc's filepath-securejoin and systemd-tmpfiles.
package final class SecureDirectory: Sendable {
    /// Who may own a directory, and which mode bits it must not have.
    public struct Requirement: Sendable, Hashable {
        enum Owner: Sendable, Hashable { case anyone, caller, user(uid_t) }
        let owner: Owner
        let forbiddenMode: mode_t

        /// Any directory.
        public static let none = Requirement(owner: .anyone, forbiddenMode: 0)
        /// The caller's (effective uid), and nobody else may write it.
        public static let ownedByCaller = Requirement(owner: .caller, forbiddenMode: 0o022)
        /// The caller's, and nobody else may read, search or write it (a registry of one user).
        public static let privateToCaller = Requirement(owner: .caller, forbiddenMode: 0o077)
        /// `uid`'s, and nobody else may write it (root's registry, read by anyone).
        public static func ownedBy(_ uid: uid_t) -> Requirement { Requirement(owner: .user(uid), forbiddenMode: 0o022) }
    }

    /// The path as the caller named it, for messages.
    public let path: String
    /// An `O_PATH` descriptor of the directory.
    private let descriptor: Int32
    /// The directory's descriptor, for calls relative to it (binding a socket in it).
    package var rawDescriptor: Int32 { descriptor }
    /// Whether the last component was made by this open.
    public let wasCreated: Bool
    /// The directory's owner and mode bits, from its descriptor.
    public let owner: uid_t
    public let mode: mode_t
    /// The directory's device and inode: which directory this is.
    public let device: UInt64
    public let inode: UInt64

    private init(path: String, descriptor: Int32, wasCreated: Bool, status: stat) {
        self.path = path
        self.descriptor = descriptor
        self.wasCreated = wasCreated
        owner = status.st_uid
        mode = status.st_mode & 0o7777
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }

    deinit { close(descriptor) }

    /// The most symbolic links one path may go through, as Linux allows (`MAXSYMLINKS`).
    public static let maximumLinks = 40

    // MARK: - Opening

    /// Opens the directory at `path` (relative paths start at the working directory), making
    /// the missing ones with `mode` when `mode` is given, and checks `requirement` on it.
    public static func open(_ path: String, creating mode: mode_t? = nil, requirement: Requirement = .none) throws(SafePathError) -> SecureDirectory {
        try checkPath(path)
        let start = path.hasPrefix("/") ? "/" : "."
        let base = Glibc.open(start, ROAM_O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard base >= 0 else { throw .system("open", start, .current) }
        return try walk(from: base, basePath: path.hasPrefix("/") ? "/" : nil, components: path, display: path, creating: mode,
                        requirement: requirement)
    }

    /// Opens the directory `name` inside this one (one component), making it with `mode` when
    /// `mode` is given and it is missing, and checks `requirement` on it. A link there is
    /// followed only as ``open(_:creating:requirement:)`` follows one.
    public func directory(named name: String, creating mode: mode_t? = nil, requirement: Requirement = .none) throws(SafePathError) -> SecureDirectory {
        try Self.checkName(name, in: path)
        let base = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard base >= 0 else { throw .system("open", path, .current) }
        return try Self.walk(from: base, basePath: path, components: name, display: child(name), creating: mode, requirement: requirement)
    }

    /// The directory of the file at `path` and the file's name in it, for a writer given a file
    /// path (`-o FILE`). The directory must exist.
    public static func parent(ofFile path: String) throws(SafePathError) -> (directory: SecureDirectory, name: String) {
        try checkPath(path)
        guard let slash = path.lastIndex(of: "/") else {
            try checkName(path, in: ".")
            return (try open("."), path)
        }
        let name = String(path[path.index(after: slash)...])
        let directory = String(path[..<slash])
        guard !name.isEmpty, name != ".", name != ".." else {
            throw SafePathError(.invalidName, path: path, message: "\(escapedForMessage(path, maximumLength: 256)) names a directory, not a file: name the file to write")
        }
        return (try open(directory.isEmpty ? "/" : directory), name)
    }

    /// The directory holding the file at `path` and the file's name in it, with a symbolic link
    /// at the last component followed as links on the way are (only when trusted, see
    /// ``open(_:creating:requirement:)``), for a reader of a file the user named by a path
    /// (a trace). The file itself is not opened.
    public static func resolveFile(_ path: String) throws(SafePathError) -> (directory: SecureDirectory, name: String) {
        var (directory, name) = try parent(ofFile: path)
        for _ in 0..<maximumLinks {
            var status = stat()
            var parentStatus = stat()
            guard fstatat(directory.descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0,
                  status.st_mode & S_IFMT == S_IFLNK, fstat(directory.descriptor, &parentStatus) == 0 else { return (directory, name) }
            let here = directory.child(name)
            guard trusts(link: status, in: parentStatus) else {
                throw SafePathError(.untrustedLink, path: here, message: "\(escapedForMessage(here, maximumLength: 256)) is a symbolic link "
                    + "of uid \(status.st_uid) in a directory other users can write; Roam follows no link another user could have "
                    + "planted: remove it, or name the real path")
            }
            let target = try readLink(in: directory.descriptor, name, here)
            let next = target.hasPrefix("/") ? target : directory.child(target)
            (directory, name) = try parent(ofFile: next)
        }
        throw SafePathError(.tooManyLinks, path: path, message: "\(escapedForMessage(path, maximumLength: 256)): more than \(maximumLinks) symbolic links")
    }

    /// Resolves `components` from the open directory `base` (which it takes over).
    private static func walk(from base: Int32, basePath: String?, components: String, display: String, creating mode: mode_t?,
                             requirement: Requirement) throws(SafePathError) -> SecureDirectory {
        var current = base
        defer { if current >= 0 { close(current) } }
        var currentStatus = stat()
        guard fstat(current, &currentStatus) == 0 else { throw .system("open", display, .current) }
        // What has been walked so far, for messages.
        var walked = basePath ?? ""
        var pending = Array(components.split(separator: "/", omittingEmptySubsequences: true).reversed())
        var links = 0
        var createdLast = false
        while let component = pending.popLast() {
            createdLast = false
            if component == "." { continue }
            let name = String(component)
            let here = walked.isEmpty ? name : (walked == "/" ? "/" + name : walked + "/" + name)
            if name == ".." {
                let parent = openat(current, "..", ROAM_O_PATH | O_DIRECTORY | O_CLOEXEC)
                guard parent >= 0 else { throw .system("open", here, .current) }
                close(current)
                current = parent
                guard fstat(current, &currentStatus) == 0 else { throw .system("open", here, .current) }
                walked = here
                continue
            }
            var status = stat()
            var made = false
            if fstatat(current, name, &status, AT_SYMLINK_NOFOLLOW) != 0 {
                let error = Errno.current
                guard error == .noSuchFileOrDirectory, let mode else {
                    if error == .noSuchFileOrDirectory {
                        throw SafePathError(.system, path: here, errno: error,
                                            message: "\(escapedForMessage(here, maximumLength: 256)): no such directory")
                    }
                    throw .system("open", here, error)
                }
                if mkdirat(current, name, mode) == 0 {
                    made = true
                } else if errno != EEXIST {
                    throw .system("create", here, .current)
                }
                guard fstatat(current, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { throw .system("open", here, .current) }
            }
            switch status.st_mode & S_IFMT {
            case S_IFLNK:
                guard trusts(link: status, in: currentStatus) else {
                    throw SafePathError(.untrustedLink, path: here, message: "\(escapedForMessage(here, maximumLength: 256)) is a symbolic link "
                        + "of uid \(status.st_uid) in a directory other users can write; Roam follows no link another user could have "
                        + "planted: remove it, or name the real path")
                }
                links += 1
                guard links <= maximumLinks else {
                    throw SafePathError(.tooManyLinks, path: display, message: "\(escapedForMessage(display, maximumLength: 256)): more than "
                        + "\(maximumLinks) symbolic links")
                }
                let target = try readLink(in: current, name, here)
                if target.hasPrefix("/") {
                    let root = Glibc.open("/", ROAM_O_PATH | O_DIRECTORY | O_CLOEXEC)
                    guard root >= 0 else { throw .system("open", "/", .current) }
                    close(current)
                    current = root
                    guard fstat(current, &currentStatus) == 0 else { throw .system("open", "/", .current) }
                    walked = "/"
                }
                pending.append(contentsOf: target.split(separator: "/", omittingEmptySubsequences: true).reversed())
            case S_IFDIR:
                let next = openat(current, name, ROAM_O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard next >= 0 else { throw .system("open", here, .current) }
                var opened = stat()
                guard fstat(next, &opened) == 0, opened.st_dev == status.st_dev, opened.st_ino == status.st_ino else {
                    close(next)
                    throw SafePathError(.system, path: here, message: "\(escapedForMessage(here, maximumLength: 256)) changed while Roam "
                        + "opened it (another process is replacing it); try again")
                }
                // A directory this call made is the caller's: one that is not was put there by
                // someone else between mkdirat and the open.
                if made, opened.st_uid != geteuid() {
                    close(next)
                    throw SafePathError(.foreignOwner, path: here, message: "\(escapedForMessage(here, maximumLength: 256)) was replaced by "
                        + "another user's directory while Roam made it")
                }
                close(current)
                current = next
                currentStatus = opened
                createdLast = made
                walked = here
            default:
                throw SafePathError(.notDirectory, path: here, message: "\(escapedForMessage(here, maximumLength: 256)) is \(kindName(status.st_mode)), not a directory")
            }
        }
        try check(requirement, currentStatus, display)
        let result = SecureDirectory(path: display, descriptor: current, wasCreated: createdLast, status: currentStatus)
        current = -1
        return result
    }

    /// Whether a symbolic link may be followed by `caller`: the caller's or root's; for a caller
    /// other than root, also one made by its directory's owner in a directory no one else can
    /// write. Root follows no link another user made, wherever it is: a user's `roam-reports ->
    /// /etc/cron.d` in the user's own project would steer root's writes. (The kernel's
    /// `fs.protected_symlinks` makes a similar rule for sticky directories only, and only when
    /// it is set.)
    static func trusts(link: stat, in directory: stat, caller: uid_t = geteuid()) -> Bool {
        if link.st_uid == caller || link.st_uid == 0 { return true }
        guard caller != 0 else { return false }
        return link.st_uid == directory.st_uid && directory.st_mode & 0o022 == 0
    }

    private static func check(_ requirement: Requirement, _ status: stat, _ display: String) throws(SafePathError) {
        let shown = escapedForMessage(display, maximumLength: 256)
        switch requirement.owner {
        case .anyone: break
        case .caller:
            guard status.st_uid == geteuid() else {
                throw SafePathError(.foreignOwner, path: display, message: "\(shown) belongs to uid \(status.st_uid), not to this user "
                    + "(uid \(geteuid())); another user made it first")
            }
        case .user(let uid):
            guard status.st_uid == uid else {
                throw SafePathError(.foreignOwner, path: display, message: "\(shown) belongs to uid \(status.st_uid), not uid \(uid)")
            }
        }
        if status.st_mode & requirement.forbiddenMode != 0 {
            throw SafePathError(.writableByOthers, path: display, message: "\(shown) has mode \(String(status.st_mode & 0o7777, radix: 8)): "
                + "users other than its owner can \(requirement.forbiddenMode & 0o044 != 0 ? "reach" : "write") it; "
                + "run `chmod go-rwx \(shown)` (or remove it) and try again")
        }
    }

    private static func readLink(in directory: Int32, _ name: String, _ display: String) throws(SafePathError) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlinkat(directory, name, &buffer, buffer.count - 1)
        guard count >= 0 else { throw .system("read the link", display, .current) }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: - Files

    /// A new file `name` in this directory, open for writing. It is always a new inode: a
    /// regular file of that name is replaced (unlinked first), and anything else there (a
    /// symbolic link, a FIFO, a device, a directory) is refused, so that nothing planted at the
    /// name redirects or blocks the write. With `replacing` false, any existing entry is an
    /// error (`EEXIST`).
    public func createFile(named name: String, mode: mode_t = 0o644, replacing: Bool = true) throws(SafePathError) -> FileDescriptor {
        try Self.checkName(name, in: path)
        for _ in 0..<8 {
            let fd = openat(descriptor, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode)
            if fd >= 0 { return FileDescriptor(rawValue: fd) }
            guard errno == EEXIST, replacing else { throw .system("create", child(name), .current) }
            try removeReplaceable(name)
        }
        throw SafePathError(.system, path: child(name), message: "cannot create \(shown(name)): another process keeps making it")
    }

    /// A new file with no name in this directory, open for reading and writing, readable only by
    /// its owner (`O_TMPFILE`): it disappears when its descriptor is closed, even when the
    /// process is killed, and nothing at any name is touched. Nil where the file system has no
    /// unnamed files (`EOPNOTSUPP`, `EISDIR` on old kernels) or refuses one.
    package func createUnnamedFile() -> FileDescriptor? {
        // O_TMPFILE is a macro Swift does not import: __O_TMPFILE | O_DIRECTORY.
        let unnamed: Int32 = 0o20000000 | O_DIRECTORY
        let fd = openat(descriptor, ".", unnamed | O_RDWR | O_NOCTTY | O_CLOEXEC, 0o600)
        return fd >= 0 ? FileDescriptor(rawValue: fd) : nil
    }

    /// Writes `bytes` as the whole content of `name`, atomically (a temporary file in this
    /// directory renamed over it): a reader sees the old file or the new one, never a part.
    /// Anything but a regular file at the name is refused.
    public func replaceFile(named name: String, contents bytes: some Collection<UInt8>, mode: mode_t = 0o644) throws(SafePathError) {
        try Self.checkName(name, in: path)
        try checkReplaceable(name)
        var temporary = ""
        var fd: Int32 = -1
        for _ in 0..<8 {
            temporary = ".roam-\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
            fd = openat(descriptor, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw .system("create a file in", path, .current) }
        let file = FileDescriptor(rawValue: fd)
        // Closed exactly once: a second close could close a descriptor another thread just got.
        var isOpen = true
        do throws(SafePathError) {
            do {
                try writeAll(bytes, to: file)
            } catch {
                throw SafePathError.system("write", child(name), error)
            }
            isOpen = false
            try? file.close()
            // Checked again just before the rename: something planted meanwhile is refused too.
            try checkReplaceable(name)
            guard renameat(descriptor, temporary, descriptor, name) == 0 else {
                let error = Errno.current
                if error == .notPermitted || error == .permissionDenied { throw foreignFile(name, error) }
                throw SafePathError.system("write", child(name), error)
            }
        } catch {
            if isOpen { try? file.close() }
            unlinkat(descriptor, temporary, 0)
            throw error
        }
    }

    /// Writes `bytes` as the whole content of the existing regular file `name`, in place: the
    /// same inode, so that a bind mount of it shows the new content, and closed after, so that a
    /// watcher sees `IN_CLOSE_WRITE`. Only a regular file of the caller's is written; a link,
    /// FIFO or device at the name is refused without blocking.
    public func rewriteFile(named name: String, contents bytes: some Collection<UInt8>) throws(SafePathError) {
        try Self.checkName(name, in: path)
        let fd = openat(descriptor, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { throw .system("open", child(name), .current) }
        let file = FileDescriptor(rawValue: fd)
        defer { try? file.close() }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw .system("inspect", child(name), .current) }
        guard status.st_mode & S_IFMT == S_IFREG, status.st_uid == geteuid(), status.st_nlink == 1 else {
            throw SafePathError(.system, path: child(name), message: "\(shown(name)) is not a regular file of the caller's with one name; not written")
        }
        do {
            _ = try systemCall { ftruncate(fd, 0) }
            try writeAll(bytes, to: file)
        } catch {
            throw SafePathError.system("write", child(name), error)
        }
    }

    /// The content of the regular file `name`, at most `maximumBytes` long; a link, a FIFO or a
    /// device at the name is refused without being opened for reading.
    public func readFile(named name: String, maximumBytes: Int) throws(SafePathError) -> [UInt8] {
        let (file, _) = try openRegularFile(named: name)
        defer { try? file.close() }
        return try readRegularFile(file.rawValue, display: child(name), maximumBytes: maximumBytes)
    }

    /// The regular file `name`, open for reading, for a caller that reads it in pieces (a file
    /// too large to hold whole); a link, a FIFO or a device at the name is refused as
    /// ``readFile(named:maximumBytes:)`` refuses it. Its size comes with it.
    public func openRegularFile(named name: String) throws(SafePathError) -> (file: FileDescriptor, size: Int) {
        try Self.checkName(name, in: path)
        let fd = openat(descriptor, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            let error = Errno.current
            if error == .tooManySymbolicLinkLevels {
                throw SafePathError(.notRegularFile, path: child(name), message: "\(shown(name)) is a symbolic link; Roam reads it only as a regular file")
            }
            throw .system("read", child(name), error)
        }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            let error = Errno.current
            close(fd)
            throw .system("read", child(name), error)
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw SafePathError(.notRegularFile, path: child(name), message: "\(shown(name)) is "
                + "\(Self.kindName(status.st_mode)); only regular files are read")
        }
        return (FileDescriptor(rawValue: fd), Int(status.st_size))
    }

    /// Whether this process may create files here (its effective ids, `faccessat` with
    /// `AT_EACCESS`).
    public var isWritable: Bool { faccessat(descriptor, ".", W_OK, AT_EACCESS) == 0 }

    /// Whether `name` exists here (not following a link).
    public func contains(_ name: String) -> Bool {
        var status = stat()
        return fstatat(descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// The owner and type of `name` here (not following a link), or nil when it is missing.
    public func status(of name: String) -> (owner: uid_t, mode: mode_t, links: UInt64)? {
        var status = stat()
        guard fstatat(descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return (status.st_uid, status.st_mode, UInt64(status.st_nlink))
    }

    /// Removes the file `name` (not a directory); a missing one is not an error.
    public func removeFile(named name: String) throws(SafePathError) {
        try Self.checkName(name, in: path)
        guard unlinkat(descriptor, name, 0) == 0 || errno == ENOENT else { throw .system("remove", child(name), .current) }
    }

    /// Removes the empty directory `name` in this one (never following a link).
    public func removeDirectory(named name: String) throws(SafePathError) {
        try Self.checkName(name, in: path)
        guard unlinkat(descriptor, name, AT_REMOVEDIR) == 0 || errno == ENOENT else { throw .system("remove", child(name), .current) }
    }

    /// The names in this directory, `.` and `..` left out, sorted.
    public func entries() throws(SafePathError) -> [String] {
        let fd = openat(descriptor, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0, let listing = fdopendir(fd) else {
            let error = Errno.current
            throw .system("list", path, error)
        }
        defer { closedir(listing) }
        var names: [String] = []
        while let entry = readdir(listing) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// `path/name`, for messages.
    public func child(_ name: String) -> String {
        path == "/" ? "/" + name : (path.hasSuffix("/") ? path + name : path + "/" + name)
    }

    private func shown(_ name: String) -> String { escapedForMessage(child(name), maximumLength: 256) }

    /// Refuses anything but a regular file (or nothing) at `name`.
    private func checkReplaceable(_ name: String) throws(SafePathError) {
        var status = stat()
        guard fstatat(descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return }
            throw .system("write", child(name), .current)
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw SafePathError(.notRegularFile, path: child(name), message: "\(shown(name)) is \(Self.kindName(status.st_mode)); Roam writes "
                + "only regular files and replaces nothing else: remove it, or write elsewhere")
        }
    }

    /// Unlinks a regular file at `name` so that a new one can be made; refuses anything else.
    private func removeReplaceable(_ name: String) throws(SafePathError) {
        try checkReplaceable(name)
        guard unlinkat(descriptor, name, 0) == 0 || errno == ENOENT else {
            let error = Errno.current
            if error == .notPermitted || error == .permissionDenied { throw foreignFile(name, error) }
            throw .system("replace", child(name), error)
        }
    }

    private func foreignFile(_ name: String, _ error: Errno) -> SafePathError {
        let owner = status(of: name).map { " (it belongs to uid \($0.owner))" } ?? ""
        return SafePathError(.foreignOwner, path: child(name), errno: error, message: "cannot replace \(shown(name))\(owner): \(error); "
            + "remove it, or write elsewhere")
    }

    // MARK: - Names

    private static func checkPath(_ path: String) throws(SafePathError) {
        guard !path.isEmpty, !path.utf8.contains(0), path.utf8.count < Int(PATH_MAX) else {
            throw SafePathError(.invalidName, path: path, message: "'\(escapedForMessage(path, maximumLength: 256))' is not a path")
        }
    }

    static func checkName(_ name: String, in directory: String) throws(SafePathError) {
        guard !name.isEmpty, name != ".", name != "..", !name.utf8.contains(0), !name.contains("/"), name.utf8.count <= Int(NAME_MAX) else {
            throw SafePathError(.invalidName, path: name, message: "'\(escapedForMessage(name, maximumLength: 256))' is not a file name in "
                + escapedForMessage(directory, maximumLength: 256))
        }
    }

    static func kindName(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFLNK: "a symbolic link"
        case S_IFDIR: "a directory"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFIFO: "a FIFO (named pipe)"
        case S_IFSOCK: "a socket"
        case S_IFREG: "a regular file"
        default: "not a regular file"
        }
    }
}

/// Reads the regular file open as `fd`, at most `maximumBytes` of it: anything but a regular
/// file is refused (``SafePathError/Code-swift.struct/notRegularFile``), a longer one too
/// (``SafePathError/Code-swift.struct/tooLarge``).
package func readRegularFile(_ fd: Int32, display: String, maximumBytes: Int) throws(SafePathError) -> [UInt8] {
    var status = stat()
    guard fstat(fd, &status) == 0 else { throw .system("read", display, .current) }
    guard status.st_mode & S_IFMT == S_IFREG else {
        throw SafePathError(.notRegularFile, path: display, message: "\(escapedForMessage(display, maximumLength: 256)) is "
            + "\(SecureDirectory.kindName(status.st_mode)); only regular files are read")
    }
    let limit = max(0, maximumBytes)
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let wanted = min(chunk.count, limit + 1 - bytes.count)
        let count: Int
        do {
            count = try systemCall { read(fd, &chunk, wanted) }
        } catch {
            throw .system("read", display, error)
        }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[..<count])
        if bytes.count > limit {
            throw SafePathError(.tooLarge, path: display, message: "\(escapedForMessage(display, maximumLength: 256)) is larger than "
                + "\(byteCountDescription(limit)), the most Roam reads from such a file")
        }
    }
    return bytes
}

/// Reads the regular file at `path` (a path the user named: links are followed) as UTF-8 text,
/// at most `maximumBytes`: a FIFO, a device or a directory is refused at once (opened
/// non-blocking, so that a FIFO without a writer does not hang), a longer file too.
package func readTextFile(atPath path: String, maximumBytes: Int) throws(SafePathError) -> String {
    String(decoding: try readRegularFile(atPath: path, maximumBytes: maximumBytes), as: UTF8.self)
}

/// The bytes of the regular file at `path`, as ``readTextFile(atPath:maximumBytes:)`` reads them.
package func readRegularFile(atPath path: String, maximumBytes: Int) throws(SafePathError) -> [UInt8] {
    try readRegularFileAndOwner(atPath: path, maximumBytes: maximumBytes).bytes
}

/// The bytes of the regular file at `path` and its owner, from the one descriptor read.
package func readRegularFileAndOwner(atPath path: String, maximumBytes: Int) throws(SafePathError) -> (bytes: [UInt8], owner: uid_t) {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
    guard fd >= 0 else {
        let error = Errno.current
        let shown = escapedForMessage(path, maximumLength: 256)
        let reason = error == .noSuchFileOrDirectory ? "no such file" : "\(error)"
        throw SafePathError(.system, path: path, errno: error, message: "cannot read \(shown): \(reason)")
    }
    defer { close(fd) }
    let bytes = try readRegularFile(fd, display: path, maximumBytes: maximumBytes)
    var status = stat()
    fstat(fd, &status)
    return (bytes, status.st_uid)
}

/// Writes `bytes` as the whole content of the file at `path` (its directory must exist),
/// atomically and without following a link at the name (`SecureDirectory`).
package func replaceFile(atPath path: String, contents bytes: some Collection<UInt8>) throws(SafePathError) {
    let (directory, name) = try SecureDirectory.parent(ofFile: path)
    try directory.replaceFile(named: name, contents: bytes)
}
