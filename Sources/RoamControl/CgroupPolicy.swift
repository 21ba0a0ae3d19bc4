import Glibc
import Netlink
import PathMonitor
import RoamCore
import RoamSystem
import Simulator
import Synchronization
import SystemPackage

/// `roam daemon --cgroup-policy FILE`: a path policy per control group, as URLSession's
/// `allowsExpensiveNetworkAccess` for programs that cannot set it (docs/daemon.md).
///
/// One line per group: its path below the cgroup2 root, then what it may not use:
///
/// ```
/// system.slice/backup.service          prohibit=expensive,constrained
/// user.slice/user-1000.slice/call.scope  require=validated
/// ```
///
/// `prohibit=` takes `expensive`, `constrained`, `ultra-constrained`, `cellular`, `wifi`,
/// `wired`; `require=validated` leaves out every interface not validated (with `--validate`).
/// `#` starts a comment. At most ``maximumEntries`` groups.
package struct CgroupPolicies: Sendable, Hashable {
    package struct Entry: Sendable, Hashable {
        /// The group's path below the cgroup2 root, without a leading `/`.
        package var cgroup: String
        /// What the group's programs may use.
        package var policy: PathPolicy
        /// The line's words after the group, for messages.
        package var summary: String
    }

    package var entries: [Entry]
    package static let maximumEntries = 64

    /// Why a policy file was refused: every problem (the first 20), one `FILE:LINE: error:` line each.
    package struct ParseError: Error, Sendable, CustomStringConvertible {
        package var description: String
    }

    package init(_ entries: [Entry]) { self.entries = entries }

    /// Parses a policy file's text; `source` names it in messages.
    package init(parsing text: String, source: String) throws(ParseError) {
        var entries: [Entry] = []
        var problems: [String] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let group = words.first else { continue }
            let place = "\(source):\(number + 1): error:"
            if let problem = Self.problem(ofCgroup: String(group)) {
                problems.append("\(place) \(problem)")
                continue
            }
            var policy = PathPolicy(validation: .ignore)
            var bad = false
            for word in words.dropFirst() {
                let parts = word.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else {
                    problems.append("\(place) '\(escapedForMessage(word, maximumLength: 60))' is not prohibit=LIST or require=validated")
                    bad = true
                    continue
                }
                switch parts[0] {
                case "prohibit":
                    for item in parts[1].split(separator: ",") {
                        switch item {
                        case "expensive": policy.allowsExpensive = false
                        case "constrained": policy.allowsConstrained = false
                        case "ultra-constrained": policy.allowsUltraConstrained = false
                        case "cellular": policy.allowsCellular = false
                        case "wifi": policy.prohibitedInterfaceTypes.insert(.wifi)
                        case "wired": policy.prohibitedInterfaceTypes.insert(.wiredEthernet)
                        default:
                            problems.append("\(place) cannot prohibit '\(escapedForMessage(item, maximumLength: 40))': expensive, constrained, ultra-constrained, cellular, wifi or wired")
                            bad = true
                        }
                    }
                case "require":
                    guard parts[1] == "validated" else {
                        problems.append("\(place) require= takes validated, not '\(escapedForMessage(parts[1], maximumLength: 40))'")
                        bad = true
                        continue
                    }
                    policy.validation = .require
                default:
                    problems.append("\(place) '\(escapedForMessage(parts[0], maximumLength: 40))' is not prohibit= or require=")
                    bad = true
                }
            }
            if words.count == 1 {
                problems.append("\(place) nothing for '\(escapedForMessage(group, maximumLength: 80))': write for example '\(escapedForMessage(group, maximumLength: 80)) prohibit=expensive'")
                bad = true
            }
            if entries.contains(where: { $0.cgroup == group }) {
                problems.append("\(place) '\(escapedForMessage(group, maximumLength: 80))' has a line already")
                bad = true
            }
            if !bad { entries.append(Entry(cgroup: String(group), policy: policy, summary: words.dropFirst().joined(separator: " "))) }
            if problems.count > 20 { break }
        }
        if entries.count > Self.maximumEntries {
            problems.append("\(source): error: \(entries.count) groups; at most \(Self.maximumEntries)")
        }
        guard problems.isEmpty else {
            let shown = problems.prefix(20).joined(separator: "\n")
            throw ParseError(description: problems.count > 20 ? shown + "\n(and more)" : shown)
        }
        self.entries = entries
    }

    /// Reads and parses a policy file (a regular file of at most 1 MiB: a FIFO or a device is
    /// refused at once, never waited on).
    package init(contentsOfFile path: String) throws(ParseError) {
        let text: String
        do throws(SafePathError) {
            text = try readTextFile(atPath: path, maximumBytes: 1 << 20)
        } catch {
            throw ParseError(description: "\(escapedForMessage(path, maximumLength: 256)): error: cannot read it: \(error.message)")
        }
        try self.init(parsing: text, source: escapedForMessage(path, maximumLength: 256))
    }

    /// Why `cgroup` is not a group's path below the root, or nil.
    static func problem(ofCgroup cgroup: String) -> String? {
        let components = cgroup.split(separator: "/", omittingEmptySubsequences: false)
        if cgroup.hasPrefix("/") || cgroup.isEmpty || cgroup.utf8.count > 4096
            || components.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." })
            || cgroup.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "\"" || $0 == "\\" }) {
            return "'\(escapedForMessage(cgroup, maximumLength: 80))' is not a control group below the root (like system.slice/backup.service: no leading '/', no '.' or '..', no quotes)"
        }
        return nil
    }
}

/// What the daemon puts in the kernel for ``CgroupPolicies``, derived from a path: pure, for tests.
///
/// Group `i`'s sockets get the firewall mark `markBase + i` from an nftables `type route` output
/// chain (`socket cgroupv2`), which routes them again; `ip rule fwmark MARK lookup TABLE` sends
/// them to a table of their own that holds the main table's default routes through the
/// interfaces the group's policy permits and, after them, `unreachable default`, so that
/// nothing falls through to the main table. Marked packets are masqueraded on their way out, so
/// that a connection routed away from the interface its address came from leaves with the
/// address of the one it uses.
package enum CgroupPolicyPlan {
    package static let markBase: UInt32 = 0x524f_0100
    package static let tableBase: UInt32 = 0x524f_0100
    /// Before the source-address rules multihomed hosts have (Roam's own runs put theirs at
    /// 1000 and up; MPTCP setups commonly add some): a group's traffic is its table's, whatever
    /// address the main table gave its socket.
    package static let priorityBase: UInt32 = 100
    package static let nftTable = "roam-cgroup-policy"

    /// One group's table.
    package struct Table: Sendable, Hashable {
        package var index: Int
        package var cgroup: String
        package var mark: UInt32
        package var table: RouteTable
        package var priority: UInt32
        /// The interfaces the policy permits (names, the path's order).
        package var interfaces: [String]
        /// The table's routes.
        package var routes: [Route]
    }

    /// Each group's table for `path`, with the main table's routes `main`.
    package static func tables(_ policies: CgroupPolicies, path: NetworkPath, routes: [Route]) -> [Table] {
        // The main table's routes through one interface: its defaults, and the subnets it reaches
        // directly (a printer on the Wi-Fi's network is reached on it, not through the gateway).
        let defaults = routes.filter { $0.table == .main && $0.type == .unicast && $0.nextHops.count == 1 && $0.nextHops[0].interfaceIndex != nil }
        return policies.entries.enumerated().map { index, entry in
            let permitted = ((try? entry.policy.permittedInterfaces(of: path).get()) ?? []).filter { $0.type != .loopback }
            let indices = Set(permitted.map(\.index))
            let table = RouteTable(rawValue: tableBase + UInt32(index))
            var own = defaults.filter { indices.contains($0.nextHops[0].interfaceIndex!) }.map { route -> Route in
                var copy = route
                copy.table = table
                return copy
            }
            for family in [AddressFamily.inet, .inet6] {
                own.append(Route(family: family, table: table, destination: .any(family), metric: UInt32.max, type: .unreachable, nextHops: []))
            }
            return Table(index: index, cgroup: entry.cgroup, mark: markBase + UInt32(index), table: table,
                         priority: priorityBase + UInt32(index), interfaces: permitted.map(\.name), routes: own)
        }
    }

    /// The nftables ruleset (replacing the table whole) for `tables`, with a rule for each group
    /// in `present` (a group that does not exist cannot be matched; nft would refuse it).
    package static func ruleset(_ tables: [Table], present: Set<String>) -> String {
        var text = "table inet \(nftTable) {}\ndelete table inet \(nftTable)\ntable inet \(nftTable) {\n"
        text += "  chain output {\n    type route hook output priority mangle; policy accept;\n"
        for table in tables where present.contains(table.cgroup) {
            let level = table.cgroup.split(separator: "/").count
            text += "    socket cgroupv2 level \(level) \"\(table.cgroup)\" meta mark set 0x\(String(table.mark, radix: 16)) counter\n"
        }
        text += "  }\n  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n"
        text += "    meta mark & 0xffffff00 == 0x\(String(markBase, radix: 16)) masquerade\n  }\n}\n"
        return text
    }
}

/// Keeps the kernel in step with ``CgroupPolicies`` as the path changes: routes, rules and an
/// nftables table in the watched namespace (CAP_NET_ADMIN). ``stop()`` removes all of it.
package final class CgroupPolicyManager: Sendable {
    private struct State {
        var lastRuleset = ""
        /// The groups the loaded ruleset matches, by id (the directory's inode in cgroup2).
        var lastGroups: [String: UInt64] = [:]
        var stopped = false
    }

    private let namespace: NetworkNamespace
    private let policies: CgroupPolicies
    private let cgroupRoot: String
    private let nft: String
    private let state = Mutex(State())

    /// Checks what the policies need: nft, the cgroup2 hierarchy, a route socket in `namespace`;
    /// removes the rules and routes a daemon that died left (its nftables table is replaced by
    /// the first ``apply(_:)`` in the same transaction, or removed by ``stop()``: one nft fewer
    /// before the policy is in force, which on a loaded machine is seconds).
    ///
    /// - Throws: ``CgroupPolicyError`` when one is missing.
    package init(namespace: NetworkNamespace, policies: CgroupPolicies) throws(CgroupPolicyError) {
        guard let nft = NetworkServices.locate("nft") else {
            throw CgroupPolicyError("nft is not installed (or not root's: apt-get install nftables)")
        }
        guard let root = Self.cgroup2Root() else {
            throw CgroupPolicyError("no cgroup2 hierarchy is mounted (/proc/self/mountinfo): per-program policy matches cgroup v2 groups")
        }
        self.namespace = namespace
        self.policies = policies
        self.cgroupRoot = root
        self.nft = nft
        try removeEverything(nftables: false)
    }

    /// Where cgroup2 is mounted in this mount namespace (/sys/fs/cgroup, or /sys/fs/cgroup/unified
    /// on a hybrid system).
    static func cgroup2Root() -> String? {
        guard let file = fopen("/proc/self/mountinfo", "re") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        var found: String?
        while getline(&line, &capacity, file) > 0, let line {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
            let text = String(cString: line)
            guard let separator = text.range(of: " - ") else { continue }
            let fields = text[..<separator.lowerBound].split(separator: " ")
            let type = text[separator.upperBound...].split(separator: " ").first
            if type == "cgroup2", fields.count >= 5, fields[3] == "/" {
                let mountPoint = String(fields[4])
                if mountPoint == "/sys/fs/cgroup" { return mountPoint }
                found = found ?? mountPoint
            }
        }
        return found
    }

    /// The groups of the policies that exist now, with their ids.
    private func presentGroups() -> [String: UInt64] {
        var groups: [String: UInt64] = [:]
        for cgroup in policies.entries.map(\.cgroup) {
            var status = stat()
            if lstat(cgroupRoot + "/" + cgroup, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR { groups[cgroup] = UInt64(status.st_ino) }
        }
        return groups
    }

    /// Whether a group came, went or was made again (a unit restarted) since the rules were
    /// loaded: nft matches a group by the id it had then. Cheap (a stat per group).
    package var groupsChanged: Bool {
        let now = presentGroups()
        return state.withLock { !$0.stopped && $0.lastGroups != now }
    }

    /// Applies the policies to `path`. Returns what changed, for the log.
    @discardableResult
    package func apply(_ path: NetworkPath) throws(CgroupPolicyError) -> [String] {
        try state.withLock { state throws(CgroupPolicyError) -> [String] in
            guard !state.stopped else { return [] }
            var changes: [String] = []
            let socket = try route()
            let routes: [Route], rules: [RoutingRule]
            do throws(NetlinkError) {
                routes = try socket.routes()
                rules = try socket.rules()
            } catch {
                throw CgroupPolicyError("cannot read the routes of the \(namespace): \(error)")
            }
            let tables = CgroupPolicyPlan.tables(policies, path: path, routes: routes)
            for table in tables {
                let existing = routes.filter { $0.table == table.table }
                do throws(NetlinkError) {
                    // What it should hold first (the unreachable default stays throughout: the
                    // group never falls through to the main table), then what it should not.
                    for route in table.routes where !existing.contains(where: { Self.sameRoute($0, route) }) {
                        try socket.addRoute(route, replace: true)
                    }
                    for route in existing where !table.routes.contains(where: { Self.sameRoute($0, route) }) {
                        try socket.deleteRoute(route)
                    }
                    for family in [AddressFamily.inet, .inet6] {
                        let rule = RoutingRule(family: family, priority: table.priority, source: nil, table: table.table, mark: table.mark)
                        if !rules.contains(rule) { try socket.addRule(rule) }
                    }
                } catch {
                    throw CgroupPolicyError("cannot set the table of \(table.cgroup): \(error)")
                }
                let before = existing.filter { $0.type == .unicast }.compactMap(\.nextHops.first?.interfaceIndex)
                let after = table.routes.filter { $0.type == .unicast }.compactMap(\.nextHops.first?.interfaceIndex)
                if Set(before) != Set(after) {
                    changes.append("\(table.cgroup): \(table.interfaces.isEmpty ? "no interface" : table.interfaces.joined(separator: ", "))")
                }
            }
            let groups = presentGroups()
            let ruleset = CgroupPolicyPlan.ruleset(tables, present: Set(groups.keys))
            if ruleset != state.lastRuleset || groups != state.lastGroups {
                try load(ruleset)
                state.lastRuleset = ruleset
                state.lastGroups = groups
                changes.append("nftables: \(ruleset.components(separatedBy: "socket cgroupv2").count - 1) of \(tables.count) group(s) present")
            }
            return changes
        }
    }

    /// Removes the routes, rules and nftables table; later paths change nothing.
    package func stop() {
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            try? removeEverything()
        }
    }

    private func route() throws(CgroupPolicyError) -> NetlinkSocket {
        do throws(NetlinkError) {
            return try NetlinkSocket(.route, in: namespace)
        } catch {
            throw CgroupPolicyError("cannot open a route socket in the \(namespace): \(error)")
        }
    }

    private static func sameRoute(_ a: Route, _ b: Route) -> Bool {
        a.family == b.family && a.table == b.table && a.destination == b.destination && a.metric == b.metric && a.type == b.type
            && a.nextHops.map(\.interfaceIndex) == b.nextHops.map(\.interfaceIndex) && a.nextHops.map(\.gateway) == b.nextHops.map(\.gateway)
    }

    private func removeEverything(nftables: Bool = true) throws(CgroupPolicyError) {
        let socket = try route()
        let range = CgroupPolicyPlan.tableBase..<(CgroupPolicyPlan.tableBase + UInt32(CgroupPolicies.maximumEntries))
        do throws(NetlinkError) {
            for rule in try socket.rules() where range.contains(rule.table.rawValue) { try? socket.deleteRule(rule) }
            for route in try socket.routes() where range.contains(route.table.rawValue) { try? socket.deleteRoute(route) }
        } catch {
            throw CgroupPolicyError("cannot read the routes of the \(namespace): \(error)")
        }
        if nftables { try load("table inet \(CgroupPolicyPlan.nftTable) {}\ndelete table inet \(CgroupPolicyPlan.nftTable)\n") }
    }

    /// How long one `nft -f` may take.
    static let nftTimeout: Duration = .seconds(10)

    /// Runs `nft -f` with `ruleset` in the namespace; where cgroup2 is not at /sys/fs/cgroup
    /// (nft looks for groups there), in a mount namespace of the thread's own where it is.
    private func load(_ ruleset: String) throws(CgroupPolicyError) {
        let root = cgroupRoot, nft = self.nft
        let outcome: Result<(TerminationStatus, String), Errno>
        do {
            outcome = try namespace.perform {
                Result { () throws(Errno) -> (TerminationStatus, String) in
                    if root != "/sys/fs/cgroup" { try bindInThread(root, over: "/sys/fs/cgroup") }
                    let input = try makeMemoryFile(named: "roam-cgroup-policy.nft", contents: ruleset)
                    defer { try? input.close() }
                    let (reader, writer) = try makePipe()
                    let pid: pid_t
                    do {
                        defer { try? writer.close() }
                        pid = try spawnProcess([nft, "-f", "/dev/fd/3"], environment: [], standardOutput: writer, standardError: writer,
                                               newProcessGroup: false, inheriting: [(input, 3)])
                    }
                    // Its output until it ends, for at most `nftTimeout`: an nft that hangs must
                    // not hold the daemon's paths (this runs on the monitor's delivery thread),
                    // so it is killed and the next path tries again.
                    var output: [UInt8] = []
                    var chunk = [UInt8](repeating: 0, count: 4096)
                    let deadline = MonotonicInstant.now + Self.nftTimeout
                    var timedOut = false
                    while output.count < 65536 {
                        var entry = pollfd(fd: reader.rawValue, events: Int16(POLLIN), revents: 0)
                        let left = deadline - .now
                        if left <= .zero { timedOut = true; break }
                        let ready = poll(&entry, 1, Int32(min(1000, max(1, left / .milliseconds(1)))))
                        if ready < 0 && errno == EINTR { continue }
                        if ready == 0 { continue }
                        let count = read(reader.rawValue, &chunk, chunk.count)
                        if count < 0 && errno == EINTR { continue }
                        if count <= 0 { break }
                        output += chunk[..<count]
                    }
                    try? reader.close()
                    if timedOut {
                        kill(pid, SIGKILL)
                        _ = try? waitForExit(pid)
                        return (TerminationStatus(waitStatus: SIGKILL),
                                "nft did not finish within \(Self.nftTimeout.components.seconds) s and was killed" + (output.isEmpty ? "" : ": " + String(decoding: output, as: UTF8.self)))
                    }
                    return (try waitForExit(pid), String(decoding: output, as: UTF8.self))
                }
            }
        } catch {
            throw CgroupPolicyError("cannot enter the \(namespace) to run nft: \(error)")
        }
        switch outcome {
        case .success(let (status, _)) where status.code == 0:
            return
        case .success(let (_, output)):
            throw CgroupPolicyError("nft refused the policy's rules: \(escapedForMessage(String(output.split(separator: "\n").prefix(6).joined(separator: "; ")), maximumLength: 400))")
        case .failure(let error):
            throw CgroupPolicyError("cannot run nft: \(error)")
        }
    }
}

/// Why per-program policy could not be applied.
package struct CgroupPolicyError: Error, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
