import RoamSystem
import Foundation
import Netlink
import PathMonitor
import ScenarioModel
import Simulator
import Testing

/// What the multipath kernel tests run on: a phone and a server joined by a Wi-Fi and a
/// cellular link played by Roam's userspace emulator (so that a Wi-Fi that is up but passes
/// nothing can be made on any kernel), with a path monitor in the phone. Everything goes when
/// it is released.
final class PhoneAndServer {
    let topology: Topology
    let backend: UserspaceBackend
    let monitor: NetworkPathMonitor
    let server: TopologyPlan.Node
    let phone: NetworkNamespace
    let serverNamespace: NetworkNamespace

    /// `wifi` and `cell` are each link's settings in the scenario format (`delay: 5ms, rate: 40mbit`).
    init(wifi: String, cell: String) throws {
        let scenario = try #require(ScenarioReader.parse("""
            name: phone-and-server
            duration: 10s
            nodes: { phone: {}, server: {} }
            links:
              - { name: wifi, between: [phone, server], type: wifi, \(wifi) }
              - { name: cell, between: [phone, server], type: cellular, expensive: true, \(cell) }
            """, file: "phone-and-server.yaml").scenario)
        let plan = try TopologyPlan(scenario: scenario, runID: RunRegistry.newRunID())
        backend = UserspaceBackend(plan: plan, seed: 1)
        topology = try Topology.build(plan, backend: backend)
        do {
            try backend.start(topology)
            for link in scenario.links {
                for direction in TrafficDirection.allCases {
                    try backend.apply(LinkConditions(impairment: direction == .up ? link.up : link.down), link: link.name, direction: direction)
                }
            }
        } catch {
            backend.stop()
            topology.teardown()
            throw error
        }
        server = plan.node("server")!
        phone = topology.namespace(of: "phone")!
        serverNamespace = topology.namespace(of: "server")!
        monitor = NetworkPathMonitor(namespace: phone)
        // Fully made from here: deinit tears down if this throws.
        try monitor.start()
    }

    deinit {
        monitor.cancel()
        backend.stop()
        topology.teardown()
    }

    /// The phone's IPv4 address on `link`.
    func phoneAddress(on link: String) throws -> IPAddress {
        try #require(topology.plan.node("phone")?.interfaces.first { $0.name == link }?.ipv4.address)
    }

    /// Makes `link` pass nothing in either direction while it stays up.
    func blackhole(_ link: String, delay: Duration = .milliseconds(5)) throws {
        for direction in TrafficDirection.allCases {
            try backend.apply(LinkConditions(impairment: Impairment(delay: delay), isBlackholed: true), link: link, direction: direction)
        }
    }

    /// Waits (up to 5 s) until the phone's path has or has not `interface`.
    func waitForPath(containing interface: String, _ present: Bool) {
        let deadline = Date().addingTimeInterval(5)
        while monitor.currentPath?.availableInterfaces.contains(where: { $0.name == interface }) != present, Date() < deadline { usleep(5_000) }
    }
}
