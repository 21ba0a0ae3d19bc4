import Glibc
import RoamCore

/// A phone's recorded movement (`phones: {phone: {track: FILE}}`): a file of positions over
/// time, one a line, `SECONDS,X,Y` (seconds from the run's start, metres on the scenario's map;
/// `#` starts a comment), as `roam import gnettrack --track` writes from a drive's GPS fixes.
/// It is played as a path: the phone stands at the first position until its time, then moves
/// from each position to the next at the speed that arrives on time.
public enum RecordedTrack {
    /// The most positions a track holds.
    public static let maximumPoints = 20_000
    /// The largest track file read.
    public static let maximumFileSize = 2 << 20

    /// Positions on the Earth as metres east and north of an origin: an equirectangular
    /// projection, within a metre over the tens of kilometres of a drive, to the decimetre.
    /// What `roam import gnettrack --track` and `roam import recording --track` write.
    public struct Projection: Sendable {
        public let latitude: Double
        public let longitude: Double
        private let metresPerDegree = 6_371_000 * Double.pi / 180
        private let east: Double

        /// A projection whose origin is `latitude`, `longitude` (degrees).
        public init(latitude: Double, longitude: Double) {
            self.latitude = latitude
            self.longitude = longitude
            east = metresPerDegree * cos(latitude * Double.pi / 180)
        }

        /// Where `latitude`, `longitude` is: metres east and north of the origin.
        public func metres(latitude: Double, longitude: Double) -> (x: Double, y: Double) {
            (((longitude - self.longitude) * east * 10).rounded() / 10, ((latitude - self.latitude) * metresPerDegree * 10).rounded() / 10)
        }
    }

    /// GPS fixes as a track file's text: a line a fix, `SECONDS,X,Y`, metres east and north of the
    /// first fix (``Projection``), to the millisecond; a fix not after the one before, or where it
    /// was, left out. What every importer's `--track` writes.
    ///
    /// - Parameters:
    ///   - fixes: Each fix's time from the start and its position, in time order.
    ///   - comment: The file's first line, a comment saying where it came from.
    /// - Returns: The text, or nil without fixes.
    public static func text(_ fixes: [(at: Duration, latitude: Double, longitude: Double)], comment: String) -> String? {
        guard let first = fixes.first else { return nil }
        let projection = Projection(latitude: first.latitude, longitude: first.longitude)
        var lines = ["# " + comment.filter { $0 != "\n" && $0 != "\r" }]
        var last: (at: Duration, x: Double, y: Double)?
        for fix in fixes {
            let (x, y) = projection.metres(latitude: fix.latitude, longitude: fix.longitude)
            if let last, fix.at <= last.at || (last.x == x && last.y == y) { continue }
            last = (fix.at, x, y)
            lines.append("\(((fix.at.seconds * 1000).rounded() / 1000).roamTrimmed),\(x.roamTrimmed),\(y.roamTrimmed)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Parses a track's text.
    ///
    /// - Parameter bytes: The file's bytes.
    /// - Returns: The positions in time order, or what is wrong and on which line.
    public static func parse(_ bytes: [UInt8]) -> Result<[(at: Duration, position: Position)], TraceError> {
        var points: [(at: Duration, position: Position)] = []
        for (offset, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let text = String(String(decoding: line, as: UTF8.self).filter { $0 != " " && $0 != "\t" && $0 != "\r" })
            if text.isEmpty || text.hasPrefix("#") { continue }
            func problem(_ message: String) -> Result<[(at: Duration, position: Position)], TraceError> {
                .failure(TraceError(line: offset + 1, message: message))
            }
            guard line.count <= 256 else { return problem("longer than a track's line (SECONDS,X,Y)") }
            let fields = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 3, fields.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && ($0.isNumber || $0 == "." || $0 == "-") } }),
                  let seconds = Double(fields[0]), let x = Double(fields[1]), let y = Double(fields[2]) else {
                return problem("not SECONDS,X,Y (three decimal numbers: seconds from the start, metres east and north)")
            }
            guard seconds >= 0, seconds <= ScenarioLimits.maximumDuration.seconds else { return problem("\(fields[0]) s is outside 0 to 24 h") }
            guard abs(x) <= 1_000_000, abs(y) <= 1_000_000 else { return problem("a position more than 1,000 km from the map's origin") }
            let at = Duration.milliseconds(Int64((seconds * 1000).rounded()))
            if let last = points.last, at <= last.at { return problem("\(fields[0]) s is not after the line before's") }
            guard points.count < maximumPoints else { return problem("more than \(maximumPoints) positions") }
            points.append((at, Position(x, y)))
        }
        guard !points.isEmpty else { return .failure(TraceError(line: 1, message: "no positions")) }
        return .success(points)
    }

    /// The positions as a path: where it starts and its legs.
    ///
    /// - Parameter points: From ``parse(_:)``.
    /// - Returns: The start and the legs, or the line (counted among positions) of a step faster
    ///   than a path may move (350 m/s: a GPS fix that jumped).
    public static func path(_ points: [(at: Duration, position: Position)]) -> Result<(start: Position, legs: [PhoneMovement.Leg]), TraceError> {
        guard let first = points.first else { return .failure(TraceError(line: 1, message: "no positions")) }
        var legs: [PhoneMovement.Leg] = []
        if first.at > .zero { legs.append(.pause(first.at)) }
        for (index, (before, now)) in zip(points, points.dropFirst()).enumerated() {
            let span = (now.at - before.at).seconds
            let distance = before.position.distance(to: now.position)
            if distance < 0.001 {
                legs.append(.pause(now.at - before.at))
                continue
            }
            let speed = distance / span
            guard speed <= 350 else {
                return .failure(TraceError(line: index + 2, message: "\(Int(distance)) m in \(span) s: faster than 350 m/s (a fix that jumped)"))
            }
            if speed < 0.01 {
                // Slower than a path moves: stand, then move at the slowest speed, to arrive on time.
                legs.append(.pause(.milliseconds(Int64(((span - distance / 0.01) * 1000).rounded(.down)))))
                legs.append(.move(to: now.position, speed: 0.01))
            } else {
                legs.append(.move(to: now.position, speed: speed))
            }
        }
        return .success((first.position, legs))
    }
}
