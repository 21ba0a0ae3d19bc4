import Glibc
import Netlink
import PathMonitor

/// Rewrites the PathMonitor tags of a link's two interfaces as the timeline changes the link's
/// quality, so that the nodes' path monitors publish the new ``LinkQuality``.
///
/// It owns a netlink socket in each node's namespace, opened by ``Topology/makeTagger()``, and is
/// used from one thread at a time (the timeline's).
package final class LinkTagger {
    private let plan: TopologyPlan
    private let sockets: [String: any RouteSocket]

    init(plan: TopologyPlan, sockets: [String: any RouteSocket]) {
        self.plan = plan
        self.sockets = sockets
    }

    /// Tags both interfaces of `link` with `quality`.
    package func tag(_ link: String, quality: LinkQuality) throws(SimulatorError) {
        guard let planned = plan.link(link) else {
            throw SimulatorError(.invalidScenario, "no link named '\(link)' in this run")
        }
        let alias = planned.alias(quality: quality)
        for node in [planned.first, planned.second] {
            guard let socket = sockets[node] else { continue }
            let name = planned.interface(in: node)
            do throws(NetlinkError) {
                guard let interface = try socket.link(named: name) else {
                    throw NetlinkError(.errno(ENODEV), operation: "find \(name) in node '\(node)'")
                }
                try socket.setLink(index: interface.index, up: nil, alias: alias, mtu: nil, name: nil)
            } catch {
                throw SimulatorError("tag \(link) in node '\(node)' with quality \(quality)", error)
            }
        }
    }
}

extension Topology {
    /// A tagger with netlink sockets of its own in every node, for the timeline's thread.
    package func makeTagger() throws(SimulatorError) -> LinkTagger {
        var sockets: [String: any RouteSocket] = [:]
        for node in plan.nodes {
            guard let namespace = namespace(of: node.name) else { continue }
            do throws(NetlinkError) {
                sockets[node.name] = try control.routeSocket(in: namespace)
            } catch {
                throw SimulatorError("open a netlink socket in node '\(node.name)' to retag its links", error)
            }
        }
        return LinkTagger(plan: plan, sockets: sockets)
    }
}
