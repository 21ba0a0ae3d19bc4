import RoamCore
import RoamSystem

/// `roam import mp-traces`: a pair of MP-Traces recordings (Wi-Fi and cellular measured at the
/// same time and place by a phone on a walk) made into a scenario with one link per interface on
/// one clock, so that what a multipath client does is decided by what the phone saw.
///
/// What is read is the format the dataset documents (I. Aydin, F. Fund, S. Panwar, "A Data Set
/// and Reference Experiments for Multipath Wireless Emulation on Public Testbeds", IEEE INFOCOM
/// CNERT 2023; github.com/aydini/MP-Traces, `Traces/README.md`): one file per interface, named
/// `PATH_TRIAL_wifi.csv` and `PATH_TRIAL_cellular.csv`, each line `timeInSeconds,BytesPerSecond`
/// (seconds 1 to 100): what a download over that interface received in that second.
public enum MPTracesImport {
    /// The largest file read.
    public static let maximumFileSize = 4 << 20
    /// The most seconds read (a day).
    public static let maximumSeconds = 86_400

    /// Reads one file of a pair.
    ///
    /// - Parameter path: The file.
    /// - Returns: Each second's received bytes, by second.
    /// - Throws: ``ScenarioError`` naming the file and the line when it is not such a file.
    public static func read(_ path: String) throws(ScenarioError) -> [(second: Int, bytesPerSecond: Int64)] {
        let bytes: [UInt8]
        do throws(SafePathError) {
            bytes = try readRegularFile(atPath: path, maximumBytes: maximumFileSize)
        } catch {
            throw ScenarioError("cannot read the MP-Traces file: \(error.message)")
        }
        switch parse(bytes) {
        case .success(let samples): return samples
        case .failure(let error): throw ScenarioError("\(escapedForMessage(path, maximumLength: 256)): \(error.message)")
        }
    }

    /// Parses one file's text.
    ///
    /// - Parameter bytes: The file's bytes.
    /// - Returns: Each second's received bytes in the file's order, or what is wrong and where.
    public static func parse(_ bytes: [UInt8]) -> Result<[(second: Int, bytesPerSecond: Int64)], ScenarioError> {
        guard bytes.count <= maximumFileSize else {
            return .failure(ScenarioError("\(bytes.count) bytes: more than \(maximumFileSize >> 20) MiB: not an MP-Traces file"))
        }
        var samples: [(second: Int, bytesPerSecond: Int64)] = []
        var seen = Set<Int>()
        for (offset, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            var line = line
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if line.isEmpty { continue }
            func problem(_ message: String) -> Result<[(second: Int, bytesPerSecond: Int64)], ScenarioError> {
                .failure(ScenarioError("line \(offset + 1): \(message)"))
            }
            guard line.count <= 64 else { return problem("\(line.count) bytes: not timeInSeconds,BytesPerSecond") }
            let fields = line.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: " ") }
            guard fields.count == 2, fields.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
                  let second = Int(fields[0]), let rate = Int64(fields[1]) else {
                // A header line is read past (the published files have none; a spreadsheet adds one).
                if offset == 0 && line.contains(where: { (0x41...0x7a).contains($0) }) { continue }
                return problem("'\(escapedForMessage(String(decoding: line, as: UTF8.self), maximumLength: 40))' is not timeInSeconds,BytesPerSecond (two whole numbers)")
            }
            guard second <= maximumSeconds else { return problem("second \(second): more than a day") }
            guard rate <= Int64(ScenarioLimits.maximumRate.bitsPerSecond / 8) else { return problem("\(rate) bytes a second: more than 100 Gbit/s") }
            guard seen.insert(second).inserted else { return problem("second \(second) a second time") }
            samples.append((second, rate))
        }
        guard !samples.isEmpty else { return .failure(ScenarioError("no seconds: an empty file")) }
        return .success(samples)
    }

    /// The pair as two recorded interfaces on one clock (the first second of either is the
    /// recording's start), and what could not be carried over.
    ///
    /// - Parameters:
    ///   - wifi: The Wi-Fi file's seconds.
    ///   - cellular: The cellular file's seconds.
    ///   - wifiDelay: The one-way delay to play on the Wi-Fi (the recordings carry none).
    ///   - cellularDelay: The same for the cellular link.
    /// - Returns: The interfaces (`wifi`, `cell`) and the notes.
    public static func interfaces(wifi: [(second: Int, bytesPerSecond: Int64)], cellular: [(second: Int, bytesPerSecond: Int64)],
                                  wifiDelay: Duration?, cellularDelay: Duration?) -> (interfaces: [RateRecording.Interface], notes: [String]) {
        let origin = min(wifi.map(\.second).min() ?? 0, cellular.map(\.second).min() ?? 0)
        func samples(_ seconds: [(second: Int, bytesPerSecond: Int64)]) -> [RateRecording.Sample] {
            seconds.sorted { $0.second < $1.second }.map { RateRecording.Sample(at: .seconds($0.second - origin), down: Rate(bitsPerSecond: Double($0.bytesPerSecond) * 8), up: nil) }
        }
        var notes = [
            "each second's rate is what a download over that interface received then: the downlink's capacity as far as that download could fill it; the uplink is not recorded and is left unlimited",
            "a second that received nothing is a link that passes nothing toward the phone (its carrier stays up)",
        ]
        if wifiDelay == nil || cellularDelay == nil {
            notes.append("the recordings carry no delay: \(wifiDelay == nil ? "the Wi-Fi" : "the cellular link") plays none (give --wifi-delay and --cellular-delay)")
        }
        let missing = [("Wi-Fi", wifi), ("cellular", cellular)].compactMap { name, seconds -> String? in
            guard let first = seconds.map(\.second).min(), let last = seconds.map(\.second).max() else { return nil }
            let gaps = (last - first + 1) - seconds.count
            return gaps > 0 ? "\(gaps) second\(gaps == 1 ? "" : "s") missing from the \(name) file keep the rate before them" : nil
        }
        notes += missing
        return ([RateRecording.Interface(link: "wifi", type: "wifi", samples: samples(wifi), delay: wifiDelay),
                 RateRecording.Interface(link: "cell", type: "cellular", samples: samples(cellular), delay: cellularDelay)], notes)
    }

    /// The header comments for a scenario made from a pair.
    ///
    /// - Parameters:
    ///   - wifi: The Wi-Fi file's seconds.
    ///   - cellular: The cellular file's seconds.
    ///   - sources: The two files' names.
    ///   - width: The windows' length.
    /// - Returns: The comment lines.
    public static func header(wifi: [(second: Int, bytesPerSecond: Int64)], cellular: [(second: Int, bytesPerSecond: Int64)],
                              sources: (wifi: String, cellular: String), width: Duration) -> [String] {
        func rates(_ seconds: [(second: Int, bytesPerSecond: Int64)]) -> [Rate] { seconds.map { Rate(bitsPerSecond: Double($0.bytesPerSecond) * 8) } }
        return [
            "Imported by roam import mp-traces from \(sources.wifi) and \(sources.cellular) (MP-Traces: Wi-Fi and cellular at the same time and place).",
            "Played in windows of \(RateRecording.milliseconds(width)): each link's downlink rate the mean received in it.",
            "Wi-Fi as recorded: \(RateRecording.summary(rates(wifi)))",
            "Cellular as recorded: \(RateRecording.summary(rates(cellular)))",
        ]
    }
}
