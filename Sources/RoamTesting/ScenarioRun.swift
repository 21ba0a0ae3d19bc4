import CRoamTestingRootless
import Glibc
import Netlink
import PathMonitor
import ScenarioModel
import Simulator
import Synchronization

/// How `Scenario/run(_:_:)` plays a scenario for a test.
public struct TestRunOptions: Sendable {
    /// When the run ends.
    public enum End: Sendable, Hashable {
        /// As soon as the code under test returns (or throws): the report covers what ran.
        case whenBodyReturns
        /// At the scenario's end, also when the code under test is done before.
        case atScenarioEnd
    }

    /// The userspace emulator by default: with a seed, it makes the same decisions for the
    /// same packets on every run, so a failure can be replayed.
    public var backend: BackendChoice = .userspace
    /// The seed; nil: the scenario's. `ROAM_SEED` in the environment overrides both, to replay
    /// a failure.
    public var seed: UInt64?
    public var end: End = .whenBodyReturns
    /// Where reports go; nil: `.build/roam-reports` under the working directory when it has a
    /// `.build` this process may write (as `swift test` runs), otherwise a directory this process
    /// makes under `$TMPDIR` (`roam-reports-XXXXXX`, `mkdtemp`: private to the caller, never one
    /// another user made first).
    public var reportsDirectory: String?
    /// Plays the scenario this many times as fast.
    public var timeScale: Double = 1

    /// Options for a run under test.
    ///
    /// - Parameters:
    ///   - backend: What degrades the links.
    ///   - seed: The seed (nil: the scenario's; `ROAM_SEED` overrides both).
    ///   - end: When the run ends.
    ///   - reportsDirectory: Where reports go (nil: see ``reportsDirectory``).
    ///   - timeScale: Plays the scenario this many times as fast.
    public init(backend: BackendChoice = .userspace, seed: UInt64? = nil, end: End = .whenBodyReturns, reportsDirectory: String? = nil,
                timeScale: Double = 1) {
        self.backend = backend
        self.seed = seed
        self.end = end
        self.reportsDirectory = reportsDirectory
        self.timeScale = timeScale
    }

    /// A seed drawn at random, for tests that explore: a failing one prints it.
    ///
    /// - Returns: A seed from 1 to 2³² − 1.
    public static func randomSeed() -> UInt64 { UInt64.random(in: 1...UInt64(UInt32.max)) }

    /// The seed `ROAM_SEED` asks for, if any.
    static var seedFromEnvironment: UInt64? {
        guard let text = getenv("ROAM_SEED") else { return nil }
        return UInt64(String(cString: text))
    }
}

/// The network of a scenario under test: its nodes, while the scenario plays.
public struct TestNetwork: Sendable {
    let running: RunningNetwork
    public let scenario: Scenario

    /// The seed this run uses.
    public var seed: UInt64 { running.seed }
    /// Time since the scenario's time zero.
    public var elapsed: Duration { running.elapsed }

    /// The node named `name`.
    ///
    /// - Parameter name: A node of the scenario.
    /// - Returns: A handle on the node: its addresses, path, monitor, and code and programs run
    ///   inside it.
    /// - Throws: A ``RoamTestingError`` that lists the nodes, when the scenario has none of
    ///   that name.
    public func node(_ name: String) throws -> NodeHandle {
        guard let namespace = running.namespace(of: name), let plan = running.plan.node(name) else {
            throw RoamTestingError("scenario '\(scenario.name)' has no node '\(name)'; nodes: \(scenario.nodes.map(\.name).joined(separator: ", "))")
        }
        return NodeHandle(name: name, namespace: namespace, plan: plan, network: running)
    }

    /// Writes a `mark` into the run's timeline.
    ///
    /// - Parameter text: The mark's text.
    public func mark(_ text: String) { running.mark(text) }

    /// Suspends until the scenario's clock reaches `time` (at once when it has), to line code
    /// under test up with the timeline: `try await network.wait(until: .seconds(5))`.
    ///
    /// - Parameter time: A time of the scenario, since its time zero.
    /// - Throws: `CancellationError` when the task is cancelled while it waits.
    public func wait(until time: Duration) async throws {
        let remaining = time - running.elapsed
        if remaining > .zero { try await Task.sleep(for: remaining) }
    }
}

/// A finished run of a scenario under test: what the code under test returned and the report.
public struct ScenarioRun<Value: Sendable>: Sendable {
    public let scenario: Scenario
    public let report: RunReport
    public let value: Value

    /// The seed the run used: `ROAM_SEED=<seed>` replays it.
    public var seed: UInt64 { report.seed }

    /// What a failure message carries so that the failure can be replayed and looked at.
    public var replayHint: String { report.replayHint }
}

extension RunReport {
    /// "scenario NAME, seed N (replay: ROAM_SEED=N), report DIR".
    public var replayHint: String {
        var hint = "scenario '\(scenario.name)', seed \(seed)"
        if backend.kind == .userspace { hint += " (replay: ROAM_SEED=\(seed))" } else { hint += " (netem: random draws are not replayable)" }
        return hint + ", report \(reportDirectory)"
    }
}

/// The code under test threw: its error, with the run's seed and report.
public struct ScenarioRunFailure: Error, Sendable, CustomStringConvertible {
    public let underlying: any Error
    public let report: RunReport
    public var seed: UInt64 { report.seed }
    public var description: String { "\(underlying) [\(report.replayHint)]" }
}

extension Scenario {
    /// Reads a scenario file; a path that is not absolute starts at the working directory
    /// (the package's root under `swift test`). Every problem in the file is in the error.
    public static func load(_ path: String) throws -> Scenario {
        let outcome = ScenarioReader.read(contentsOf: path)
        guard let scenario = outcome.scenario else {
            throw RoamTestingError(outcome.errors.map(\.description).joined(separator: "\n"))
        }
        return scenario
    }

    /// Reads a scenario from YAML text.
    public static func parse(yaml: String, name: String = "scenario.yaml") throws -> Scenario {
        let outcome = ScenarioReader.parse(yaml, file: name)
        guard let scenario = outcome.scenario else {
            throw RoamTestingError(outcome.errors.map(\.description).joined(separator: "\n"))
        }
        return scenario
    }

    /// Plays the scenario and runs `body` alongside it, from time zero, with the network built
    /// and the links set; then returns what `body` returned and the run's report.
    ///
    /// The scenario's own workloads and expectations run as with `roam run`; the report's
    /// `RunReport/passed` covers them. When `body` throws, the run still ends cleanly and a
    /// ``ScenarioRunFailure`` carrying the seed and the report is thrown. Cancelling the task
    /// cancels the run. Needs root (see ``RoamTesting/unavailableReason``).
    public func run<Value: Sendable>(_ options: TestRunOptions = TestRunOptions(),
                                     _ body: @Sendable (TestNetwork) async throws -> Value) async throws -> ScenarioRun<Value> {
        let problems = problems
        guard problems.isEmpty else {
            throw RoamTestingError("scenario '\(name)' cannot run: " + problems.joined(separator: "; "))
        }
        var runOptions = RunOptions()
        runOptions.backend = options.backend
        runOptions.seed = TestRunOptions.seedFromEnvironment ?? options.seed
        runOptions.timeScale = options.timeScale
        let reports = try options.reportsDirectory ?? Self.defaultReportsDirectory()
        runOptions.reportDirectory = "\(reports)/\(ScenarioRunner.pathComponent(name))-\(Self.stamp())"
        let runner = ScenarioRunner(scenario: self, options: runOptions)

        let started = OneShot<Result<RunningNetwork, SimulatorError>>()
        let finished = OneShot<Result<RunReport, SimulatorError>>()
        let thread: PinnedThread
        do {
            thread = try PinnedThread(name: "roam-scenario") {
                do throws(SimulatorError) {
                    let report = try runner.run(started: { network in started.fulfill(.success(network)) })
                    started.fulfill(.failure(SimulatorError(.environment, "the run ended before it started")))
                    finished.fulfill(.success(report))
                } catch {
                    started.fulfill(.failure(error))
                    finished.fulfill(.failure(error))
                }
            }
        } catch {
            throw RoamTestingError("start the scenario: \(error)")
        }
        thread.detach()

        return try await withTaskCancellationHandler {
            let network: RunningNetwork
            switch await started.value {
            case .success(let value): network = value
            case .failure(let error):
                _ = await finished.value
                throw RoamTestingError("scenario '\(name)': \(error.message)")
            }
            let outcome: Result<Value, any Error>
            do {
                outcome = .success(try await body(TestNetwork(running: network, scenario: self)))
            } catch {
                outcome = .failure(error)
            }
            if options.end == .whenBodyReturns || (try? outcome.get()) == nil { runner.finish() }
            let report: RunReport
            switch await finished.value {
            case .success(let value): report = value
            case .failure(let error): throw RoamTestingError("scenario '\(name)': \(error.message)")
            }
            switch outcome {
            case .success(let value):
                return ScenarioRun(scenario: self, report: report, value: value)
            case .failure(let error):
                FileHandleStandardError.write("roam: the code under test failed: \(error) [\(report.replayHint)]\n")
                throw ScenarioRunFailure(underlying: error, report: report)
            }
        } onCancel: {
            runner.cancel()
        }
    }

    package static func defaultReportsDirectory() throws(RoamTestingError) -> String {
        var info = stat()
        // Another user's build directory (a shared checkout) is not written to.
        if stat(".build", &info) == 0, info.st_mode & S_IFMT == S_IFDIR, access(".build", W_OK) == 0 { return ".build/roam-reports" }
        return try temporaryReportsDirectory()
    }

    /// This process's reports directory under `$TMPDIR` (or /tmp), made on first use: a fixed
    /// name there (`/tmp/roam-reports`) is one any user could make first, and own.
    package static func temporaryReportsDirectory() throws(RoamTestingError) -> String {
        try temporaryReports.withLock { made throws(RoamTestingError) -> String in
            // Made again if it went (a cleaner of /tmp): a name this process no longer holds is
            // one another user could take.
            var status = stat()
            if let made, lstat(made, &status) == 0, status.st_mode & S_IFMT == S_IFDIR, status.st_uid == geteuid() { return made }
            let temporary = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
            var template = Array("\(temporary)/roam-reports-XXXXXX".utf8CString)
            let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
            guard created else {
                let reason = String(cString: strerror(errno))
                throw RoamTestingError("cannot make a reports directory under \(temporary): \(reason); "
                    + "set TMPDIR or TestRunOptions.reportsDirectory to a directory this user may write")
            }
            let directory = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            made = directory
            return directory
        }
    }

    private static let temporaryReports = Mutex<String?>(nil)

    private static let runs = Atomic<Int>(0)

    /// Unique per run of this process, and sorted by time across processes.
    static func stamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let count = runs.wrappingAdd(1, ordering: .relaxed).newValue
        return String(UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec / 1_000_000), radix: 36) + "-\(getpid())-\(count)"
    }
}

enum FileHandleStandardError {
    static func write(_ text: String) {
        var bytes = Array(text.utf8)
        _ = Glibc.write(2, &bytes, bytes.count)
    }
}

/// A value given once, awaited by one task.
final class OneShot<T: Sendable>: Sendable {
    private let state = Mutex<(value: T?, waiter: CheckedContinuation<T, Never>?)>((nil, nil))

    /// The first call wins; later ones are ignored.
    func fulfill(_ value: T) {
        let waiter = state.withLock { state -> CheckedContinuation<T, Never>? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: value)
    }

    var value: T {
        get async {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> T? in
                    if let value = state.value { return value }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}

/// Whether this process can run scenarios.
public enum RoamTesting {
    /// Why scenarios cannot run here (nil when they can): for `.enabled(if:)` traits and
    /// `XCTSkipIf`. Scenarios need network namespaces and `/dev/net/tun` (the userspace emulator).
    ///
    /// Root is not needed. A test process that is not root enters a user namespace of its own
    /// before `main` (RoamTesting links a constructor that does it, while the process has one
    /// thread), where it is root over the namespaces it creates and over nothing else: it stays in
    /// the host's network namespace and cannot change it. Its own files stay the user's. Set
    /// `ROAM_ROOTLESS=0` to keep the process as it is (scenarios then need root); where the kernel
    /// or a container forbids user namespaces, this says which setting.
    public static var unavailableReason: String? {
        if geteuid() != 0 {
            if roam_testing_rootless_status() > 0 {
                let message = String(cString: roam_testing_rootless_message())
                return "Roam scenarios need root or a user namespace of the test process's own, and it could not make one: \(message)"
            }
            return "Roam scenarios need root or a user namespace of the test process's own (ROAM_ROOTLESS=0 turned that off)"
        }
        if access("/dev/net/tun", R_OK | W_OK) != 0 { return "Roam's userspace link emulator needs /dev/net/tun (modprobe tun)" }
        return nil
    }

    /// Whether scenarios can run here.
    public static var isAvailable: Bool { unavailableReason == nil }
}
