// An HTTP/1 client on swift-nio's codec, on a phone whose Wi-Fi stays up and passes nothing:
// how long from the start of a connect to a complete response with RoamClientBootstrap, beside
// a plain ClientBootstrap, and beside the bound the racer promises (one attempt delay plus one
// LTE connect). One run of a scenario (Roam's userspace emulator): healthy first, then
// blackholed. `--quick`: fewer rounds.
import Foundation
import Multipath
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOTestSupport
import RoamNIO
import RoamTesting
import ScenarioModel

struct Sample: Sendable {
    var connect: Duration
    var response: Duration
}

enum Outcome: Sendable {
    case done(Sample)
    case failed(Duration, String)
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func median(_ values: [Duration]) -> Duration? {
    guard !values.isEmpty else { return nil }
    return values.sorted()[values.count / 2]
}

/// One GET of 1000 bytes over a new connection made by `connect`; the connection is closed after.
@Sendable func measure(_ connect: @Sendable () async throws -> NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>,
             host: String) async -> Outcome {
    let clock = ContinuousClock()
    let start = clock.now
    do {
        let channel = try await connect()
        let connected = clock.now - start
        return try await channel.executeThenClose { inbound, outbound in
            var exchange = HTTPExchange(inbound: inbound.makeAsyncIterator(), outbound: outbound, host: host)
            let response = try await exchange.get(1000)
            guard response.status == .ok, response.bytes == 1000 else { return .failed(clock.now - start, "bad response") }
            return .done(Sample(connect: connected, response: clock.now - start))
        }
    } catch {
        return .failed(clock.now - start, "\(error)")
    }
}

@main
struct RoamNIOBenchmark {
    static func main() async throws {
        let quick = CommandLine.arguments.contains("--quick")
        let rounds = quick ? 5 : 20
        let plainRoundsBlackholed = quick ? 1 : 2
        let blackholeAt: Duration = .seconds(quick ? 6 : 12)

        guard RoamTesting.isAvailable else {
            FileHandle.standardError.write("RoamNIOBenchmark: \(RoamTesting.unavailableReason ?? "Roam scenarios cannot run here")\n".data(using: .utf8)!)
            exit(2)
        }

        let group = MultiThreadedEventLoopGroup.singleton

        let scenario = try phoneAndServer("nio-benchmark", timeline: """
              - { at: \(blackholeAt.components.seconds)s, link: wifi, blackhole: true }
            """)

        let run = try await scenario.run { network in
            let phone = try network.node("phone"), server = try network.node("server")
            let http = try await server.run { try HTTPServer(group: group) }
            defer { http.close() }
            let host = server.address, port = http.port
            let roam = try RoamClientBootstrap(group: group, monitor: phone.monitor!)
            let cellular = roam.policy(PathPolicy(requiredInterfaceType: .cellular))
            let initializer: @Sendable (any Channel) -> EventLoopFuture<NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>> = { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
            let withRoam: @Sendable () async throws -> NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart> = {
                try await roam.connect(host: host, port: port, channelInitializer: initializer)
            }
            let overCellular: @Sendable () async throws -> NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart> = {
                try await cellular.connect(host: host, port: port, channelInitializer: initializer)
            }
            // NIO's own default connect timeout (10 s); the socket is made on the phone's thread.
            let plain: @Sendable () async throws -> NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart> = {
                try await phone.run {
                    try await ClientBootstrap(group: group).connect(to: try SocketAddress(ipAddress: host, port: port), channelInitializer: initializer)
                }
            }
            var results: [String: [Outcome]] = [:]
            func sample(_ name: String, _ count: Int, _ connect: @escaping @Sendable () async throws -> NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>) async {
                for _ in 0..<count { results[name, default: []].append(await measure(connect, host: host)) }
            }
            await sample("roam/healthy", rounds, withRoam)
            await sample("plain/healthy", rounds, plain)
            await sample("cell/healthy", rounds, overCellular)
            guard network.elapsed < blackholeAt else { throw RoamTestingError("the healthy rounds outlasted the healthy Wi-Fi") }
            try await network.wait(until: blackholeAt + .milliseconds(500))
            await sample("cell/blackholed", rounds, overCellular)
            await sample("roam/blackholed", rounds, withRoam)
            await sample("plain/blackholed", plainRoundsBlackholed, plain)
            return results
        }

        let results = run.value
        func cell(_ key: String, _ field: (Sample) -> Duration) -> String {
            let outcomes = results[key] ?? []
            let samples = outcomes.compactMap { if case .done(let sample) = $0 { sample } else { nil } }
            let failures = outcomes.compactMap { if case .failed(let time, let why) = $0 { (time, why) } else { nil } }
            if samples.isEmpty, let failure = failures.first {
                return String(format: "failed after %.0f ms (%@)", milliseconds(failure.0), failure.1.prefix(40).description)
            }
            guard let value = median(samples.map(field)) else { return "-" }
            let failed = failures.isEmpty ? "" : ", \(failures.count) failed"
            return String(format: "%.1f ms", milliseconds(value)) + " (\(samples.count) runs\(failed))"
        }

        let attemptDelay = ConnectionRace.Configuration().attemptDelay
        func bound(_ key: String) -> String {
            let samples = (results[key] ?? []).compactMap { if case .done(let sample) = $0 { sample.connect } else { nil } }
            guard let lte = median(samples) else { return "-" }
            return String(format: "%.1f ms", milliseconds(attemptDelay + lte))
        }

        print("""
            RoamNIO: an HTTP/1 GET (1000 bytes) over a new connection; medians of one run (Roam's userspace emulator, Wi-Fi 4 ms RTT, LTE about 55 ms RTT)

            | | healthy Wi-Fi | Wi-Fi blackholed |
            |---|---|---|
            | RoamClientBootstrap: connect | \(cell("roam/healthy", \.connect)) | \(cell("roam/blackholed", \.connect)) |
            | RoamClientBootstrap: complete response | \(cell("roam/healthy", \.response)) | \(cell("roam/blackholed", \.response)) |
            | ClientBootstrap (NIO's 10 s connect timeout): connect | \(cell("plain/healthy", \.connect)) | \(cell("plain/blackholed", \.connect)) |
            | ClientBootstrap: complete response | \(cell("plain/healthy", \.response)) | \(cell("plain/blackholed", \.response)) |
            | LTE alone (required interface): connect | \(cell("cell/healthy", \.connect)) | \(cell("cell/blackholed", \.connect)) |
            | bound: attempt delay (\(Int(milliseconds(attemptDelay))) ms) + LTE connect | | \(bound("cell/blackholed")) |

            report: \(run.report.reportDirectory)
            """)
    }
}
