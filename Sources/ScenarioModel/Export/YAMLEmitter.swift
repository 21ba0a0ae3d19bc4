import PathMonitor
import Yams

/// Block-style YAML for a JSON value, as Kubernetes manifests are written, emitted by Yams
/// (libyaml): keys in their order; every string value double-quoted, so that `"5"`, `"true"`
/// or `"null"` stay strings; numbers and booleans plain; infinities as `.inf`.
///
/// A key is written plain only when it reads back as the same string (letters, digits and
/// `_ . / -`, not starting with a digit or sign, and not a word YAML reads as a boolean or
/// null); any other key (a label key with `: ` or `#`, a key of digits) is double-quoted.
enum YAMLEmitter {
    static func document(_ value: JSONValue) -> String {
        do {
            return try Yams.serialize(node: node(value), indent: 2, width: -1, allowUnicode: true)
        } catch {
            // libyaml refuses only malformed event streams, which a JSON value cannot make.
            preconditionFailure("YAML emitter failed on a JSON value: \(error)")
        }
    }

    private static func node(_ value: JSONValue) -> Node {
        switch value {
        case .null: return Node("null", Tag(.null))
        case .bool(let flag): return Node(flag ? "true" : "false", Tag(.bool))
        case .int(let number): return Node(String(number), Tag(.int))
        case .double(let number):
            let text = number.isNaN ? ".nan" : number.isInfinite ? (number < 0 ? "-.inf" : ".inf") : "\(number)"
            return Node(text, Tag(.float))
        case .string(let text): return Node(text, Tag(.str), .doubleQuoted)
        case .array(let items): return Node(items.map(node), Tag(.seq), items.isEmpty ? .flow : .block)
        case .object(let members):
            let pairs = members.map { (key, member) in
                (Node(key, Tag(.str), isPlainSafe(key) ? .plain : .doubleQuoted), node(member))
            }
            return Node(pairs, Tag(.map), members.isEmpty ? .flow : .block)
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
