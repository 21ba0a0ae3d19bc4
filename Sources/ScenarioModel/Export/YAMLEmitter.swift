import RoamCore

/// Block-style YAML for a JSON value, as Kubernetes manifests are written (and as Yams writes
/// them: lists in a mapping at the key's indent): keys in their order; every string value
/// double-quoted, so that `"5"`, `"true"` or `"null"` stay strings; numbers and booleans plain;
/// infinities as `.inf`. Written in one pass into one buffer, so that a Workflow of 200,000
/// steps costs its size and no more (libyaml through Yams' node tree took tens of kilobytes a
/// step); the tests read it back with Yams.
///
/// A key is written plain only when it reads back as the same string (letters, digits and
/// `_ . / -`, not starting with a digit or sign, and not a word YAML reads as a boolean or
/// null); any other key (a label key with `: ` or `#`, a key of digits) is double-quoted.
package enum YAMLEmitter {
    package static func document(_ value: JSONValue) -> String {
        var writer = Writer()
        switch value {
        case .object(let members) where !members.isEmpty: writer.mapping(members, indent: 0, continuing: false)
        case .array(let items) where !items.isEmpty: writer.sequence(items, indent: 0, continuing: false)
        default:
            writer.scalar(value)
            writer.bytes.append(0x0A)
        }
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    private struct Writer {
        var bytes: [UInt8] = []

        mutating func text(_ text: String) { bytes.append(contentsOf: text.utf8) }

        mutating func spaces(_ count: Int) { bytes.append(contentsOf: repeatElement(0x20, count: count)) }

        /// `continuing`: the first member goes on the line already begun (after `- `).
        mutating func mapping(_ members: [(String, JSONValue)], indent: Int, continuing: Bool) {
            for (index, (key, member)) in members.enumerated() {
                if index > 0 || !continuing { spaces(indent) }
                if isPlainSafe(key) { text(key) } else { quoted(key) }
                bytes.append(UInt8(ascii: ":"))
                switch member {
                case .object(let nested) where !nested.isEmpty:
                    bytes.append(0x0A)
                    mapping(nested, indent: indent + 2, continuing: false)
                case .array(let items) where !items.isEmpty:
                    bytes.append(0x0A)
                    sequence(items, indent: indent, continuing: false)
                default:
                    bytes.append(0x20)
                    scalar(member)
                    bytes.append(0x0A)
                }
            }
        }

        mutating func sequence(_ items: [JSONValue], indent: Int, continuing: Bool) {
            for (index, item) in items.enumerated() {
                if index > 0 || !continuing { spaces(indent) }
                text("- ")
                switch item {
                case .object(let members) where !members.isEmpty: mapping(members, indent: indent + 2, continuing: true)
                case .array(let nested) where !nested.isEmpty: sequence(nested, indent: indent + 2, continuing: true)
                default:
                    scalar(item)
                    bytes.append(0x0A)
                }
            }
        }

        /// A scalar, or an empty mapping or list (`{}`, `[]`).
        mutating func scalar(_ value: JSONValue) {
            switch value {
            case .null: text("null")
            case .bool(let flag): text(flag ? "true" : "false")
            case .int(let number): text(String(number))
            case .double(let number): text(number.isNaN ? ".nan" : number.isInfinite ? (number < 0 ? "-.inf" : ".inf") : "\(number)")
            case .string(let string): quoted(string)
            case .array: text("[]")
            case .object: text("{}")
            }
        }

        /// A double-quoted scalar: `"` and the backslash escaped, line breaks, controls, C1 controls, the
        /// Unicode line and paragraph separators and a byte-order mark as escapes; the rest as is.
        mutating func quoted(_ string: String) {
            bytes.append(UInt8(ascii: "\""))
            for scalar in string.unicodeScalars {
                switch scalar {
                case "\"": text("\\\"")
                case "\\": text("\\\\")
                case "\n": text("\\n")
                case "\t": text("\\t")
                case "\r": text("\\r")
                case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
                    || scalar.value == 0x2028 || scalar.value == 0x2029 || scalar.value == 0xFEFF
            || scalar.value == 0xFFFE || scalar.value == 0xFFFF:
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    text("\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex)
                default:
                    bytes.append(contentsOf: String(scalar).utf8)
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }
    }

    private static let implicitWords: Set<String> = [
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~",
    ]

    /// Whether `key`, written plain, reads back as the same string under YAML 1.1 and 1.2.
    static func isPlainSafe(_ key: String) -> Bool {
        guard let first = key.unicodeScalars.first, first.properties.isAlphabetic || first == "_" else { return false }
        guard !implicitWords.contains(key.lowercased()) else { return false }
        return key.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "_./-".unicodeScalars.contains(scalar))
        }
    }
}
