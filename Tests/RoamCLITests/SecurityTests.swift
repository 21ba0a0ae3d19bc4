import Foundation
import Glibc
import Testing
import TestSupport

/// Issue 30's attacks, each played as the attacker would play it: `nobody` plants links, FIFOs,
/// notes and directories where root (or another user, uid 4242) then runs `roam`. Each attack
/// must fail with a clear refusal (exit 2) and leave its target as it was. The defence does not
/// depend on `fs.protected_symlinks` (0 on the machine these run on).
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && access("/usr/bin/setpriv", X_OK) == 0,
                "needs root, setpriv and the built roam"), .serialized)
struct SecurityTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"
    let walk = NetemHost.root + "/scenarios/walk-out-of-home.yaml"
    static let attacker: uid_t = 65534
    static let victim: uid_t = 4242

    /// Runs `arguments` as `uid` (no capabilities, a minimal environment, no XDG_RUNTIME_DIR),
    /// in `directory`.
    func run(as uid: uid_t, in directory: String = "/tmp", _ arguments: [String], timeout: TimeInterval = 60) throws -> (status: Int32, output: String, error: String) {
        try RunningCommand.run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--inh-caps=-all", "/usr/bin/env", "-i",
                                                    "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=\(directory)", "/bin/sh", "-c",
                                                    "cd \"$0\" && exec \"$@\"", directory] + arguments, timeout: timeout)
    }

    /// Runs `arguments` as root in `directory`, without XDG_RUNTIME_DIR.
    func runAsRoot(in directory: String, _ arguments: [String], timeout: TimeInterval = 60) throws -> (status: Int32, output: String, error: String) {
        try RunningCommand.run("/usr/bin/env", ["-u", "XDG_RUNTIME_DIR", "/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", directory] + arguments,
                               timeout: timeout)
    }

    /// A sticky, world-writable directory, as /tmp is, removed afterwards.
    func sharedDirectory() throws -> String {
        try home("roam-security-shared", mode: 0o1777)
    }

    /// A fresh directory of this test's own under /tmp (`mkdtemp`, never one another user made
    /// first), then given `mode` and, if named, `owner`.
    func home(_ prefix: String, mode: mode_t, owner: uid_t? = nil) throws -> String {
        let path = try TestEnvironment.scratchDirectory(prefix)
        #expect(chmod(path, mode) == 0)
        if let owner { #expect(chown(path, owner, owner) == 0) }
        return path
    }

    /// A file only root can read, in a directory only root can search: what an attacker would
    /// have root overwrite or read.
    func rootSecret() throws -> (directory: String, file: String) {
        let directory = try home("roam-security-root", mode: 0o700)
        let file = directory + "/secret"
        try "TOP-SECRET-API-KEY=abc123\n".write(toFile: file, atomically: false, encoding: .utf8)
        chmod(file, 0o600)
        return (directory, file)
    }

    func remove(_ paths: String...) {
        for path in paths { _ = try? FileManager.default.removeItem(atPath: path) }
    }

    func contents(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    // MARK: - 1. nobody → root through roam exec

    @Test func execIntoAPlantedRunIsRefusedAndRunsNothing() throws {
        let shared = try sharedDirectory()
        defer { remove(shared, "/tmp/roam-0") }
        // nobody's namespaces: a /run/netns/roam-abcdef-phone and an `ip` of its own, as in the
        // issue's reproducer; `evil-ip` would leave a mark where only root can write.
        let secret = try rootSecret()
        defer { remove(secret.directory) }
        let mark = secret.directory + "/pwned"
        let evil = shared + "/evil-ip"
        try "#!/bin/sh\ntouch \(mark)\n".write(toFile: evil, atomically: false, encoding: .utf8)
        chmod(evil, 0o755)
        chown(evil, Self.attacker, Self.attacker)
        let holder = try RunningCommand("/usr/bin/setpriv", ["--reuid=\(Self.attacker)", "--regid=\(Self.attacker)", "--clear-groups",
            "/usr/bin/unshare", "-Urmn", "/bin/sh", "-c",
            "mount -t tmpfs t /run && mkdir /run/netns && touch /run/netns/roam-abcdef-phone && mount --bind /proc/self/ns/net /run/netns/roam-abcdef-phone "
                + "&& mount --bind \(evil) /usr/bin/ip && echo ready && exec sleep 60"])
        defer { _ = holder.stop(with: SIGKILL) }
        #expect(holder.lines.wait(timeout: 10, until: { $0.contains("ready") }) != nil, "the attacker's namespaces: \(holder.errors.values)")
        let pid = holder.process.processIdentifier
        let start = try #require(processStartTime(pid))
        // The note, old style (a pid alone) and new style, in the place root used to read.
        #expect(try run(as: Self.attacker, ["/bin/mkdir", "-p", "/tmp/roam-0/runs"]).status == 0)
        for note in ["\(pid)\n", "\(pid) \(start)\n"] {
            #expect(try run(as: Self.attacker, ["/bin/sh", "-c", "printf '\(note)' > /tmp/roam-0/runs/abcdef"]).status == 0)
            let result = try runAsRoot(in: "/tmp", [roam, "exec", "abcdef", "phone", "--", "ip", "addr"])
            #expect(result.status == 2, "\(result.error)")
            #expect(result.error.contains("no run abcdef in progress"), "\(result.error)")
            #expect(access(mark, F_OK) != 0, "root ran the attacker's program")
        }
        // Even a note in root's own rootless registry (as if root had been fooled into writing
        // one): the process is nobody's, and so are its namespaces.
        _ = try runAsRoot(in: "/tmp", ["/bin/sh", "-c", "mkdir -p -m 0700 /run/roam/rootless"])
        try "\(pid) \(start)\n".write(toFile: "/run/roam/rootless/abcdef", atomically: false, encoding: .utf8)
        defer { unlink("/run/roam/rootless/abcdef") }
        let fooled = try runAsRoot(in: "/tmp", [roam, "exec", "abcdef", "phone", "--", "ip", "addr"])
        #expect(fooled.status == 2, "\(fooled.error)")
        #expect(fooled.error.contains("not one Roam trusts") && fooled.error.contains("belongs to uid 65534"), "\(fooled.error)")
        #expect(access(mark, F_OK) != 0, "root ran the attacker's program")
    }

    // MARK: - 2, 16. Writers and planted links or FIFOs

    @Test func everyWriterRefusesALinkOrFIFOPlantedAtItsOutput() throws {
        let shared = try sharedDirectory()
        let secret = try rootSecret()
        defer { remove(shared, secret.directory) }
        let original = contents(secret.file)
        // A run to report on, copied where nobody can plant into it.
        let recorded = shared + "/run"
        #expect(try run(as: Self.attacker, ["/bin/mkdir", recorded]).status == 0)
        for file in ["summary.json", "timeline.jsonl"] {
            #expect(try run(as: Self.attacker, ["/bin/cp", NetemHost.root + "/Tests/Fixtures/report/" + file, recorded + "/" + file]).status == 0)
        }
        for (name, target) in [("out.yaml", secret.file), ("profile.yaml", secret.file), ("run/report.html", secret.file),
                               ("comparison.html", secret.file), ("roam-reports", secret.directory)] {
            #expect(try run(as: Self.attacker, ["/bin/ln", "-s", target, shared + "/" + name]).status == 0)
        }
        #expect(try run(as: Self.attacker, ["/usr/bin/mkfifo", shared + "/fifo.yaml"]).status == 0)
        let trace = NetemHost.root + "/traces/lte-steady.trace"
        let attempts: [(String, [String], String)] = [
            ("export -o", [roam, "export", walk, "-o", shared + "/out.yaml"], "out.yaml is a symbolic link"),
            ("import -o", [roam, "import", "mahimahi", "--up", trace, "--down", trace, "--name", "lab", "-o", shared + "/profile.yaml"], "profile.yaml is a symbolic link"),
            ("report DIR", [roam, "report", recorded], "report.html is a symbolic link"),
            ("report A B", [roam, "report", recorded, recorded], "comparison.html is a symbolic link"),
            ("run, default report directory", [roam, "run", walk, "--time-scale", "0.05", "--quiet"], "roam-reports is a symbolic link of uid 65534"),
            ("export -o FIFO", [roam, "export", walk, "-o", shared + "/fifo.yaml"], "fifo.yaml is a FIFO (named pipe)"),
        ]
        for (what, arguments, refusal) in attempts {
            let result = try runAsRoot(in: shared, arguments, timeout: 30)
            #expect(result.status == 2, "\(what): exit \(result.status) \(result.error)")
            #expect(result.error.contains(refusal), "\(what): \(result.error)")
            #expect(contents(secret.file) == original, "\(what) overwrote the planted link's target")
            #expect(try FileManager.default.contentsOfDirectory(atPath: secret.directory) == ["secret"], "\(what) wrote into the link's target")
        }
    }

    @Test func aRunRefusesLinksPlantedInItsReportDirectory() throws {
        let shared = try sharedDirectory()
        let secret = try rootSecret()
        defer { remove(shared, secret.directory) }
        let original = contents(secret.file)
        let report = shared + "/report"
        #expect(try run(as: Self.attacker, ["/bin/mkdir", "-m", "0777", report]).status == 0)
        for name in ["timeline.jsonl", "summary.json", "report.html"] {
            #expect(try run(as: Self.attacker, ["/bin/ln", "-s", secret.file, report + "/" + name]).status == 0)
        }
        let result = try runAsRoot(in: shared, [roam, "run", walk, "--time-scale", "0.05", "--quiet", "--report", report])
        #expect(result.status == 2, "\(result.error)")
        // Refused before anything is opened in it: the directory is another user's.
        #expect(result.error.contains("report belongs to uid 65534"), "\(result.error)")
        #expect(contents(secret.file) == original)
    }

    /// A user's link in the user's own project (a directory only they write): theirs to follow,
    /// never root's. Root running in the project would have written its report into
    /// `roam-reports -> DIR`, a directory the user chose (`/etc/cron.d`, say).
    @Test func rootFollowsNoLinkAUserMadeInTheirOwnDirectory() throws {
        let project = try home("roam-security-project", mode: 0o755, owner: Self.victim)
        let secret = try rootSecret()
        // The victim's own rootless run makes its /tmp/roam-UID: gone with the test.
        defer { remove(project, secret.directory, "/tmp/roam-\(Self.victim)") }
        #expect(try run(as: Self.victim, in: project, ["/bin/ln", "-s", secret.directory, project + "/roam-reports"]).status == 0)
        let result = try runAsRoot(in: project, [roam, "run", walk, "--time-scale", "0.05", "--quiet"])
        #expect(result.status == 2, "\(result.error)")
        #expect(result.error.contains("roam-reports is a symbolic link of uid \(Self.victim)"), "\(result.error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: secret.directory) == ["secret"], "root wrote into the link's target")
        // The user's own run follows the user's own link (into a directory of theirs).
        let own = project + "/elsewhere"
        #expect(try run(as: Self.victim, in: project, ["/bin/sh", "-c", "mkdir elsewhere && rm roam-reports && ln -s \(own) roam-reports"]).status == 0)
        let theirs = try run(as: Self.victim, in: project, [roam, "run", walk, "--time-scale", "0.05", "--quiet"])
        #expect(theirs.status == 0, "\(theirs.error)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: own)) ?? []).count == 1, "the user's run reported through the user's link")
    }

    /// `--report DIR` must be the caller's and written by no one else: a directory another user
    /// owns or can write could swap the timeline the page is drawn from, or read what root's run
    /// captured. Every file of a report is 0640.
    @Test func aReportGoesOnlyWhereNoOtherUserCanReachIt() throws {
        let shared = try sharedDirectory()
        defer { remove(shared) }
        let theirs = shared + "/theirs"
        #expect(try run(as: Self.attacker, ["/bin/mkdir", "-m", "0755", theirs]).status == 0)
        let open = try home("roam-security-open", mode: 0o777)
        defer { remove(open) }
        for (directory, refusal) in [(theirs, "belongs to uid 65534"), (open, "has mode 777"), (shared, "has mode 1777")] {
            let result = try runAsRoot(in: shared, [roam, "run", walk, "--time-scale", "0.05", "--quiet", "--report", directory])
            #expect(result.status == 2, "\(directory): \(result.error)")
            #expect(result.error.contains(refusal), "\(directory): \(result.error)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: theirs).isEmpty)
        // Its own directory: every file 0640, none readable by another user.
        let mine = open + "/mine"
        let result = try runAsRoot(in: shared, [roam, "run", walk, "--time-scale", "0.05", "--quiet", "--report", mine])
        #expect(result.status == 0, "\(result.error)")
        let files = try FileManager.default.contentsOfDirectory(atPath: mine)
        #expect(files.contains("summary.json") && files.contains("timeline.jsonl") && files.contains("report.html"), "\(files)")
        for file in files {
            var status = stat()
            #expect(lstat(mine + "/" + file, &status) == 0 && status.st_mode & 0o777 == 0o640, "\(file): \(String(status.st_mode & 0o777, radix: 8))")
        }
        #expect(try run(as: Self.attacker, ["/bin/cat", mine + "/timeline.jsonl"]).status != 0, "another user read root's timeline")
    }

    // MARK: - 3, 4. Another user's registry

    @Test func anotherUsersRegistryIsNeitherCleanedThroughNorABlock() throws {
        let home = try self.home("roam-security-victim", mode: 0o755, owner: Self.victim)
        defer { remove(home, "/tmp/roam-\(Self.victim)") }
        #expect(try run(as: Self.victim, in: home, ["/bin/sh", "-c", "mkdir runs && echo keep > runs/results-1.csv && echo 123 > runs/abcdef"]).status == 0)
        // nobody makes the victim's /tmp/roam-UID first, its runs/ a link into the victim's files.
        #expect(try run(as: Self.attacker, ["/bin/sh", "-c", "mkdir -m 0777 /tmp/roam-\(Self.victim) && ln -s \(home)/runs /tmp/roam-\(Self.victim)/runs"]).status == 0)
        // The victim's registry moves to a name nobody else can take first, in its home
        // (~/.local/state/roam/runs): cleanup looks there, and never through the planted link.
        let cleanup = try run(as: Self.victim, in: home, [roam, "cleanup"])
        #expect(cleanup.status == 0, "\(cleanup.output) \(cleanup.error)")
        #expect(contents(home + "/runs/results-1.csv") == "keep\n" && contents(home + "/runs/abcdef") == "123\n", "the victim's files were deleted")
        // The victim's runs run, controlled runs included (they stopped at "cannot place the
        // control socket" before), and roam ctl finds them.
        let victimRun = try run(as: Self.victim, in: home, [roam, "run", walk, "--time-scale", "0.05", "--quiet", "--control", "--report", home + "/report"])
        #expect(victimRun.status == 0, "\(victimRun.error)")
        #expect(!victimRun.error.contains("will not find"), "\(victimRun.error)")
        #expect(victimRun.output.contains("\"socket\":\"\(home)/.local/state/roam/runs/"), "\(victimRun.output)")
        var status = stat()
        #expect(lstat(home + "/.local/state/roam/runs", &status) == 0 && status.st_uid == Self.victim && status.st_mode & 0o777 == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: home + "/runs").sorted() == ["abcdef", "results-1.csv"])
        // Root's rootless run does not go near /tmp/roam-0 at all.
        #expect(try run(as: Self.attacker, ["/bin/sh", "-c", "mkdir -m 0777 /tmp/roam-0 && ln -s \(home)/runs /tmp/roam-0/runs"]).status == 0)
        defer { remove("/tmp/roam-0") }
        let rootRun = try runAsRoot(in: home, [roam, "run", walk, "--rootless", "--time-scale", "0.05", "--quiet", "--report", home + "/root-report"])
        #expect(rootRun.status == 0, "\(rootRun.error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: home + "/runs").sorted() == ["abcdef", "results-1.csv"])
    }

    // MARK: - Issue 56, case 3. Root's --rootless run is contained

    @Test func rootsRootlessCommandsCannotReachTheHostsFiles() throws {
        let home = try self.home("roam-security-contained", mode: 0o755)
        let secret = try rootSecret()
        let probe = "/etc/roam-probe-\(getpid())"
        defer { remove(home, secret.directory, probe) }
        // What a hostile scenario's command would try: root's files, /etc, a set-user-ID program,
        // the run's own process. And what it keeps: the run's network (ping needs CAP_NET_RAW,
        // `ip link set` CAP_NET_ADMIN, both of the run's user namespace alone).
        let script = [
            "id -u; id -g; id -G",
            "cat /etc/shadow >/dev/null 2>&1 && echo READ-SHADOW",
            "cat \(secret.file) >/dev/null 2>&1 && echo READ-SECRET",
            "echo x >> \(probe) 2>/dev/null && echo WROTE-ETC",
            "kill -0 $PPID 2>/dev/null && echo SIGNALS-ROAM",
            "cat /proc/$PPID/environ >/dev/null 2>&1 && echo READS-ROAM",
            "grep -q '^NoNewPrivs:.1' /proc/self/status && echo NO-NEW-PRIVS",
            "ping -c 1 -W 5 $ROAM_SERVER_ADDR >/dev/null && echo PINGED",
            "ip link set lo mtu 9000 && echo NET-ADMIN",
        ].joined(separator: "; ")
        let scenario = """
            name: contained
            duration: 2s
            nodes: {phone: {}, server: {}}
            links:
              - {name: wifi, between: [phone, server]}
            workloads:
              - {name: probe, kind: command, from: phone, run: [sh, -c, "\(script); true"]}

            """
        try scenario.write(toFile: home + "/contained.yaml", atomically: false, encoding: .utf8)
        let result = try runAsRoot(in: home, [roam, "run", home + "/contained.yaml", "--rootless", "--backend", "userspace", "--quiet",
                                              "--report", home + "/r"])
        #expect(result.status == 0, "\(result.error)")
        let lines = (contents(home + "/r/probe.stdout") ?? "").split(separator: "\n").map(String.init)
        // The run's unprivileged identity (65534 inside; on the host, root's subordinate id or nobody).
        #expect(lines.prefix(3) == ["65534", "65534", "65534"], "\(lines)")
        for forbidden in ["READ-SHADOW", "READ-SECRET", "WROTE-ETC", "SIGNALS-ROAM", "READS-ROAM"] {
            #expect(!lines.contains(forbidden), "a command of root's --rootless run could do \(forbidden): \(lines)")
        }
        #expect(access(probe, F_OK) != 0, "\(probe) was written")
        for kept in ["NO-NEW-PRIVS", "PINGED", "NET-ADMIN"] {
            #expect(lines.contains(kept), "\(kept) missing: \(lines) \(contents(home + "/r/probe.stderr") ?? "")")
        }
        // A program the contained identity may not run is named, with what to do.
        let privateProgram = secret.directory + "/tool"
        try "#!/bin/sh\ntrue\n".write(toFile: privateProgram, atomically: false, encoding: .utf8)
        chmod(privateProgram, 0o755)
        let refused = """
            name: private
            duration: 1s
            nodes: {phone: {}, server: {}}
            links:
              - {name: wifi, between: [phone, server]}
            workloads:
              - {name: tool, kind: command, from: phone, run: [\(privateProgram)]}

            """
        try refused.write(toFile: home + "/private.yaml", atomically: false, encoding: .utf8)
        let denied = try runAsRoot(in: home, [roam, "run", home + "/private.yaml", "--rootless", "--backend", "userspace", "--quiet",
                                              "--report", home + "/r2"])
        // A scenario without expectations judges nothing: the run ends 0, and says why the tool did not run.
        #expect(denied.status == 0, "\(denied.output) \(denied.error)")
        #expect((denied.output + denied.error + (contents(home + "/r2/summary.json") ?? "")).contains("runs commands as uid"),
                "\(denied.output) \(denied.error)")
    }

    // MARK: - 5. Traces of another user's scenario

    @Test func aScenarioCannotMakeRootReadOrProbeFilesItsOwnerCannot() throws {
        let shared = try sharedDirectory()
        let secret = try rootSecret()
        defer { remove(shared, secret.directory) }
        let relative = String(repeating: "../", count: 8) + String(secret.file.dropFirst())
        let missing = String(repeating: "../", count: 8) + String(secret.directory.dropFirst()) + "/nothing"
        var messages: [String] = []
        for target in [relative, missing] {
            let scenario = """
                name: probe
                duration: 1s
                nodes: {phone: {}, server: {}}
                links:
                  - {name: cell, between: [phone, server], up: {trace: \(target)}}

                """
            #expect(try run(as: Self.attacker, ["/bin/sh", "-c", "cat > \(shared)/probe.yaml <<'EOF'\n\(scenario)EOF"]).status == 0)
            let result = try runAsRoot(in: shared, [roam, "validate", shared + "/probe.yaml"])
            #expect(result.status == 2)
            #expect(!result.output.contains("TOP-SECRET") && !result.error.contains("TOP-SECRET"), "the secret was quoted: \(result.error)")
            // The diagnostic's first line; the quoted source line below it shows the path as written.
            messages.append(String(result.error.split(separator: "\n").first ?? "").replacingOccurrences(of: target, with: "TARGET"))
        }
        #expect(messages[0] == messages[1], "a file that exists and one that does not are told apart: \(messages)")
        #expect(messages[0].contains("no such file of uid 65534, who owns the scenario"), "\(messages[0])")
    }

    // MARK: - 8, 10. Nested user namespaces; a report under the run's private /run

    @Test func insideUserNamespacesRunsWorkOrSayWhyNot() throws {
        let home = try self.home("roam-security-nested", mode: 0o755, owner: Self.attacker)
        defer { remove(home) }
        let mapped = try run(as: Self.attacker, in: home, ["/usr/bin/unshare", "-Ur", roam, "run", walk, "--time-scale", "0.05", "--quiet", "--report", home + "/r"])
        #expect(mapped.status == 0, "\(mapped.error)")
        #expect(contents(home + "/r/summary.json")?.contains("\"passed\":true") == true)
        let unmapped = try run(as: Self.attacker, in: home, ["/usr/bin/unshare", "-U", roam, "run", walk, "--time-scale", "0.05", "--quiet", "--report", home + "/u"])
        #expect(unmapped.status == 2)
        #expect(unmapped.error.contains("maps no user or group id to it") && unmapped.error.contains("--map-root-user"), "\(unmapped.error)")
        #expect(access(home + "/u", F_OK) != 0, "a refused run made its report directory")
        let privateRun = try run(as: Self.attacker, in: home, [roam, "run", walk, "--time-scale", "0.05", "--quiet", "--report", "/run/roam-report-\(getpid())"])
        #expect(privateRun.status == 2)
        #expect(privateRun.error.contains("cannot create /run/roam-report-\(getpid())"), "\(privateRun.error)")
        #expect(!privateRun.output.contains("PASS"), "a report that went nowhere was announced")
    }

    // MARK: - 9. Notes of pid 0 and -1

    @Test func notesOfNoProcessAreNeverRunsAndAreCleaned() throws {
        let home = try self.home("roam-security-notes", mode: 0o700, owner: Self.attacker)
        defer { remove(home, "/tmp/roam-\(Self.attacker)-notes-test") }
        // nobody's own registry under XDG_RUNTIME_DIR (private), holding pid 0 and -1.
        let plant = "mkdir -p -m 0700 \(home)/roam/runs && chmod 0700 \(home)/roam && printf '0 0\\n' > \(home)/roam/runs/000000 && printf -- '-1 0\\n' > \(home)/roam/runs/ffffff"
        #expect(try run(as: Self.attacker, in: home, ["/bin/sh", "-c", plant]).status == 0)
        let exec = try run(as: Self.attacker, in: home, ["/usr/bin/env", "XDG_RUNTIME_DIR=\(home)", roam, "exec", "ffffff", "phone", "--", "true"])
        #expect(exec.status == 2)
        #expect(exec.error.contains("not one Roam trusts"), "\(exec.error)")
        let cleanup = try run(as: Self.attacker, in: home, ["/usr/bin/env", "XDG_RUNTIME_DIR=\(home)", roam, "cleanup"])
        #expect(cleanup.status == 0, "\(cleanup.error)")
        #expect(cleanup.output.contains("removed the note of ended rootless run 000000") && cleanup.output.contains("removed the note of ended rootless run ffffff"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: home + "/roam/runs").isEmpty)
    }

    // MARK: - 13, 15. A run that dies; output without end

    @Test func aKilledRunTakesItsCommandsWithIt() throws {
        let home = try self.home("roam-security-killed", mode: 0o755)
        defer { remove(home) }
        let marker = "600.\(getpid())"
        let scenario = """
            name: sleeper
            duration: 60s
            nodes: {phone: {}, server: {}}
            links:
              - {name: wifi, between: [phone, server]}
            workloads:
              - {name: sleeper, kind: command, from: phone, run: [sh, -c, "sleep \(marker); true"]}

            """
        try scenario.write(toFile: home + "/sleeper.yaml", atomically: false, encoding: .utf8)
        let command = try RunningCommand(roam, ["run", home + "/sleeper.yaml", "--backend", "userspace", "--report", home + "/r"])
        let started = Date()
        while Date().timeIntervalSince(started) < 30, sleeperPIDs(marker).isEmpty { usleep(50_000) }  // until it runs, bounded
        #expect(!sleeperPIDs(marker).isEmpty, "the command started")
        #expect(command.stop(with: SIGKILL) != 0)
        // The watchdog sees the run's end of its pipe close and kills the command's group.
        let killed = Date()
        while Date().timeIntervalSince(killed) < 10, !sleeperPIDs(marker).isEmpty { usleep(50_000) }  // bounded wait for the kill
        #expect(sleeperPIDs(marker).isEmpty, "the command outlived its run")
        _ = try RunningCommand.run(roam, ["cleanup"])
    }

    @Test func outputWithoutEndIsCutAtItsBound() throws {
        let home = try self.home("roam-security-output", mode: 0o755)
        defer { remove(home) }
        let scenario = """
            name: chatty
            duration: 3s
            nodes: {phone: {}, server: {}}
            links:
              - {name: wifi, between: [phone, server]}
            workloads:
              - {name: chatty, kind: command, from: phone, run: [yes]}

            """
        try scenario.write(toFile: home + "/chatty.yaml", atomically: false, encoding: .utf8)
        let result = try RunningCommand.run(roam, ["run", home + "/chatty.yaml", "--backend", "userspace", "--quiet", "--report", home + "/r",
                                                   "--max-file-size", "1MiB"])
        #expect(result.status == 0, "\(result.error)")
        var status = stat()
        #expect(stat(home + "/r/chatty.stdout", &status) == 0)
        #expect(status.st_size == 1 << 20, "the output file holds exactly its bound")
        #expect(contents(home + "/r/summary.json")?.contains("chatty.stdout was cut short") == true)
        #expect(result.output.contains("chatty.stdout was cut short"))
    }

    // MARK: - 18. What a flag or a name says is escaped

    @Test func controlCharactersInFlagsAndNamesAreEscaped() throws {
        let cases: [[String]] = [
            ["export", walk, "--select", "x\n\u{1B}[31my"],
            ["export", walk, "--device", "x\n\u{1B}[31my"],
            ["export", walk, "--resolution", "x\n\u{1B}[31my"],
            ["monitor", "--netns", "x\n\u{1B}[31my"],
            ["monitor", "--interfaces", "/nonexistent/x\n\u{1B}[31my"],
            ["exec", "x\n\u{1B}[31my", "phone", "--", "true"],
            ["validate", "/tmp/f.yaml:99:1: error: x\n\u{1B}[31my.yaml"],
        ]
        for arguments in cases {
            let result = try RunningCommand.run(roam, arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(!result.error.contains("\u{1B}"), "\(arguments): an escape sequence reached the terminal")
            #expect(!result.error.contains("x\n"), "\(arguments): a line break from the input split the message")
            #expect(!result.error.contains("/tmp/f.yaml:99:1: error"), "\(arguments): a file name forged a diagnostic line")
        }
    }

    // MARK: - Helpers

    func processStartTime(_ pid: pid_t) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count >= 20 ? UInt64(fields[19]) : nil
    }

    func sleeperPIDs(_ marker: String) -> [pid_t] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { pid_t($0) }.filter { pid in
            (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8))?.contains(marker) == true
        }
    }
}
