import Glibc

extension NetworkNamespace {
    /// Sets network sysctls of this namespace, such as `net.ipv4.ip_forward` = `1`.
    ///
    /// `/proc/sys/net` shows the network namespace of the thread that opens it, so the files are
    /// written from a thread pinned to this namespace; nothing changes anywhere else.
    public func setSysctls(_ values: KeyValuePairs<String, String>) throws(NetlinkError) {
        let pairs = Array(values)
        for (key, _) in pairs where !key.hasPrefix("net.") {
            throw NetlinkError(.errno(EINVAL), operation: "sysctl \(key)", hint: "only net.* sysctls belong to a network namespace")
        }
        try onPinnedThread { () -> Result<Void, NetlinkError> in
            for (key, value) in pairs {
                if let error = Sysctl.write(key, value) { return .failure(error) }
            }
            return .success(())
        }
    }

    /// Reads a network sysctl of this namespace.
    public func sysctl(_ key: String) throws(NetlinkError) -> String {
        try onPinnedThread { Sysctl.read(key) }
    }

    /// Runs `body` on a thread inside this namespace. (Results rather than typed-throwing
    /// closures: Swift 6.3 crashes reabstracting those through `perform`.)
    private func onPinnedThread<T>(_ body: () -> Result<T, NetlinkError>) throws(NetlinkError) -> T {
        let result: Result<T, NetlinkError>
        do {
            result = try perform(body)
        } catch let error as NetlinkError {
            throw error
        } catch {
            throw NetlinkError(.errno(EIO), operation: "work in \(self)", hint: "\(error)")
        }
        return try result.get()
    }
}

private enum Sysctl {
    static func path(_ key: String) -> String { "/proc/sys/" + String(key.map { $0 == "." ? "/" : $0 }) }

    static func write(_ key: String, _ value: String) -> NetlinkError? {
        let path = path(key)
        let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return NetlinkError.posix("open \(path)") }
        defer { Glibc.close(fd) }
        // No newline, and partial writes continued: some handlers report fewer bytes than they
        // took (IPv6's ignore_routes_with_linkdown returns 1 on kernel 6.1) and reject a write
        // of what is left.
        let bytes = Array(value.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            let code = errno
            if written < 0 && code == EINTR { continue }
            guard written > 0 else { return NetlinkError.posix("write \(value) to \(path)", errno: written < 0 ? code : EIO) }
            offset += written
        }
        return nil
    }

    static func read(_ key: String) -> Result<String, NetlinkError> {
        let path = path(key)
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(NetlinkError.posix("open \(path)")) }
        defer { Glibc.close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = Glibc.read(fd, &buffer, buffer.count)
        guard count >= 0 else { return .failure(NetlinkError.posix("read \(path)")) }
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        return .success(text.hasSuffix("\n") ? String(text.dropLast()) : text)
    }
}
