import CNetlink
import CRoamLinux
import Glibc

/// A policy routing rule (`ip rule`): traffic from `source` (and with the firewall mark
/// `mark`, when given) is looked up in `table`.
public struct RoutingRule: Sendable, Hashable {
    public var family: AddressFamily
    /// The rule's priority; lower runs first.
    public var priority: UInt32
    /// The source prefix the rule matches; nil matches every source.
    public var source: IPPrefix?
    /// The table looked up.
    public var table: RouteTable
    /// The firewall mark the rule matches (`fwmark`, every bit); nil matches every packet.
    public var mark: UInt32?

    /// A rule that looks up `table` for traffic from `source` (nil: every source).
    public init(family: AddressFamily, priority: UInt32, source: IPPrefix?, table: RouteTable) {
        self.init(family: family, priority: priority, source: source, table: table, mark: nil)
    }

    /// A rule that looks up `table` for traffic from `source` (nil: every source) with the
    /// firewall mark `mark` (nil: any).
    public init(family: AddressFamily, priority: UInt32, source: IPPrefix?, table: RouteTable, mark: UInt32?) {
        self.family = family
        self.priority = priority
        self.source = source
        self.table = table
        self.mark = mark
    }

    init?(libnl rule: OpaquePointer) {
        let family = AddressFamily(rawValue: rtnl_rule_get_family(rule))
        guard family == .inet || family == .inet6 else { return nil }
        var source = LibnlAddress.prefix(rtnl_rule_get_src(rule))
        if source?.length == 0 { source = nil }
        // libnl says 0xFFFFFFFF for a rule without FRA_FWMARK (and 0 in older versions).
        let mark = rtnl_rule_get_mark(rule)
        self.init(family: family, priority: rtnl_rule_get_prio(rule), source: source, table: RouteTable(rawValue: rtnl_rule_get_table(rule)),
                  mark: mark == 0 || mark == UInt32.max ? nil : mark)
    }
}

extension NetlinkSocket {
    /// Every policy routing rule of both families.
    public func rules() throws(NetlinkError) -> [RoutingRule] {
        try dump("dump rules (RTM_GETRULE)", allocate: { rtnl_rule_alloc_cache($0, AF_UNSPEC, $1) }, convert: { RoutingRule(libnl: $0) })
    }

    /// Adds a rule that sends traffic from `rule.source` to `rule.table`.
    public func addRule(_ rule: RoutingRule) throws(NetlinkError) {
        let object = try makeRule(rule)
        defer { rtnl_rule_put(object) }
        try request("add rule from \(rule.source?.description ?? "all") table \(rule.table)") {
            rtnl_rule_add($0, object, NLM_F_CREATE | NLM_F_EXCL)
        }
    }

    /// Deletes a rule.
    public func deleteRule(_ rule: RoutingRule) throws(NetlinkError) {
        let object = try makeRule(rule)
        defer { rtnl_rule_put(object) }
        try request("delete rule from \(rule.source?.description ?? "all") table \(rule.table)") { rtnl_rule_delete($0, object, 0) }
    }

    private func makeRule(_ rule: RoutingRule) throws(NetlinkError) -> OpaquePointer {
        let object = rtnl_rule_alloc()!
        rtnl_rule_set_family(object, rule.family.rawValue)
        rtnl_rule_set_prio(object, rule.priority)
        rtnl_rule_set_table(object, rule.table.rawValue)
        rtnl_rule_set_action(object, UInt8(FR_ACT_TO_TBL))
        if let mark = rule.mark {
            rtnl_rule_set_mark(object, mark)
            rtnl_rule_set_mask(object, UInt32.max)
        }
        if let source = rule.source {
            let address = try LibnlAddress.make(source.address, prefixLength: source.length)
            _ = rtnl_rule_set_src(object, address)
            nl_addr_put(address)
        }
        return object
    }
}
