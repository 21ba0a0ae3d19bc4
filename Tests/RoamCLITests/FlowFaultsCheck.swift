import Foundation
import RoamReport
import Testing

/// What `Tests/Fixtures/flow-faults.yaml` must show on either backend: each flow delayed or
/// lost as its `match:` says and nothing else touched, the timeline's set and reset in force
/// between their records, and on netem the kernel's qdiscs and filters as the docs describe
/// them. Returns the medians it measured, for the notes.
enum FlowFaultsCheck {
    struct Probe {
        var began: Double
        var what: String
        var took: Double
        var result: String
    }

    @discardableResult
    static func check(_ directory: String, netem: Bool, sourceLocation: SourceLocation = #_sourceLocation) -> [String: Double] {
        let output = ["probe", "web", "dig"].map { NetemHost.text(directory + "/\($0).stdout") }.joined()
        let probes = output.split(separator: "\n").compactMap { line -> Probe? in
            let words = line.split(separator: " ", maxSplits: 3)
            guard words.count == 4, let began = Double(words[0]), let took = Double(words[2]) else { return nil }
            return Probe(began: began, what: String(words[1]), took: took, result: String(words[3]))
        }
        func of(_ what: String) -> [Probe] { probes.filter { $0.what == what } }
        // The port-443 flow as the run applied it: set after it was due, in force once recorded.
        let changes = NetemHost.timeline(directory, sourceLocation: sourceLocation).compactMap { record -> (action: String, due: Double, done: Double)? in
            guard case .link(let change) = record.event, change.link == "wifi.phone", let planned = change.planned,
                  ["set", "reset"].contains(change.action) else { return nil }
            return (change.action, planned.seconds, record.time.seconds)
        }
        let set = changes.filter { $0.action == "set" }, reset = changes.filter { $0.action == "reset" }
        #expect(!set.isEmpty && !reset.isEmpty, "the timeline has the flow's set and reset: \(changes)", sourceLocation: sourceLocation)
        guard let setDone = set.map(\.done).max(), let setDue = set.map(\.due).min(),
              let resetDue = reset.map(\.due).min(), let resetDone = reset.map(\.done).max() else { return [:] }

        // DNS: 300 ms each way, to glibc and to dig over UDP and TCP (dig's own query time); HTTP
        // (curl) to the server the lookup gave, untouched; UDP to it 200 ms each way. At least
        // three rounds (a VM's first Python start takes seconds of the run).
        let lookups = of("lookup"), plain = of("tcp80"), udp = of("udp")
        #expect(lookups.count >= 3 && lookups.allSatisfy { $0.took >= 0.59 && $0.took < 1.5 && $0.result.hasPrefix("198.19.255.") },
                "lookups: \(output)", sourceLocation: sourceLocation)
        // dig's query time is 600 ms over both; over TCP its connection waits one round trip
        // more before it (dig does not count it; the probe's own clock does: 1.2 s).
        var digs: [String: Double] = [:]
        for (transport, least) in [("dignotcp", 0.59), ("digtcp", 1.19)] {
            let queries = of(transport).compactMap { probe -> Double? in
                let words = probe.result.split(separator: " ")
                guard words.count == 2, words[0].hasPrefix("198.19.255."), let milliseconds = Double(words[1]),
                      probe.took >= least, probe.took < least + 2 else { return nil }
                return milliseconds
            }
            #expect(queries.count >= 3 && queries.count == of(transport).count && queries.allSatisfy { $0 >= 590 && $0 < 1490 },
                    "\(transport): \(output)", sourceLocation: sourceLocation)
            digs[transport] = queries.isEmpty ? nil : queries.sorted()[queries.count / 2] / 1000
        }
        #expect(plain.count >= 3 && plain.allSatisfy { $0.took < 0.3 && $0.result == "ok" }, "port 80: \(output)", sourceLocation: sourceLocation)
        #expect(udp.count >= 3 && udp.allSatisfy { $0.took >= 0.39 && $0.took < 1.0 && $0.result == "ping" }, "udp: \(output)",
                sourceLocation: sourceLocation)
        // Port 443: as port 80 outside the loss, nothing gets through inside it.
        let secure = of("tcp443")
        let before = secure.filter { $0.began + $0.took < setDue }, after = secure.filter { $0.began > resetDone }
        #expect(!before.isEmpty && !after.isEmpty && (before + after).allSatisfy { $0.took < 0.3 && $0.result == "ok" },
                "port 443 outside the loss: \(output)", sourceLocation: sourceLocation)
        // Every try begun in the loss failed, or got through only once the loss was reset (its
        // SYN retransmitted after); at least one failed. A try may end after the reset: in a
        // slow VM a failed try before it leaves the next one the loss's last seconds (curl's
        // 1.5 s timeout plus its start).
        let inside = secure.filter { $0.began > setDone && $0.began < resetDue }
        #expect(inside.contains { $0.result.hasPrefix("error") }
                    && inside.allSatisfy { $0.result.hasPrefix("error") || $0.began + $0.took > resetDone },
                "port 443 in the loss (\(setDone)...\(resetDue)): \(output)", sourceLocation: sourceLocation)
        // What the kernel held once the 443 flow was set: on netem the docs' layout, on the
        // userspace backend none of Roam's qdiscs (its emulator classifies).
        let kernel = output.components(separatedBy: "tc qdisc show dev wifi").last ?? ""
        if netem {
            for expected in ["qdisc prio 1: root", "qdisc netem 10: parent 1:1", "qdisc netem 11: parent 1:2", "qdisc netem 12: parent 1:3",
                             "qdisc netem 13: parent 1:4", "flowid 1:2", "flowid 1:3", "flowid 1:4", "match 00000035/0000ffff at 20",
                             "match 000001bb/0000ffff at 20"] {
                #expect(kernel.contains(expected), "\(expected) in \(kernel)", sourceLocation: sourceLocation)
            }
            // The 443 flow's coming replaced the filters make-before-break: the new set at the
            // second priorities (257 and up), the first set (1 to 4) deleted after.
            #expect(kernel.contains(" pref 257 ") && kernel.contains(" pref 261 ") && !kernel.contains(" pref 1 "),
                    "the filters replaced at their second priorities: \(kernel)", sourceLocation: sourceLocation)
        } else {
            #expect(kernel.contains("tc filter show dev wifi") && !kernel.contains("qdisc prio") && !kernel.contains("qdisc netem") && !kernel.contains("u32"), "\(kernel)",
                    sourceLocation: sourceLocation)
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        return ["lookup": median(lookups.map(\.took)), "tcp80": median(plain.map(\.took)), "udp": median(udp.map(\.took)),
                "tcp443": median((before + after).map(\.took))].merging(digs) { first, _ in first }
    }
}
