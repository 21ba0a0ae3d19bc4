import Foundation

/// Seeded mutations of scenario text, as a careless or hostile author would make them: extreme
/// numbers, wrong units, deleted, repeated and swapped lines, stray bytes, cut files, odd names.
/// The same seed gives the same mutations, so a failure names the seed that replays it.
public struct ScenarioMutator {
    private var random: SeededGenerator

    public init(seed: UInt64) { random = SeededGenerator(seed: seed &+ 0x9E37_79B9_7F4A_7C15) }

    private mutating func step() -> UInt64 { random.next() }

    private mutating func below(_ bound: Int) -> Int { bound <= 1 ? 0 : Int(step() % UInt64(bound)) }

    private mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    static let numbers = ["0", "-1", "1e19", "99999999999999999999", "1e-9", "nan", "inf", "0.5", "18446744073709551616", "-0", "1e308", "3"]
    static let units = ["ns", "ms", "s", "h", "gbit", "kbit", "bit", "%", "b", "tib", "", "mb", "µs"]
    static let words = ["../x", "", "a b", "-x", String(repeating: "w", count: 300), "null", "~", "true", "{", "[", "\"", "'", "*anchor", "&a", "!!binary", ":"]
    static let bytes: [String] = ["\u{0}", "\u{1}", "\t", "\r", "\n", "\u{FEFF}", "\u{7F}", "\u{85}", ":", "{", "[", "\"", "#", "- ", "  ", "\u{2028}", "é", "\\"]
    static let snippets = [
        "  - {at: 1s, link: wifi, flap: {period: 10ms}}",
        "  - {at: 1s, link: wifi, up: true}",
        "  - {at: 1s, link: wifi, down: true, direction: up}",
        "  - {at: 1s, link: wifi, blackhole: false}",
        "  - {at: 0s, link: wifi, ramp: {to: {delay: 60s, rate: 100gbit}, over: 24h}}",
        "  - {name: x, kind: requests, from: server, to: phone, requestSize: 1b, interval: 1ns}",
        "  - {name: y, kind: command, from: phone, run: \"\"}",
        "  - {name: z, kind: bulk, from: server, to: phone, size: 1.5b}",
        "    trace: /dev/zero",
        "    env: {\"A=B\": x}",
        "  - {node: phone, path: cellular, within: 1s, after: {link: wifi, event: ramp}}",
        "name: ../../etc",
        "duration: 99999999999h",
        "*alias",
        "<<: *x",
        "&a [*a]",
    ]

    /// `text` with one to three mutations.
    public mutating func mutate(_ text: String) -> String {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for _ in 0...below(3) {
            guard !lines.isEmpty else { break }
            let index = below(lines.count)
            switch below(9) {
            case 0: lines[index] = replaceNumber(in: lines[index])
            case 1: lines[index] = replaceUnit(in: lines[index])
            case 2: lines.remove(at: index)
            case 3: lines.insert(lines[index], at: index)
            case 4:
                let line = Array(lines[index])
                let at = below(line.count + 1)
                lines[index] = String(line[..<at]) + pick(Self.bytes) + String(line[at...])
            case 5: lines.swapAt(index, below(lines.count))
            case 6:
                let joined = lines.joined(separator: "\n")
                let cut = below(joined.count + 1)
                lines = String(joined.prefix(cut)).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            case 7: lines[index] = replaceWord(in: lines[index])
            default: lines.insert(pick(Self.snippets), at: index)
            }
        }
        return lines.joined(separator: "\n")
    }

    private mutating func replaceNumber(in line: String) -> String {
        let characters = Array(line)
        guard let start = characters.indices.filter({ characters[$0].isNumber }).randomElement(using: &self) else { return line + " " + pick(Self.numbers) }
        var end = start
        while end < characters.count, characters[end].isNumber || characters[end] == "." { end += 1 }
        var begin = start
        while begin > 0, characters[begin - 1].isNumber || characters[begin - 1] == "." { begin -= 1 }
        return String(characters[..<begin]) + pick(Self.numbers) + String(characters[end...])
    }

    private mutating func replaceUnit(in line: String) -> String {
        for unit in ["ms", "mbit", "kbit", "%", "s", "mb", "kb"] where line.contains(unit) {
            return line.replacingFirst(unit, with: pick(Self.units))
        }
        return line
    }

    private mutating func replaceWord(in line: String) -> String {
        guard let colon = line.firstIndex(of: ":") else { return pick(Self.words) }
        return String(line[...colon]) + " " + pick(Self.words)
    }
}

extension ScenarioMutator: RandomNumberGenerator {
    public mutating func next() -> UInt64 { step() }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = range(of: target) else { return self }
        return replacingCharacters(in: range, with: replacement)
    }
}
