import Glibc
import RoamCore
import Synchronization

/// NetworkManager's `Metered` flag of each device, followed over the system bus, as interface
/// rules: `roam daemon --network-manager` puts them before the interfaces file's (which wins),
/// so that an interface NetworkManager knows to be metered (a phone's hotspot, a connection the
/// user marked) is expensive in the path.
///
/// NetworkManager's values (`NMMetered`): yes and guess-yes make an interface expensive; no and
/// guess-no make it not expensive (a cellular modem the user marked unmetered); unknown leaves
/// it to Roam's own classification.
package final class NetworkManagerMetered: Sendable {
    static let service = "org.freedesktop.NetworkManager"
    static let path = "/org/freedesktop/NetworkManager"
    static let deviceInterface = "org.freedesktop.NetworkManager.Device"

    private let connection: BusConnection
    private final class Known: Sendable {
        let flags = Mutex<[String: Bool]?>(nil)
    }
    private let current = Known()

    /// Starts following NetworkManager on the system bus; `changed` gets every device's flag
    /// (interface name to expensive) first and again whenever one changes, on the bus's thread.
    /// When NetworkManager is not running, `changed` gets nothing until it starts.
    ///
    /// - Throws: ``BusError`` when the system bus cannot be reached.
    package init(changed: @escaping @Sendable ([String: Bool]) -> Void, ended: @escaping @Sendable (BusError) -> Void,
                 report: @escaping @Sendable (String) -> Void) throws(BusError) {
        let connection = try BusConnection(bus: .system)
        self.connection = connection
        let current = self.current
        @Sendable func refresh(_ connection: BusConnection) {
            do {
                let flags = try Self.read(connection)
                let changes = current.flags.withLock { known -> Bool in
                    defer { known = flags }
                    return known != flags
                }
                if changes { changed(flags) }
            } catch {
                report("NetworkManager: \(error)")
            }
        }
        // A device's Metered or Interface changed, a device came or went, NetworkManager
        // (re)started: read every device again (there are few). Nothing is taken from a signal
        // itself: a signal another connection sent straight to this one (which no match rule on
        // the bus filters) can only cause a read of what NetworkManager's own name answers.
        try connection.watch(sender: Self.service, path: nil, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged") { [unowned connection] message in
            if message.path.hasPrefix(Self.path + "/Devices/") { refresh(connection) }
        }
        try connection.watch(sender: Self.service, path: Self.path, interface: Self.service, member: "DeviceAdded") { [unowned connection] _ in refresh(connection) }
        try connection.watch(sender: Self.service, path: Self.path, interface: Self.service, member: "DeviceRemoved") { [unowned connection] _ in refresh(connection) }
        try connection.watch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged") { [unowned connection] message in
            if message.readString() == Self.service { refresh(connection) }
        }
        try connection.start(name: "roam-nm") { ended($0) }
        connection.perform { refresh($0) }
    }

    /// The flags last read (nil before NetworkManager answered).
    package var flags: [String: Bool]? { current.flags.withLock { $0 } }

    package func stop() { connection.stop() }

    /// Every device's interface and flag; nothing when NetworkManager is not on the bus.
    static func read(_ connection: BusConnection) throws(BusError) -> [String: Bool] {
        let devices: [String]
        do {
            devices = try connection.call(destination: service, path: path, interface: service, member: "GetDevices") { $0.readObjectPaths() }
        } catch {
            // Not running (yet): its NameOwnerChanged will say when it is.
            if error.description.contains("ServiceUnknown") || error.description.contains("NameHasNoOwner") { return [:] }
            throw error
        }
        var flags: [String: Bool] = [:]
        for device in devices.prefix(4096) {
            let properties = try connection.call(destination: service, path: device, interface: "org.freedesktop.DBus.Properties", member: "GetAll",
                                                 arguments: [.string(deviceInterface)]) { reply -> (name: String?, metered: UInt32?)? in
                var name: String?, metered: UInt32?
                let read = reply.readProperties(["Interface": "s", "Metered": "u"]) { key, value in
                    if key == "Interface" { name = value.readString() } else { metered = value.readUInt32() }
                }
                return read ? (name, metered) : nil
            }
            guard let name = properties.name, !name.isEmpty, let metered = properties.metered, let expensive = expensive(metered: metered) else { continue }
            flags[name] = expensive
        }
        return flags
    }

    /// `NMMetered` as expensive: nil for unknown (0) and values NetworkManager does not define.
    package static func expensive(metered: UInt32) -> Bool? {
        switch metered {
        case 1, 3: true  // yes, guess-yes
        case 2, 4: false  // no, guess-no
        default: nil
        }
    }

    /// The flags as interface rules (a name's glob characters escaped), to put before the
    /// interfaces file's rules.
    package static func rules(_ flags: [String: Bool]) -> [InterfaceRules.Rule] {
        flags.sorted { $0.key < $1.key }.map { name, expensive in
            let pattern = String(name.flatMap { "*?[]\\".contains($0) ? ["\\", $0] : [$0] })
            return InterfaceRules.Rule(pattern: pattern, attributes: InterfaceAttributes(isExpensive: expensive))
        }
    }
}
