import Foundation
import PathMonitor
import RoamControl
import RoamCore
import Testing

/// `roam daemon --dbus`'s shape apart from the bus: the properties a path gives, which changed,
/// the introspection every D-Bus tool reads, docs that list them, and NetworkManager's Metered as
/// rules. Root-free (the daemon on a bus, with its readers: RoamCLITests.DaemonBusTests).
struct PathBusModelTests {
    @Test func thePropertiesAreThePathsAndOnlyThoseThatChangedAreSent() {
        let wifi = PathServiceTests.path(["wl0", "ce0"])
        let cellular = PathServiceTests.path(["ce0"])
        let before = PathBusModel.pathProperties(of: wifi, sequence: 4, json: "{\"sequence\":4}")
        #expect(before.map(\.0) == PathBusModel.pathPropertyNames)
        let value = { (properties: [(String, BusValue)], name: String) in properties.first { $0.0 == name }?.1 }
        #expect(value(before, "PrimaryInterface") == .string("wl0"))
        #expect(value(before, "UnsatisfiedReason") == .string(""), "absent: the empty string")
        #expect(value(before, "Interfaces") == .objectPaths(["/org/roam/PathMonitor1/Interface/2", "/org/roam/PathMonitor1/Interface/3"]))
        #expect(value(before, "Sequence") == .uint64(4))
        let after = PathBusModel.pathProperties(of: cellular, sequence: 5, json: "{\"sequence\":5}")
        let changed = PathBusModel.changed(from: before, to: after)
        #expect(Set(changed.map(\.0)) == ["Sequence", "PrimaryInterface", "Interfaces", "Path"], "\(changed.map(\.0))")
        #expect(PathBusModel.changed(from: after, to: after).isEmpty)
        #expect(PathBusModel.changed(from: [], to: after).count == after.count, "the first: every property")
        let interface = PathBusModel.interfaceProperties(of: wifi.availableInterfaces[1])
        #expect(interface.map(\.0) == PathBusModel.interfacePropertyNames)
        #expect(value(interface, "Type") == .string("cellular") && value(interface, "IsExpensive") == .boolean(true))
        #expect(value(interface, "Addresses") == .strings(["198.18.1.2/24"]) && value(interface, "Index") == .int32(3))
    }

    @Test func introspectionDeclaresEveryPropertyWithItsType() {
        let path = PathServiceTests.path(["wl0"])
        let xml = PathBusModel.introspection(of: PathBusModel.pathInterface, children: ["Interface"])
        for (name, value) in PathBusModel.pathProperties(of: path, sequence: 0, json: "{}") {
            #expect(xml.contains("<property name=\"\(name)\" type=\"\(value.signature)\" access=\"read\">"), "\(name)")
        }
        #expect(xml.contains("<signal name=\"PathChanged\"><arg name=\"sequence\" type=\"t\"/><arg name=\"path\" type=\"s\"/></signal>"))
        #expect(xml.contains("<method name=\"Revalidate\"><arg name=\"interface\" type=\"s\" direction=\"in\"/></method>"))
        #expect(xml.contains("<node name=\"Interface\"/>"))
        let interfaceXML = PathBusModel.introspection(of: PathBusModel.linkInterface, children: [])
        for (name, value) in PathBusModel.interfaceProperties(of: path.availableInterfaces[0]) {
            #expect(interfaceXML.contains("<property name=\"\(name)\" type=\"\(value.signature)\" access=\"read\">"), "\(name)")
        }
        #expect(!interfaceXML.contains("PathChanged"))
        // Balanced: every interface and node element closes.
        for (open, close) in [("<interface ", "</interface>"), ("<node>", "</node>")] {
            #expect(xml.components(separatedBy: open).count == xml.components(separatedBy: close).count, "\(open)")
        }
    }

    @Test func docsListEveryPropertyAndMember() throws {
        let text = try String(contentsOfFile: PathServiceTests.root + "/docs/daemon.md", encoding: .utf8)
        for name in PathBusModel.pathPropertyNames + PathBusModel.interfacePropertyNames + ["PathChanged", "Revalidate", "PropertiesChanged"] {
            #expect(text.contains("`\(name)`") || text.contains("`\(name)("), "docs/daemon.md names \(name)")
        }
    }

    @Test(arguments: [(UInt32(0), nil), (1, true), (2, false), (3, true), (4, false), (5, nil), (UInt32.max, nil)] as [(UInt32, Bool?)])
    func networkManagersMeteredValuesAsExpensive(_ metered: UInt32, _ expensive: Bool?) {
        #expect(NetworkManagerMetered.expensive(metered: metered) == expensive)
    }

    @Test func meteredFlagsBecomeRulesThatMatchOnlyTheirInterface() {
        let rules = InterfaceRules(NetworkManagerMetered.rules(["wl0": true, "ce*0": false, "x[1]": true]))
        #expect(rules.attributes(forInterfaceNamed: "wl0").isExpensive == true)
        #expect(rules.attributes(forInterfaceNamed: "ce*0").isExpensive == false)
        #expect(rules.attributes(forInterfaceNamed: "ce10").isExpensive == nil, "a name's '*' is not a pattern")
        #expect(rules.attributes(forInterfaceNamed: "x[1]").isExpensive == true)
        #expect(rules.attributes(forInterfaceNamed: "x1").isExpensive == nil)
        // The interfaces file's rules come after, and win.
        let combined = InterfaceRules(rules.rules + [InterfaceRules.Rule(pattern: "wl*", attributes: InterfaceAttributes(isExpensive: false))])
        #expect(combined.attributes(forInterfaceNamed: "wl0").isExpensive == false)
    }
}
