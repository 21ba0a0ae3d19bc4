import CRoamLinux
import Glibc
import RoamSystem

extension NetworkNamespace {
    /// Creates a new, empty network namespace named `name` under `/run/netns`, the way
    /// `ip netns add` does, and returns it. Only the new namespace's loopback exists in it
    /// (down, as the kernel creates it).
    ///
    /// The calling thread's namespace does not change: the namespace is made on a pinned
    /// thread and kept alive by a bind mount.
    ///
    /// - Throws: ``NetlinkError`` with `EEXIST` when the name is taken, `EPERM` without root.
    @discardableResult
    public static func create(named name: String) throws(NetlinkError) -> NetworkNamespace {
        let namespace = try NetworkNamespace.named(name)
        let path = namespace.path!
        try prepareRunDirectory()

        let fd = Glibc.open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0)
        if fd < 0 {
            let error = NetlinkError.posix("create \(path)")
            if error.isAlreadyExists { throw error.withHint("a network namespace named '\(name)' exists already") }
            if error.isPermissionDenied { throw error.withHint("creating a network namespace requires root") }
            throw error
        }
        Glibc.close(fd)

        let outcome = UncheckedBox<NetlinkError?>(nil)
        let thread = try PinnedThread(name: "roam-netns-add") {
            do throws(NetlinkError) {
                try systemCall("unshare(CLONE_NEWNET)") { unshare(CLONE_NEWNET) }
                try systemCall("mount --bind /proc/thread-self/ns/net \(path)") {
                    mount("/proc/thread-self/ns/net", path, "none", UInt(MS_BIND), nil)
                }
            } catch {
                outcome.value = error
            }
        }
        thread.join()
        if let error = outcome.value {
            _ = unlink(path)
            if error.isPermissionDenied { throw error.withHint("creating a network namespace requires root") }
            throw error
        }
        return namespace
    }

    /// Deletes a named namespace: unmounts and removes its file under `/run/netns`.
    ///
    /// The kernel frees the namespace, and destroys the interfaces in it, once no process,
    /// thread or open file refers to it any more.
    public func delete() throws(NetlinkError) {
        guard let path, name != nil else {
            throw NetlinkError(.errno(EINVAL), operation: "delete \(description)", hint: "only a named network namespace can be deleted")
        }
        if umount2(path, Int32(MNT_DETACH)) != 0 {
            let error = NetlinkError.posix("umount \(path)")
            if error.errno == ENOENT { throw error.withHint("no network namespace named '\(name!)'") }
            if error.errno != EINVAL { throw error } // EINVAL: not a mount point, remove the stray file
        }
        try systemCall("unlink(\(path))") { unlink(path) }
    }

    /// The names of the namespaces under `/run/netns`, sorted.
    public static func list() -> [String] {
        guard let directory = opendir(runDirectory) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// Makes `/run/netns` exist and be a shared mount, so that namespace mounts propagate to
    /// other mount namespaces (the same steps as iproute2).
    private static func prepareRunDirectory() throws(NetlinkError) {
        if mkdir(runDirectory, 0o755) != 0 && errno != EEXIST {
            let error = NetlinkError.posix("mkdir \(runDirectory)")
            throw error.isPermissionDenied ? error.withHint("creating a network namespace requires root") : error
        }
        var boundItself = false
        while mount("", runDirectory, "none", UInt(MS_SHARED | MS_REC), nil) != 0 {
            let error = NetlinkError.posix("mount --make-shared \(runDirectory)")
            guard error.errno == EINVAL, !boundItself else {
                throw error.isPermissionDenied ? error.withHint("creating a network namespace requires root") : error
            }
            try systemCall("mount --bind \(runDirectory)") {
                mount(runDirectory, runDirectory, "none", UInt(MS_BIND | MS_REC), nil)
            }
            boundItself = true
        }
    }
}
