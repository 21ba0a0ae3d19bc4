import RoamCore
import RoamSystem

/// `roam import lumos5g`: one run of the Lumos5G dataset (a phone walking or driving a 1.3 km
/// loop in downtown Minneapolis on commercial mmWave 5G, measuring its TCP downlink every
/// second) made into a scenario whose cellular link plays, second by second, what the phone's
/// download received.
///
/// What is read is the dataset's CSV, by the column names its README documents (A. Narayanan et
/// al., "Lumos5G: Mapping and Predicting Commercial mmWave 5G Throughput", ACM IMC 2020;
/// Lumos5G 1.0, licensed CC BY 4.0): `run_num` and `seq_num` (the run, and its second: "an index
/// or a per-second timeline"), `Throughput` (iPerf 3.7's TCP downlink that second, Mbit/s),
/// `nrStatus` (`CONNECTED` on 5G, anything else on LTE), `latitude`, `longitude`,
/// `movingSpeed` (m/s), `compassDirection`, `lte_rsrp`, `nr_ssRsrp` and the rest of the radio's
/// figures, `mobility_mode` (`walking`, `driving`), `trajectory_direction` (`CW`, `ACW`) and
/// `tower_id`. A field left empty, or Android's `CellInfo.UNAVAILABLE` (2147483647), was not
/// measured. Other columns are ignored (a spreadsheet's index column among them); `run_num`,
/// `seq_num` and `Throughput` are required.
public enum Lumos5GImport {
    /// The largest file read (the published CSV is about 10 MiB).
    public static let maximumFileSize = 32 << 20
    /// The most rows read.
    public static let maximumRows = 1_000_000
    /// Android's `CellInfo.UNAVAILABLE`, which the dataset keeps where a figure was not reported.
    static let unavailable = 2_147_483_647.0

    /// One row: one second of one run.
    public struct Row: Sendable, Hashable {
        public var run: Int
        /// The run's second.
        public var second: Int
        /// What the download received that second.
        public var throughput: Rate?
        /// `nrStatus`: `CONNECTED` when the phone was on 5G.
        public var nrStatus: String?
        public var latitude: Double?
        public var longitude: Double?
        /// Metres a second.
        public var speed: Double?
        /// The LTE and 5G NR reference signal received powers (dBm), where reported.
        public var lteRSRP: Double?
        public var nrRSRP: Double?
        public var mobility: String?
        public var direction: String?
        public var tower: String?

        /// Whether the phone was on 5G that second.
        public var onNR: Bool { nrStatus == "CONNECTED" }
    }

    /// One run: its rows in time order, with the mobility and direction that name it.
    public struct Run: Sendable, Hashable {
        public var number: Int
        public var mobility: String?
        public var direction: String?
        public var rows: [Row]
        /// Rows whose second was already in the run (kept: a window averages them).
        public var repeated: Int

        /// How the run is named on the command line and in messages.
        public var label: String {
            "run \(number)" + (mobility.map { " \($0)" } ?? "") + (direction.map { " \($0)" } ?? "")
        }
    }

    /// Reads a file.
    ///
    /// - Parameter path: The CSV file.
    /// - Returns: Its runs, in the order the file first names them.
    /// - Throws: ``ScenarioError`` naming the file and the line when it is not such a file.
    public static func read(_ path: String) throws(ScenarioError) -> [Run] {
        let bytes: [UInt8]
        do throws(SafePathError) {
            bytes = try readRegularFile(atPath: path, maximumBytes: maximumFileSize)
        } catch {
            throw ScenarioError("cannot read the Lumos5G file: \(error.message)")
        }
        switch parse(bytes) {
        case .success(let runs): return runs
        case .failure(let error): throw ScenarioError("\(escapedForMessage(path, maximumLength: 256)): \(error.message)")
        }
    }

    /// Parses a file's text.
    ///
    /// - Parameter bytes: The file's bytes.
    /// - Returns: Its runs (each a `run_num`, `mobility_mode` and `trajectory_direction`), in
    ///   the order the file first names them, each run's rows in time order; or what is wrong
    ///   and on which line.
    public static func parse(_ bytes: [UInt8]) -> Result<[Run], ScenarioError> {
        guard bytes.count <= maximumFileSize else {
            return .failure(ScenarioError("\(bytes.count) bytes: more than \(maximumFileSize >> 20) MiB (split the file by run)"))
        }
        if bytes.starts(with: [0x50, 0x4b, 0x03, 0x04]) { return .failure(ScenarioError("a zip archive: unzip it and import its CSV file")) }
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        guard let headerLine = lines.first else { return .failure(ScenarioError("empty: no header line")) }
        func fields(_ line: ArraySlice<UInt8>) -> [String] {
            var line = line
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if line.starts(with: [0xef, 0xbb, 0xbf]) { line = line.dropFirst(3) }
            return String(decoding: line, as: UTF8.self).split(separator: ",", omittingEmptySubsequences: false).map { field in
                var field = field.trimmingCharacters(in: " ")
                if field.count >= 2, field.hasPrefix("\""), field.hasSuffix("\"") { field = String(field.dropFirst().dropLast()) }
                return field
            }
        }
        guard headerLine.count <= 4096 else { return .failure(ScenarioError("line 1: \(headerLine.count) bytes: not a Lumos5G header")) }
        let header = fields(headerLine)
        guard header.count <= 256 else { return .failure(ScenarioError("line 1: \(header.count) columns: not a Lumos5G header")) }
        func column(_ name: String) -> Int? { header.firstIndex { $0.lowercased() == name.lowercased() } }
        guard let runColumn = column("run_num"), let secondColumn = column("seq_num"), let throughputColumn = column("Throughput") else {
            let missing = ["run_num", "seq_num", "Throughput"].filter { column($0) == nil }
            return .failure(ScenarioError("line 1: no \(missing.joined(separator: ", ")) column: not Lumos5G's CSV (its header starts run_num,seq_num,abstractSignalStr,latitude,...)"))
        }
        guard lines.count - 1 <= maximumRows else {
            return .failure(ScenarioError("\(lines.count - 1) rows: more than \(maximumRows) (split the file by run)"))
        }
        let status = column("nrStatus"), latitude = column("latitude"), longitude = column("longitude"), speed = column("movingSpeed")
        let lteRSRP = column("lte_rsrp"), nrRSRP = column("nr_ssRsrp"), mobility = column("mobility_mode")
        let direction = column("trajectory_direction"), tower = column("tower_id")
        var runs: [Run] = []
        var runIndex: [String: Int] = [:]
        var seconds: [Int: Set<Int>] = [:]
        for (offset, line) in lines.enumerated().dropFirst() {
            let lineNumber = offset + 1
            func problem(_ message: String) -> Result<[Run], ScenarioError> { .failure(ScenarioError("line \(lineNumber): \(message)")) }
            guard line.count <= 4096 else { return problem("\(line.count) bytes: longer than a Lumos5G row") }
            let values = fields(line)
            if values.count == 1 && values[0].isEmpty { continue }
            guard values.count == header.count else { return problem("\(values.count) fields where the header has \(header.count)") }
            func whole(_ index: Int, _ name: String, _ range: ClosedRange<Int>) -> Result<Int, ScenarioError> {
                let field = values[index]
                // pandas writes a whole number read with gaps as a float ("12.0").
                let digits = field.hasSuffix(".0") ? String(field.dropLast(2)) : field
                guard !digits.isEmpty, digits.count <= 9, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(digits), range.contains(value) else {
                    return .failure(ScenarioError("line \(lineNumber): \(name) '\(escapedForMessage(field, maximumLength: 40))' is not a whole number from \(range.lowerBound) to \(range.upperBound)"))
                }
                return .success(value)
            }
            func number(_ index: Int?, _ name: String, _ range: ClosedRange<Double>) -> Result<Double?, ScenarioError> {
                guard let index else { return .success(nil) }
                let field = values[index]
                if field.isEmpty || field == "NaN" || field == "nan" { return .success(nil) }
                guard field.count <= 32, field.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "." || $0 == "-" || $0 == "+" || $0 == "e" || $0 == "E") }),
                      let value = Double(field), value.isFinite else {
                    return .failure(ScenarioError("line \(lineNumber): \(name) '\(escapedForMessage(field, maximumLength: 40))' is not a number"))
                }
                if value == unavailable { return .success(nil) }
                guard range.contains(value) else {
                    return .failure(ScenarioError("line \(lineNumber): \(name) \(escapedForMessage(field, maximumLength: 40)) is outside \(range.lowerBound.roamTrimmed) to \(range.upperBound.roamTrimmed)"))
                }
                return .success(value)
            }
            func word(_ index: Int?, _ name: String) -> Result<String?, ScenarioError> {
                guard let index, !values[index].isEmpty else { return .success(nil) }
                let field = values[index]
                guard field.count <= 32, field.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == ".") }) else {
                    return .failure(ScenarioError("line \(lineNumber): \(name) '\(escapedForMessage(field, maximumLength: 40))' is not a word (letters, digits, '_', '-', '.', at most 32)"))
                }
                return .success(field)
            }
            let run: Int, second: Int
            switch (whole(runColumn, "run_num", 0...1_000_000), whole(secondColumn, "seq_num", 0...Int(ScenarioLimits.maximumDuration.seconds))) {
            case let (.success(a), .success(b)): (run, second) = (a, b)
            case let (.failure(error), _), let (_, .failure(error)): return .failure(error)
            }
            let maximumMbit = ScenarioLimits.maximumRate.bitsPerSecond / 1e6
            let numbers: [Double?]
            switch (number(throughputColumn, "Throughput", 0...maximumMbit), number(latitude, "latitude", -90...90),
                    number(longitude, "longitude", -180...180), number(speed, "movingSpeed", 0...1000),
                    number(lteRSRP, "lte_rsrp", -200...0), number(nrRSRP, "nr_ssRsrp", -200...0)) {
            case let (.success(a), .success(b), .success(c), .success(d), .success(e), .success(f)): numbers = [a, b, c, d, e, f]
            case let (.failure(error), _, _, _, _, _), let (_, .failure(error), _, _, _, _), let (_, _, .failure(error), _, _, _),
                 let (_, _, _, .failure(error), _, _), let (_, _, _, _, .failure(error), _), let (_, _, _, _, _, .failure(error)):
                return .failure(error)
            }
            let words: [String?]
            switch (word(status, "nrStatus"), word(mobility, "mobility_mode"), word(direction, "trajectory_direction"), word(tower, "tower_id")) {
            case let (.success(a), .success(b), .success(c), .success(d)): words = [a, b, c, d]
            case let (.failure(error), _, _, _), let (_, .failure(error), _, _), let (_, _, .failure(error), _), let (_, _, _, .failure(error)):
                return .failure(error)
            }
            let row = Row(run: run, second: second, throughput: numbers[0].map { .mbit($0) }, nrStatus: words[0], latitude: numbers[1],
                          longitude: numbers[2], speed: numbers[3], lteRSRP: numbers[4], nrRSRP: numbers[5], mobility: words[1],
                          direction: words[2], tower: words[3])
            let key = "\(run) \(words[1] ?? "") \(words[2] ?? "")"
            let index: Int
            if let known = runIndex[key] {
                index = known
            } else {
                guard runs.count < 10_000 else { return problem("more than 10,000 runs") }
                index = runs.count
                runIndex[key] = index
                runs.append(Run(number: run, mobility: words[1], direction: words[2], rows: [], repeated: 0))
            }
            if !seconds[index, default: []].insert(second).inserted { runs[index].repeated += 1 }
            runs[index].rows.append(row)
        }
        guard !runs.isEmpty else { return .failure(ScenarioError("no rows after the header: nothing was measured")) }
        for index in runs.indices {
            // Rows placed by their second; a second given twice keeps the file's order.
            runs[index].rows = runs[index].rows.enumerated().sorted { ($0.element.second, $0.offset) < ($1.element.second, $1.offset) }.map(\.element)
        }
        return .success(runs)
    }

    /// The run `number` names (with `mobility` and `direction` where the number alone names
    /// several), or the only run.
    ///
    /// - Parameters:
    ///   - runs: The file's runs.
    ///   - number: `--run`; nil picks the file's only run.
    ///   - mobility: `--mobility`, to choose among runs of one number.
    ///   - direction: `--direction`, likewise.
    /// - Returns: The run.
    /// - Throws: ``ScenarioError`` listing the runs when none or several match.
    public static func select(_ runs: [Run], number: Int?, mobility: String?, direction: String?) throws(ScenarioError) -> Run {
        let matching = runs.filter { run in
            (number.map { $0 == run.number } ?? true)
                && (mobility.map { $0.lowercased() == run.mobility?.lowercased() } ?? true)
                && (direction.map { $0.lowercased() == run.direction?.lowercased() } ?? true)
        }
        if matching.count == 1, let run = matching.first { return run }
        func listed(_ runs: [Run]) -> String {
            runs.prefix(12).map { "\($0.label) (\($0.rows.count) rows)" }.joined(separator: ", ") + (runs.count > 12 ? ", ... (\(runs.count) in all)" : "")
        }
        if number == nil && mobility == nil && direction == nil {
            throw ScenarioError("the file has \(runs.count) runs: \(listed(runs)); choose one with --run (and --mobility, --direction where a number names several)")
        }
        if matching.isEmpty {
            throw ScenarioError("no run is \([number.map { "run \($0)" }, mobility, direction].compactMap { $0 }.joined(separator: " ")); the file has \(listed(runs))")
        }
        throw ScenarioError("\(matching.count) runs match: \(listed(matching)); choose one with --run, --mobility and --direction")
    }

    /// The run as one recorded cellular interface, and what could not be carried over.
    ///
    /// - Parameters:
    ///   - run: The run.
    ///   - link: The link's name.
    ///   - delay: A one-way delay to play (the dataset has none).
    /// - Returns: The interface and the notes.
    public static func interface(_ run: Run, link: String = "cell", delay: Duration? = nil) -> (interface: RateRecording.Interface, notes: [String]) {
        let origin = run.rows.first?.second ?? 0
        let samples = run.rows.map { row in
            RateRecording.Sample(at: .seconds(row.second - origin), down: row.throughput, up: nil)
        }
        var notes = ["Throughput is the download's TCP goodput each second (iPerf 3.7), what the link carried to one flow, not a measured capacity: played as the downlink's rate; a second of 0 passes nothing",
                     "the dataset has no uplink rate: the uplink is left unlimited"]
        notes.append(delay.map { "delay: \(RateRecording.milliseconds($0)) each way, as given (the dataset measures none)" }
            ?? "the dataset measures no delay: the link plays none (give one with --delay)")
        let expected = (run.rows.last?.second ?? origin) - origin + 1
        let distinct = Set(run.rows.map(\.second)).count
        if distinct < expected {
            notes.append("\(expected - distinct) of the run's \(expected) seconds \(expected - distinct == 1 ? "has" : "have") no row: \(expected - distinct == 1 ? "it keeps" : "each keeps") the rate before it")
        }
        if run.repeated > 0 { notes.append("\(run.repeated) second\(run.repeated == 1 ? "" : "s") given twice: each window plays the mean") }
        let missing = run.rows.filter { $0.throughput == nil }.count
        if missing > 0 { notes.append("\(missing) row\(missing == 1 ? "" : "s") without a Throughput keep the rate before them") }
        var changes: [String] = []
        for (before, row) in zip(run.rows, run.rows.dropFirst()) where before.nrStatus != nil && row.nrStatus != nil && before.onNR != row.onNR {
            changes.append("\(row.second - origin) s to \(row.onNR ? "5G" : "LTE")")
        }
        let onNR = run.rows.filter(\.onNR).count
        if run.rows.contains(where: { $0.nrStatus != nil }) {
            notes.append("on 5G (nrStatus CONNECTED) \(onNR) of \(run.rows.count) s; \(changes.count) change\(changes.count == 1 ? "" : "s") between 5G and LTE, played only as the rates around them"
                + (changes.isEmpty ? "" : ": " + changes.prefix(8).joined(separator: "; ") + (changes.count > 8 ? "; ..." : "")))
        }
        let towers = Set(run.rows.compactMap(\.tower))
        if towers.count > 1 { notes.append("\(towers.count) towers: the handovers between them are in the rates") }
        let fixes = run.rows.filter { $0.latitude != nil && $0.longitude != nil }.count
        if fixes > 0 {
            let speeds = run.rows.compactMap(\.speed)
            notes.append("position is not played by the link (\(fixes) fixes\(speeds.isEmpty ? "" : ", \((speeds.min() ?? 0).roamTrimmed) to \((speeds.max() ?? 0).roamTrimmed) m/s")); --track FILE writes it as a track for mobility: (phones: {phone: {track: FILE}})")
        }
        notes.append("not carried over: the LTE and NR RSRP, RSRQ, SINR and RSSI, abstractSignalStr and compassDirection (what the radio gave is in the rates)")
        return (RateRecording.Interface(link: link, type: "cellular", samples: samples, delay: delay), notes)
    }

    /// The run's positions as a track file (`phones: {phone: {track: FILE}}`), or nil when it has
    /// none.
    public static func track(_ run: Run) -> String? {
        let origin = run.rows.first?.second ?? 0
        let fixes = run.rows.compactMap { row in
            row.latitude.flatMap { latitude in row.longitude.map { (at: Duration.seconds(row.second - origin), latitude: latitude, longitude: $0) } }
        }
        return RecordedTrack.text(fixes, comment: "Imported by roam import lumos5g: the run's positions, seconds from its first row, metres east and north of its first fix")
    }

    /// The header comments for a scenario made from `run`.
    ///
    /// - Parameters:
    ///   - run: The run.
    ///   - source: The file's name.
    ///   - width: The windows' length.
    /// - Returns: The comment lines.
    public static func header(_ run: Run, source: String, width: Duration) -> [String] {
        let span = (run.rows.last?.second ?? 0) - (run.rows.first?.second ?? 0)
        return [
            "Imported by roam import lumos5g from \(source) (Lumos5G, Narayanan et al., IMC 2020; CC BY 4.0): \(run.label), \(run.rows.count) rows over \(span) s.",
            "Played in windows of \(RateRecording.milliseconds(width)): the downlink's rate the mean Throughput in each.",
            "Downlink as measured: \(RateRecording.summary(run.rows.compactMap(\.throughput)))",
        ]
    }
}
