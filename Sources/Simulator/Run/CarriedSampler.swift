import Netlink
import RoamReport

/// What each link carried, sample by sample (`carried` in the timeline), beside the conditions
/// it was set to: the bytes the kernel says each end's interface received since the last sample
/// (`ip -s link`), so that the report shows what a link played, not only what it was asked.
/// One engine for both backends: the userspace emulator writes what a link delivers into the
/// receiving node's TUN interface, netem hands it to the receiving veth, and either way the
/// receiving interface counts it (a veth's count holds the Ethernet header, 14 bytes a packet).
///
/// The first ``maximumLinks`` links of the scenario are sampled (a crowd's hundreds of links
/// would make the timeline that much longer); each node's counters are one netlink dump a
/// sample, on a socket of the sampler's own (the timeline's player uses the topology's).
final class CarriedSampler {
    /// The most links sampled.
    static let maximumLinks = 16

    /// Where a link's traffic arrives: a node's namespace and the link's interface there.
    struct End {
        var namespace: NetworkNamespace
        var node: String
        var interface: String
    }

    private struct Sampled {
        var link: String
        /// The receiving end of each direction: the second node for up, the first for down; nil
        /// where that node is not Roam's to read (roam attach's other side).
        var up: End?
        var down: End?
        var last: (up: UInt64?, down: UInt64?)
    }

    private var links: [Sampled]
    private var sockets: [String: NetlinkSocket] = [:]

    /// A sampler of `links` (at most ``maximumLinks`` of them), each with the ends its traffic
    /// arrives at each way; its baseline read now.
    init(_ links: [(link: String, up: End?, down: End?)]) {
        self.links = links.prefix(Self.maximumLinks).map { Sampled(link: $0.link, up: $0.up, down: $0.down, last: (nil, nil)) }
        for end in self.links.flatMap({ [$0.up, $0.down] }).compactMap({ $0 }) where sockets[end.node] == nil {
            if let socket = try? NetlinkSocket(.route, in: end.namespace) { sockets[end.node] = socket }
        }
        _ = sample(interval: .zero)
    }

    /// A sampler of `plan`'s links in `topology`'s namespaces.
    convenience init(plan: TopologyPlan, topology: Topology) {
        self.init(plan.links.map { link in
            (link.name, topology.namespace(of: link.second).map { End(namespace: $0, node: link.second, interface: link.secondInterface) },
             topology.namespace(of: link.first).map { End(namespace: $0, node: link.first, interface: link.firstInterface) })
        })
    }

    /// Each sampled link's rates over the `interval` since the last call (none on the first
    /// call, which only reads the baseline).
    func sample(interval: Duration) -> [RunEvent.Carried] {
        var counters: [String: [String: InterfaceCounters]] = [:]
        func received(_ end: End?) -> UInt64? {
            guard let end else { return nil }
            if counters[end.node] == nil { counters[end.node] = (try? sockets[end.node]?.interfaceCounters()) ?? [:] }
            return counters[end.node]?[end.interface]?.receivedBytes
        }
        let seconds = interval.seconds
        var events: [RunEvent.Carried] = []
        for index in links.indices {
            let up = received(links[index].up), down = received(links[index].down)
            // A count that went back (the interface made again) says nothing of the interval.
            func rate(_ now: UInt64?, _ before: UInt64?) -> Int64? {
                guard seconds > 0, let now, let before, now >= before else { return nil }
                return Int64((Double(now - before) * 8 / seconds).rounded())
            }
            if seconds > 0 {
                events.append(RunEvent.Carried(link: links[index].link, interval: interval, up: rate(up, links[index].last.up),
                                               down: rate(down, links[index].last.down)))
            }
            links[index].last = (up, down)
        }
        return events
    }
}
