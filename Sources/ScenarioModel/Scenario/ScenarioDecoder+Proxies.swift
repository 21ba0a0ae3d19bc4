import RoamCore
import Yams

// Proxies (`proxies:`) and their toxics, with toxiproxy's field names, so that a toxiproxy
// configuration (its `-config` file, a populate body) reads as it is. The run's toxiproxy API
// reads its request bodies with the same code (``ProxyRequest``).
extension ScenarioDecoder {
    /// `proxies:`: a list of proxies (or toxiproxy's form, a list under any name is not taken).
    func proxies(_ node: Node, nodes: Set<String>) -> [ProxySpec] {
        guard let items = list(node, "proxies") else { return [] }
        if items.count > ProxySpec.maximumProxies {
            error("a scenario may have at most \(ProxySpec.maximumProxies) proxies, not \(items.count)", at: node)
            return []
        }
        var proxies: [ProxySpec] = []
        var places: [String: Node] = [:]
        for item in items {
            guard let proxy = proxy(item, context: "a proxy", nodes: nodes, base: nil) else { continue }
            if places[proxy.name] != nil {
                error("two proxies are named '\(proxy.name)'; give each its own name", at: item)
                continue
            }
            places[proxy.name] = item
            proxies.append(proxy)
        }
        // Two proxies listening on one port of one node would collide when the run starts.
        var listening: [ProxyEndpoint: String] = [:]
        for proxy in proxies where proxy.listen.port != 0 {
            let key = ProxyEndpoint(host: proxy.listen.isLoopback ? "localhost" : proxy.listen.host, port: proxy.listen.port)
            if let other = listening[key] {
                error("proxies '\(other)' and '\(proxy.name)' both listen on \(proxy.listen); give one another port", at: places[proxy.name] ?? node)
            }
            listening[key] = proxy.name
        }
        return proxies
    }

    /// One proxy: `name`, `listen`, `upstream`, `enabled`, `toxics`. With `base` (an update to
    /// a proxy that exists), every key may be left out and keeps the base's value.
    func proxy(_ node: Node, context: String, nodes: Set<String>, base: ProxySpec?) -> ProxySpec? {
        guard var fields = fields(node, context) else { return nil }
        let name = take(&fields, "name", required: base == nil) { self.proxyName($0, "a proxy's name") }
        let context = name.map { "proxy '\($0)'" } ?? context
        let listen = take(&fields, "listen", required: base == nil) { self.endpoint($0, "\(context)'s listen", nodes: nodes, listening: true) }
        let upstream = take(&fields, "upstream", required: base == nil) { self.endpoint($0, "\(context)'s upstream", nodes: nodes, listening: false) }
        let enabled = take(&fields, "enabled") { self.bool($0, "\(context)'s enabled") }
        let toxics = take(&fields, "toxics") { self.toxics($0, context: context) }
        finish(fields, known: ["name", "listen", "upstream", "enabled", "toxics"])
        guard let name = name ?? base?.name, let listen = listen ?? base?.listen, let upstream = upstream ?? base?.upstream else { return nil }
        if listen.port == 0, !listen.isLoopback {
            error("\(context) listens on port 0 of node '\(listen.host)'; a proxy in a node needs a port of its own (0, any free port, is for the host's loopback)",
                  at: node)
            return nil
        }
        if upstream.port == 0 {
            error("\(context)'s upstream needs a port (1-65535), not 0", at: node)
            return nil
        }
        return ProxySpec(name: name, listen: listen, upstream: upstream, enabled: enabled ?? base?.enabled ?? true,
                         toxics: toxics ?? base?.toxics ?? [])
    }

    /// A proxy's toxics: a list of toxics, each with its own name.
    func toxics(_ node: Node, context: String) -> [Toxic]? {
        guard let items = list(node, "\(context)'s toxics") else { return nil }
        if items.count > ProxySpec.maximumToxics {
            error("\(context) may have at most \(ProxySpec.maximumToxics) toxics, not \(items.count)", at: node)
            return nil
        }
        var toxics: [Toxic] = []
        for item in items {
            guard let toxic = toxic(item, context: "a toxic of \(context)", base: nil) else { continue }
            if toxics.contains(where: { $0.name == toxic.name }) {
                error("\(context) has two toxics named '\(toxic.name)'; name one of them (name: ...)", at: item)
                continue
            }
            toxics.append(toxic)
        }
        return toxics
    }

    /// One toxic: `type`, `name`, `stream`, `toxicity`, `attributes` (toxiproxy's). With `base`
    /// (an update), the type may be left out, and the attributes given replace only theirs.
    func toxic(_ node: Node, context: String, base: Toxic?) -> Toxic? {
        guard var fields = fields(node, context) else { return nil }
        let type = take(&fields, "type", required: base == nil) { node -> String? in
            guard let text = self.string(node, "\(context)'s type") else { return nil }
            guard Toxic.typeNames.contains(text) else {
                var message = "\(context)'s type '\(escapedForMessage(text))' is not a toxic toxiproxy has"
                if let guess = suggestion(for: text, among: Toxic.typeNames) { message += " (did you mean '\(guess)'?)" }
                self.error(message + "; toxics: \(Toxic.typeNames.joined(separator: ", "))", at: node)
                return nil
            }
            return text
        }
        // An empty name is none, as toxiproxy takes it (TYPE_STREAM): toxiproxy's Go client
        // sends `"name": ""` for a toxic its caller did not name.
        let name = take(&fields, "name") { node -> String? in
            guard let text = self.string(node, "\(context)'s name") else { return nil }
            return text.isEmpty ? nil : self.proxyName(node, "\(context)'s name")
        }
        let stream = take(&fields, "stream") { node -> Toxic.Stream? in
            guard let text = self.string(node, "\(context)'s stream") else { return nil }
            guard let stream = Toxic.Stream(rawValue: text) else {
                self.error("\(context)'s stream must be upstream (client to server) or downstream (server to client), not '\(escapedForMessage(text))'", at: node)
                return nil
            }
            return stream
        }
        let toxicity = take(&fields, "toxicity") { self.number($0, "\(context)'s toxicity", range: 0...1, unit: nil) }
        let attributesNode = fields.take("attributes")
        finish(fields, known: ["name", "type", "stream", "toxicity", "attributes"])
        if let type, let base, type != base.kind.typeName {
            error("\(context) is a \(base.kind.typeName) toxic; its type cannot change (remove it and add a \(type) toxic)", at: node)
            return nil
        }
        guard let type = type ?? base?.kind.typeName, let bounds = Toxic.Kind.attributeBounds(of: type) else { return nil }
        var values = Dictionary(uniqueKeysWithValues: base?.kind.attributes ?? [])
        if let attributesNode, var attributes = self.fields(attributesNode, "\(context)'s attributes") {
            for (attribute, range) in bounds {
                if let value = attributes.take(attribute), let number = integer(value, "\(context)'s \(attribute)", range: Int(range.lowerBound)...Int(range.upperBound)) {
                    values[attribute] = Int64(number)
                }
            }
            finish(attributes, known: bounds.map(\.name))
        }
        guard let kind = Toxic.Kind(type: type, attributes: values) else { return nil }
        if case let .slicer(size, variation, _) = kind, variation > size {
            error("\(context)'s size_variation (\(variation)) must be at most its average_size (\(size))", at: attributesNode ?? node)
            return nil
        }
        // Roam's own toxics act on one stream: the requests, or the responses.
        if let only = Toxic.roamTypes[type], let stream, stream != only {
            error("\(context): \(type) acts on the \(only.rawValue) stream (\(only == .upstream ? "the requests" : "the server's bytes")), not \(stream.rawValue)",
                  at: fields.keyNode("stream") ?? node)
            return nil
        }
        let chosenStream = stream ?? base?.stream ?? Toxic.roamTypes[type] ?? .downstream
        var toxic = Toxic(name: name ?? base?.name, kind, stream: chosenStream, toxicity: toxicity ?? base?.toxicity ?? 1)
        if name == nil, base == nil { toxic.name = "\(type)_\(chosenStream.rawValue)" }
        return toxic
    }

    private func proxyName(_ node: Node, _ what: String) -> String? {
        guard let text = string(node, what) else { return nil }
        guard ProxySpec.isName(text) else {
            error("\(what) '\(escapedForMessage(text))' must be 1 to \(ProxySpec.maximumNameLength) letters, digits, '_', '-' and '.', not starting with '.' or '-'", at: node)
            return nil
        }
        return text
    }

    /// `HOST:PORT` where the host is a node of the scenario or the loopback.
    private func endpoint(_ node: Node, _ what: String, nodes: Set<String>, listening: Bool) -> ProxyEndpoint? {
        guard let text = string(node, what) else { return nil }
        guard let endpoint = ProxyEndpoint(text) else {
            error("\(what) must be HOST:PORT (a node's name, or localhost, and a port), not '\(escapedForMessage(text))'", at: node)
            return nil
        }
        guard endpoint.isLoopback || nodes.contains(endpoint.host) else {
            var message = "\(what) names '\(escapedForMessage(endpoint.host))', which is neither a node of the scenario nor the loopback"
            if let guess = suggestion(for: endpoint.host, among: nodes.sorted()) { message += " (did you mean '\(guess)'?)" }
            message += listening ? "; a proxy listens in a node (NODE:PORT) or on the host's loopback (127.0.0.1:PORT)"
                : "; an upstream is a node (NODE:PORT) or the loopback where the proxy is (localhost:PORT): a proxy reaches nothing outside the run"
            error(message, at: node)
            return nil
        }
        return endpoint
    }
}

/// The bodies of the run's toxiproxy API (`roam run --toxiproxy-port`), read by the scenario
/// reader's own code: a proxy, an update to one, a toxic, an update to one, a populate list.
/// Each read gives the value, or nil and the diagnostics that say why (placed in the body).
package enum ProxyRequest {
    /// The most a body may hold.
    package static let maximumSize = 256 * 1024

    package struct Outcome<Value: Sendable>: Sendable {
        package var value: Value?
        package var diagnostics: [ScenarioDiagnostic]
        /// The diagnostics as one message, for an answer's `error`.
        package var message: String { diagnostics.filter { $0.severity == .error }.map(\.description).joined(separator: "\n") }
    }

    /// A new proxy (`POST /proxies`), or with `base`, an update to one (`POST /proxies/NAME`).
    package static func proxy(_ text: String, nodes: Set<String>, base: ProxySpec? = nil) -> Outcome<ProxySpec> {
        read(text) { decoder, root in decoder.proxy(root, context: "the proxy", nodes: nodes, base: base) }
    }

    /// A new toxic (`POST /proxies/NAME/toxics`), or with `base`, an update to one.
    package static func toxic(_ text: String, base: Toxic? = nil) -> Outcome<Toxic> {
        read(text) { decoder, root in decoder.toxic(root, context: "the toxic", base: base) }
    }

    /// `POST /populate`: a list of proxies, or toxiproxy's `{"proxies": [...]}`.
    package static func populate(_ text: String, nodes: Set<String>) -> Outcome<[ProxySpec]> {
        read(text) { decoder, root in
            var list = root
            if case .mapping(let mapping) = root, mapping.count == 1, let value = mapping["proxies"] { list = value }
            let errorsBefore = decoder.diagnostics.hasErrors
            let proxies = decoder.proxies(list, nodes: nodes)
            return decoder.diagnostics.hasErrors && !errorsBefore ? nil : proxies
        }
    }

    private static func read<Value>(_ text: String, _ body: (ScenarioDecoder, Node) -> Value?) -> Outcome<Value> {
        let collector = DiagnosticCollector(file: "request body", source: text)
        guard text.utf8.count <= maximumSize else {
            collector.error("a body may hold at most \(maximumSize) bytes; this one holds \(text.utf8.count)", line: 0, column: 0)
            return Outcome(value: nil, diagnostics: collector.diagnostics)
        }
        guard let root = ScenarioReader.compose(text, collector: collector, empty: "the body is empty; send a JSON object") else {
            return Outcome(value: nil, diagnostics: collector.sortedDiagnostics)
        }
        let decoder = ScenarioDecoder(collector)
        let value = body(decoder, root)
        return Outcome(value: collector.hasErrors ? nil : value, diagnostics: collector.sortedDiagnostics)
    }
}

// The timeline's proxy events: `{at: 5s, proxy: api, toxic: {...}, for: 4s}`,
// `{at: 9s, proxy: api, remove: NAME}`, `{at: 3s, proxy: api, enabled: false}`.
extension ScenarioDecoder {
    func proxyEvents(_ item: Node, duration: Duration?) -> [(event: ProxyEvent, node: Node)] {
        guard var fields = fields(item, "a timeline event") else { return [] }
        let at = take(&fields, "at", required: true) { self.duration($0, "at") }
        let proxy = take(&fields, "proxy") { node -> ProxySpec? in
            guard let name = self.string(node, "proxy") else { return nil }
            guard let proxy = self.declaredProxies[name] else {
                let names = self.declaredProxies.keys.sorted()
                var message = "no proxy named '\(escapedForMessage(name))'"
                if let guess = suggestion(for: name, among: names) { message += " (did you mean '\(guess)'?)" }
                self.error(message + (names.isEmpty ? "; the scenario has no proxies: (add them to proxies:)" : "; proxies: \(names.joined(separator: ", "))"), at: node)
                return nil
            }
            return proxy
        }
        let actions = ["toxic", "remove", "enabled"].filter { fields.has($0) }
        let toxic = take(&fields, "toxic") { self.toxic($0, context: "the toxic", base: nil) }
        let removed = take(&fields, "remove") { node -> String? in
            guard let name = self.string(node, "remove") else { return nil }
            guard ProxySpec.isName(name) else {
                self.error("remove names a toxic: '\(escapedForMessage(name))' is not a toxic's name", at: node)
                return nil
            }
            return name
        }
        let enabled = take(&fields, "enabled") { self.bool($0, "enabled") }
        let span = take(&fields, "for") { self.duration($0, "for", allowZero: false) }
        finish(fields, known: ["at", "proxy", "toxic", "remove", "enabled", "for"])
        guard actions.count == 1 else {
            error(actions.isEmpty ? "a proxy's event needs one of toxic: {...}, remove: NAME or enabled: true|false"
                : "a proxy's event does one thing; this one has \(actions.joined(separator: " and "))", at: item)
            return []
        }
        if let forNode = fields.keyNode("for"), actions != ["toxic"] {
            error("for: ends a toxic's span; \(actions[0]) has none", at: forNode)
            return []
        }
        guard let at, let proxy else { return [] }
        if let duration, at > duration {
            error("this event at \(at.roamDescription) is after the scenario's end (\(duration.roamDescription))", at: item)
            return []
        }
        var events: [(event: ProxyEvent, node: Node)] = []
        if let toxic {
            events.append((ProxyEvent(at: at, proxy: proxy.name, .addToxic(toxic)), item))
            if let span { events.append((ProxyEvent(at: at + span, proxy: proxy.name, .removeToxic(toxic.name)), item)) }
        } else if let removed {
            events.append((ProxyEvent(at: at, proxy: proxy.name, .removeToxic(removed)), item))
        } else if let enabled {
            events.append((ProxyEvent(at: at, proxy: proxy.name, .enabled(enabled)), item))
        }
        return events
    }

    /// Plays the proxy events in time order against the proxies' toxics: a removal names a toxic
    /// the proxy has then, and a proxy never holds more than its bound.
    func checkProxyEvents(_ items: [(event: ProxyEvent, node: Node)]) {
        guard items.count <= ProxyEvent.maximumEvents else {
            error("the timeline has \(items.count) proxy events; at most \(ProxyEvent.maximumEvents)", at: items[ProxyEvent.maximumEvents].node)
            return
        }
        let sorted = items.enumerated().sorted { ($0.element.event.at, $0.offset) < ($1.element.event.at, $1.offset) }.map(\.element)
        var toxics = declaredProxies.mapValues { Set($0.toxics.map(\.name)) }
        for (event, node) in sorted {
            switch event.action {
            case .addToxic(let toxic):
                toxics[event.proxy, default: []].insert(toxic.name)
                if toxics[event.proxy, default: []].count > ProxySpec.maximumToxics {
                    error("proxy '\(event.proxy)' would hold more than \(ProxySpec.maximumToxics) toxics at \(event.at.roamDescription)", at: node)
                }
            case .removeToxic(let name):
                if toxics[event.proxy]?.remove(name) == nil {
                    let held = toxics[event.proxy, default: []].sorted()
                    error("proxy '\(event.proxy)' has no toxic named '\(name)' at \(event.at.roamDescription)"
                        + (held.isEmpty ? " (it has none then)" : "; it has \(held.joined(separator: ", "))"), at: node)
                }
            case .enabled:
                break
            }
        }
        proxyEvents = sorted.map(\.event)
    }
}
