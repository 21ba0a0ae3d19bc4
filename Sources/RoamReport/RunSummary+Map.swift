import RoamCore
import RoamSystem

extension RunSummary {
    /// Where a scenario's phones went (`mobility:`), for the report's map and signal chart: the
    /// access points, cell sites and obstacles, and each phone's track, a point a step (at most
    /// ``maximumPoints`` a phone), with the network and transmitter it used and that signal.
    public struct MobilityMap: Sendable, Hashable {
        public struct Transmitter: Sendable, Hashable {
            public var name: String
            public var network: String
            public var isCellular: Bool
            public var x: Double
            public var y: Double

            public init(name: String, network: String, isCellular: Bool, x: Double, y: Double) {
                self.name = name
                self.network = network
                self.isCellular = isCellular
                self.x = x
                self.y = y
            }
        }

        public struct Obstacle: Sendable, Hashable {
            public var name: String
            public var x0: Double, y0: Double, x1: Double, y1: Double

            public init(name: String, x0: Double, y0: Double, x1: Double, y1: Double) {
                self.name = name
                (self.x0, self.y0, self.x1, self.y1) = (x0, y0, x1, y1)
            }
        }

        /// Where a phone was at `t` (seconds of the run), and what it used: the Wi-Fi network
        /// when it had one, else the cellular one, else none (nil).
        public struct Point: Sendable, Hashable {
            public var t: Double
            public var x: Double
            public var y: Double
            public var network: String?
            public var transmitter: String?
            /// RSSI (Wi-Fi) or RSRP (cellular) from ``transmitter``, dBm.
            public var signal: Double?

            public init(t: Double, x: Double, y: Double, network: String?, transmitter: String?, signal: Double?) {
                (self.t, self.x, self.y) = (t, x, y)
                self.network = network
                self.transmitter = transmitter
                self.signal = signal
            }
        }

        public struct Track: Sendable, Hashable {
            public var node: String
            public var points: [Point]

            public init(node: String, points: [Point]) {
                self.node = node
                self.points = points
            }
        }

        public var transmitters: [Transmitter]
        public var obstacles: [Obstacle]
        public var tracks: [Track]

        /// The most points a track keeps (a longer walk is thinned evenly), and the most
        /// transmitters, obstacles and tracks a map holds: a report stays a size a browser draws.
        public static let maximumPoints = 1000
        public static let maximumItems = 1000
        /// Coordinates are metres within ±10,000 km; a reader clamps what lies beyond.
        static let maximumCoordinate = 1e7

        public init(transmitters: [Transmitter], obstacles: [Obstacle], tracks: [Track]) {
            self.transmitters = transmitters
            self.obstacles = obstacles
            self.tracks = tracks
        }

        /// The map as `summary.json` holds it (points as `[t, x, y, network, transmitter, dBm]`).
        public var json: JSONValue {
            func number(_ value: Double) -> JSONValue { .number(value, digits: 100) }
            func optional(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
            return .object([
                ("transmitters", .array(transmitters.map { transmitter in
                    .object([("name", .string(transmitter.name)), ("network", .string(transmitter.network)),
                             ("kind", .string(transmitter.isCellular ? "cell" : "ap")), ("x", number(transmitter.x)), ("y", number(transmitter.y))])
                })),
                ("obstacles", .array(obstacles.map { obstacle in
                    .object([("name", .string(obstacle.name)), ("from", .array([number(obstacle.x0), number(obstacle.y0)])),
                             ("to", .array([number(obstacle.x1), number(obstacle.y1)]))])
                })),
                ("tracks", .array(tracks.map { track in
                    .object([("node", .string(track.node)), ("points", .array(track.points.map { point in
                        .array([.number(point.t, digits: 1000), number(point.x), number(point.y), optional(point.network),
                                optional(point.transmitter), point.signal.map { .number($0, digits: 10) } ?? .null])
                    }))])
                })),
            ])
        }

        /// Reads a map from `summary.json`, within the bounds above.
        public init(json: JSONValue) throws(ReportError) {
            let fields = JSONFields(json, place: "summary.json 'map'")
            func coordinate(_ value: JSONValue?, _ what: String) throws(ReportError) -> Double {
                guard let number = value?.doubleValue, number.isFinite else { throw fields.error("\(what) that is not a finite number") }
                return min(max(number, -Self.maximumCoordinate), Self.maximumCoordinate)
            }
            func pair(_ value: JSONValue?, _ what: String) throws(ReportError) -> (Double, Double) {
                guard let items = value?.arrayValue, items.count == 2 else { throw fields.error("\(what) that is not [x, y]") }
                return (try coordinate(items[0], what), try coordinate(items[1], what))
            }
            transmitters = try fields.list("transmitters", limit: Self.maximumItems) { item throws(ReportError) in
                let entry = JSONFields(item, place: "summary.json 'map' 'transmitters'")
                return Transmitter(name: try entry.string("name"), network: try entry.string("network"),
                                   isCellular: try entry.string("kind") == "cell",
                                   x: try coordinate(item["x"], "x"), y: try coordinate(item["y"], "y"))
            }
            obstacles = try fields.list("obstacles", limit: Self.maximumItems) { item throws(ReportError) in
                let entry = JSONFields(item, place: "summary.json 'map' 'obstacles'")
                let (x0, y0) = try pair(item["from"], "from")
                let (x1, y1) = try pair(item["to"], "to")
                return Obstacle(name: try entry.string("name"), x0: x0, y0: y0, x1: x1, y1: y1)
            }
            tracks = try fields.list("tracks", limit: Self.maximumItems) { item throws(ReportError) in
                let entry = JSONFields(item, place: "summary.json 'map' 'tracks'")
                let points = try entry.list("points", limit: Self.maximumPoints) { point throws(ReportError) in
                    guard let values = point.arrayValue, values.count == 6 else {
                        throw entry.error("a point that is not [t, x, y, network, transmitter, dBm]")
                    }
                    func text(_ value: JSONValue) throws(ReportError) -> String? {
                        if value == .null { return nil }
                        guard let text = value.stringValue else { throw entry.error("a point whose network or transmitter is not a string") }
                        return text
                    }
                    let signal: Double? = values[5] == .null ? nil : try coordinate(values[5], "a signal")
                    return Point(t: try coordinate(values[0], "a time"), x: try coordinate(values[1], "x"), y: try coordinate(values[2], "y"),
                                 network: try text(values[3]), transmitter: try text(values[4]), signal: signal)
                }
                return Track(node: try entry.string("node"), points: points)
            }
        }
    }
}
