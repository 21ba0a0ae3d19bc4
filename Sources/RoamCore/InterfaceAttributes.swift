/// Attributes that override what the kernel says of an interface: its type, whether it is
/// expensive, constrained or ultra-constrained, and its link quality. A nil field leaves the
/// value to the next source.
///
/// The textual form is a list of items separated by commas or spaces:
///
/// | item | meaning |
/// |---|---|
/// | `type=T` | the interface type: `wifi`, `cellular`, `wiredEthernet` (or `wired`, `ethernet`), `loopback`, `other` |
/// | `expensive` / `expensive=false` | mark the interface expensive, or not (cellular is expensive unless said otherwise) |
/// | `constrained` / `constrained=false` | mark the interface constrained (Low Data Mode), or not |
/// | `ultraConstrained` / `ultraConstrained=false` | mark the interface ultra-constrained (a carrier's satellite network), or not; ultra-constrained is also constrained unless `constrained=false` says otherwise |
/// | `quality=Q` | the link quality: `unknown`, `minimal`, `moderate`, `good` |
///
/// Boolean values may be written `true`/`false`, `yes`/`no`, `on`/`off` or `1`/`0`.
/// An alias tag is this form behind `roam:`, for example `roam:type=cellular,expensive,constrained`.
public struct InterfaceAttributes: Sendable, Hashable {
    public var type: InterfaceType?
    public var isExpensive: Bool?
    public var isConstrained: Bool?
    public var isUltraConstrained: Bool?
    public var linkQuality: LinkQuality?

    public init(type: InterfaceType? = nil, isExpensive: Bool? = nil, isConstrained: Bool? = nil,
                isUltraConstrained: Bool? = nil, linkQuality: LinkQuality? = nil) {
        self.type = type
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
        self.isUltraConstrained = isUltraConstrained
        self.linkQuality = linkQuality
    }

    /// True when no attribute is set.
    public var isEmpty: Bool {
        type == nil && isExpensive == nil && isConstrained == nil && isUltraConstrained == nil && linkQuality == nil
    }

    /// These attributes, with every attribute that `other` sets taken from `other`.
    public func overridden(by other: InterfaceAttributes) -> InterfaceAttributes {
        InterfaceAttributes(
            type: other.type ?? type,
            isExpensive: other.isExpensive ?? isExpensive,
            isConstrained: other.isConstrained ?? isConstrained,
            isUltraConstrained: other.isUltraConstrained ?? isUltraConstrained,
            linkQuality: other.linkQuality ?? linkQuality
        )
    }

    /// A problem found while parsing attributes.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The offending item, as written.
        public var item: String
        /// What is wrong with it.
        public var message: String
        public var description: String { "'\(item)': \(message)" }
    }

    /// Parses the textual form (see the type's documentation). Separators and keys are ASCII,
    /// keys compared without regard to case. Read byte by byte, not character by character:
    /// a path monitor parses an interface's tag again on every change of its alias.
    public init(parsing text: some StringProtocol) throws(ParseError) {
        self.init()
        let text = Substring(text)
        for item in Self.words(of: text, separatedBy: { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) {
            try parse(item: item)
        }
    }

    private mutating func parse(item: Substring) throws(ParseError) {
        let equals = item.utf8.firstIndex(of: UInt8(ascii: "="))
        let key = item[..<(equals ?? item.endIndex)]
        let value = equals.map { String(item[item.utf8.index(after: $0)...]) }
        if Self.matches(key, "type") {
            guard let value, let type = InterfaceType(name: value) else {
                throw ParseError(item: String(item), message: "type must be one of wifi, cellular, wiredEthernet, loopback, other")
            }
            self.type = type
        } else if Self.matches(key, "expensive") {
            isExpensive = try Self.boolean(value, item: item)
        } else if Self.matches(key, "constrained") {
            isConstrained = try Self.boolean(value, item: item)
        } else if Self.matches(key, "ultraconstrained") || Self.matches(key, "ultra-constrained") {
            isUltraConstrained = try Self.boolean(value, item: item)
        } else if Self.matches(key, "quality") {
            guard let value, let quality = LinkQuality(rawValue: value.lowercased()) else {
                throw ParseError(item: String(item), message: "quality must be one of unknown, minimal, moderate, good")
            }
            linkQuality = quality
        } else {
            let key = key.lowercased()
            let known = ["type", "expensive", "constrained", "ultraConstrained", "quality"]
            let suggestion = known.first { $0.lowercased().hasPrefix(String(key.prefix(3))) }
            throw ParseError(item: String(item), message: "unknown attribute '\(key)'" + (suggestion.map { " (did you mean '\($0)'?)" } ?? "") + "; known: type=, expensive, constrained, ultraConstrained, quality=")
        }
    }

    /// Whether `key` is `lowercase` (ASCII), whatever the case of its letters.
    private static func matches(_ key: Substring, _ lowercase: StaticString) -> Bool {
        let bytes = key.utf8
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        var index = 0
        for byte in bytes {
            let folded = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
            guard folded == lowercase.utf8Start[index] else { return false }
            index += 1
        }
        return true
    }

    /// The non-empty runs of `text` between separator bytes (each an ASCII character, so that
    /// every run starts and ends on a Unicode scalar of `text`).
    static func words(of text: Substring, separatedBy separates: (UInt8) -> Bool) -> [Substring] {
        var words: [Substring] = []
        let bytes = text.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex {
            if separates(bytes[start]) {
                start = bytes.index(after: start)
                continue
            }
            var end = bytes.index(after: start)
            while end < bytes.endIndex, !separates(bytes[end]) { end = bytes.index(after: end) }
            words.append(text[start..<end])
            start = end
        }
        return words
    }

    private static func boolean(_ value: String?, item: some StringProtocol) throws(ParseError) -> Bool {
        guard let value else { return true }
        switch value.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw ParseError(item: String(item), message: "expected true or false")
        }
    }

    /// The textual form, as ``init(parsing:)`` reads it.
    public var text: String {
        var items: [String] = []
        if let type { items.append("type=\(type.rawValue)") }
        if let isExpensive { items.append(isExpensive ? "expensive" : "expensive=false") }
        if let isConstrained { items.append(isConstrained ? "constrained" : "constrained=false") }
        if let isUltraConstrained { items.append(isUltraConstrained ? "ultraConstrained" : "ultraConstrained=false") }
        if let linkQuality { items.append("quality=\(linkQuality.rawValue)") }
        return items.joined(separator: ",")
    }
}

/// The tags Roam reads from an interface's alias (`ip link set DEV alias ...`).
///
/// A tag is the word `roam:` followed by attributes (see ``InterfaceAttributes``), with no
/// spaces inside, for example `roam:type=cellular,expensive,constrained`. It may stand anywhere
/// in the alias, separated by spaces from other text: `uplink roam:type=wifi` is valid. Where
/// several tags stand in one alias, later ones override earlier ones.
public enum InterfaceTag {
    /// The prefix that marks a tag.
    public static let prefix = "roam:"

    /// The attributes of every tag in `alias`. Unparsable tags are skipped (the alias belongs to
    /// the system, and a monitor must not fail on it); ``problems(inAlias:)`` reports them.
    public static func attributes(fromAlias alias: String?) -> InterfaceAttributes {
        var result = InterfaceAttributes()
        for tag in tags(in: alias) {
            if let attributes = try? InterfaceAttributes(parsing: tag) {
                result = result.overridden(by: attributes)
            }
        }
        return result
    }

    /// The problems of the tags in `alias`, for tools that check tags they wrote.
    public static func problems(inAlias alias: String?) -> [InterfaceAttributes.ParseError] {
        tags(in: alias).compactMap { tag in
            do throws(InterfaceAttributes.ParseError) {
                _ = try InterfaceAttributes(parsing: tag)
                return nil
            } catch { return error }
        }
    }

    /// The alias text that carries `attributes` as a tag.
    public static func alias(for attributes: InterfaceAttributes) -> String {
        prefix + attributes.text
    }

    private static func tags(in alias: String?) -> [Substring] {
        guard let alias else { return [] }
        let marker = Array(prefix.utf8)
        return InterfaceAttributes.words(of: Substring(alias), separatedBy: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }).compactMap { word in
            word.utf8.starts(with: marker) ? word[word.utf8.index(word.startIndex, offsetBy: marker.count)...] : nil
        }
    }
}
