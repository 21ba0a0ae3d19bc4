import Glibc
import RoamTesting

/// The server side of the tests: answers `GET /bytes/N` with N bytes, one connection at a time,
/// giving up on a client that stops reading for a second (a path that went away).
final class TestServer: Sendable {
    let listener: Int32

    init(address: String, port: UInt16) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        inet_pton(AF_INET, address, &sin.sin_addr)
        let bound = withUnsafeBytes(of: sin) { bind(listener, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count)) }
        guard bound == 0, listen(listener, 16) == 0 else {
            close(listener)
            throw RoamTestingError("listen on \(address):\(port): \(String(cString: strerror(errno)))")
        }
    }

    /// Serves until ``stop()``; returns how many responses went out whole.
    func serve() -> Int {
        var served = 0
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return served
            }
            var limit = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            if answer(client) { served += 1 }
            close(client)
        }
    }

    private func answer(_ client: Int32) -> Bool {
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !request.suffix(4).elementsEqual([13, 10, 13, 10]) {
            let count = recv(client, &buffer, buffer.count, 0)
            guard count > 0 else { return false }
            request.append(contentsOf: buffer[0..<count])
        }
        let line = String(decoding: request.prefix { $0 != 13 }, as: UTF8.self)
        let size = line.split(separator: " ").dropFirst().first.flatMap { $0.split(separator: "/").last }.flatMap { Int($0) } ?? 0
        let response = Array("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\nConnection: close\r\n\r\n".utf8) + [UInt8](repeating: 0x61, count: size)
        var sent = 0
        while sent < response.count {
            let count = response[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    /// Makes ``serve()`` return.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
    }

    deinit { close(listener) }
}
