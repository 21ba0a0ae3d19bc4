#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small HTTP/1.1 client over POSIX sockets, the kind an app or an SDK carries: one GET per
/// connection, a timeout for the connection and for every read, and retries with backoff.
/// Its sockets are made on the calling thread (so, under RoamTesting, inside the node).
public struct HTTPClient: Sendable {
    public struct Response: Sendable {
        public var status: Int
        public var body: [UInt8]
        /// How many attempts it took (1: the first one worked).
        public var attempts: Int
    }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// How long a connect or a read may wait without progress.
    public var timeout: Duration
    /// Attempts in all, the first included.
    public var attempts: Int
    /// Wait before the second attempt; doubles with each further one.
    public var backoff: Duration

    public init(timeout: Duration = .seconds(1), attempts: Int = 4, backoff: Duration = .milliseconds(100)) {
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff
    }

    /// GETs `path` from `host` (an IPv4 or IPv6 literal) and `port`, retrying on failure.
    public func get(host: String, port: UInt16, path: String) async throws -> Response {
        var delay = backoff
        var lastError: any Error = Failure(description: "no attempt made")
        for attempt in 1...max(1, attempts) {
            do {
                var response = try fetchOnce(host: host, port: port, path: path)
                response.attempts = attempt
                return response
            } catch {
                lastError = error
                if attempt < attempts {
                    try await Task.sleep(for: delay)
                    delay *= 2
                }
            }
        }
        throw lastError
    }

    private var timeoutMilliseconds: Int32 {
        Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
    }

    func fetchOnce(host: String, port: UInt16, path: String) throws -> Response {
        let (fd, address) = try Self.socketAndAddress(host: host, port: port)
        defer { close(fd) }
        // Connect without blocking past the timeout.
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        let started = address.withUnsafeBytes { connect(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count)) }
        if started != 0 {
            guard errno == EINPROGRESS else { throw Failure(description: "connect: \(String(cString: strerror(errno)))") }
            try wait(fd, for: Int16(POLLOUT), what: "connect")
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else { throw Failure(description: "connect: \(String(cString: strerror(error)))") }
        }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            try wait(fd, for: Int16(POLLOUT), what: "send")
            let count = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            sent += count
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            try wait(fd, for: Int16(POLLIN), what: "read")
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 { break }
            guard count > 0 else {
                if errno == EAGAIN || errno == EINTR { continue }
                throw Failure(description: "read: \(String(cString: strerror(errno)))")
            }
            received.append(contentsOf: buffer[0..<count])
        }
        return try Self.parse(received)
    }

    private func wait(_ fd: Int32, for events: Int16, what: String) throws {
        var entry = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let ready = poll(&entry, 1, timeoutMilliseconds)
            if ready > 0 { return }
            if ready == 0 { throw Failure(description: "\(what): no progress for \(timeout)") }
            if errno != EINTR { throw Failure(description: "poll: \(String(cString: strerror(errno)))") }
        }
    }

    static func socketAndAddress(host: String, port: UInt16) throws -> (Int32, [UInt8]) {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
            return (fd, withUnsafeBytes(of: v4) { Array($0) })
        }
        var v6 = sockaddr_in6()
        guard inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 else { throw Failure(description: "not an IP address: \(host)") }
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = port.bigEndian
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        return (fd, withUnsafeBytes(of: v6) { Array($0) })
    }

    /// Status line, headers, and a body of `Content-Length` bytes (a shorter one is a failure).
    static func parse(_ bytes: [UInt8]) throws -> Response {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { Array(bytes[$0..<$0 + 4]) == separator }) else {
            throw Failure(description: "the response ended inside its header (\(bytes.count) bytes)")
        }
        let head = String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\r\n")
        let statusParts = head.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw Failure(description: "bad status line") }
        let body = Array(bytes[(end + 4)...])
        for line in head.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length",
               let length = Int(parts[1].trimmingPrefix(" ")), body.count != length {
                throw Failure(description: "the body ended after \(body.count) of \(length) bytes")
            }
        }
        return Response(status: status, body: body, attempts: 1)
    }
}
