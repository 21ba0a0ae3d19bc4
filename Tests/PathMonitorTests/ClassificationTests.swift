import Glibc
import Netlink
import Testing
@testable import PathMonitor

@Suite struct InterfaceAttributesTests {
    @Test(arguments: [
        ("type=cellular,expensive,constrained", InterfaceAttributes(type: .cellular, isExpensive: true, isConstrained: true)),
        ("type=wifi", InterfaceAttributes(type: .wifi)),
        ("type=wired expensive=no", InterfaceAttributes(type: .wiredEthernet, isExpensive: false)),
        ("constrained=1, expensive=off", InterfaceAttributes(isExpensive: false, isConstrained: true)),
        ("TYPE=Ethernet", InterfaceAttributes(type: .wiredEthernet)),
        ("", InterfaceAttributes()),
        (" ,\ttype=cellular,,\t ULTRA-Constrained  ,quality=Good,", InterfaceAttributes(type: .cellular, isUltraConstrained: true, linkQuality: .good)),
        ("UltraConstrained=false", InterfaceAttributes(isUltraConstrained: false)),
    ])
    func parses(_ text: String, _ expected: InterfaceAttributes) throws {
        #expect(try InterfaceAttributes(parsing: text) == expected)
    }

    @Test(arguments: [
        ("type=satellite", "type must be one of"),
        ("type", "type must be one of"),
        ("expensive=maybe", "expected true or false"),
        ("expensiv", "did you mean 'expensive'"),
        ("constraint", "did you mean 'constrained'"),
        ("type=", "type must be one of"),
        ("quality=good=1", "quality must be one of"),
        ("=wifi", "unknown attribute ''"),
        ("typé=wifi", "unknown attribute 'typé'"),
        ("ＴＹＰＥ=wifi", "unknown attribute 'ｔｙｐｅ'"),
    ])
    func rejects(_ text: String, _ message: String) {
        let error = #expect(throws: InterfaceAttributes.ParseError.self) { try InterfaceAttributes(parsing: text) }
        #expect(error?.message.contains(message) == true, "\(error.map(String.init(describing:)) ?? "no error")")
    }

    @Test func roundTripsThroughText() throws {
        let attributes = InterfaceAttributes(type: .cellular, isExpensive: false, isConstrained: true)
        #expect(try InterfaceAttributes(parsing: attributes.text) == attributes)
        #expect(InterfaceTag.alias(for: attributes) == "roam:type=cellular,expensive=false,constrained")
    }
}

@Suite struct InterfaceTagTests {
    @Test func readsTagsAnywhereInTheAlias() {
        #expect(InterfaceTag.attributes(fromAlias: "roam:type=cellular,expensive") == InterfaceAttributes(type: .cellular, isExpensive: true))
        #expect(InterfaceTag.attributes(fromAlias: "uplink to the lab roam:constrained") == InterfaceAttributes(isConstrained: true))
        #expect(InterfaceTag.attributes(fromAlias: "roam:type=wifi roam:type=cellular") == InterfaceAttributes(type: .cellular))
        #expect(InterfaceTag.attributes(fromAlias: "no tags here").isEmpty)
        #expect(InterfaceTag.attributes(fromAlias: nil).isEmpty)
        #expect(InterfaceTag.attributes(fromAlias: "notroam:type=wifi").isEmpty)
        #expect(InterfaceTag.attributes(fromAlias: "Wi‑Fi für Gäste\troam:type=wifi 🛰️") == InterfaceAttributes(type: .wifi))
        #expect(InterfaceTag.attributes(fromAlias: "ROAM:type=wifi").isEmpty)
        #expect(InterfaceTag.attributes(fromAlias: "roam:").isEmpty)
        #expect(InterfaceTag.problems(inAlias: "roam: roam:,").isEmpty)
    }

    @Test func skipsBrokenTagsButReportsThem() {
        let alias = "roam:type=bogus roam:expensive"
        #expect(InterfaceTag.attributes(fromAlias: alias) == InterfaceAttributes(isExpensive: true))
        #expect(InterfaceTag.problems(inAlias: alias).count == 1)
    }
}

@Suite struct InterfaceRulesTests {
    @Test func appliesMatchingRulesInOrder() throws {
        let rules = try InterfaceRules(parsing: """
            # pattern   attributes
            wl*         type=wifi
            wwan*       type=cellular
            usb*        type=wiredEthernet expensive   # a tethered phone
            wlp3s0      constrained

            """)
        #expect(rules.attributes(forInterfaceNamed: "wlp3s0") == InterfaceAttributes(type: .wifi, isConstrained: true))
        #expect(rules.attributes(forInterfaceNamed: "wlan1") == InterfaceAttributes(type: .wifi))
        #expect(rules.attributes(forInterfaceNamed: "usb0") == InterfaceAttributes(type: .wiredEthernet, isExpensive: true))
        #expect(rules.attributes(forInterfaceNamed: "eth0").isEmpty)
    }

    @Test func reportsEveryBadLineWithItsNumber() {
        let error = #expect(throws: InterfaceRules.ParseError.self) {
            try InterfaceRules(parsing: "wl* type=wifi\nbad0\neth* type=fiber\n", source: "ifaces.conf")
        }
        #expect(error?.description.contains("ifaces.conf:2: error: no attributes for 'bad0'") == true)
        #expect(error?.description.contains("ifaces.conf:3: error: 'type=fiber'") == true)
    }

    @Test func aBadFileIsAnInvalidInterfacesFileWithEveryLine() throws {
        var template = Array("/tmp/roam-ifaces-XXXXXX".utf8CString)
        let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
        defer { rmdir(directory) }
        let path = directory + "/ifaces.conf"
        let file = try #require(fopen(path, "wx"))
        fputs("wl* type=wifi\nbad0\n", file)
        fclose(file)
        defer { unlink(path) }
        let error = #expect(throws: PathMonitorError.self) { try InterfaceRules(contentsOfFile: path) }
        #expect(error?.code == .invalidInterfacesFile)
        #expect(error?.message.contains("\(path):2: error: no attributes for 'bad0'") == true)
    }

    @Test func reportsAnUnreadableFile() {
        let error = #expect(throws: PathMonitorError.self) { try InterfaceRules(contentsOfFile: "/nonexistent/roam-ifaces") }
        #expect(error?.code == .invalidInterfacesFile)
        #expect(error?.message == "cannot read interfaces file /nonexistent/roam-ifaces: No such file or directory")
    }
}

@Suite struct InterfaceClassifierTests {
    typealias Case = (link: Link, facts: DeviceFacts, type: InterfaceType)

    static let kernelCases: [Case] = [
        (Fixture.loopback, DeviceFacts(), .loopback),
        (Fixture.link(2, "wlan0", kind: nil), DeviceFacts(isWireless: true, driver: "iwlwifi"), .wifi),
        (Fixture.link(2, "wlan0", kind: nil), DeviceFacts(deviceType: "wlan"), .wifi),
        (Fixture.link(3, "wwan0", hardware: .rawIP, kind: nil), DeviceFacts(), .cellular),
        (Fixture.link(3, "wwan0", kind: nil), DeviceFacts(deviceType: "wwan"), .cellular),
        (Fixture.link(3, "usb0", kind: nil), DeviceFacts(driver: "qmi_wwan"), .cellular),
        (Fixture.link(3, "rmnet0", hardware: .none, kind: "rmnet"), DeviceFacts(), .cellular),
        (Fixture.link(4, "eth0", kind: nil), DeviceFacts(driver: "e1000e"), .wiredEthernet),
        (Fixture.link(5, "veth0"), DeviceFacts(), .wiredEthernet),
        (Fixture.link(6, "tun0", hardware: .none, kind: "tun"), DeviceFacts(), .other),
        (Fixture.link(7, "ppp0", hardware: .ppp, kind: nil), DeviceFacts(), .other),
    ]

    @Test(arguments: kernelCases)
    func classifiesFromTheKernel(_ testCase: Case) {
        #expect(InterfaceClassifier.kernelType(of: testCase.link, facts: testCase.facts) == testCase.type)
    }

    /// The classification as (type, expensive, constrained, ultra-constrained, quality).
    func classify(_ link: Link, _ facts: DeviceFacts = DeviceFacts(), rules: InterfaceRules = InterfaceRules())
        -> (InterfaceType, Bool, Bool, Bool, LinkQuality) {
        let result = InterfaceClassifier(rules: rules).classify(link, facts: facts)
        return (result.type, result.isExpensive, result.isConstrained, result.isUltraConstrained, result.linkQuality)
    }

    @Test func cellularIsExpensiveByDefaultAndNothingIsConstrained() {
        #expect(classify(Fixture.link(3, "wwan0", kind: nil), DeviceFacts(deviceType: "wwan")) == (.cellular, true, false, false, .unknown))
        #expect(classify(Fixture.link(2, "wlan0", kind: nil), DeviceFacts(isWireless: true)) == (.wifi, false, false, false, .unknown))
    }

    @Test func tagsOverrideTheKernelAndTheFileOverridesTags() throws {
        let tagged = Fixture.link(2, "veth0", alias: "roam:type=cellular,constrained")
        #expect(classify(tagged) == (.cellular, true, true, false, .unknown))
        let notExpensive = Fixture.link(2, "veth0", alias: "roam:type=cellular,expensive=false")
        #expect(classify(notExpensive) == (.cellular, false, false, false, .unknown))
        let rules = try InterfaceRules(parsing: "veth* type=wifi expensive\n")
        #expect(classify(tagged, rules: rules) == (.wifi, true, true, false, .unknown))
    }

    @Test func ultraConstrainedIsConstrainedUnlessSaidOtherwise() throws {
        let satellite = Fixture.link(2, "sat0", alias: "roam:type=cellular,ultraConstrained,quality=minimal")
        #expect(classify(satellite) == (.cellular, true, true, true, .minimal))
        let odd = Fixture.link(2, "sat0", alias: "roam:ultraConstrained,constrained=false")
        #expect(classify(odd) == (.wiredEthernet, false, false, true, .unknown))
        let rules = try InterfaceRules(parsing: "sat* quality=good ultra-constrained=false\n")
        #expect(classify(satellite, rules: rules) == (.cellular, true, false, false, .good))
        #expect(InterfaceTag.problems(inAlias: "roam:quality=great").map(\.message) == ["quality must be one of unknown, minimal, moderate, good"])
        #expect(InterfaceTag.problems(inAlias: "roam:ultra").first?.message.contains("did you mean 'ultraConstrained'") == true)
        let attributes = InterfaceAttributes(isUltraConstrained: true, linkQuality: .moderate)
        #expect(try InterfaceAttributes(parsing: attributes.text) == attributes)
        #expect(attributes.text == "ultraConstrained,quality=moderate")
    }

    @Test func theKernelsWiFiQualityYieldsToTagsAndRules() throws {
        let wlan = Fixture.link(2, "wlan0", kind: nil)
        let measured = DeviceFacts(isWireless: true, linkQuality: .moderate)
        #expect(classify(wlan, measured).4 == .moderate)
        let tagged = Fixture.link(2, "wlan0", alias: "roam:quality=good", kind: nil)
        #expect(classify(tagged, measured).4 == .good)
        let rules = try InterfaceRules(parsing: "wlan* quality=minimal\n")
        #expect(classify(tagged, measured, rules: rules).4 == .minimal)
    }
}

/// Wi-Fi link quality from what nl80211 says of the access point (see
/// `LinkQuality.WirelessGrading`): the worse of signal and bitrate.
@Suite struct WirelessGradingTests {
    @Test(arguments: [
        (WirelessStation(signal: -30, transmitBitrate: 54_000_000), LinkQuality.good),
        (WirelessStation(signal: -67, transmitBitrate: 24_000_000), .good),
        (WirelessStation(signal: -68, transmitBitrate: 300_000_000), .moderate),
        (WirelessStation(signal: -30, transmitBitrate: 11_000_000), .moderate),
        (WirelessStation(signal: -75, transmitBitrate: 6_000_000), .moderate),
        (WirelessStation(signal: -76, transmitBitrate: 54_000_000), .minimal),
        (WirelessStation(signal: -30, transmitBitrate: 5_500_000), .minimal),
        // The average wins over the last frame's signal; the receive rate stands in for a missing transmit rate.
        (WirelessStation(signal: -80, signalAverage: -60, transmitBitrate: 54_000_000), .good),
        (WirelessStation(signal: -40, receiveBitrate: 1_000_000), .minimal),
        (WirelessStation(signal: -40), .good),
        (WirelessStation(), .unknown),
    ])
    func gradesTheWorseOfSignalAndBitrate(_ station: WirelessStation, _ expected: LinkQuality) {
        #expect(LinkQuality(grading: station) == expected)
    }
}
