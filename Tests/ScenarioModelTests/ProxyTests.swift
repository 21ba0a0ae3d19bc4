import RoamCore
import ScenarioModel
import Testing

/// Proxies (`proxies:`) and their toxics as a scenario and toxiproxy's API write them: read with
/// toxiproxy's names, defaults and units, shown back in toxiproxy's form, and every mistake a
/// placed error.
@Suite struct ProxyTests {
    func read(_ proxies: String) -> ScenarioReader.Outcome {
        ScenarioReader.parse("""
            name: proxies
            duration: 30s
            nodes: {phone: {}, web: {}}
            links:
              - {name: wifi, between: [phone, web]}
            proxies:
            \(proxies)

            """, file: "s.yaml")
    }

    @Test func proxiesAndToxicsAreReadWithToxiproxysNames() throws {
        let outcome = read("""
              - name: api
                listen: web:8080
                upstream: web:80
                toxics:
                  - {type: latency, attributes: {latency: 250, jitter: 20}}
                  - {type: bandwidth, stream: upstream, toxicity: 0.5, attributes: {rate: 64}}
                  - {name: cut, type: limit_data, attributes: {bytes: 4096}}
                  - {type: slicer, attributes: {average_size: 64, size_variation: 16, delay: 1500}}
              - {name: host-side, listen: "127.0.0.1:0", upstream: "web:443", enabled: false}
            """)
        #expect(outcome.errors.isEmpty, "\(outcome.errors)")
        let proxies = try #require(outcome.scenario?.proxies)
        #expect(proxies.map(\.name) == ["api", "host-side"])
        #expect(proxies[0].listen == ProxyEndpoint(host: "web", port: 8080) && proxies[0].upstream.description == "web:80")
        #expect(proxies[1].listen.isLoopback && !proxies[1].enabled && proxies[1].toxics.isEmpty)
        let toxics = proxies[0].toxics
        #expect(toxics.map(\.name) == ["latency_downstream", "bandwidth_upstream", "cut", "slicer_downstream"])
        #expect(toxics[0].kind == .latency(latency: .milliseconds(250), jitter: .milliseconds(20)) && toxics[0].stream == .downstream)
        #expect(toxics[1].kind == .bandwidth(kilobytesPerSecond: 64) && toxics[1].stream == .upstream && toxics[1].toxicity == 0.5)
        #expect(toxics[2].kind == .limitData(bytes: 4096))
        #expect(toxics[3].kind == .slicer(averageSize: 64, sizeVariation: 16, delay: .microseconds(1500)))
        // Shown as toxiproxy shows them, every attribute of the type present.
        #expect(toxics[0].json.serialized == #"{"name":"latency_downstream","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":250,"jitter":20}}"#)
        #expect(proxies[1].json.serialized == #"{"name":"host-side","listen":"127.0.0.1:0","upstream":"web:443","enabled":false,"toxics":[]}"#)
    }

    @Test func mistakesArePlacedErrors() {
        let cases: [(String, String)] = [
            ("  - {name: a, listen: web:8080, upstream: example.com:80}", "neither a node of the scenario nor the loopback"),
            ("  - {name: a, listen: 'web', upstream: web:80}", "must be HOST:PORT"),
            ("  - {name: a, listen: web:0, upstream: web:80}", "needs a port of its own"),
            ("  - {name: a, listen: web:8080, upstream: web:0}", "upstream needs a port"),
            ("  - {name: a, listen: wbe:8080, upstream: web:80}", "did you mean 'web'?"),
            ("  - {name: 'a/b', listen: web:8080, upstream: web:80}", "must be 1 to 64 letters"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: latncy}]}", "did you mean 'latency'?"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: latency, stream: up}]}", "must be upstream (client to server) or downstream"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: latency, toxicity: 2}]}", "toxicity must be between 0 and 1"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: latency, attributes: {delay: 5}}]}", "unknown key 'delay'"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: latency, attributes: {latency: -1}}]}", "between 0 and 3600000"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: slicer, attributes: {average_size: 4, size_variation: 8}}]}", "at most its average_size"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: timeout}, {type: timeout}]}", "two toxics named 'timeout_downstream'"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: http_status, stream: downstream}]}", "http_status acts on the upstream stream"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: http_status, attributes: {status: 600}}]}", "between 100 and 599"),
            ("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: tls_stall, attributes: {delay: 0}}]}", "between 1 and 3600000"),
            ("  - {name: a, listen: web:8080, upstream: web:80}\n  - {name: a, listen: web:8081, upstream: web:80}", "two proxies are named 'a'"),
            ("  - {name: a, listen: web:8080, upstream: web:80}\n  - {name: b, listen: web:8080, upstream: web:81}", "both listen on web:8080"),
        ]
        for (proxies, message) in cases {
            let errors = read(proxies).errors
            #expect(errors.contains { $0.message.contains(message) && $0.line > 0 }, "\(proxies): \(errors.map(\.message))")
        }
        let many = (0...ProxySpec.maximumProxies).map { "  - {name: p\($0), listen: 'web:\(9000 + $0)', upstream: web:80}" }.joined(separator: "\n")
        #expect(read(many).errors.contains { $0.message.contains("at most \(ProxySpec.maximumProxies) proxies") })
    }

    @Test func roamsOwnToxicsHaveTheirStreamAndDefaults() throws {
        let outcome = read("  - {name: a, listen: web:8080, upstream: web:80, toxics: [{type: http_status}, {type: http_truncate, attributes: {bytes: 10}}, {type: tls_stall}]}")
        let toxics = try #require(outcome.scenario?.proxies.first?.toxics, "\(outcome.errors)")
        #expect(toxics.map(\.name) == ["http_status_upstream", "http_truncate_downstream", "tls_stall_downstream"])
        #expect(toxics[0].kind == .httpStatus(status: 503, percent: 100) && toxics[0].stream == .upstream)
        #expect(toxics[1].kind == .httpTruncate(bytes: 10, percent: 100))
        #expect(toxics[2].kind == .tlsStall(delay: .seconds(10)))
    }

    @Test func endpointsAreReadAsToxiproxyWritesThem() {
        #expect(ProxyEndpoint("localhost:3306") == ProxyEndpoint(host: "localhost", port: 3306))
        #expect(ProxyEndpoint("[::1]:80")?.host == "::1" && ProxyEndpoint("[::1]:80")?.description == "[::1]:80")
        #expect(ProxyEndpoint("127.0.0.1:0")?.isLoopback == true && ProxyEndpoint("0.0.0.0:1")?.isLoopback == true)
        for bad in ["", ":80", "web:", "web:65536", "web:-1", "web:8o", "::1:80", "we b:80", "web:80:81", "[::1]80"] {
            #expect(ProxyEndpoint(bad) == nil, "\(bad)")
        }
    }

    /// The toxiproxy API's bodies: read by the same code, an update keeping what it leaves out.
    @Test func requestBodiesAreReadAndUpdatesKeepTheRest() throws {
        let created = ProxyRequest.proxy(#"{"name": "redis", "listen": "127.0.0.1:26379", "upstream": "web:6379"}"#, nodes: ["web"])
        let proxy = try #require(created.value, "\(created.diagnostics)")
        #expect(proxy.enabled && proxy.listen.port == 26379)
        let disabled = try #require(ProxyRequest.proxy(#"{"enabled": false}"#, nodes: ["web"], base: proxy).value)
        #expect(!disabled.enabled && disabled.listen == proxy.listen && disabled.upstream == proxy.upstream)

        let toxic = try #require(ProxyRequest.toxic(#"{"type": "latency", "attributes": {"latency": 1000}}"#).value)
        #expect(toxic.name == "latency_downstream" && toxic.kind == .latency(latency: .seconds(1), jitter: .zero))
        let updated = try #require(ProxyRequest.toxic(#"{"attributes": {"jitter": 100}, "toxicity": 0.25}"#, base: toxic).value)
        #expect(updated.kind == .latency(latency: .seconds(1), jitter: .milliseconds(100)) && updated.toxicity == 0.25 && updated.name == toxic.name)
        #expect(ProxyRequest.toxic(#"{"type": "bandwidth"}"#, base: toxic).value == nil, "a toxic's type cannot change")
        // An empty name is none, as toxiproxy's Go client sends it: TYPE_STREAM; on an update, the name kept.
        #expect(ProxyRequest.toxic(#"{"name": "", "type": "slicer", "stream": "upstream", "attributes": {"average_size": 10}}"#).value?.name == "slicer_upstream")
        #expect(ProxyRequest.toxic(#"{"name": "", "attributes": {"jitter": 5}}"#, base: toxic).value?.name == toxic.name)
        #expect(ProxyRequest.toxic(#"{"name": ".x", "type": "latency"}"#).value == nil, "a name that is not empty is still checked")

        let populated = try #require(ProxyRequest.populate(#"[{"name": "a", "listen": "web:1", "upstream": "web:2"}]"#, nodes: ["web"]).value)
        #expect(populated.map(\.name) == ["a"])
        #expect(ProxyRequest.populate(#"{"proxies": [{"name": "a", "listen": "web:1", "upstream": "web:2"}]}"#, nodes: ["web"]).value?.count == 1)
        let refused = ProxyRequest.proxy(#"{"name": "a", "listen": "127.0.0.1:1"}"#, nodes: [])
        #expect(refused.value == nil && refused.message.contains("needs 'upstream'"), "\(refused.message)")
        #expect(ProxyRequest.proxy(String(repeating: " ", count: ProxyRequest.maximumSize + 1), nodes: []).message.contains("at most"))
    }
}

/// The timeline's proxy events: a toxic for a span, a removal, a proxy down and up.
@Suite struct ProxyTimelineTests {
    func read(_ timeline: String) -> ScenarioReader.Outcome {
        ScenarioReader.parse("""
            name: proxies
            duration: 30s
            nodes: {phone: {}, web: {}}
            links:
              - {name: wifi, between: [phone, web]}
            proxies:
              - {name: api, listen: "web:8080", upstream: "web:80", toxics: [{type: timeout, attributes: {timeout: 0}}]}
            timeline:
            \(timeline)

            """, file: "s.yaml")
    }

    @Test func eventsAreReadInTimeOrder() throws {
        let outcome = read("""
              - {at: 10s, link: wifi, down: true}
              - {at: 5s, proxy: api, toxic: {type: latency, attributes: {latency: 500}}, for: 4s}
              - {at: 2s, proxy: api, remove: timeout_downstream}
              - {at: 12s, proxy: api, enabled: false}
            """)
        #expect(outcome.errors.isEmpty, "\(outcome.errors)")
        let scenario = try #require(outcome.scenario)
        #expect(scenario.timeline.count == 1, "the link's event stays the link's")
        #expect(scenario.proxyEvents.map(\.at) == [.seconds(2), .seconds(5), .seconds(9), .seconds(12)])
        #expect(scenario.proxyEvents[0].action == .removeToxic("timeout_downstream"))
        #expect(scenario.proxyEvents[1].action == .addToxic(Toxic(.latency(latency: .milliseconds(500), jitter: .zero))))
        #expect(scenario.proxyEvents[2].action == .removeToxic("latency_downstream"), "for: removes it again")
        #expect(scenario.proxyEvents[3].action == .enabled(false))
        #expect(scenario.timeScaled(by: 0.5).proxyEvents.map(\.at) == [.seconds(1), .milliseconds(2500), .milliseconds(4500), .seconds(6)])
    }

    @Test func mistakesArePlacedErrors() {
        let cases: [(String, String)] = [
            ("  - {at: 1s, proxy: apu, enabled: false}", "did you mean 'api'?"),
            ("  - {at: 1s, proxy: api}", "needs one of toxic"),
            ("  - {at: 1s, proxy: api, enabled: false, remove: x}", "does one thing"),
            ("  - {at: 1s, proxy: api, remove: latency_downstream}", "has no toxic named 'latency_downstream' at 1s"),
            ("  - {at: 1s, proxy: api, enabled: false, for: 2s}", "for: ends a toxic's span"),
            ("  - {at: 40s, proxy: api, enabled: false}", "after the scenario's end"),
            ("  - {at: 1s, proxy: api, toxic: {type: latency}, for: 2s}\n  - {at: 4s, proxy: api, remove: latency_downstream}", "has no toxic named 'latency_downstream' at 4s"),
        ]
        for (timeline, message) in cases {
            let errors = read(timeline).errors
            #expect(errors.contains { $0.message.contains(message) && $0.line > 0 }, "\(timeline): \(errors.map(\.message))")
        }
    }
}
