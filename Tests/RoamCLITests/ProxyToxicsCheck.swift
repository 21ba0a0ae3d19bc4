import Foundation
import Testing

/// What `Tests/Fixtures/proxy-toxics.yaml` must show: each of toxiproxy's toxics, on a proxy of
/// the run, doing to a real client's connection what toxiproxy documents, within 10% of its
/// setting where it sets a time or a rate. Returns what it measured, for the notes.
enum ProxyToxicsCheck {
    @discardableResult
    static func check(_ directory: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String: String] {
        let output = NetemHost.text(directory + "/probe.stdout")
        var lines: [String: [[String]]] = [:]
        for line in output.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            if let name = words.first { lines[name, default: []].append(Array(words.dropFirst())) }
        }
        func numbers(_ name: String) -> [[Double]] { (lines[name] ?? []).map { $0.compactMap(Double.init) } }
        func expect(_ condition: Bool, _ what: String) {
            #expect(condition, "\(what): \(output)", sourceLocation: sourceLocation)
        }
        // latency 200 ms (downstream): the first byte 200 ms later than without the proxy's
        // toxic; a toxicity of 0 never acts.
        let latency = numbers("latency")
        expect(latency.count == 3 && latency.allSatisfy { $0.count == 3 && abs($0[1] - $0[0] - 0.2) <= 0.02 && $0[2] < 0.1 }, "latency")
        // bandwidth 100 KB/s: 300,000 bytes in 3 s.
        let bandwidth = numbers("bandwidth").first ?? []
        expect(bandwidth.count == 3 && bandwidth[0] == 300_000 && abs(bandwidth[2] - 3.0) <= 0.3, "bandwidth")
        // limit_data 1000: 1000 bytes of the 5000 sent, then the connection closes.
        expect(lines["limit"]?.first == ["1000", "eof"], "limit_data")
        // slow_close 500 ms: the close comes 500 ms after the last byte.
        let slowClose = numbers("slowclose").first ?? []
        expect(slowClose.count == 3 && slowClose[0] == 100 && abs(slowClose[2] - slowClose[1] - 0.5) <= 0.05, "slow_close")
        // reset_peer 300 ms: a connection that passes nothing is reset 300 ms after it began.
        let reset = lines["reset"]?.first ?? []
        expect(reset.count == 2 && reset[0] == "reset" && Double(reset[1]).map { abs($0 - 0.3) <= 0.03 } == true, "reset_peer")
        // timeout 400 ms (upstream): the request never reaches the server, nothing comes back, and
        // the connection is closed 400 ms after it began.
        let timeout = lines["timeout"]?.first ?? []
        expect(timeout.count == 3 && timeout[0] == "eof" && timeout[1] == "0" && Double(timeout[2]).map { abs($0 - 0.4) <= 0.04 } == true, "timeout")
        // slicer 100 bytes, 20 ms apart: 1000 bytes in ten reads over 180 ms.
        let slicer = numbers("slicer").first ?? []
        expect(slicer.count == 4 && slicer[0] == 1000 && slicer[1] == 10 && abs(slicer[3] - slicer[2] - 0.18) <= 0.03, "slicer")
        // Roam's own: every request answered 503 by the proxy (the server never sees it), the
        // same requests straight to the server answered whole; a body cut after 10 of its 1,000
        // bytes; about half of 40 answered 502; the server's first bytes held 300 ms.
        expect(lines["http_status"]?.first == ["503:0:http_status", "503:0:http_status"], "http_status")
        expect(lines["http_plain"]?.first == ["200:1000:-", "200:1000:-", "200:1000:-"], "HTTP without a proxy")
        expect(lines["http_truncate"]?.first == ["cut:10:1000"], "http_truncate")
        let half = lines["http_half"]?.first ?? []
        let failed = half.filter { $0 == "502:0:http_status" }.count
        expect(half.count == 40 && half.allSatisfy { $0 == "502:0:http_status" || $0 == "200:1000:-" } && (10...30).contains(failed), "http_status at 50%")
        let stall = numbers("tls_stall").first ?? []
        expect(stall.count == 2 && stall.allSatisfy { abs($0 - 0.3) <= 0.03 }, "tls_stall")
        // The timeline's toxic: 300 ms on what began from 9 s to 12 s (its first byte), none before
        // or after (a margin of 100 ms each side for the fetch in flight).
        let timed = numbers("timed").filter { $0.count == 2 }
        let during = timed.filter { $0[0] > 9.05 && $0[0] + 0.35 < 12 }, outside = timed.filter { $0[0] + $0[1] < 8.95 || $0[0] > 12.05 }
        expect(during.count >= 3 && during.allSatisfy { abs($0[1] - 0.3) <= 0.03 }, "the timeline's latency toxic, 9 s to 12 s")
        expect(outside.count >= 3 && outside.allSatisfy { $0[1] < 0.1 }, "no latency outside 9 s to 12 s")
        return lines.mapValues { $0.map { $0.joined(separator: " ") }.joined(separator: "; ") }
    }
}
