import Glibc
import Netlink
import RoamCore
import RoamSystem

/// Position fixes from gpsd, for `roam record`: its JSON protocol over TCP (`?WATCH=` with
/// `json`), read as it comes; each `TPV` report with a 2D or 3D fix is kept, the latest one an
/// interval taken with ``take()``.
///
/// What gpsd sends is bounded: at most ``maximumLine`` bytes a report (a longer one, such as a
/// `SKY` report of very many satellites, is skipped to its end), and at most 64 KiB read a
/// wake-up.
final class GPSDFeed {
    /// A fix: degrees north and east, and the speed over ground (m/s) where gpsd gives one.
    struct Fix: Equatable {
        var latitude: Double
        var longitude: Double
        var speed: Double?
    }

    static let maximumLine = 16 << 10
    let address: IPAddress
    let port: UInt16
    private let descriptor: OwnedFileDescriptor
    private var pending: [UInt8] = []
    private var skipping = false
    private var latest: Fix?
    /// Whether gpsd closed the connection.
    private(set) var ended = false

    /// The descriptor to poll for reports.
    var pollEntry: pollfd { pollfd(fd: ended ? -1 : descriptor.rawValue, events: Int16(POLLIN), revents: 0) }

    /// Connects to gpsd at `address`:`port` (within a second) and asks for its reports.
    ///
    /// - Throws: A sentence saying why gpsd could not be reached.
    init(address: IPAddress, port: UInt16) throws(RecordError) {
        self.address = address
        self.port = port
        let domain = address.family == .inet ? AF_INET : AF_INET6
        let fd = socket(domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw RecordError("cannot open a socket for gpsd: \(String(cString: strerror(errno)))") }
        descriptor = OwnedFileDescriptor(owning: fd)
        let result = address.withSocketAddress(port: port) { Glibc.connect(fd, $0, $1) }
        if result != 0 {
            guard errno == EINPROGRESS else { throw RecordError("gpsd at \(address) port \(port): \(String(cString: strerror(errno)))") }
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard poll(&entry, 1, 1000) == 1 else { throw RecordError("gpsd at \(address) port \(port) did not answer within a second") }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else { throw RecordError("gpsd at \(address) port \(port): \(String(cString: strerror(error)))") }
        }
        // Whoever listens there speaks for the device's position: only root's, gpsd's user's or
        // this user's server is believed (any local user may listen on a free port first).
        if let owner = Self.serverOwner(fd, family: address.family, port: port), owner != 0, owner != getuid(), owner != Self.gpsdUser {
            throw RecordError("the server at \(address) port \(port) is uid \(owner)'s, not root's, gpsd's or yours: its positions are not believed")
        }
        let watch = Array(#"?WATCH={"enable":true,"json":true};"#.utf8) + [0x0a]
        let sent = watch.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == watch.count else { throw RecordError("gpsd at \(address) port \(port): cannot ask for its reports: \(String(cString: strerror(errno)))") }
    }

    /// Reads what gpsd sent, without waiting.
    func receive() {
        guard !ended else { return }
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        for _ in 0..<4 {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor.rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count == 0 { ended = true }
            guard count > 0 else { return }
            for byte in buffer[0..<count] {
                if byte == 0x0a {
                    if !skipping { report(pending) }
                    pending.removeAll(keepingCapacity: true)
                    skipping = false
                } else if !skipping {
                    pending.append(byte)
                    if pending.count > Self.maximumLine {
                        pending.removeAll(keepingCapacity: true)
                        skipping = true
                    }
                }
            }
        }
    }

    /// The uid of the user `gpsd`, whom Debian's gpsd runs as.
    static var gpsdUser: uid_t? {
        getpwnam("gpsd").map { $0.pointee.pw_uid }
    }

    /// The owner of the socket that accepted the connection `fd` made to `port`: the kernel's
    /// table of this namespace's TCP sockets (/proc/self/net/tcp or tcp6) lists it with its
    /// local port `port` and its remote port this socket's own. Nil when it is not found.
    static func serverOwner(_ fd: Int32, family: AddressFamily, port: UInt16) -> uid_t? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return nil }
        let mine = withUnsafeBytes(of: &storage) { bytes in UInt16(bytes[2]) << 8 | UInt16(bytes[3]) }
        guard let table = try? readRegularFile(atPath: family == .inet ? "/proc/self/net/tcp" : "/proc/self/net/tcp6", maximumBytes: 16 << 20) else {
            return nil
        }
        func portOf(_ field: Substring) -> UInt16? { field.split(separator: ":").last.flatMap { UInt16($0, radix: 16) } }
        for line in table.split(separator: 0x0a).dropFirst() {
            let fields = String(decoding: line, as: UTF8.self).split(separator: " ")
            guard fields.count > 7, portOf(fields[1]) == port, portOf(fields[2]) == mine else { continue }
            return UInt32(fields[7]).map { uid_t($0) }
        }
        return nil
    }

    /// The latest fix since the last call, if one came.
    func take() -> Fix? {
        defer { latest = nil }
        return latest
    }

    private func report(_ line: [UInt8]) {
        guard let value = try? JSONValue.parse(String(decoding: line, as: UTF8.self)), let fix = Self.fix(value) else { return }
        latest = fix
    }

    /// A `TPV` report's fix: mode 2 (2D) or 3 (3D), a latitude and longitude in range.
    static func fix(_ value: JSONValue) -> Fix? {
        guard value["class"]?.stringValue == "TPV", let mode = value["mode"]?.intValue, mode >= 2,
              let latitude = value["lat"]?.doubleValue, let longitude = value["lon"]?.doubleValue,
              (-90...90).contains(latitude), (-180...180).contains(longitude) else { return nil }
        let speed = value["speed"]?.doubleValue.flatMap { $0.isFinite && $0 >= 0 && $0 < 1000 ? $0 : nil }
        return Fix(latitude: latitude, longitude: longitude, speed: speed)
    }
}
