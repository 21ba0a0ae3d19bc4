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

    private struct Sampled {
        var link: String
        /// The receiving end of each direction: the second node for up, the first for down.
        var up: (node: String, interface: String)
        var down: (node: String, interface: String)
        var last: (up: UInt64?, down: UInt64?)
    }

    private var links: [Sampled]
    private var sockets: [String: NetlinkSocket] = [:]

    /// A sampler of `plan`'s first links in `topology`'s namespaces, its baseline read now.
    init(plan: TopologyPlan, topology: Topology) {
        links = plan.links.prefix(Self.maximumLinks).map { link in
            Sampled(link: link.name, up: (link.second, link.secondInterface), down: (link.first, link.firstInterface), last: (nil, nil))
        }
        for node in Set(links.flatMap { [$0.up.node, $0.down.node] }) {
            if let namespace = topology.namespace(of: node), let socket = try? NetlinkSocket(.route, in: namespace) { sockets[node] = socket }
        }
        _ = sample(interval: .zero)
    }

    /// Each sampled link's rates over the `interval` since the last call (none on the first
    /// call, which only reads the baseline).
    func sample(interval: Duration) -> [RunEvent.Carried] {
        var counters: [String: [String: InterfaceCounters]] = [:]
        func received(_ end: (node: String, interface: String)) -> UInt64? {
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
