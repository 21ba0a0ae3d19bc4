import Glibc
import RoamCore
import RoamSystem
import SystemPackage

/// A download through one interface, for `roam record --throughput`: curl fetches the URL
/// bound to the interface (`--interface`), its body comes down a pipe and is counted, never
/// stored, and each interval's count is what the interface carried to one TCP flow. A download
/// that ends (the file was whole, or it failed) is started again at the next interval's start;
/// an interval counts only when one download ran through the whole of it, so a connection's
/// setup and slow start are never taken for the link's rate.
///
/// curl is run with `-q` (no `.curlrc` read), HTTP and HTTPS alone (`--proto =http,https`), no
/// redirect followed, a 5 s connection timeout; its errors are kept (at most 512 bytes) to say
/// why a download ended. Should roam end without stopping it, curl's next write fails on the
/// closed pipe and it ends too.
final class ThroughputDownload {
    let url: String
    let interface: String
    private var process: pid_t?
    private var output: OwnedFileDescriptor?
    private var errors: OwnedFileDescriptor?
    /// When the running download started.
    private var started: MonotonicInstant?
    /// Bytes received since the last ``take(intervalStart:interval:)``.
    private var bytes: Int64 = 0
    /// Whether the running download ended since the last take (its interval does not count).
    private var endedInInterval = false
    private var errorText: [UInt8] = []
    /// Downloads that ended, and the first one's reason (said once).
    private(set) var ends = 0
    private(set) var firstEnd: String?

    /// The descriptor to poll for the body, while a download runs.
    var pollEntries: [pollfd] {
        guard let output else { return [] }
        return [pollfd(fd: output.rawValue, events: Int16(POLLIN), revents: 0)]
    }

    init(url: String, interface: String) {
        self.url = url
        self.interface = interface
    }

    deinit { stop() }

    /// Whether `url` is one `--throughput` takes: `http://` or `https://`, at most 2,048
    /// printable ASCII characters without spaces, and no user name or password in it (it would
    /// show in the process list).
    static func isURL(_ url: String) -> Bool {
        guard url.utf8.count <= 2048, url.hasPrefix("http://") || url.hasPrefix("https://"),
              url.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else { return false }
        let rest = url.drop { $0 != "/" }.dropFirst(2)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return !authority.isEmpty && !authority.contains("@")
    }

    /// Starts a download if none runs.
    ///
    /// - Throws: ``RecordError`` when curl cannot be started at all (not installed).
    func startIfIdle(at now: MonotonicInstant) throws(RecordError) {
        guard process == nil else { return }
        let body: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
        let said: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
        do {
            body = try makePipe()
            said = try makePipe()
        } catch {
            throw RecordError("cannot make a pipe for the download: \(error)")
        }
        defer {
            try? body.writeEnd.close()
            try? said.writeEnd.close()
        }
        _ = fcntl(body.readEnd.rawValue, F_SETFL, fcntl(body.readEnd.rawValue, F_GETFL) | O_NONBLOCK)
        _ = fcntl(said.readEnd.rawValue, F_SETFL, fcntl(said.readEnd.rawValue, F_GETFL) | O_NONBLOCK)
        let arguments = ["curl", "-q", "--silent", "--show-error", "--fail", "--interface", interface, "--proto", "=http,https",
                         "--max-redirs", "0", "--connect-timeout", "5", "--output", "-", url]
        do {
            process = try spawnProcess(arguments, environment: Self.environment, standardOutput: body.writeEnd,
                                       standardError: said.writeEnd, newProcessGroup: true)
        } catch {
            try? body.readEnd.close()
            try? said.readEnd.close()
            throw RecordError(error == .noSuchFileOrDirectory
                ? Self.curlMissing
                : "cannot start curl for the download through \(interface): \(error)")
        }
        output = OwnedFileDescriptor(owning: body.readEnd.rawValue)
        errors = OwnedFileDescriptor(owning: said.readEnd.rawValue)
        started = now
        errorText.removeAll()
    }

    /// What `roam record` says when curl is not in its `PATH`.
    static let curlMissing = "--throughput needs curl, which is not installed (apt install curl)"

    /// This process's environment, for curl (its proxy settings are the user's to give).
    private static var environment: [String] {
        var entries: [String] = []
        var pointer = environ
        while let entry = pointer.pointee {
            entries.append(String(cString: entry))
            pointer += 1
        }
        return entries
    }

    /// Counts what came, without waiting (at most 4 MiB a call), and notices a download that
    /// ended.
    func receive() {
        guard let output else { return }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        for _ in 0..<64 {
            let count = buffer.withUnsafeMutableBytes { read(output.rawValue, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += Int64(count)
                continue
            }
            if count == 0 { finish() }
            return
        }
    }

    /// The download ended (its body's pipe closed): reaps curl and keeps why.
    private func finish() {
        if let errors {
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = buffer.withUnsafeMutableBytes { read(errors.rawValue, $0.baseAddress, $0.count) }
            if count > 0 { errorText = Array(buffer[0..<count]) }
        }
        var status: TerminationStatus?
        if let process { status = try? waitForExit(process) }
        process = nil
        output = nil
        errors = nil
        started = nil
        endedInInterval = true
        ends += 1
        if firstEnd == nil {
            let said = String(decoding: errorText, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            firstEnd = status?.code == 0 ? "the download ended (the file was whole)"
                : "curl " + (status?.code.map { "exited \($0)" } ?? status?.signal.map { "ended by signal \($0)" } ?? "ended")
                    + (said.isEmpty ? "" : ": " + escapedForMessage(said, maximumLength: 200))
        }
    }

    /// The interval's throughput, bits per second, when one download ran through the whole of
    /// it (it started before `intervalStart` and has not ended); then starts counting the next.
    func take(intervalStart: MonotonicInstant, interval: Duration) -> UInt64? {
        defer {
            bytes = 0
            endedInInterval = false
        }
        guard !endedInInterval, let started, started <= intervalStart else { return nil }
        return UInt64((Double(bytes) * 8 / interval.seconds).rounded())
    }

    /// Ends the download, if one runs.
    func stop() {
        guard let process else { return }
        kill(process, SIGTERM)
        _ = try? waitForExit(process)
        self.process = nil
        output = nil
        errors = nil
        started = nil
    }
}
