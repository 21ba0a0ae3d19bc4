import ArgumentParser
import Glibc
import RoamControl
import RoamCore
import RoamSystem
import ScenarioModel
import Simulator

/// `roam ctl RUN ...`: drive a run started with `roam run --control` from a shell.
struct CtlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Drive a run started with --control: its links, its nodes' paths, its events, its end.",
        discussion: """
            RUN is the run's id. The command talks to the run's control API on its Unix socket (/run/roam/control/RUN.sock \
            for a run as root; this user's registry of rootless runs otherwise), as the user who started it. Link and network \
            changes use the timeline's own vocabulary and are checked as a scenario's are. Examples:
              roam ctl 1a2b3c link wifi blackhole
              roam ctl 1a2b3c link wifi set delay=300ms loss=5% --direction down
              roam ctl 1a2b3c link wifi set delay=2s --match protocol=udp --match port=53
              roam ctl 1a2b3c link wifi ramp over=10s rate=1mbit
              roam ctl 1a2b3c link wifi flap period=2s for=20s
              roam ctl 1a2b3c network home portal login --node phone
              roam ctl 1a2b3c path phone --json
              roam ctl 1a2b3c events --follow
              roam ctl 1a2b3c stop
            Exit 0 on success, 2 when the API refuses the request (the message says why) or cannot be reached.
            """,
        )

    /// The commands after RUN (`roam ctl RUN COMMAND ...`): parsed by hand, since a positional
    /// argument cannot come before a subcommand.
    static let commands: [(name: String, type: any ParsableCommand.Type)] = [
        ("info", Info.self), ("path", Path.self), ("link", Link.self), ("network", Network.self), ("events", Events.self),
        ("stop", Stop.self), ("address", Address.self),
    ]

    @Argument(help: ArgumentHelp("The run's id.", valueName: "run"))
    var runID: String

    @Argument(parsing: .captureForPassthrough, help: ArgumentHelp("info | path NODE | link LINK [ACTION] | network NETWORK ACTION | events | stop | address; `roam ctl RUN COMMAND --help` for each.", valueName: "command"))
    var arguments: [String] = []

    func validate() throws {
        guard RunRegistry.isRunID(runID) else {
            throw ValidationError("'\(escapedForMessage(runID))' is not a run id: six lowercase hex digits (0-9, a-f), as roam run printed")
        }
        guard let name = arguments.first else {
            throw ValidationError("name a command after the run: \(Self.commands.map(\.name).joined(separator: ", "))")
        }
        guard Self.commands.contains(where: { $0.name == name }) else {
            throw ValidationError("'\(escapedForMessage(name))' is not a roam ctl command: \(Self.commands.map(\.name).joined(separator: ", "))")
        }
    }

    func run() throws {
        let type = Self.commands.first { $0.name == arguments[0] }!.type
        do {
            var command = try type.parseAsRoot([runID] + arguments.dropFirst())
            try command.run()
        } catch {
            type.exit(withError: error)
        }
    }

    struct RunOption: ParsableArguments {
        @Argument(help: ArgumentHelp("The run's id.", valueName: "run"))
        var runID: String

        func validate() throws {
            guard RunRegistry.isRunID(runID) else {
                throw ValidationError("'\(escapedForMessage(runID))' is not a run id: six lowercase hex digits (0-9, a-f), as roam run printed")
            }
        }

        /// The run's socket: root's control directory, then this user's rootless registry.
        func address() throws -> ControlClient.Address {
            let name = ControlListeners.socketName(runID)
            var places: [String] = []
            for rootless in [false, true] {
                guard let directory = try? ControlListeners.directory(rootless: rootless, creating: false) else { continue }
                places.append(directory.child(name))
                if let status = directory.status(of: name), status.mode & S_IFMT == S_IFSOCK { return .unix(directory.child(name)) }
            }
            let runs = (try? RunRegistry.rootless(creating: false))?.liveRuns() ?? []
            fail("no control API for run \(runID) here (looked for \(places.isEmpty ? name : places.joined(separator: " and "))); "
                + "start the run with roam run --control" + (runs.isEmpty ? "" : "; this user's runs in progress: \(runs.joined(separator: ", "))"))
        }
    }

    struct Info: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "info", abstract: "The run: scenario, nodes, links, networks, time (GET /v1/run).")
        @OptionGroup var target: RunOption
        func run() throws { try CtlCommand.send(target, "GET", "/v1/run") }
    }

    struct Path: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "path", abstract: "A node's current path, as roam monitor prints it.")
        @OptionGroup var target: RunOption
        @Argument(help: "The node.") var node: String
        @Flag(help: "The whole path as JSON (as roam monitor --json prints it).") var json = false
        func run() throws {
            try CtlCommand.send(target, "GET", "/v1/nodes/\(CtlCommand.segment(node))/path") { body in
                guard !json, let path = try? JSONValue.parse(body) else { return body }
                return Self.summary(path)
            }
        }
    }

    struct Link: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "link", abstract: "A link's conditions, or a change to them: set, ramp, down, up, blackhole, flap, profile.",
            discussion: """
                With no action, prints the link's carrier and conditions. Actions: set KEY=VALUE... (delay, jitter, rate, loss, \
                duplicate, reorder, corrupt, limit, ...), ramp over=DURATION KEY=VALUE..., down, up, blackhole [on|off], \
                flap period=DURATION [duty=PERCENT] [for=DURATION | until=TIME], profile NAME, reset (with --match); or --json \
                with a timeline event. --match KEY=VALUE (protocol, port, localPort, server, to, dns; repeated, all must hold) \
                makes set, ramp, blackhole and reset act on those packets only.
                """)
        @OptionGroup var target: RunOption
        @Argument(help: "The link.") var link: String
        @Argument(help: "The action and its settings.") var action: [String] = []
        @Option(help: "Only one direction: up or down (set, ramp, blackhole).") var direction: String?
        @Option(help: ArgumentHelp("Only the packets this selects (set, ramp, blackhole, reset): protocol=udp, port=53, port=8000-8100, "
                                   + "localPort=5000, server=NODE, to=PREFIX, dns=true; repeat for more, each must hold.", valueName: "key=value"))
        var match: [String] = []
        @Option(help: ArgumentHelp("The change as a JSON object, in the timeline's vocabulary, e.g. '{\"set\": {\"delay\": \"80ms\"}}'.", valueName: "body"))
        var json: String?

        func run() throws {
            let path = "/v1/links/\(CtlCommand.segment(link))"
            guard json != nil || !action.isEmpty else { return try CtlCommand.send(target, "GET", path) }
            if json != nil, !match.isEmpty { throw ValidationError("--match goes in the --json body as \"match\"; give one or the other") }
            let body = try json ?? CtlCommand.linkChange(action, direction: direction, match: match)
            try CtlCommand.send(target, "POST", path, body: body)
        }
    }

    struct Network: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "network", abstract: "A change to a network: join, leave, renumber, rebind, dns, portal.",
            discussion: "join NODE, leave NODE, renumber NODE, rebind, dns ok|timeout|nxdomain|refused|servfail [for=DURATION], dns delay=DURATION [for=DURATION], portal login|logout [--node NODE]; or --json with a timeline event.")
        @OptionGroup var target: RunOption
        @Argument(help: "The network.") var network: String
        @Argument(help: "The action and its settings.") var action: [String] = []
        @Option(help: "The member a portal login or logout is for.") var node: String?
        @Option(help: ArgumentHelp("The change as a JSON object, in the timeline's vocabulary.", valueName: "body")) var json: String?

        func run() throws {
            let body = try json ?? CtlCommand.networkChange(action, node: node)
            try CtlCommand.send(target, "POST", "/v1/networks/\(CtlCommand.segment(network))", body: body)
        }
    }

    struct Events: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "events", abstract: "The run's events, one JSON line each, as timeline.jsonl has them.")
        @OptionGroup var target: RunOption
        @Option(help: "From this sequence number on (0: the first).") var from = 0
        @Flag(help: "Keep printing events as they happen, until the run ends.") var follow = false
        @Flag(help: "Print each event's sequence number before it.") var ids = false

        func validate() throws {
            guard from >= 0 else { throw ValidationError("--from is a sequence number: 0 or more") }
        }

        func run() throws {
            let address = try target.address()
            let parser = ServerSentEvents()
            let ids = self.ids
            let status: Int
            do {
                status = try ControlClient.stream(address, path: "/v1/events?from=\(from)&follow=\(follow)") { bytes in
                    for event in parser.feed(bytes) {
                        if event.type == "gap" {
                            printError("roam ctl: events were left out (no longer held by the run; timeline.jsonl has them): \(event.data)")
                        } else {
                            writeLine(ids ? "\(event.id ?? "?") \(event.data)" : event.data)
                        }
                    }
                    return true
                }
            } catch {
                CtlCommand.fail("cannot reach run \(target.runID)'s control API: \(error)")
            }
            if status != 200 { CtlCommand.fail("the run answered \(status): \(parser.unparsed)") }
        }
    }

    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "stop", abstract: "End the run: its report is written, its network removed; prints where the report is.")
        @OptionGroup var target: RunOption
        func run() throws { try CtlCommand.send(target, "POST", "/v1/stop", timeout: 600) }
    }

    struct Address: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "address", abstract: "The path of the run's control socket (for curl --unix-socket and clients).")
        @OptionGroup var target: RunOption
        func run() throws {
            guard case .unix(let path) = try target.address() else { return }
            writeLine(path)
        }
    }

    // MARK: - Support

    static func send(_ run: RunOption, _ method: String, _ path: String, body: String? = nil, timeout seconds: Int64 = 60,
                     render: (String) -> String = { $0 }) throws {
        let address = try run.address()
        let response: ControlClient.Response
        do {
            response = try ControlClient.request(address, method: method, path: path, body: body.map { Array($0.utf8) }, timeoutSeconds: seconds)
        } catch {
            fail("cannot reach run \(run.runID)'s control API: \(error)")
        }
        let text = String(decoding: response.body, as: UTF8.self).trimmingSuffix("\n")
        guard (200..<300).contains(response.status) else {
            if case .object(let members)? = try? JSONValue.parse(text), case .string(let message)? = members.first(where: { $0.0 == "error" })?.1 {
                fail("\(message) (HTTP \(response.status))")
            }
            fail("HTTP \(response.status): \(escapedForMessage(text, maximumLength: 2000))")
        }
        writeLine(render(text))
    }

    /// A path segment with what is not a name character escaped.
    static func segment(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            if (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x5F || byte == 0x2E {
                result.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                result += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return result
    }

    /// `KEY=VALUE` words as a JSON object of strings.
    static func settings(_ words: ArraySlice<String>, action: String) throws -> [(String, JSONValue)] {
        try words.map { word in
            guard let equals = word.firstIndex(of: "="), equals != word.startIndex else {
                throw ValidationError("\(action) takes KEY=VALUE settings (e.g. delay=80ms), not '\(escapedForMessage(word))'")
            }
            return (String(word[..<equals]), .string(String(word[word.index(after: equals)...])))
        }
    }

    /// The JSON body of `roam ctl RUN link LINK ACTION ...`.
    static func linkChange(_ words: [String], direction: String?, match: [String] = []) throws -> String {
        let action = words[0]
        let rest = words.dropFirst()
        var body: [(String, JSONValue)]
        switch action {
        case "set":
            guard !rest.isEmpty else { throw ValidationError("set needs KEY=VALUE settings, e.g. set delay=80ms loss=2%") }
            body = [("set", .object(try settings(rest, action: "set")))]
        case "ramp":
            var values = try settings(rest, action: "ramp")
            guard let over = values.firstIndex(where: { $0.0 == "over" }) else { throw ValidationError("ramp needs over=DURATION and what it ramps to, e.g. ramp over=10s delay=300ms") }
            let span = values.remove(at: over).1
            body = [("ramp", .object([("to", .object(values)), ("over", span)]))]
        case "down", "up":
            guard rest.isEmpty else { throw ValidationError("\(action) takes nothing more") }
            body = [(action, true)]
        case "blackhole":
            guard rest.count <= 1, rest.allSatisfy({ ["on", "off"].contains($0) }) else { throw ValidationError("blackhole takes on (the default) or off") }
            body = [("blackhole", .bool(rest.first != "off"))]
        case "flap":
            body = [("flap", .object(try settings(rest, action: "flap")))]
        case "profile":
            guard rest.count == 1 else { throw ValidationError("profile takes one profile name, e.g. profile lte") }
            body = [("profile", .string(rest.first!))]
        case "reset":
            guard rest.isEmpty, !match.isEmpty else { throw ValidationError("reset takes nothing more, and --match for the flow it resets") }
            body = [("reset", true)]
        default:
            throw ValidationError("'\(escapedForMessage(action))' is not a link action: set, ramp, down, up, blackhole, flap, profile, reset")
        }
        if let direction { body.append(("direction", .string(direction))) }
        if !match.isEmpty {
            // A key given more than once is a list (port=80 --match port=443); the run checks the rest.
            var keys: [(String, [JSONValue])] = []
            for (key, value) in try settings(match[...], action: "--match") {
                if let index = keys.firstIndex(where: { $0.0 == key }) { keys[index].1.append(value) } else { keys.append((key, [value])) }
            }
            body.append(("match", .object(keys.map { ($0.0, $0.1.count == 1 ? $0.1[0] : .array($0.1)) })))
        }
        return JSONValue.object(body).serialized
    }

    /// The JSON body of `roam ctl RUN network NETWORK ACTION ...`.
    static func networkChange(_ words: [String], node: String?) throws -> String {
        guard let action = words.first else { throw ValidationError("name an action: join, leave, renumber, rebind, dns, portal (or --json)") }
        let rest = words.dropFirst()
        var body: [(String, JSONValue)]
        switch action {
        case "join", "leave", "renumber":
            guard rest.count == 1 else { throw ValidationError("\(action) takes the member's node name, e.g. \(action) phone") }
            body = [(action, .string(rest.first!))]
        case "rebind":
            guard rest.isEmpty else { throw ValidationError("rebind takes nothing more") }
            body = [("rebind", true)]
        case "dns":
            guard let first = rest.first else { throw ValidationError("dns takes ok, a fault (timeout, nxdomain, refused, servfail) or delay=DURATION") }
            if first == "ok" {
                body = [("dns", "ok")]
            } else if first.hasPrefix("delay=") {
                body = [("dns", .object(try settings(rest, action: "dns")))]
            } else {
                body = [("dns", .object([("fail", .string(first))] + (try settings(rest.dropFirst(), action: "dns"))))]
            }
        case "portal":
            guard rest.count == 1 else { throw ValidationError("portal takes login or logout") }
            body = [("portal", .string(rest.first!))]
        default:
            throw ValidationError("'\(escapedForMessage(action))' is not a network action: join, leave, renumber, rebind, dns, portal")
        }
        if let node { body.append(("node", .string(node))) }
        return JSONValue.object(body).serialized
    }

    static func fail(_ message: String) -> Never {
        printError("roam ctl: \(message)")
        Glibc.exit(ExitCode.badInput.rawValue)
    }
}

/// Reads a Server-Sent Events stream as it arrives (`roam ctl events`, `roam monitor --daemon`):
/// each event's id, type and data, in order, as Roam's servers send them (`id:` and `event:`
/// before one `data:` line). A line longer than ``maximumLine`` is dropped and counted.
final class ServerSentEvents: @unchecked Sendable {
    struct Event {
        var id: String?
        var type: String
        var data: String
    }

    /// The most a line may hold before its end.
    static let maximumLine = 1 << 20

    private var pending: [UInt8] = []
    private var id: String?
    private var event: String?
    /// What was received that was not an event (an error's body), at most 4 KiB of it.
    private(set) var unparsed = ""
    /// Lines dropped for being longer than ``maximumLine``.
    private(set) var dropped = 0

    func feed(_ bytes: [UInt8]) -> [Event] {
        pending += bytes
        var events: [Event] = []
        while let newline = pending.firstIndex(of: 0x0A) {
            let line = String(decoding: pending[..<newline], as: UTF8.self)
            pending.removeSubrange(...newline)
            if line.isEmpty {
                event = nil
            } else if line.hasPrefix("id: ") {
                id = String(line.dropFirst(4))
            } else if line.hasPrefix("event: ") {
                event = String(line.dropFirst(7))
            } else if line.hasPrefix("data: ") {
                events.append(Event(id: id, type: event ?? "message", data: String(line.dropFirst(6))))
            } else if unparsed.utf8.count < 4096 {
                unparsed += line
            }
        }
        if pending.count > Self.maximumLine {
            pending = []
            dropped += 1
        }
        return events
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

extension CtlCommand.Path {
    /// `satisfied via wifi (expensive: no, constrained: no, quality: good, connectivity: validated);
    /// wifi up 198.18.0.1/24, cell unknown 198.18.1.1/24`: a path in one line.
    static func summary(_ path: JSONValue) -> String {
        func text(_ value: JSONValue?) -> String { value?.stringValue ?? (value?.boolValue).map { $0 ? "yes" : "no" } ?? "-" }
        var line = text(path["status"])
        if let reason = path["unsatisfiedReason"]?.stringValue { line += " (\(reason))" }
        if let primary = path["primaryInterface"]?.stringValue { line += " via \(primary)" }
        line += " (expensive: \(text(path["isExpensive"])), constrained: \(text(path["isConstrained"])), quality: \(text(path["linkQuality"])), "
            + "connectivity: \(text(path["connectivity"])))"
        let interfaces = (path["interfaces"]?.arrayValue ?? []).compactMap { interface -> String? in
            guard let name = interface["name"]?.stringValue, interface["type"]?.stringValue != "loopback" else { return nil }
            let addresses = (interface["addresses"]?.arrayValue ?? []).compactMap(\.stringValue).filter { !$0.hasPrefix("fe80:") }
            return ([name, text(interface["state"])] + addresses).joined(separator: " ")
        }
        return interfaces.isEmpty ? line : line + "; " + interfaces.joined(separator: ", ")
    }
}
