import Foundation
import Glibc
import Netlink
import PathMonitor
import ScenarioModel
import Synchronization
import Testing
import TestSupport

/// Where real Wi-Fi (mac80211_hwsim radios, hostapd and wpa_supplicant) can run: in the VM that
/// proves netem, booted with Debian's kernel, which has mac80211_hwsim as a module.
enum WiFiHost {
    static let tools = ["/usr/sbin/hostapd", "/usr/sbin/wpa_supplicant", "/usr/sbin/iw"]

    static var kernelHasHwsim: Bool {
        let kernels = (try? FileManager.default.contentsOfDirectory(atPath: "/boot")) ?? []
        return kernels.filter { $0.hasPrefix("vmlinuz-") }.contains { image in
            // drivers/net/wireless/ up to 6.1, drivers/net/wireless/virtual/ after.
            let base = "/lib/modules/\(image.dropFirst("vmlinuz-".count))/kernel/drivers/net/wireless"
            return [base, base + "/virtual"].contains { directory in
                ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).contains { $0.hasPrefix("mac80211_hwsim.ko") }
            }
        }
    }

    static var canRun: Bool {
        TestEnvironment.roamExecutable != nil && NetemHost.vmAvailable && kernelHasHwsim && tools.allSatisfy { access($0, X_OK) == 0 }
    }

    /// Which boot runs wifi-check.sh: the netem check's, when it starts first (as the suites
    /// come in a whole run), or one of its own (this suite alone, or first).
    enum Boot { case netemBoot, ownBoot }
    private static let boot = Mutex<Boot?>(nil)

    /// Whether `boot` runs the check: the first to ask gets it.
    static func claim(_ boot: Boot) -> Bool {
        self.boot.withLock { claimed in
            if claimed == nil { claimed = boot }
            return claimed == boot
        }
    }

    /// In CI the suite runs whatever this machine says, so that a machine that should run it
    /// and cannot fails instead of skipping.
    static var shouldRun: Bool { canRun || ProcessInfo.processInfo.environment["CI"] != nil }

    /// Runs scripts/wifi-check.sh once in the VM and returns its output directory: in the boot
    /// that checks netem (``NetemHost/checks``) where that one runs in the VM too.
    static let output: Result<String, WiFiCheckFailure> = {
        if let outcome = NetemHost.prebooted?.wifi { return outcome }
        if !claim(.ownBoot), let outcome = NetemHost.checks.wifi { return outcome }
        guard canRun, let roam = TestEnvironment.roamExecutable else {
            return .failure(WiFiCheckFailure(message: "cannot run here: needs root, the built roam, scripts/vm.sh's VM with a kernel that has "
                + "mac80211_hwsim, and hostapd, wpa_supplicant and iw (scripts/setup.sh --vm installs them)"))
        }
        guard let scratch = try? TestEnvironment.processScratchDirectory("roam-wifi-check") else {
            return .failure(WiFiCheckFailure(message: "cannot make a directory under /tmp for the check's output"))
        }
        let directory = scratch + "/wifi"
        let command = [NetemHost.root + "/scripts/vm.sh", "--rwdir", "/tmp", "--", NetemHost.root + "/scripts/wifi-check.sh", roam, directory]
        guard let result = try? RunningCommand.run(command[0], Array(command.dropFirst()), timeout: 600) else {
            return .failure(WiFiCheckFailure(message: "scripts/wifi-check.sh did not finish in 600 s"))
        }
        print(result.output)
        guard result.status == 0 else {
            return .failure(WiFiCheckFailure(message: "scripts/wifi-check.sh exited \(result.status): "
                + NetemHost.text(directory + "/failure") + result.output.suffix(2000) + result.error.suffix(2000)))
        }
        return .success(directory)
    }()
}

struct WiFiCheckFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// The path monitor on a real cfg80211 stack: two mac80211_hwsim radios in the VM, an access
/// point and a client in namespaces of their own. The client's radio is Wi-Fi from the kernel
/// alone, and its link quality comes from nl80211, read the way `iw` reads it.
@Suite(.enabled(if: WiFiHost.shouldRun, "needs the netem VM with mac80211_hwsim, hostapd, wpa_supplicant and iw"), .serialized)
struct WiFiTests {
    func output() throws -> String {
        try WiFiHost.output.get()
    }

    /// The published paths, in order.
    func paths(_ directory: String) -> [[String: Any]] { NetemHost.lines(directory + "/monitor.jsonl") }

    func interface(_ name: String, in path: [String: Any]) -> [String: Any]? {
        (path["interfaces"] as? [[String: Any]])?.first { $0["name"] as? String == name }
    }

    @Test func theRadioIsWiFiFromTheKernelAloneAndCarriesTraffic() throws {
        let directory = try output()
        let radio = NetemHost.text(directory + "/interface").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(NetemHost.text(directory + "/alias").trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "no tag told Roam anything")
        let published = paths(directory)
        try #require(!published.isEmpty)
        #expect(published.allSatisfy { interface(radio, in: $0).map { $0["type"] as? String == "wifi" } ?? true })
        let satisfied = try #require(published.first { $0["status"] as? String == "satisfied" }, "the association made the path satisfied")
        #expect(satisfied["primaryInterface"] as? String == radio)
        #expect(NetemHost.text(directory + "/ping.txt").contains(" 0% packet loss"))
        #expect(published.last?["status"] as? String == "unsatisfied", "the client left its access point")
    }

    /// At each forced rate, the grade the monitor published is the grade of what `iw` read from
    /// the same station entry: 54 Mbit/s good, 11 moderate, 1 minimal, and good again.
    @Test(arguments: [("free", LinkQuality.good), ("rate11", .moderate), ("rate1", .minimal), ("again", .good)])
    func linkQualityFollowsWhatNl80211Says(_ step: String, _ expected: LinkQuality) throws {
        let directory = try output()
        let dump = NetemHost.text(directory + "/station-\(step).txt")
        let station = try #require(Self.station(fromIwDump: dump), "\(dump)")
        let published = NetemHost.text(directory + "/published-\(step)").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(published == LinkQuality(grading: station).rawValue, "iw: \(station)")
        #expect(published == expected.rawValue)
    }

    /// The grades appear in the order the rates were forced.
    @Test func theMonitorPublishedEachGradeAsTheRateChanged() throws {
        let directory = try output()
        let radio = NetemHost.text(directory + "/interface").trimmingCharacters(in: .whitespacesAndNewlines)
        var grades: [String] = []
        for path in paths(directory) where path["status"] as? String == "satisfied" {
            guard let grade = interface(radio, in: path)?["linkQuality"] as? String else { continue }
            if grades.last != grade { grades.append(grade) }
        }
        // Rate control starts slow after association, so grades before the first step vary;
        // the client may read no station for a moment as it leaves.
        while grades.last == "unknown" { grades.removeLast() }
        #expect(Array(grades.suffix(4)) == ["good", "moderate", "minimal", "good"], "\(grades)")
    }

    /// `roam record` on the same radio through the forced rates: the access point it is
    /// associated with, its signal and the bitrates nl80211 gives (11 and 1 Mbit/s among them),
    /// echoes to the access point answered; once the client left, no access point; interrupted,
    /// exit 0, and the scenario written plays 65% of each bitrate recorded.
    @Test func roamRecordReadsTheRadioAndReplaysItsBitrates() throws {
        let directory = try output()
        let radio = NetemHost.text(directory + "/interface").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(NetemHost.text(directory + "/record.exit").trimmingCharacters(in: .whitespacesAndNewlines) == "0",
                "\(NetemHost.text(directory + "/record.stderr"))")
        let recording = try DeviceRecording.read(directory + "/recording.jsonl")
        #expect(recording.interfaces == [DeviceRecording.Interface(name: radio, type: "wifi", target: IPAddress("198.18.0.1"))], "\(recording.interfaces)")
        let accessPoint = NetemHost.text(directory + "/ap-address").trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        let associated = recording.samples.filter { $0.bssid != nil }
        // (The carrier may read down in the interval the client left in, its station not yet gone.)
        #expect(associated.count >= 4 && associated.allSatisfy { $0.bssid == accessPoint && $0.signal != nil }
                    && associated.filter { $0.carrier == true }.count >= associated.count - 1, "\(accessPoint): \(associated)")
        let rates = Set(associated.compactMap(\.transmitBitrate))
        #expect(rates.contains(11_000_000) && rates.contains(1_000_000), "\(rates)")
        #expect(associated.contains { $0.received > 0 && $0.roundTrip != nil }, "\(associated)")
        #expect(recording.samples.last?.bssid == nil, "the client left its access point: \(recording.samples.suffix(3))")
        let scenario = NetemHost.text(directory + "/recorded-wifi.yaml")
        #expect(ScenarioReader.parse(scenario, file: "recorded-wifi.yaml").errors.isEmpty, "\(scenario.prefix(2000))")
        #expect(scenario.contains("rate: 650kbit") && scenario.contains("rate: 7150kbit"), "\(scenario.prefix(3000))")
    }

    /// `iw dev X station dump`'s signal average (else signal) and tx bitrate.
    static func station(fromIwDump text: String) -> WirelessStation? {
        var station = WirelessStation()
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 else { continue }
            let number = parts[1].split(separator: " ").first.flatMap { Double($0) }
            switch parts[0] {
            case "signal": station.signal = number.map { Int($0) }
            case "signal avg": station.signalAverage = number.map { Int($0) }
            case "tx bitrate": station.transmitBitrate = number.map { UInt64(($0 * 1_000_000).rounded()) }
            case "rx bitrate": station.receiveBitrate = number.map { UInt64(($0 * 1_000_000).rounded()) }
            default: break
            }
        }
        return station.signal == nil && station.transmitBitrate == nil ? nil : station
    }
}
