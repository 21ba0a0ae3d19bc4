import PathMonitor

/// Block-style YAML for a JSON value, as Kubernetes manifests are written: keys in their order,
/// every string double-quoted (so that `"5"` stays a string), numbers and booleans plain.
enum YAMLEmitter {
    static func document(_ value: JSONValue) -> String {
        var output = ""
        emit(value, indent: 0, into: &output)
        return output
    }

    private static func scalar(_ value: JSONValue) -> String? {
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .int(let number): return String(number)
        case .double(let number): return number.isFinite ? "\(number)" : ".nan"
        case .string: return value.serialized
        case .array(let items) where items.isEmpty: return "[]"
        case .object(let members) where members.isEmpty: return "{}"
        default: return nil
        }
    }

    private static func emit(_ value: JSONValue, indent: Int, into output: inout String) {
        let pad = String(repeating: " ", count: indent)
        switch value {
        case .object(let members):
            for (key, member) in members {
                if let text = scalar(member) {
                    output += "\(pad)\(key): \(text)\n"
                } else {
                    output += "\(pad)\(key):\n"
                    emit(member, indent: indent + 2, into: &output)
                }
            }
        case .array(let items):
            for item in items {
                if let text = scalar(item) {
                    output += "\(pad)- \(text)\n"
                } else {
                    // The item's first line follows the dash; the rest align under it.
                    var nested = ""
                    emit(item, indent: indent + 2, into: &nested)
                    output += pad + "- " + nested.dropFirst(indent + 2)
                }
            }
        default:
            output += pad + (scalar(value) ?? "") + "\n"
        }
    }
}
