import Glibc
import Netlink
import RoamCore
import RoamSystem

/// What the kernel says about an interface's hardware beyond netlink: read from sysfs.
public struct DeviceFacts: Sendable, Hashable {
    /// `/sys/class/net/X/wireless` or `/sys/class/net/X/phy80211` exists.
    public var isWireless: Bool
    /// `DEVTYPE` from `/sys/class/net/X/uevent`: `wlan`, `wwan`, `bridge`, ...
    public var deviceType: String?
    /// The name of the driver bound to the device (`/sys/class/net/X/device/driver`).
    public var driver: String?
    /// What the kernel's Wi-Fi stack says of the link's quality (nl80211), for an associated
    /// Wi-Fi interface; nil when it says nothing.
    public var linkQuality: LinkQuality?

    /// Facts about one device.
    ///
    /// - Parameters:
    ///   - isWireless: Whether sysfs shows the device as wireless.
    ///   - deviceType: `DEVTYPE` from its uevent, if any.
    ///   - driver: The driver bound to it, if any.
    ///   - linkQuality: What nl80211 says of an associated Wi-Fi link's quality, if anything.
    public init(isWireless: Bool = false, deviceType: String? = nil, driver: String? = nil, linkQuality: LinkQuality? = nil) {
        self.isWireless = isWireless
        self.deviceType = deviceType
        self.driver = driver
        self.linkQuality = linkQuality
    }

    /// The kernel calls the device a Wi-Fi one.
    public var isWiFi: Bool { isWireless || deviceType == "wlan" }
}

/// Where device facts come from. Tests supply fixtures; monitors read sysfs.
public protocol DeviceFactsSource: Sendable {
    /// What the kernel says of an interface's device.
    ///
    /// - Parameter name: The interface's name.
    /// - Returns: Its facts; empty ones for a device the source knows nothing of.
    func facts(forInterfaceNamed name: String) -> DeviceFacts
}

/// Reads device facts from a sysfs tree (`/sys/class/net` by default).
///
/// sysfs shows the interfaces of the network namespace of whoever mounted it; a monitor of
/// another namespace reads it from a pinned thread with a private `/sys` mounted there.
public struct SysfsDeviceFacts: DeviceFactsSource {
    public var root: String

    /// Facts read from a sysfs tree.
    ///
    /// - Parameter root: The directory of the interfaces (`/sys/class/net`).
    public init(root: String = "/sys/class/net") {
        self.root = root
    }

    /// What sysfs says of an interface's device: whether it is wireless, its `DEVTYPE`, its
    /// driver (the link quality comes from nl80211, not from here).
    ///
    /// - Parameter name: The interface's name.
    /// - Returns: Its facts; empty ones for an interface sysfs does not show.
    public func facts(forInterfaceNamed name: String) -> DeviceFacts {
        let base = "\(root)/\(name)"
        let isWireless = access("\(base)/wireless", F_OK) == 0 || access("\(base)/phy80211", F_OK) == 0
        var deviceType: String?
        if let uevent = try? readTextFile("\(base)/uevent", maximumBytes: 1 << 16) {
            for line in uevent.split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
                deviceType = String(line.dropFirst("DEVTYPE=".count))
            }
        }
        var driver: String?
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("\(base)/device/driver", &buffer, buffer.count - 1)
        if count > 0 {
            let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            driver = target.split(separator: "/").last.map(String.init)
        }
        return DeviceFacts(isWireless: isWireless, deviceType: deviceType, driver: driver)
    }
}

/// Turns what the kernel says of an interface, alias tags and interfaces-file rules into its
/// type and cost.
///
/// Sources, later ones overriding earlier ones:
/// 1. the kernel: loopback flag; `wireless`/`phy80211` in sysfs or `DEVTYPE=wlan` → Wi-Fi;
///    `DEVTYPE=wwan`, a cellular modem driver, an `rmnet`/`wwan` link or raw-IP framing → cellular;
///    Ethernet framing → wired Ethernet; anything else → other. The link quality of an
///    associated Wi-Fi interface, from nl80211 (`LinkQuality/init(grading:)`).
/// 2. tags in the interface alias (`InterfaceTag`).
/// 3. the interfaces file (`InterfaceRules`).
///
/// Cellular interfaces are expensive unless a tag or rule says otherwise. Nothing is
/// constrained or ultra-constrained unless a tag or rule says so: constrained is Low Data Mode,
/// a user's choice; ultra-constrained is a carrier's satellite network, which Linux cannot tell.
public struct InterfaceClassifier: Sendable {
    /// Drivers of cellular modems whose interfaces do not announce `DEVTYPE=wwan`.
    public static let cellularDrivers: Set<String> = [
        "qmi_wwan", "cdc_mbim", "mhi_net", "ipa", "rmnet", "huawei_cdc_ncm", "sierra_net", "cdc_ncm_mbim", "t7xx", "iosm",
    ]

    public var rules: InterfaceRules

    /// A classifier.
    ///
    /// - Parameter rules: The interfaces file's rules, which override the kernel and the tags.
    public init(rules: InterfaceRules = InterfaceRules()) {
        self.rules = rules
    }

    /// The type the kernel's facts alone give `link`.
    ///
    /// - Parameters:
    ///   - link: The interface as rtnetlink dumps it.
    ///   - facts: What sysfs says of its device.
    /// - Returns: Loopback, Wi-Fi, cellular, wired Ethernet or other.
    public static func kernelType(of link: Link, facts: DeviceFacts) -> InterfaceType {
        if link.isLoopback { return .loopback }
        if facts.isWiFi { return .wifi }
        if facts.deviceType == "wwan" || facts.driver.map(cellularDrivers.contains) == true
            || link.kind == "rmnet" || link.kind == "wwan" || link.hardwareType == .rawIP {
            return .cellular
        }
        if link.hardwareType == .ethernet { return .wiredEthernet }
        return .other
    }

    /// What classification gives an interface.
    public struct Classification: Sendable, Hashable {
        public var type: InterfaceType
        public var isExpensive: Bool
        public var isConstrained: Bool
        public var isUltraConstrained: Bool
        public var linkQuality: LinkQuality
    }

    /// The final attributes of `link`. Ultra-constrained implies constrained unless a source
    /// says `constrained=false`.
    ///
    /// - Parameters:
    ///   - link: The interface as rtnetlink dumps it (its alias holds the tags).
    ///   - facts: What sysfs and nl80211 say of its device.
    /// - Returns: Its type, cost, constraints and link quality.
    public func classify(_ link: Link, facts: DeviceFacts) -> Classification {
        let attributes = InterfaceAttributes(type: Self.kernelType(of: link, facts: facts), linkQuality: facts.linkQuality)
            .overridden(by: InterfaceTag.attributes(fromAlias: link.alias))
            .overridden(by: rules.attributes(forInterfaceNamed: link.name))
        let type = attributes.type ?? .other
        let ultra = attributes.isUltraConstrained ?? false
        return Classification(type: type, isExpensive: attributes.isExpensive ?? (type == .cellular),
                              isConstrained: attributes.isConstrained ?? ultra, isUltraConstrained: ultra,
                              linkQuality: attributes.linkQuality ?? .unknown)
    }
}
