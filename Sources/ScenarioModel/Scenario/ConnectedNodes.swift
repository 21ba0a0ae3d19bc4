/// Which nodes links join, directly or through other nodes (nodes forward), by union-find.
struct ConnectedNodes {
    private var parent: [String: String] = [:]

    init(links: [LinkSpec]) {
        for link in links { union(link.endpoints.0, link.endpoints.1) }
    }

    private mutating func root(_ node: String) -> String {
        var current = node
        while let next = parent[current], next != current { current = next }
        // Path compression keeps later look-ups short.
        var walk = node
        while let next = parent[walk], next != current {
            parent[walk] = current
            walk = next
        }
        return current
    }

    private mutating func union(_ a: String, _ b: String) {
        let ra = root(a), rb = root(b)
        if ra != rb { parent[ra] = rb }
    }

    mutating func connected(_ a: String, _ b: String) -> Bool { root(a) == root(b) }
}
