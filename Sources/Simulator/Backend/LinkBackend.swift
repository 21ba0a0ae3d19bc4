import LinkEmulation
import Netlink
import ScenarioModel

/// Which backend plays a scenario's links.
public enum BackendKind: String, Sendable, Hashable, CaseIterable {
    /// The kernel's netem and tbf qdiscs on veth pairs.
    case netem
    /// Roam's own deterministic link emulator in userspace.
    case userspace
}

/// The backend a user asks for: a kind, or `auto` (netem where the kernel has it).
public enum BackendChoice: String, Sendable, Hashable, CaseIterable {
    case auto, netem, userspace
}

/// The scheduling class of the userspace emulator's threads.
public enum EmulatorPriority: String, Sendable, Hashable, CaseIterable {
    /// The kernel's real-time class (`SCHED_FIFO`, its lowest priority) where the process may use
    /// it (root, or an `RLIMIT_RTPRIO` above zero), ordinary otherwise: a packet due leaves when
    /// it is due however busy the machine's cores are. The kernel keeps 5% of each second for
    /// other threads, so a busy emulator can hold up to 95% of a core ahead of them.
    case realtime
    /// The ordinary class, sharing the cores with everything else on the machine (a shared
    /// machine's other users first): under load, packets leave later than their links say.
    case ordinary
}

/// How a scenario's links are made and impaired: the seam between the scenario engine and the
/// mechanisms that move packets. The engine builds namespaces, addresses and routes; a backend
/// creates each link's two interfaces, applies conditions per direction, and cuts or restores
/// the carrier.
///
/// Calls come from one thread at a time: the runner's, then its timeline thread.
package protocol LinkBackend: AnyObject {
    var kind: BackendKind { get }

    /// Creates `link`'s interfaces: one named `link.name` in each node's namespace, left down
    /// and unaddressed (the topology brings them up and addresses them).
    func createInterfaces(for link: TopologyPlan.Link, in topology: Topology) throws(SimulatorError)

    /// Called once the topology is complete, before any conditions are applied.
    func start(_ topology: Topology) throws(SimulatorError)

    /// Puts `conditions` in force on one direction of `link`.
    func apply(_ conditions: LinkConditions, link: String, direction: TrafficDirection) throws(SimulatorError)

    /// Cuts (`false`) or restores (`true`) the carrier of `link`, as a path monitor sees it.
    func setCarrier(_ up: Bool, link: String) throws(SimulatorError)

    /// Stops whatever the backend runs. The topology's teardown removes its kernel objects.
    func stop()

    /// Once stopped: what the backend counted for each direction of each link (the userspace
    /// emulator's packets arrived, delivered, lost; empty where the kernel does the work).
    var linkStatistics: [LinkStatistics] { get }
}

extension LinkBackend {
    package var linkStatistics: [LinkStatistics] { [] }
}

/// The backend chosen for a run, and why.
public struct BackendSelection: Sendable {
    public var kind: BackendKind
    public var reason: String
}

extension BackendChoice {
    /// Resolves the choice on this machine: `auto` is netem where the kernel has sch_netem.
    /// Throws an environment error, naming the alternative, when the choice cannot run here.
    package func resolve(netemProbe: () -> NetemAvailability = NetemBackend.probe,
                        userspaceProbe: () -> String? = UserspaceBackend.probe) throws(SimulatorError) -> BackendSelection {
        switch self {
        case .netem:
            switch netemProbe() {
            case .available:
                return BackendSelection(kind: .netem, reason: "requested")
            case .missing(let detail):
                throw SimulatorError(.environment, "--backend netem: this kernel has no sch_netem (\(detail)); "
                    + "load it with `modprobe sch_netem` where the module exists, or use --backend userspace")
            case .notPermitted(let detail):
                throw SimulatorError(.environment, "cannot probe for sch_netem: \(detail); roam run needs root")
            }
        case .auto:
            switch netemProbe() {
            case .available:
                return BackendSelection(kind: .netem, reason: "auto: sch_netem is available")
            case .notPermitted(let detail):
                throw SimulatorError(.environment, "cannot probe for sch_netem: \(detail); roam run needs root")
            case .missing(let detail):
                if let problem = userspaceProbe() {
                    throw SimulatorError(.environment, "this kernel has no sch_netem (\(detail)) and the userspace link emulator "
                        + "cannot run: \(problem)")
                }
                return BackendSelection(kind: .userspace, reason: "auto: this kernel has no sch_netem; Roam's userspace link emulator")
            }
        case .userspace:
            if let problem = userspaceProbe() {
                throw SimulatorError(.environment, "--backend userspace: \(problem)")
            }
            return BackendSelection(kind: .userspace, reason: "requested")
        }
    }
}

/// Whether the kernel can run netem.
package enum NetemAvailability: Sendable, Equatable {
    case available
    case missing(String)
    case notPermitted(String)
}
