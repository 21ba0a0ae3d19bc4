import Glibc
import RoamCore
import RoamSystem

/// `roam import gnettrack`: a G-NetTrack Pro log (the Android drive-test app's CSV, as published
/// in Raca et al.'s 5G dataset) made into a scenario whose cellular link plays, second by
/// second, the downlink rates the phone measured while downloading.
///
/// What is read is the log's header-named columns, as the dataset's paper documents them (D.
/// Raca, D. Leahy, C. J. Sreenan, J. J. Quinlan, "Beyond Throughput, The Next Generation: A 5G
/// Dataset with Channel and Context Metrics", ACM MMSys 2020): `Timestamp`
/// (`YYYY.MM.DD_HH.MM.SS`, the phone's local time, one second's resolution); `DL_bitrate` and
/// `UL_bitrate` (the rates the phone measured, kbit/s); `State` (`D` while the test app
/// downloads, `I` idle); `PINGAVG`, `PINGMIN` (ms) and `PINGLOSS` (%), where a ping ran;
/// `NetworkMode` (`5G`, `LTE`, `HSPA+`, ...) and `CellID`; `Longitude`, `Latitude` and `Speed`
/// (km/h); and the radio's `RSRP`, `RSRQ`, `SNR`, `CQI`, `RSSI`. A field of `-` was not
/// measured. Other columns are ignored; the first four above are required.
public enum GNetTrackImport {
    /// The largest log read: at a row a second, several days.
    public static let maximumFileSize = 32 << 20
    /// The most rows read.
    public static let maximumRows = 1_000_000

    /// One row of the log.
    public struct Row: Sendable, Hashable {
        /// From the first row's time.
        public var at: Duration
        /// The measured rates, where given.
        public var down: Rate?
        public var up: Rate?
        /// `State`: `D` downloading, `I` idle, others as logged; nil when the log has no such column.
        public var state: String?
        /// `PINGAVG`: the ping's mean round trip.
        public var roundTrip: Duration?
        /// `PINGMIN`: its least round trip, what the download's queue added least to.
        public var roundTripMinimum: Duration?
        /// `PINGLOSS` as a share (0 to 1).
        public var loss: Double?
        public var networkMode: String?
        public var cell: String?
        public var latitude: Double?
        public var longitude: Double?
        /// Km/h.
        public var speed: Double?
    }

    /// A log as read.
    public struct Log: Sendable, Hashable {
        /// In time order.
        public var rows: [Row]
        /// Rows whose time was before the row above them (placed by their time).
        public var outOfOrder: Int
    }

    /// Reads a log; the error names the file and what is wrong, and where.
    ///
    /// - Parameter path: The log file.
    /// - Returns: The log.
    /// - Throws: ``ScenarioError`` when it cannot be read or is not such a log.
    public static func read(_ path: String) throws(ScenarioError) -> Log {
        let bytes: [UInt8]
        do throws(SafePathError) {
            bytes = try readRegularFile(atPath: path, maximumBytes: maximumFileSize)
        } catch {
            throw ScenarioError("cannot read the G-NetTrack log: \(error.message)")
        }
        switch parse(bytes) {
        case .success(let log): return log
        case .failure(let error): throw ScenarioError("\(escapedForMessage(path, maximumLength: 256)): \(error.message)")
        }
    }

    /// Parses a log's text.
    ///
    /// - Parameter bytes: The file's bytes.
    /// - Returns: The log, or what is wrong and on which line.
    public static func parse(_ bytes: [UInt8]) -> Result<Log, ScenarioError> {
        guard bytes.count <= maximumFileSize else {
            return .failure(ScenarioError("\(bytes.count) bytes: more than \(maximumFileSize >> 20) MiB (split the log)"))
        }
        if bytes.starts(with: [0x50, 0x4b, 0x03, 0x04]) { return .failure(ScenarioError("a zip archive: unzip it and import one of its CSV files")) }
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        guard let headerLine = lines.first else { return .failure(ScenarioError("empty: no header line")) }
        func text(_ line: ArraySlice<UInt8>) -> String {
            var line = line
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if line.starts(with: [0xef, 0xbb, 0xbf]) { line = line.dropFirst(3) }
            return String(decoding: line, as: UTF8.self)
        }
        let header = text(headerLine).split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: " ") }
        guard header.count <= 256 else { return .failure(ScenarioError("line 1: \(header.count) columns: not a G-NetTrack log's header")) }
        func column(_ name: String) -> Int? { header.firstIndex { $0.lowercased() == name.lowercased() } }
        guard let timestamp = column("Timestamp"), let down = column("DL_bitrate"), let up = column("UL_bitrate") else {
            let missing = ["Timestamp", "DL_bitrate", "UL_bitrate"].filter { column($0) == nil }
            return .failure(ScenarioError("line 1: no \(missing.joined(separator: ", ")) column: not a G-NetTrack Pro log (its header starts Timestamp,Longitude,Latitude,Speed,...)"))
        }
        guard lines.count - 1 <= maximumRows else {
            return .failure(ScenarioError("\(lines.count - 1) rows: more than \(maximumRows) (split the log)"))
        }
        let state = column("State"), ping = column("PINGAVG"), pingMinimum = column("PINGMIN"), pingLoss = column("PINGLOSS"), mode = column("NetworkMode"), cell = column("CellID")
        let latitude = column("Latitude"), longitude = column("Longitude"), speed = column("Speed")
        var rows: [Row] = []
        rows.reserveCapacity(lines.count - 1)
        var first: Int64?
        var earliest: Int64?, latest: Int64?
        var outOfOrder = 0
        var previous: Int64?
        for (offset, line) in lines.enumerated().dropFirst() {
            let lineNumber = offset + 1
            func problem(_ message: String) -> Result<Log, ScenarioError> { .failure(ScenarioError("line \(lineNumber): \(message)")) }
            guard line.count <= 4096 else { return problem("\(line.count) bytes: longer than a log's line") }
            let fields = text(line).split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: " ") }
            if fields.count == 1 && fields[0].isEmpty { continue }
            guard fields.count == header.count else { return problem("\(fields.count) fields where the header has \(header.count)") }
            guard let seconds = parseTimestamp(fields[timestamp]) else {
                return problem("Timestamp '\(escapedForMessage(fields[timestamp], maximumLength: 40))' is not YYYY.MM.DD_HH.MM.SS")
            }
            let origin = first ?? seconds
            first = origin
            let at = seconds - origin
            // The whole log within a day, whichever way its clock stepped.
            earliest = min(earliest ?? seconds, seconds)
            latest = max(latest ?? seconds, seconds)
            guard let earliest, let latest, latest - earliest <= ScenarioLimits.maximumDuration.components.seconds else {
                return problem("\(at) s from the first row: the log spans more than 24 h")
            }
            if let previous, seconds < previous { outOfOrder += 1 }
            previous = seconds
            func number(_ index: Int?, _ name: String, _ range: ClosedRange<Double>) -> Result<Double?, ScenarioError> {
                guard let index else { return .success(nil) }
                let field = fields[index]
                if field == "-" || field.isEmpty { return .success(nil) }
                guard let value = Double(field), value.isFinite, range.contains(value),
                      field.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "." || $0 == "-" || $0 == "+") }) else {
                    return .failure(ScenarioError("line \(lineNumber): \(name) '\(escapedForMessage(field, maximumLength: 40))' is not a number from \(range.lowerBound) to \(range.upperBound)"))
                }
                return .success(value)
            }
            let maximumKbit = ScenarioLimits.maximumRate.bitsPerSecond / 1000
            let values: [Double?]
            switch (number(down, "DL_bitrate", 0...maximumKbit), number(up, "UL_bitrate", 0...maximumKbit), number(ping, "PINGAVG", 0...120_000),
                    number(pingLoss, "PINGLOSS", 0...100), number(latitude, "Latitude", -90...90), number(longitude, "Longitude", -180...180),
                    number(speed, "Speed", 0...2000)) {
            case let (.success(a), .success(b), .success(c), .success(d), .success(e), .success(f), .success(g)): values = [a, b, c, d, e, f, g]
            case let (.failure(error), _, _, _, _, _, _), let (_, .failure(error), _, _, _, _, _), let (_, _, .failure(error), _, _, _, _),
                 let (_, _, _, .failure(error), _, _, _), let (_, _, _, _, .failure(error), _, _), let (_, _, _, _, _, .failure(error), _),
                 let (_, _, _, _, _, _, .failure(error)):
                return .failure(error)
            }
            let least: Double?
            switch number(pingMinimum, "PINGMIN", 0...120_000) {
            case .success(let value): least = value
            case .failure(let error): return .failure(error)
            }
            func word(_ index: Int?) -> String? {
                guard let index, fields[index] != "-", !fields[index].isEmpty else { return nil }
                return String(fields[index].prefix(32))
            }
            rows.append(Row(at: .seconds(at), down: values[0].map { .kbit($0) }, up: values[1].map { .kbit($0) }, state: word(state),
                            roundTrip: values[2].map { .milliseconds($0) }, roundTripMinimum: least.map { .milliseconds($0) }, loss: values[3].map { $0 / 100 }, networkMode: word(mode),
                            cell: word(cell), latitude: values[4], longitude: values[5], speed: values[6]))
        }
        guard !rows.isEmpty else { return .failure(ScenarioError("no rows after the header: nothing was logged")) }
        // A clock stepped back (seen in the published logs) places a row by its time.
        if outOfOrder > 0 {
            let minimum = rows.map(\.at).min() ?? .zero
            rows = rows.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map { row in
                var row = row.element
                row.at -= minimum
                return row
            }
        }
        return .success(Log(rows: rows, outOfOrder: outOfOrder))
    }

    /// `YYYY.MM.DD_HH.MM.SS` as seconds from 1970 (the phone's local time; only differences
    /// are used).
    static func parseTimestamp(_ text: String) -> Int64? {
        let parts = text.split(whereSeparator: { $0 == "." || $0 == "_" })
        guard text.utf8.count == 19, parts.count == 6, parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }) else { return nil }
        let numbers = parts.compactMap { Int64($0) }
        guard numbers.count == 6 else { return nil }
        let (year, month, day, hour, minute, second) = (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4], numbers[5])
        guard (1970...9999).contains(year), (1...12).contains(month), (1...31).contains(day), (0...23).contains(hour),
              (0...59).contains(minute), (0...60).contains(second) else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return days * 86_400 + hour * 3600 + minute * 60 + second
    }

    /// The log as one recorded cellular interface, and what could not be carried over.
    ///
    /// - Parameters:
    ///   - log: The log.
    ///   - link: The link's name.
    ///   - states: The `State` values whose rates are the link's capacity (`D`: the test app
    ///     was downloading, so the link carried what it could); rows in other states (idle, or a
    ///     video player's own pace) keep the rate before them. Every row counts when the log
    ///     has no `State` column. A ping in such a row was taken while the link was loaded:
    ///     it plays the least round trip of the 10 s before it (`PINGMIN`), not its mean.
    /// - Returns: The interface and the notes.
    public static func interface(_ log: Log, link: String = "cell", states: Set<String> = ["D"]) -> (interface: RateRecording.Interface, notes: [String]) {
        var notes: [String] = []
        var skipped: [String: Int] = [:]
        // A ping taken while the app downloaded measured the download's queue too: it plays the
        // least round trip of the 10 s before it (PINGMIN where logged), as `roam record`'s do.
        var loadedDelay = RateRecording.LoadedRoundTrip()
        let samples = log.rows.map { row -> RateRecording.Sample in
            let counts = row.state.map { states.contains($0) } ?? true
            if !counts { skipped[row.state ?? "", default: 0] += 1 }
            loadedDelay.record(row.roundTripMinimum.map { min($0, row.roundTrip ?? $0) } ?? row.roundTrip, at: row.at)
            let roundTrip = loadedDelay.played(row.roundTrip, loaded: counts)
            // The uplink's measured rate while downloading is the download's acknowledgements,
            // not what the uplink could carry: it is not played (a link limited to it would
            // throttle the very download it came from).
            return RateRecording.Sample(at: row.at, down: counts ? row.down : nil, up: nil, roundTrip: roundTrip, loss: row.loss)
        }
        if log.rows.contains(where: { $0.up != nil }) {
            notes.append("UL_bitrate is not played: while the app downloads it is the download's own acknowledgements, not the uplink's capacity; the uplink is left unlimited")
        }
        if !skipped.isEmpty {
            let listed = skipped.sorted { $0.key < $1.key }.map { "\($0.value) in \($0.key)" }.joined(separator: ", ")
            notes.append("rates are taken from rows in State \(states.sorted().joined(separator: " or ")) (the link carried what it could); \(listed) keep the rate before them (an idle phone's rate says nothing of the link's capacity)")
        }
        if log.outOfOrder > 0 { notes.append("\(log.outOfOrder) row\(log.outOfOrder == 1 ? "" : "s") out of time order (the phone's clock stepped back), placed by their time") }
        let pings = log.rows.filter { $0.roundTrip != nil }.count
        let loaded = loadedDelay.replaced
        notes.append(pings > 0
            ? "delay: half of each ping's round trip (\(pings) pings), held until the next; ping losses played on the uplink"
                + (loaded > 0 ? "; \(loaded) taken while the app downloaded play\(loaded == 1 ? "s" : "") the least round trip (PINGMIN) of the \(RateRecording.LoadedRoundTrip.window.roamDescription) before, not the mean (PINGAVG): the queue the download built is the replay's own traffic's to build" : "")
            : "the log has no pings: the link plays no delay (add one to the scenario's link)")
        // Cells and network modes: what a handover between them did is in the rates; the
        // changes themselves are listed.
        var changes: [String] = []
        for (before, row) in zip(log.rows, log.rows.dropFirst()) where (row.cell != nil && before.cell != nil && row.cell != before.cell)
            || (row.networkMode != nil && before.networkMode != nil && row.networkMode != before.networkMode) {
            changes.append("\(Int64(row.at.seconds)) s \(before.networkMode ?? "?") cell \(before.cell ?? "?") to \(row.networkMode ?? "?") cell \(row.cell ?? "?")")
        }
        if !changes.isEmpty {
            notes.append("\(changes.count) change\(changes.count == 1 ? "" : "s") of cell or network mode, played only as the rates around them: "
                + changes.prefix(8).joined(separator: "; ") + (changes.count > 8 ? "; ..." : ""))
        }
        let fixes = log.rows.filter { $0.latitude != nil && $0.longitude != nil }
        if !fixes.isEmpty {
            let speeds = log.rows.compactMap(\.speed)
            notes.append("position and speed are not played by the link (\(fixes.count) fixes\(speeds.isEmpty ? "" : ", \(Int(speeds.min() ?? 0)) to \(Int(speeds.max() ?? 0)) km/h")); --track FILE writes them as a track for mobility: (phones: {phone: {track: FILE}})")
        }
        notes.append("not carried over: RSRP, RSRQ, SNR, CQI and RSSI (what the radio gave is in the rates)")
        return (RateRecording.Interface(link: link, type: "cellular", samples: samples), notes)
    }

    /// The log's GPS fixes as a track file (`phones: {phone: {track: FILE}}`): a line a fix,
    /// `SECONDS,X,Y`, metres east and north of the first fix (an equirectangular projection,
    /// within a metre over the tens of kilometres of a drive), a fix a second at most (the
    /// log's repeated rows and unmoved seconds merged).
    ///
    /// - Parameter log: The log.
    /// - Returns: The file's text, or nil when the log has no fixes.
    public static func track(_ log: Log) -> String? {
        let fixes = log.rows.compactMap { row in row.latitude.flatMap { latitude in row.longitude.map { (row.at, latitude, $0) } } }
        return RecordedTrack.text(fixes, comment: "Imported by roam import gnettrack: the log's GPS fixes, seconds from its first row, metres east and north of its first fix")
    }

    /// The header comments for a scenario made from `log`.
    ///
    /// - Parameters:
    ///   - log: The log.
    ///   - source: The file's name.
    ///   - width: The windows' length.
    /// - Returns: The comment lines.
    public static func header(_ log: Log, source: String, width: Duration) -> [String] {
        let span = log.rows.last?.at ?? .zero
        let modes = Dictionary(grouping: log.rows.compactMap(\.networkMode), by: { $0 }).mapValues(\.count).sorted { $0.value > $1.value }
        return [
            "Imported by roam import gnettrack from \(source) (G-NetTrack Pro): \(log.rows.count) rows over \(Int64(span.seconds)) s"
                + (modes.isEmpty ? "" : ", " + modes.prefix(4).map { "\($0.key) \($0.value * 100 / max(log.rows.count, 1))%" }.joined(separator: ", ")) + ".",
            "Played in windows of \(RateRecording.milliseconds(width)): each direction's rate the mean measured in it.",
            "Downlink as measured: \(RateRecording.summary(log.rows.compactMap(\.down)))",
            "Uplink as measured: \(RateRecording.summary(log.rows.compactMap(\.up)))",
        ]
    }
}
