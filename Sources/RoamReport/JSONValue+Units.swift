import RoamCore
import RoamSystem

extension JSONValue {
    /// Seconds with microsecond resolution.
    package static func seconds(_ duration: Duration) -> JSONValue {
        .double((Double(duration.nanoseconds) / 1000).rounded() / 1_000_000)
    }

    package static func milliseconds(_ duration: Duration?) -> JSONValue {
        guard let duration else { return .null }
        return .double((duration.milliseconds * 1000).rounded() / 1000)
    }

    package static func number(_ value: Double?, digits: Double = 1000) -> JSONValue {
        guard let value, value.isFinite else { return .null }
        return .double((value * digits).rounded() / digits)
    }
}
