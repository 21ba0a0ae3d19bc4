import Foundation
import Yams

/// A Kubernetes structural schema (a CRD's `openAPIV3Schema`) checked as the API server checks
/// an object against it: types, required fields, enums, patterns, bounds, and, where the
/// schema lists `properties`, no unknown fields (what `kubectl --validate=strict` rejects).
struct StructuralSchema: @unchecked Sendable {  // immutable after init
    let root: [String: Any]

    /// The `v1alpha1` schema of the CRD in `file`.
    init(crd file: String) throws {
        let text = try String(contentsOfFile: file, encoding: .utf8)
        guard let crd = try Yams.load(yaml: text) as? [String: Any],
              let spec = crd["spec"] as? [String: Any],
              let versions = spec["versions"] as? [[String: Any]],
              let version = versions.first(where: { $0["name"] as? String == "v1alpha1" }),
              let schema = (version["schema"] as? [String: Any])?["openAPIV3Schema"] as? [String: Any] else {
            throw CocoaError(.fileReadCorruptFile)
        }
        root = schema
    }

    /// Every violation, each with its path (`spec.templates[2].deadline: ...`).
    func violations(of value: Any) -> [String] {
        var problems: [String] = []
        check(value, against: root, at: "", into: &problems)
        return problems
    }

    private func check(_ value: Any, against schema: [String: Any], at path: String, into problems: inout [String]) {
        let here = path.isEmpty ? "(root)" : path
        if schema["x-kubernetes-int-or-string"] as? Bool == true {
            if !(value is Int || value is String) { problems.append("\(here): expected an integer or a string") }
            return
        }
        switch schema["type"] as? String {
        case "object":
            guard let object = value as? [String: Any] else { problems.append("\(here): expected an object, got \(type(of: value))"); return }
            for key in (schema["required"] as? [String]) ?? [] where object[key] == nil {
                problems.append("\(here): missing required field '\(key)'")
            }
            let properties = schema["properties"] as? [String: Any]
            let additional = schema["additionalProperties"]
            let preserve = schema["x-kubernetes-preserve-unknown-fields"] as? Bool == true
            for (key, member) in object {
                let memberPath = path.isEmpty ? key : "\(path).\(key)"
                if let property = properties?[key] as? [String: Any] {
                    check(member, against: property, at: memberPath, into: &problems)
                } else if let additional = additional as? [String: Any] {
                    check(member, against: additional, at: memberPath, into: &problems)
                } else if properties != nil, !preserve, additional as? Bool != true {
                    problems.append("\(here): unknown field '\(key)'")
                }
            }
        case "array":
            guard let array = value as? [Any] else { problems.append("\(here): expected an array"); return }
            if let items = schema["items"] as? [String: Any] {
                for (index, item) in array.enumerated() { check(item, against: items, at: "\(path)[\(index)]", into: &problems) }
            }
        case "string":
            guard let string = value as? String else { problems.append("\(here): expected a string, got \(value)"); return }
            if let options = schema["enum"] as? [Any], !options.contains(where: { "\($0)" == string }) {
                problems.append("\(here): '\(string)' is not one of \(options.map { "\($0)" }.joined(separator: ", "))")
            }
            if let pattern = schema["pattern"] as? String, string.range(of: pattern, options: .regularExpression) == nil {
                problems.append("\(here): '\(string)' does not match \(pattern)")
            }
            if let maximum = schema["maxLength"] as? Int, string.count > maximum { problems.append("\(here): longer than \(maximum)") }
        case "integer":
            guard let integer = value as? Int else { problems.append("\(here): expected an integer, got \(value)"); return }
            if let minimum = schema["minimum"] as? Int, integer < minimum { problems.append("\(here): \(integer) is below \(minimum)") }
            if let maximum = schema["maximum"] as? Int, integer > maximum { problems.append("\(here): \(integer) is above \(maximum)") }
            if schema["format"] as? String == "int32", !(Int(Int32.min)...Int(Int32.max)).contains(integer) { problems.append("\(here): not an int32") }
        case "number":
            if !(value is Int || value is Double) { problems.append("\(here): expected a number") }
        case "boolean":
            if !(value is Bool) { problems.append("\(here): expected a boolean") }
        default:
            break
        }
    }
}
