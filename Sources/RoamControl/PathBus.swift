import Glibc
import PathMonitor
import RoamCore
import Synchronization

/// What `roam daemon --dbus` serves on D-Bus: the path the Unix socket serves, for programs that
/// speak D-Bus (`busctl`, sd-bus, GDBus, dbus-next, zbus) — docs/daemon.md lists it.
///
/// - `/org/roam/PathMonitor1`, interface `org.roam.PathMonitor1`: the path's properties
///   (``PathBusModel/pathProperties(of:sequence:json:)``), `PropertiesChanged` for those that
///   changed, the signal `PathChanged(t sequence, s path)` with the JSON object of
///   `GET /v1/path`, and the method `Revalidate(s interface)` ("" for every interface; the
///   daemon's user and root only).
/// - `/org/roam/PathMonitor1/Interface/INDEX`, interface `org.roam.PathMonitor1.Interface`:
///   each available interface's properties, in the order the path lists them (`Interfaces`).
///
/// Every property is read-only. Reading is open to every user the bus's policy lets call
/// (docs/daemon.md's policy: every local user).
package final class PathBus: Sendable {
    package static let name = "org.roam.PathMonitor1"

    private struct State {
        var root: [(String, BusValue)] = []
        var interfaces: [(index: Int32, properties: [(String, BusValue)])] = []
        var sequence: UInt64 = 0
        var json = ""
        var published = false
    }

    private let connection: BusConnection
    private let state = Mutex(State())
    private let owner: uid_t
    private let revalidate: (@Sendable (String?) -> Void)?

    /// Connects to `bus`, owns ``name`` and serves the path (none until the first ``publish``).
    ///
    /// - Parameters:
    ///   - bus: The system bus, or the user's session bus.
    ///   - owner: The daemon's user, who (with root) may ask for a check.
    ///   - revalidate: The monitor's `revalidate(interface:)`, when it validates connectivity.
    ///   - ended: Called on the bus's thread if the bus goes away.
    /// - Throws: ``BusError`` when the bus cannot be reached or the name not owned.
    package init(bus: BusConnection.Bus, owner: uid_t, revalidate: (@Sendable (String?) -> Void)?,
                 ended: @escaping @Sendable (BusError) -> Void) throws(BusError) {
        connection = try BusConnection(bus: bus)
        self.owner = owner
        self.revalidate = revalidate
        try connection.handle(objectsUnder: PathBusModel.root) { [unowned self] message in self.answer(message) }
        try connection.requestName(Self.name)
        try connection.start(name: "roam-dbus", ended: ended)
    }

    /// The bus it serves on.
    package var bus: BusConnection.Bus { connection.bus }

    /// Publishes a path: its properties change, `PropertiesChanged` and `PathChanged` are sent.
    ///
    /// - Parameters:
    ///   - path: The path the monitor gave.
    ///   - sequence: Its sequence on the daemon's socket.
    ///   - json: Its object as `GET /v1/path` answers it.
    package func publish(_ path: NetworkPath, sequence: Int, json: String) {
        let root = PathBusModel.pathProperties(of: path, sequence: UInt64(sequence), json: json)
        let interfaces = path.availableInterfaces.map { (index: $0.index, properties: PathBusModel.interfaceProperties(of: $0)) }
        let (oldRoot, oldInterfaces) = state.withLock { state in
            defer {
                state.root = root
                state.interfaces = interfaces
                state.sequence = UInt64(sequence)
                state.json = json
                state.published = true
            }
            return (state.root, state.interfaces)
        }
        connection.perform { connection in
            for (index, properties) in interfaces {
                let before = oldInterfaces.first { $0.index == index }?.properties ?? []
                let changed = PathBusModel.changed(from: before, to: properties)
                if !changed.isEmpty {
                    connection.emit(path: PathBusModel.interfacePath(index), interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged") {
                        $0.append(.string(PathBusModel.linkInterface)) && $0.appendProperties(changed) && $0.append(.strings([]))
                    }
                }
            }
            let changed = PathBusModel.changed(from: oldRoot, to: root)
            connection.emit(path: PathBusModel.root, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged") {
                $0.append(.string(PathBusModel.pathInterface)) && $0.appendProperties(changed) && $0.append(.strings([]))
            }
            connection.emit(path: PathBusModel.root, interface: PathBusModel.pathInterface, member: "PathChanged") {
                $0.append(.uint64(UInt64(sequence))) && $0.append(.string(json))
            }
        }
    }

    /// Stops serving once what was published is sent; the name goes with the connection.
    package func stop() {
        connection.stop()
    }

    private func answer(_ message: BusConnection.Message) -> BusConnection.Handled {
        let (published, root, interfaces) = state.withLock { ($0.published, $0.root, $0.interfaces) }
        let path = message.path
        let properties: [(String, BusValue)]?
        let interfaceName: String
        if path == PathBusModel.root {
            (properties, interfaceName) = (root, PathBusModel.pathInterface)
        } else if path == PathBusModel.interfacesRoot {
            (properties, interfaceName) = (nil, "")
        } else if path.hasPrefix(PathBusModel.interfacesRoot + "/"), let index = Int32(path.dropFirst(PathBusModel.interfacesRoot.count + 1)),
                  let found = interfaces.first(where: { $0.index == index }) {
            (properties, interfaceName) = (found.properties, PathBusModel.linkInterface)
        } else {
            return .error(name: "org.freedesktop.DBus.Error.UnknownObject", message: "no object \(escapedForMessage(path, maximumLength: 120)) (the interfaces the path lists are under \(PathBusModel.interfacesRoot))")
        }
        switch (message.interface, message.member) {
        case ("org.freedesktop.DBus.Introspectable", "Introspect"):
            let children = path == PathBusModel.root ? ["Interface"] : path == PathBusModel.interfacesRoot ? interfaces.map { String($0.index) } : []
            return .reply([.string(PathBusModel.introspection(of: properties == nil ? nil : interfaceName, children: children))])
        case ("org.freedesktop.DBus.Properties", "Get"):
            guard let properties else { return .error(name: "org.freedesktop.DBus.Error.UnknownInterface", message: "\(path) has no properties") }
            guard published else { return Self.noPathYet }
            guard let asked = message.readString(), let name = message.readString() else {
                return .error(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "Get takes (ss): an interface and a property")
            }
            guard asked == interfaceName || asked.isEmpty else {
                return .error(name: "org.freedesktop.DBus.Error.UnknownInterface", message: "\(path) has \(interfaceName), not \(escapedForMessage(asked, maximumLength: 80))")
            }
            guard let value = properties.first(where: { $0.0 == name })?.1 else {
                return .error(name: "org.freedesktop.DBus.Error.UnknownProperty", message: "\(interfaceName) has no property \(escapedForMessage(name, maximumLength: 80))")
            }
            return .replyBuilt { $0.appendVariant(value) }
        case ("org.freedesktop.DBus.Properties", "GetAll"):
            guard let properties else { return .reply([]) }
            guard published else { return Self.noPathYet }
            guard let asked = message.readString() else {
                return .error(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "GetAll takes (s): an interface")
            }
            return .replyBuilt { $0.appendProperties(asked == interfaceName || asked.isEmpty ? properties : []) }
        case ("org.freedesktop.DBus.Properties", "Set"):
            return .error(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "the path's properties are read-only")
        case (PathBusModel.pathInterface, "Revalidate") where path == PathBusModel.root:
            guard let interface = message.readString() else {
                return .error(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "Revalidate takes (s): an interface name, or \"\" for every interface")
            }
            // The bus daemon's record of who connected, not a pid's /proc.
            guard let uid = message.senderUID, uid == owner || uid == 0 else {
                return .error(name: "org.freedesktop.DBus.Error.AccessDenied", message: "only the daemon's user and root may ask it to check connectivity; reading the path is open")
            }
            guard let revalidate else {
                return .error(name: "org.roam.PathMonitor1.Error.NotValidating", message: "this daemon validates nothing: start it with --validate URL")
            }
            guard interface.isEmpty || PathService.isInterfaceName(interface) else {
                return .error(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "'\(escapedForMessage(interface, maximumLength: 32))' is not an interface name (1 to 15 characters, no '/', ':' or space)")
            }
            revalidate(interface.isEmpty ? nil : interface)
            return .reply([])
        default:
            return .unhandled
        }
    }

    private static var noPathYet: BusConnection.Handled {
        .error(name: "org.roam.PathMonitor1.Error.NoPath", message: "no path yet: the monitor is starting")
    }
}

/// The D-Bus shape of a path: object paths, properties, introspection. Pure, for tests.
package enum PathBusModel {
    package static let root = "/org/roam/PathMonitor1"
    package static let interfacesRoot = root + "/Interface"
    package static let pathInterface = "org.roam.PathMonitor1"
    package static let linkInterface = "org.roam.PathMonitor1.Interface"

    /// The object of the interface with kernel index `index`.
    package static func interfacePath(_ index: Int32) -> String { "\(interfacesRoot)/\(index)" }

    /// The path's properties, in the order introspection lists them. Absent values (no primary
    /// interface, no reason) are "".
    package static func pathProperties(of path: NetworkPath, sequence: UInt64, json: String) -> [(String, BusValue)] {
        [
            ("Sequence", .uint64(sequence)),
            ("Status", .string(path.status.rawValue)),
            ("UnsatisfiedReason", .string(path.unsatisfiedReason?.rawValue ?? "")),
            ("IsExpensive", .boolean(path.isExpensive)),
            ("IsConstrained", .boolean(path.isConstrained)),
            ("IsUltraConstrained", .boolean(path.isUltraConstrained)),
            ("SupportsIPv4", .boolean(path.supportsIPv4)),
            ("SupportsIPv6", .boolean(path.supportsIPv6)),
            ("SupportsDNS", .boolean(path.supportsDNS)),
            ("PrimaryInterface", .string(path.primaryInterface?.name ?? "")),
            ("Interfaces", .objectPaths(path.availableInterfaces.map { interfacePath($0.index) })),
            ("Gateways", .strings(path.gateways.map(\.description))),
            ("LinkQuality", .string(path.linkQuality.rawValue)),
            ("Connectivity", .string(path.connectivity.rawValue)),
            ("Path", .string(json)),
        ]
    }

    /// An interface's properties.
    package static func interfaceProperties(of interface: NetworkInterface) -> [(String, BusValue)] {
        [
            ("Name", .string(interface.name)),
            ("Index", .int32(interface.index)),
            ("Type", .string(interface.type.rawValue)),
            ("IsExpensive", .boolean(interface.isExpensive)),
            ("IsConstrained", .boolean(interface.isConstrained)),
            ("IsUltraConstrained", .boolean(interface.isUltraConstrained)),
            ("State", .string(interface.state.description)),
            ("MTU", .uint32(interface.mtu)),
            ("Addresses", .strings(interface.addresses.map(\.description))),
            ("LinkQuality", .string(interface.linkQuality.rawValue)),
            ("Connectivity", .string(interface.connectivity.state.rawValue)),
            ("PortalURL", .string(interface.connectivity.portalURL ?? "")),
        ]
    }

    /// The properties of `new` that differ from `old`'s (all of them when `old` is empty).
    package static func changed(from old: [(String, BusValue)], to new: [(String, BusValue)]) -> [(String, BusValue)] {
        new.filter { name, value in old.first { $0.0 == name }?.1 != value }
    }

    /// The introspection XML of an object with D-Bus interface `interface` (nil: none of
    /// Roam's) and child nodes `children`.
    package static func introspection(of interface: String?, children: [String]) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>
             <interface name="org.freedesktop.DBus.Introspectable">
              <method name="Introspect"><arg name="xml" type="s" direction="out"/></method>
             </interface>
             <interface name="org.freedesktop.DBus.Peer">
              <method name="Ping"/>
              <method name="GetMachineId"><arg name="machine_uuid" type="s" direction="out"/></method>
             </interface>

            """
        if let interface {
            xml += """
                 <interface name="org.freedesktop.DBus.Properties">
                  <method name="Get"><arg name="interface" type="s" direction="in"/><arg name="name" type="s" direction="in"/><arg name="value" type="v" direction="out"/></method>
                  <method name="GetAll"><arg name="interface" type="s" direction="in"/><arg name="properties" type="a{sv}" direction="out"/></method>
                  <method name="Set"><arg name="interface" type="s" direction="in"/><arg name="name" type="s" direction="in"/><arg name="value" type="v" direction="in"/></method>
                  <signal name="PropertiesChanged"><arg name="interface" type="s"/><arg name="changed" type="a{sv}"/><arg name="invalidated" type="as"/></signal>
                 </interface>
                 <interface name="\(interface)">

                """
            let properties = interface == pathInterface ? pathPropertyTypes : interfacePropertyTypes
            for (name, type) in properties {
                xml += "  <property name=\"\(name)\" type=\"\(type)\" access=\"read\"><annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"true\"/></property>\n"
            }
            if interface == pathInterface {
                xml += "  <method name=\"Revalidate\"><arg name=\"interface\" type=\"s\" direction=\"in\"/></method>\n"
                xml += "  <signal name=\"PathChanged\"><arg name=\"sequence\" type=\"t\"/><arg name=\"path\" type=\"s\"/></signal>\n"
            }
            xml += " </interface>\n"
        }
        for child in children { xml += " <node name=\"\(child)\"/>\n" }
        return xml + "</node>\n"
    }

    /// The names of ``pathProperties(of:sequence:json:)``, in its order.
    package static var pathPropertyNames: [String] { pathPropertyTypes.map(\.0) }
    /// The names of ``interfaceProperties(of:)``, in its order.
    package static var interfacePropertyNames: [String] { interfacePropertyTypes.map(\.0) }

    static let pathPropertyTypes: [(String, String)] = [
        ("Sequence", "t"), ("Status", "s"), ("UnsatisfiedReason", "s"), ("IsExpensive", "b"), ("IsConstrained", "b"),
        ("IsUltraConstrained", "b"), ("SupportsIPv4", "b"), ("SupportsIPv6", "b"), ("SupportsDNS", "b"),
        ("PrimaryInterface", "s"), ("Interfaces", "ao"), ("Gateways", "as"), ("LinkQuality", "s"), ("Connectivity", "s"), ("Path", "s"),
    ]

    static let interfacePropertyTypes: [(String, String)] = [
        ("Name", "s"), ("Index", "i"), ("Type", "s"), ("IsExpensive", "b"), ("IsConstrained", "b"), ("IsUltraConstrained", "b"),
        ("State", "s"), ("MTU", "u"), ("Addresses", "as"), ("LinkQuality", "s"), ("Connectivity", "s"), ("PortalURL", "s"),
    ]
}
