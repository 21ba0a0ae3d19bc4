import PathMonitor
@testable import ScenarioModel
import Testing
import Yams

/// The export's YAML, emitted by Yams: what it writes reads back as the same value, whatever the
/// keys and numbers.
@Suite struct YAMLEmitterTests {
    @Test func keysThatYAMLWouldReadAsSomethingElseAreQuoted() throws {
        let keys = ["true", "on", "No", "null", "~", "5", "-1", "a: b", "#c", "x #y", "", " padded", "app.kubernetes.io/name", "plain_key"]
        let value = JSONValue.object(keys.map { ($0, .string("v")) })
        let text = YAMLEmitter.document(value)
        let read = try #require(try Yams.load(yaml: text) as? [String: Any], "\(text)")
        #expect(Set(read.keys) == Set(keys), "\(text)")
        #expect(text.contains("app.kubernetes.io/name: \"v\"") && text.contains("plain_key: \"v\""), "plain where it is safe: \(text)")
        #expect(text.contains("\"true\": \"v\"") && text.contains("\"5\": \"v\""), "\(text)")
    }

    @Test func valuesKeepTheirTypes() throws {
        let value = JSONValue.object([
            ("string", .string("5")), ("bool", .string("true")), ("int", .int(5)), ("double", .double(0.25)),
            ("infinite", .double(.infinity)), ("negative", .double(-.infinity)), ("missing", .null), ("flag", .bool(false)),
            ("list", .array([.string("a"), .object([("k", .int(1))])])), ("empty", .array([])), ("none", .object([])),
            ("text", .string("line one\nline \"two\"\t#")),
        ])
        let text = YAMLEmitter.document(value)
        let read = try #require(try Yams.load(yaml: text) as? [String: Any], "\(text)")
        #expect(read["string"] as? String == "5")
        #expect(read["bool"] as? String == "true")
        #expect(read["int"] as? Int == 5)
        #expect(read["double"] as? Double == 0.25)
        #expect(read["infinite"] as? Double == .infinity, "\(text)")
        #expect(read["negative"] as? Double == -.infinity, "\(text)")
        #expect(text.contains("missing: null\n") && read.keys.contains("missing"), "\(text)")
        #expect(read["flag"] as? Bool == false)
        #expect((read["list"] as? [Any])?.count == 2)
        #expect((read["empty"] as? [Any])?.isEmpty == true)
        #expect((read["none"] as? [String: Any])?.isEmpty == true)
        #expect(read["text"] as? String == "line one\nline \"two\"\t#")
    }
}
