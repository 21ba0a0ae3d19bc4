import Glibc

/// Wall-clock time formatted as RFC 3339 in UTC with microseconds: `2026-11-23T08:15:02.123456Z`.
package enum RFC3339 {
    /// The current time.
    ///
    /// - Returns: The wall clock's time now, formatted.
    public static func now() -> String {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return format(seconds: Int(time.tv_sec), nanoseconds: Int(time.tv_nsec))
    }

    /// The time `seconds` + `nanoseconds` after the Unix epoch.
    ///
    /// - Parameters:
    ///   - seconds: Whole seconds since the epoch.
    ///   - nanoseconds: Nanoseconds past them (their microseconds are written).
    /// - Returns: The time, formatted.
    public static func format(seconds: Int, nanoseconds: Int) -> String {
        var value = time_t(seconds)
        var parts = tm()
        gmtime_r(&value, &parts)
        func pad(_ number: Int32, _ width: Int) -> String {
            let text = String(number)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))."
            + "\(pad(Int32(nanoseconds / 1000), 6))Z"
    }
}
