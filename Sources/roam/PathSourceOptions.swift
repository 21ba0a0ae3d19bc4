import ArgumentParser
import Glibc
import Netlink
import PathMonitor
import RoamCore
import RoamSystem

/// Where a path comes from and how it is watched: the options `roam monitor` and `roam daemon`
/// share (the namespace, the interfaces file, connectivity validation), checked and turned into
/// a monitor's configuration in one place.
struct PathSourceOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Watch the named network namespace (as listed by `ip netns`) instead of the current one; for a node of your rootless run, roam-RUNID-NODE.", valueName: "name"))
    var netns: String?

    @Option(name: .long, help: ArgumentHelp("Interfaces file: lines of 'PATTERN ATTRIBUTES', e.g. 'wwan* type=cellular expensive'.", valueName: "file"))
    var interfaces: String?

    @Option(name: .customLong("validate"), help: ArgumentHelp("Check each interface's connectivity: an HTTP GET of this URL from the interface, expecting 204 (a redirect or another page: a captive portal; nothing: limited).", valueName: "url"))
    var validationURL: String?

    @Option(name: .long, help: ArgumentHelp("With --validate: seconds between checks of a validated interface (default 300, NetworkManager's).", valueName: "seconds"))
    var validateInterval: Int?

    func validate() throws {
        // A name under /run/netns, as `ip netns` makes them: no path, no control characters.
        if let netns, netns.isEmpty || netns == "." || netns == ".." || netns.utf8.count > 255
            || netns.unicodeScalars.contains(where: { $0 == "/" || $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) }) {
            throw ValidationError("--netns '\(escapedForMessage(netns))' is not a network namespace name (a file name under /run/netns, as `ip netns list` shows)")
        }
        if let validationURL, case .failure(let error) = ConnectivityValidation(url: validationURL).target() {
            throw ValidationError("--validate: \(error.message)")
        }
        if let validateInterval, !(1...86_400).contains(validateInterval) {
            throw ValidationError("--validate-interval must be 1 to 86400 seconds, not \(validateInterval)")
        }
        if validationURL == nil, validateInterval != nil {
            throw ValidationError("--validate-interval needs --validate URL: nothing is validated without a probe")
        }
    }

    /// The namespace to watch and the monitor's configuration under `policy`. A node of the
    /// user's rootless run is entered first (the process must still have one thread). Bad input
    /// is said as `roam COMMAND: …` and exits 2.
    func monitorConfiguration(policy: PathPolicy, command: String) throws -> (NetworkNamespace, NetworkPathMonitor.Configuration) {
        if let netns, !Rootless.canRunAsRoot, access("\(NetworkNamespace.runDirectory)/\(netns)", F_OK) != 0,
           let run = RootlessRun.runID(ofNamespace: netns), (try? RootlessRun.process(of: run)) ?? nil != nil {
            do {
                try RootlessRun.enter(run)
            } catch {
                printError("roam \(command): \(error)")
                throw ExitCode.badInput
            }
        }
        let namespace: NetworkNamespace
        do {
            namespace = try netns.map { try NetworkNamespace.named($0) } ?? .current
        } catch {
            throw ValidationError("\(error)")
        }
        var configuration = NetworkPathMonitor.Configuration(policy: policy)
        if let validationURL {
            var validation = ConnectivityValidation(url: validationURL)
            if let validateInterval { validation.interval = .seconds(validateInterval) }
            configuration.validation = validation
        }
        if let interfaces {
            do {
                configuration.interfaceRules = try InterfaceRules(contentsOfFile: interfaces)
            } catch {
                printError("roam \(command): \(error)")
                throw ExitCode.badInput
            }
        }
        return (namespace, configuration)
    }
}
