import Foundation
import Glibc

/// What a process holds at one moment, and the TCP sockets of the network namespaces it made:
/// for soak tests and the soak benchmark, which look for growth over a long run.
public struct ResourceSample: Sendable {
    /// Seconds since sampling began.
    public var time: Double
    public var descriptors: Int
    public var threads: Int
    public var residentKilobytes: Int
    /// The part of ``residentKilobytes`` that is anonymous memory (heap, stacks: `RssAnon`);
    /// the rest is mapped files (the program's and its libraries' pages as they are first used)
    /// and shared memory.
    public var anonymousKilobytes: Int
    /// Per namespace, the number of TCP sockets in each state (`ESTAB`, `TIME-WAIT`, ...).
    public var sockets: [String: [String: Int]]

    /// Sockets in every namespace that are neither listening nor established: connections
    /// closing or abandoned, which a leak makes pile up.
    public var lingering: Int {
        sockets.values.reduce(0) { total, states in total + states.filter { $0.key != "LISTEN" && $0.key != "ESTAB" }.values.reduce(0, +) }
    }

    /// Established connections in every namespace.
    public var established: Int { sockets.values.reduce(0) { $0 + ($1["ESTAB"] ?? 0) } }
}

public enum ResourceSampler {
    /// The names under `/run/netns` now.
    public static func namespaces() -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")) ?? [])
    }

    /// The namespace prefix (`roam-RUNID-`) of a run started after `existing` was taken: the run
    /// whose `node` namespace appeared since, so that other runs on the machine are left out.
    public static func runPrefix(node: String, since existing: Set<String>) -> String? {
        namespaces().subtracting(existing).first { $0.hasPrefix("roam-") && $0.hasSuffix("-" + node) }.map { String($0.dropLast(node.count)) }
    }

    /// Samples process `pid` and the namespaces (under `/run/netns`) whose names start with `prefix`.
    public static func sample(pid: pid_t, namespacePrefix: String, since start: Date) -> ResourceSample {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? 0
        var resident = 0, anonymous = 0
        if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) {
            func kilobytes(_ field: String) -> Int {
                guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) }) else { return 0 }
                return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
            }
            resident = kilobytes("VmRSS:")
            anonymous = kilobytes("RssAnon:")
        }
        var sockets: [String: [String: Int]] = [:]
        let namespaces = ((try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")) ?? []).filter { $0.hasPrefix(namespacePrefix) }
        for namespace in namespaces {
            guard let result = try? RunningCommand.run("/usr/bin/ss", ["-N", namespace, "-tanH"], timeout: 10), result.status == 0 else { continue }
            var states: [String: Int] = [:]
            for line in result.output.split(separator: "\n") {
                if let state = line.split(separator: " ", omittingEmptySubsequences: true).first { states[String(state), default: 0] += 1 }
            }
            sockets[namespace] = states
        }
        return ResourceSample(time: Date().timeIntervalSince(start), descriptors: descriptors, threads: threads,
                              residentKilobytes: resident, anonymousKilobytes: anonymous, sockets: sockets)
    }
}
