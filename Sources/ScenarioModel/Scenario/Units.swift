import RoamCore
import RoamSystem

/// Parsers for the units scenario files use: durations (`250ms`, `30s`), rates (`10mbit`,
/// `512kbit`) and percentages (`0.5%`). Each returns nil with a message when the text is not valid.
public enum Units {
    /// A duration: a number with `ns`, `us`, `ms`, `s`, `m` or `h`; `1.5s` and `-5ms` parse (the
    /// caller decides whether negative values make sense).
    public static func duration(_ text: String) -> Result<Duration, UnitError> {
        let units: [(String, Double)] = [("ns", 1e-9), ("us", 1e-6), ("µs", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60), ("h", 3600)]
        guard let (number, unit) = split(text), let scale = units.first(where: { $0.0 == unit })?.1 else {
            return .failure(UnitError("'\(escapedForMessage(text))' is not a duration; write a number with a unit: 250ms, 30s, 2m"))
        }
        let nanoseconds = (number * scale * 1e9).rounded()
        // Every duration a scenario may hold is far shorter (ScenarioLimits); this only keeps the
        // conversion to whole nanoseconds from trapping, and the caller checks the real bound.
        guard nanoseconds.magnitude < 9e18 else {
            return .failure(UnitError("'\(escapedForMessage(text))' is too long a duration; the longest a scenario holds is \(ScenarioLimits.maximumDuration.roamDescription)"))
        }
        return .success(.nanoseconds(Int64(nanoseconds)))
    }

    /// A rate in bits per second: a number with `bit`, `kbit`, `mbit` or `gbit` (decimal
    /// multiples, as `tc` reads them). `bps`-style units are refused: tc reads them as bytes.
    /// The caller checks the range (``ScenarioLimits``).
    public static func rate(_ text: String) -> Result<Rate, UnitError> {
        let units: [(String, Double)] = [("bit", 1), ("kbit", 1e3), ("mbit", 1e6), ("gbit", 1e9)]
        guard let (number, unit) = split(text.lowercased()), let scale = units.first(where: { $0.0 == unit })?.1 else {
            return .failure(UnitError("'\(escapedForMessage(text))' is not a rate; write a number with bit, kbit, mbit or gbit: 512kbit, 10mbit"))
        }
        return .success(Rate(bitsPerSecond: number * scale))
    }

    /// A percentage, `0.5%`, as a fraction (0.005). The number is written in decimal, as every
    /// number in a scenario is (`0x10%` and `1e1%` are refused, as rates and durations refuse them).
    public static func percentage(_ text: String) -> Result<Double, UnitError> {
        guard text.hasSuffix("%"), let number = decimal(text.dropLast().trimmingCharacters(in: " ")) else {
            return .failure(UnitError("'\(escapedForMessage(text))' is not a percentage; write it with a % sign: 0.5%, 40%"))
        }
        return .success(number / 100)
    }

    /// A size in bytes: a number with `b`, `kb`, `mb` or `gb` (multiples of 1000), or `kib`,
    /// `mib`, `gib` (multiples of 1024).
    /// A size is a whole number of bytes: `1.5kb` is 1500 bytes, `1.5b` is refused.
    public static func size(_ text: String) -> Result<Int64, UnitError> {
        let units: [(String, Double)] = [("b", 1), ("kb", 1e3), ("mb", 1e6), ("gb", 1e9), ("tb", 1e12), ("kib", 1024), ("mib", 1_048_576),
                                         ("gib", 1_073_741_824), ("tib", 1_099_511_627_776)]
        guard let (number, unit) = split(text.lowercased()), let scale = units.first(where: { $0.0 == unit })?.1 else {
            return .failure(UnitError("'\(escapedForMessage(text))' is not a size; write a number with b, kb, mb or gb: 10mb, 64kib"))
        }
        let bytes = number * scale
        guard bytes.magnitude < 9e18 else {
            return .failure(UnitError("'\(escapedForMessage(text))' is too large a size; the largest is \(ScenarioLimits.maximumSize) bytes (1tib)"))
        }
        // Decimal fractions are not exact in binary: 1.001kb is 1000.9999999999999 bytes.
        guard (bytes - bytes.rounded()).magnitude < 1e-9 * max(1, bytes.magnitude) else {
            return .failure(UnitError("'\(escapedForMessage(text))' is not a whole number of bytes (\(bytes)); sizes count whole bytes"))
        }
        return .success(Int64(bytes.rounded()))
    }

    /// Splits `12.5ms` into 12.5 and `ms`.
    private static func split(_ text: String) -> (Double, String)? {
        let trimmed = text.trimmingCharacters(in: " ")
        guard let unitStart = trimmed.firstIndex(where: { $0.isLetter || $0 == "µ" }) else { return nil }
        guard let number = decimal(trimmed[..<unitStart].trimmingCharacters(in: " ")), number.isFinite else { return nil }
        return (number, String(trimmed[unitStart...]))
    }

    /// A number written in plain decimal: an optional sign, digits, and an optional fraction
    /// (`12`, `-5`, `0.5`, `.5`); not hexadecimal, not an exponent, not `inf` or `nan`.
    static func decimal(_ text: String) -> Double? {
        var scalars = Substring(text).unicodeScalars[...]
        if let first = scalars.first, first == "+" || first == "-" { scalars = scalars.dropFirst() }
        var digits = 0, points = 0
        for scalar in scalars {
            if ("0"..."9").contains(scalar) {
                digits += 1
            } else if scalar == ".", points == 0 {
                points += 1
            } else {
                return nil
            }
        }
        guard digits > 0 else { return nil }
        return Double(text)
    }
}

/// Why a value could not be read in its unit.
public struct UnitError: Error, Sendable, Equatable {
    public var message: String
    init(_ message: String) { self.message = message }
}

/// A data rate.
public struct Rate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var bitsPerSecond: Double
    public init(bitsPerSecond: Double) { self.bitsPerSecond = bitsPerSecond }
    public static func kbit(_ value: Double) -> Rate { Rate(bitsPerSecond: value * 1e3) }
    public static func mbit(_ value: Double) -> Rate { Rate(bitsPerSecond: value * 1e6) }
    public static func < (lhs: Rate, rhs: Rate) -> Bool { lhs.bitsPerSecond < rhs.bitsPerSecond }
    public var description: String {
        for (unit, scale) in [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)] where bitsPerSecond >= scale {
            return "\(trim(bitsPerSecond / scale))\(unit)"
        }
        return "\(trim(bitsPerSecond))bit"
    }
}

/// A number without a trailing `.0`; any Double, however large, prints without trapping.
func trim(_ value: Double) -> String {
    value == value.rounded() && value.magnitude < 9e15 ? String(Int64(value)) : String(value)
}

extension StringProtocol {
    func trimmingCharacters(in set: Character) -> String {
        var text = Substring(self)
        while text.first == set { text = text.dropFirst() }
        while text.last == set { text = text.dropLast() }
        return String(text)
    }
}
