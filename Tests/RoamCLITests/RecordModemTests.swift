import Foundation
import Glibc
import ScenarioModel
import Testing
import TestSupport

/// `roam record` on a cellular interface: its modem read through ModemManager's D-Bus API, here
/// python-dbusmock's ModemManager template (from PyPI: Debian 12's python3-dbusmock has none)
/// on a private system bus, its modem's network port the test namespace's `wwan0`. The
/// recording holds what the modem reported as it changed, the modem's signal polling is turned
/// on while recording and back off after, and the scenario it makes plays the bands' rates.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && access("/usr/bin/dbus-daemon", X_OK) == 0
                && access("/usr/bin/busctl", X_OK) == 0, "needs root, the built roam, dbus-daemon and busctl (scripts/setup.sh --dbus)"), .serialized)
struct RecordModemTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"
    /// python-dbusmock from PyPI, where scripts/setup.sh --dbus puts it.
    static let python = (ProcessInfo.processInfo.environment["ROAM_DBUSMOCK_VENV"] ?? NSHomeDirectory() + "/.cache/roam/dbusmock") + "/bin/python"
    static let service = "org.freedesktop.ModemManager1"

    @Test func recordsWhatModemManagerReportsOfTheModem() async throws {
        let template = try RunningCommand.run(Self.python, ["-c", "import dbusmock.templates.modemmanager"])
        try #require(template.status == 0, "needs python-dbusmock with its ModemManager template (scripts/setup.sh --dbus): \(template.error)")
        try await TestNamespace.with { test in
            _ = try test.addUplink("wwan0", subnet: 0, metric: 100, alias: "roam:type=cellular")
            let directory = try TestEnvironment.processScratchDirectory("roam-record-modem")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let bus = try PrivateSystemBus(directory: directory, extraPolicy: """
                <policy user="root"><allow own="\(Self.service)"/><allow send_destination="\(Self.service)"/></policy>
                """)
            func record(_ arguments: [String]) throws -> RunningCommand {
                try RunningCommand("/usr/bin/ip", ["netns", "exec", test.name, "/usr/bin/env", "DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", roam, "record",
                                                   "--interface", "wwan0", "--echoes", "0", "--interval", "500ms"] + arguments)
            }

            // No ModemManager on the bus: the carrier is recorded, and the radio said missing.
            let alone = try record(["--duration", "1s", "--output", directory + "/alone.jsonl"])
            #expect(alone.waitForExit(timeout: 20) == 0, "\(alone.errors.values)")
            #expect(alone.errors.values.contains { $0.contains("ModemManager is not running, or has no modem: wwan0's radio is not recorded") },
                    "\(alone.errors.values)")
            // No gpsd in the namespace either: --gpsd auto goes on without a position.
            #expect(alone.errors.values.contains { $0.contains("no gpsd at 127.0.0.1 port 2947") }, "\(alone.errors.values)")
            let without = try DeviceRecording.read(directory + "/alone.jsonl")
            #expect(without.interfaces.first?.type == "cellular" && without.samples.count == 2)
            #expect(without.samples.allSatisfy { $0.carrier == true && $0.technology == nil && $0.rsrp == nil }, "\(without.samples)")

            // ModemManager with a modem (the template's), whose network port is wwan0, and a
            // Modem.Signal that fills only once Setup is called, as ModemManager's does.
            let modemManager = try RunningCommand("/usr/bin/env", ["DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", Self.python, "-m", "dbusmock",
                                                                   "--system", "--template", "modemmanager"])
            defer { _ = modemManager.stop(with: SIGKILL) }
            // Until the mock owns ModemManager's name (this dbusmock prints nothing when it does).
            func served() throws -> Bool {
                try bus.busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", "s", Self.service])
                    .output.contains("true")
            }
            let deadline = Date().addingTimeInterval(20)
            while try !served(), Date() < deadline, modemManager.process.isRunning { usleep(20_000) }
            try #require(try served(), "ModemManager's mock on the bus within 20 s: \(modemManager.errors.values)")
            func call(_ path: String, _ arguments: [String]) throws -> String {
                let result = try bus.busctl(["call", Self.service, path, "org.freedesktop.DBus.Mock"] + arguments)
                #expect(result.status == 0, "\(arguments): \(result)")
                return result.output
            }
            let added = try call("/org/freedesktop/ModemManager1", ["AddSimpleModem"])
            let modem = try #require(added.split(separator: "\"").dropFirst().first.map(String.init), "\(added)")
            _ = try call(modem, ["AddProperty", "ssv", "org.freedesktop.ModemManager1.Modem", "Ports", "a(su)", "2", "cdc-wdm0", "6", "wwan0", "2"])
            _ = try call(modem, ["AddProperties", "sa{sv}", "org.freedesktop.ModemManager1.Modem.Signal", "3", "Rate", "u", "0",
                                 "Lte", "a{sv}", "0", "Nr5g", "a{sv}", "0"])
            _ = try call(modem, ["AddMethod", "sssss", "org.freedesktop.ModemManager1.Modem.Signal", "Setup", "u", "", """
                self.Set('org.freedesktop.ModemManager1.Modem.Signal', 'Rate', args[0]); \
                self.Set('org.freedesktop.ModemManager1.Modem.Signal', 'Lte', dbus.Dictionary({'rsrp': dbus.Double(-75.0), 'rsrq': dbus.Double(-9.0), 'snr': dbus.Double(20.0)} if args[0] else {}, signature='sv'))
                """])
            func rate() throws -> String {
                try bus.busctl(["get-property", Self.service, modem, "org.freedesktop.ModemManager1.Modem.Signal", "Rate"]).output
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
            #expect(try rate() == "u 0")

            let output = directory + "/drive.jsonl"
            let recorder = try record(["--duration", "5s", "--output", output, "--scenario", directory + "/drive.yaml"])
            defer { _ = recorder.stop(with: SIGKILL) }
            // Once three intervals are written, the modem falls back to UMTS at -105 dBm.
            func samples() -> Int { NetemHost.text(output).split(separator: "\n").count - 1 }
            let written = Date().addingTimeInterval(20)
            while samples() < 3, Date() < written, recorder.process.isRunning { usleep(20_000) }
            try #require(samples() >= 3, "three intervals within 20 s: \(recorder.errors.values)")
            #expect(try rate() == "u 1", "roam record turned the modem's signal polling on (every second)")
            _ = try call(modem, ["AddMethod", "sssss", "org.roam.Test", "Fade", "", "", """
                self.Set('org.freedesktop.ModemManager1.Modem', 'AccessTechnologies', dbus.UInt32(32)); \
                self.Set('org.freedesktop.ModemManager1.Modem', 'SignalQuality', dbus.Struct((dbus.UInt32(30), dbus.Boolean(True)), signature='ub')); \
                self.Set('org.freedesktop.ModemManager1.Modem.Signal', 'Lte', dbus.Dictionary({'rsrp': dbus.Double(-105.0), 'rsrq': dbus.Double(-15.5), 'snr': dbus.Double(1.0)}, signature='sv'))
                """])
            let faded = try bus.busctl(["call", Self.service, modem, "org.roam.Test", "Fade"])
            #expect(faded.status == 0, "\(faded)")
            #expect(recorder.waitForExit(timeout: 20) == 0, "\(recorder.errors.values)")
            #expect(try rate() == "u 0", "roam record turned the polling it started off")

            let recorded = try DeviceRecording.read(output).samples
            #expect(recorded.count == 10, "\(recorded)")
            let first = try #require(recorded.first), last = try #require(recorded.last)
            #expect(first.technology == "lte" && first.quality == 70 && first.rsrp == -75 && first.rsrq == -9 && first.snr == 20, "\(first)")
            #expect(last.technology == "umts" && last.quality == 30 && last.rsrp == -105 && last.rsrq == -15.5 && last.snr == 1, "\(last)")
            // Each sample is one or the other, the first after the other from the change on; only
            // the sample read while the modem changed (its two interfaces are read one after the
            // other) may be half one, half the other.
            let before = recorded.prefix { $0.technology == "lte" && $0.rsrp == -75 }
            let after = recorded.dropFirst(before.count).drop { !($0.technology == "umts" && $0.rsrp == -105) }
            #expect(before.count >= 3 && before.count + after.count >= recorded.count - 1
                        && after.allSatisfy { $0.technology == "umts" && $0.rsrp == -105 }, "\(recorded)")

            // Replayed: the excellent band (60 and 20 Mbit/s), then the poor one (4 and 1).
            let yaml = NetemHost.text(directory + "/drive.yaml")
            #expect(yaml.contains("down: {rate: 60000kbit") && yaml.contains("up: {rate: 20000kbit"), "\(yaml)")
            #expect(yaml.contains("direction: down, set: {rate: 4000kbit") && yaml.contains("direction: up, set: {rate: 1000kbit"), "\(yaml)")
            let validate = try RunningCommand.run(roam, ["validate", directory + "/drive.yaml"])
            #expect(validate.status == 0, "\(validate.output)\(validate.error)")
        }
    }
}
