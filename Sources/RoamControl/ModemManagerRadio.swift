import Glibc
import RoamCore

/// A cellular modem's radio as ModemManager reports it on the system bus
/// (`org.freedesktop.ModemManager1`, the API `mmcli` uses): which modem drives a network
/// interface (its `net` port), its access technologies, its signal quality and, from its
/// `Modem.Signal` interface, the LTE or 5G signal (RSRP, RSRQ, SNR). `roam record` reads it each
/// interval for a cellular interface.
///
/// Calls are made on the caller's thread (the connection is never started) and wait at most
/// ``callTimeout`` each. ModemManager fills `Modem.Signal` only once asked to poll (its `Setup`
/// method, as `mmcli --signal-setup` does): ``startSignalPolling(_:every:)`` asks where it was
/// not polling, and ``stop()`` puts it back.
package final class ModemManagerRadio {
    static let service = "org.freedesktop.ModemManager1"
    static let path = "/org/freedesktop/ModemManager1"
    static let modemInterface = "org.freedesktop.ModemManager1.Modem"
    static let signalInterface = "org.freedesktop.ModemManager1.Modem.Signal"
    static let properties = "org.freedesktop.DBus.Properties"
    /// How long one call to ModemManager may take.
    package static let callTimeout: Duration = .seconds(1)
    /// `MMModemPortType`'s network port.
    static let networkPort: UInt32 = 2
    /// The most modems read.
    static let maximumModems = 64

    /// What the radio reported at one moment: nil where ModemManager said nothing.
    package struct Reading: Sendable, Hashable {
        /// The access technologies in use, ModemManager's names (`lte`, `5gnr`, `umts`, ...),
        /// joined by `,`, the newest first (``technologyNames(_:)``).
        package var technology: String?
        /// ModemManager's signal quality, a percentage, if recent.
        package var quality: Int?
        /// LTE's (or, without LTE, 5G NR's) reference signal received power and quality (dBm,
        /// dB) and signal-to-noise ratio (dB), from `Modem.Signal`.
        package var rsrp: Double?
        package var rsrq: Double?
        package var snr: Double?

        package init(technology: String? = nil, quality: Int? = nil, rsrp: Double? = nil, rsrq: Double? = nil, snr: Double? = nil) {
            self.technology = technology
            self.quality = quality
            self.rsrp = rsrp
            self.rsrq = rsrq
            self.snr = snr
        }
    }

    private let connection: BusConnection
    /// Modems whose signal polling this reader turned on, to turn off at ``stop()``.
    private var polling: [String] = []

    /// Connects to the system bus.
    ///
    /// - Throws: ``BusError`` when the system bus cannot be reached.
    package init() throws(BusError) {
        connection = try BusConnection(bus: .system)
    }

    /// Each modem's object path by the network interface it drives (its `net` ports). Empty
    /// when ModemManager is not running.
    ///
    /// - Throws: ``BusError`` when ModemManager answers what cannot be read, or refuses.
    package func modemsByInterface() throws(BusError) -> [String: String] {
        let paths: [String]
        do {
            paths = try connection.call(destination: Self.service, path: Self.path, interface: "org.freedesktop.DBus.ObjectManager",
                                        member: "GetManagedObjects", timeout: Self.callTimeout) { reply -> [String]? in
                // a{oa{sa{sv}}}: the objects that have the Modem interface (their properties
                // are read after, by name).
                guard reply.enter("a", "{oa{sa{sv}}}") else { return nil }
                var paths: [String] = []
                while reply.enter("e", "oa{sa{sv}}") {
                    guard let path = reply.readString("o"), reply.enter("a", "{sa{sv}}") else { return nil }
                    var isModem = false
                    while reply.enter("e", "sa{sv}") {
                        guard let interface = reply.readString(), reply.skip("a{sv}"), reply.exit() else { return nil }
                        if interface == Self.modemInterface { isModem = true }
                    }
                    guard reply.exit(), reply.exit() else { return nil }
                    if isModem, paths.count < Self.maximumModems { paths.append(path) }
                }
                return reply.exit() ? paths : nil
            }
        } catch {
            if error.description.contains("ServiceUnknown") || error.description.contains("NameHasNoOwner") { return [:] }
            throw error
        }
        var modems: [String: String] = [:]
        for path in paths {
            let ports = try all(path, Self.modemInterface, ["Ports": "a(su)"]) { _, value -> [(String, UInt32)]? in
                guard value.enter("a", "(su)") else { return nil }
                var ports: [(String, UInt32)] = []
                while value.enter("r", "su") {
                    guard let name = value.readString(), let type = value.readUInt32(), value.exit() else { return nil }
                    if ports.count < 64 { ports.append((name, type)) }
                }
                return value.exit() ? ports : nil
            }["Ports"] ?? []
            for (name, type) in ports where type == Self.networkPort && modems[name] == nil { modems[name] = path }
        }
        return modems
    }

    /// Asks the modem at `path` to poll its signal every `interval` (at least a second) when it
    /// does not already: its `Modem.Signal` properties stay empty otherwise.
    ///
    /// - Returns: Whether it polls now (false: the modem has no `Modem.Signal`, or refused).
    package func startSignalPolling(_ path: String, every interval: Duration) -> Bool {
        guard let rate = try? all(path, Self.signalInterface, ["Rate": "u"], { _, value in value.readUInt32() })["Rate"] else { return false }
        if rate > 0 { return true }
        let seconds = UInt32(max(1, interval.components.seconds))
        do {
            _ = try connection.call(destination: Self.service, path: path, interface: Self.signalInterface, member: "Setup",
                                    timeout: Self.callTimeout, arguments: [.uint32(seconds)]) { _ in () }
            polling.append(path)
            return true
        } catch {
            return false
        }
    }

    /// What the modem at `path` reports now.
    ///
    /// - Throws: ``BusError`` when ModemManager does not answer (it stopped, or the modem went).
    package func read(_ path: String) throws(BusError) -> Reading {
        var reading = Reading()
        enum Field { case technologies(UInt32), quality(UInt32, Bool) }
        let modem = try all(path, Self.modemInterface, ["AccessTechnologies": "u", "SignalQuality": "(ub)"]) { key, value -> Field? in
            switch key {
            case "AccessTechnologies": return value.readUInt32().map(Field.technologies)
            default:
                guard value.enter("r", "ub"), let quality = value.readUInt32(), let recent = value.readBool(), value.exit() else { return nil }
                return .quality(quality, recent)
            }
        }
        for field in modem.values {
            switch field {
            case .technologies(let bits): reading.technology = Self.technologyNames(bits)
            case .quality(let quality, let recent): if recent, quality <= 100 { reading.quality = Int(quality) }
            }
        }
        // LTE's signal first (an NSA 5G phone anchors on it), else 5G NR's; a modem without
        // Modem.Signal has neither.
        let signal = (try? all(path, Self.signalInterface, ["Lte": "a{sv}", "Nr5g": "a{sv}"]) { _, value -> [String: Double]? in
            var values: [String: Double] = [:]
            let read = value.readProperties(["rsrp": "d", "rsrq": "d", "snr": "d"]) { key, entry in
                if let number = entry.readDouble(), number.isFinite { values[key] = number }
            }
            return read ? values : nil
        }) ?? [:]
        if let values = [signal["Lte"], signal["Nr5g"]].compactMap({ $0 }).first(where: { $0["rsrp"] != nil }) {
            reading.rsrp = values["rsrp"]
            reading.rsrq = values["rsrq"]
            reading.snr = values["snr"]
        }
        return reading
    }

    /// Turns off the signal polling this reader turned on.
    package func stop() {
        for path in polling {
            _ = try? connection.call(destination: Self.service, path: path, interface: Self.signalInterface, member: "Setup",
                                     timeout: Self.callTimeout, arguments: [.uint32(0)]) { _ in () }
        }
        polling = []
    }

    /// The properties `wanted` (name to signature) of `interface` at `path`, each read by `read`.
    private func all<T>(_ path: String, _ interface: String, _ wanted: [String: String],
                        _ read: (String, BusConnection.Message) -> T?) throws(BusError) -> [String: T] {
        try connection.call(destination: Self.service, path: path, interface: Self.properties, member: "GetAll", timeout: Self.callTimeout,
                            arguments: [.string(interface)]) { reply -> [String: T]? in
            var values: [String: T] = [:]
            let complete = reply.readProperties(wanted) { key, value in
                if let read = read(key, value) { values[key] = read }
            }
            return complete ? values : nil
        }
    }

    /// `MMModemAccessTechnology`'s bits as ModemManager names them, the newest first (at most
    /// four: a modem in use has one or two).
    package static func technologyNames(_ bits: UInt32) -> String? {
        let names: [(UInt32, String)] = [
            (1 << 15, "5gnr"), (1 << 14, "lte"), (1 << 16, "lte-cat-m"), (1 << 17, "lte-nb-iot"), (1 << 9, "hspa-plus"), (1 << 8, "hspa"),
            (1 << 7, "hsupa"), (1 << 6, "hsdpa"), (1 << 5, "umts"), (1 << 13, "evdob"), (1 << 12, "evdoa"), (1 << 11, "evdo0"),
            (1 << 10, "1xrtt"), (1 << 4, "edge"), (1 << 3, "gprs"), (1 << 2, "gsm-compact"), (1 << 1, "gsm"), (1 << 0, "pots"),
        ]
        let present = names.filter { bits & $0.0 != 0 }.map(\.1).prefix(4)
        return present.isEmpty ? nil : present.joined(separator: ",")
    }
}
