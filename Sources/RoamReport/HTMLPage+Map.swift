import RoamSystem

// The map of a scenario with `mobility:`, and the signal each phone had over time.
extension Page {
    /// Colours for networks, in the order they first appear; a track with no network is grey.
    static let networkColours = ["#2f6fd8", "#d8572f", "#3a9a5b", "#8e44ad", "#c49a00", "#16a2b8", "#b03a6a", "#6b6b6b"]
    /// Phones drawn in the signal chart at most (the map shows every track).
    static let signalChartPhones = 12

    /// An SVG map: obstacles, access points (circles) and cell sites (squares), each phone's
    /// track coloured by the network it used, a ring where it roamed between transmitters of one
    /// network and a diamond where it changed network; then the signal chart.
    mutating func map(_ model: ReportModel) {
        guard let map = model.run.summary.map, !map.tracks.isEmpty || !map.transmitters.isEmpty else { return }
        section("Map")
        var networks: [String] = []
        for name in map.transmitters.map(\.network) + map.tracks.flatMap({ $0.points.compactMap(\.network) }) where !networks.contains(name) {
            networks.append(name)
        }
        func colour(_ network: String?) -> String {
            guard let network, let index = networks.firstIndex(of: network) else { return "#b0b0b0" }
            return Self.networkColours[index % Self.networkColours.count]
        }
        // The area is where the phones walk, the access points and the obstacles; a cell site far
        // outside it (hundreds of metres off, as towers are) is drawn on its edge, with where it is.
        var xs = map.transmitters.filter { !$0.isCellular }.map(\.x) + map.obstacles.flatMap { [$0.x0, $0.x1] } + map.tracks.flatMap { $0.points.map(\.x) }
        var ys = map.transmitters.filter { !$0.isCellular }.map(\.y) + map.obstacles.flatMap { [$0.y0, $0.y1] } + map.tracks.flatMap { $0.points.map(\.y) }
        if xs.isEmpty {
            xs = map.transmitters.map(\.x)
            ys = map.transmitters.map(\.y)
        }
        guard let minX = xs.min(), let maxX = xs.max(), let minY = ys.min(), let maxY = ys.max() else { return }
        let pad = max(2, 0.05 * max(maxX - minX, maxY - minY))
        let spanX = max(1, maxX - minX + 2 * pad), spanY = max(1, maxY - minY + 2 * pad)
        let width = Page.width
        let height = min(700, max(160, width * spanY / spanX))
        let scale = min(width / spanX, height / spanY)
        let offsetX = (width - spanX * scale) / 2, offsetY = (height - spanY * scale) / 2
        func mapX(_ x: Double) -> Double { (x - minX + pad) * scale + offsetX }
        // North up: y grows upwards on the map, downwards in SVG.
        func mapY(_ y: Double) -> Double { height - ((y - minY + pad) * scale + offsetY) }
        func px(_ x: Double) -> String { format2(mapX(x)) }
        func py(_ y: Double) -> String { format2(mapY(y)) }

        var svg = SVG()
        for obstacle in map.obstacles {
            let x = min(obstacle.x0, obstacle.x1), y = max(obstacle.y0, obstacle.y1)
            svg.add("<rect class=obstacle x=\"\(px(x))\" y=\"\(py(y))\" width=\"\(format2(abs(obstacle.x1 - obstacle.x0) * scale))\" "
                + "height=\"\(format2(abs(obstacle.y1 - obstacle.y0) * scale))\"><title>\(escape(obstacle.name))</title></rect>")
        }
        var roams = 0, handovers = 0
        for track in map.tracks {
            // Runs of points on one network, each drawn in its colour; the segment joining two
            // runs takes the later one's.
            var run: [String] = []
            var runNetwork: String?? = .none
            func flush() {
                if case .some(let network) = runNetwork, run.count > 1 {
                    svg.add("<polyline class=\"track\(network == nil ? " outside" : "")\" stroke=\"\(colour(network))\" points=\"\(run.joined(separator: " "))\">"
                        + "<title>\(escape(track.node))\(network.map { " on " + escape($0) } ?? ", no network")</title></polyline>")
                }
            }
            var previous: RunSummary.MobilityMap.Point?
            for point in track.points {
                let coordinates = "\(px(point.x)),\(py(point.y))"
                if case .some(let network) = runNetwork, network == point.network {
                    run.append(coordinates)
                } else {
                    flush()
                    run = (previous.map { ["\(px($0.x)),\(py($0.y))"] } ?? []) + [coordinates]
                    runNetwork = .some(point.network)
                }
                if let previous, previous.transmitter != nil, point.transmitter != nil, previous.transmitter != point.transmitter {
                    let what = previous.network == point.network ? "roam" : "handover"
                    if what == "roam" { roams += 1 } else { handovers += 1 }
                    let label = "\(escape(track.node)) \(what) \(escape(previous.transmitter ?? "")) → \(escape(point.transmitter ?? "")) at \(format3(point.t)) s"
                    if what == "roam" {
                        svg.add("<circle class=roam cx=\"\(px(point.x))\" cy=\"\(py(point.y))\" r=\"4\"><title>\(label)</title></circle>")
                    } else {
                        let (cx, cy) = (mapX(point.x), mapY(point.y))
                        svg.add("<polygon class=handover points=\"\(format2(cx)),\(format2(cy - 5)) \(format2(cx + 5)),\(format2(cy)) "
                            + "\(format2(cx)),\(format2(cy + 5)) \(format2(cx - 5)),\(format2(cy))\"><title>\(label)</title></polygon>")
                    }
                }
                previous = point
            }
            flush()
            if let last = track.points.last {
                svg.add("<circle class=phone cx=\"\(px(last.x))\" cy=\"\(py(last.y))\" r=\"2.5\"><title>\(escape(track.node)) at the end</title></circle>")
            }
        }
        for var transmitter in map.transmitters {
            let kind = transmitter.isCellular ? "cell site" : "access point"
            let title = "<title>\(escape(transmitter.name)): \(kind) of \(escape(transmitter.network)) at "
                + "(\(format3(transmitter.x)), \(format3(transmitter.y))) m</title>"
            let (lowX, highX, lowY, highY) = (minX - pad, maxX + pad, minY - pad, maxY + pad)
            var label = escape(transmitter.name)
            if !(lowX...highX).contains(transmitter.x) || !(lowY...highY).contains(transmitter.y) {
                label += " (\(format3(transmitter.x.rounded())), \(format3(transmitter.y.rounded())) m, off the map)"
                transmitter.x = min(max(transmitter.x, lowX + 1 / scale * 8), highX - 1 / scale * 8)
                transmitter.y = min(max(transmitter.y, lowY + 1 / scale * 8), highY - 1 / scale * 8)
            }
            if transmitter.isCellular {
                svg.add("<rect class=cell x=\"\(format2(mapX(transmitter.x) - 6))\" y=\"\(format2(mapY(transmitter.y) - 6))\" "
                    + "width=\"12\" height=\"12\" fill=\"\(colour(transmitter.network))\">\(title)</rect>")
            } else {
                svg.add("<circle class=ap cx=\"\(px(transmitter.x))\" cy=\"\(py(transmitter.y))\" r=\"6\" fill=\"\(colour(transmitter.network))\">\(title)</circle>")
            }
            // Labels of transmitters on the right half go to their left.
            let right = mapX(transmitter.x) > width / 2
            svg.add("<text class=transmitter x=\"\(format2(mapX(transmitter.x) + (right ? -9 : 9)))\" y=\"\(format2(mapY(transmitter.y) + 4))\"\(right ? " text-anchor=end" : "")>"
                + "\(label)</text>")
        }
        let legend = networks.map { "<span class=swatch style=\"background:\(colour($0))\"></span>\(escape($0))" }.joined(separator: " ")
        body += "<figure class=map data-map=\"\(map.tracks.count) \(map.transmitters.count) \(roams) \(handovers)\">"
        body += "<figcaption>Where the phones went: \(map.tracks.count) tracks, \(roams) roams (rings), \(handovers) network changes "
            + "(diamonds); \(legend) <span class=swatch style=\"background:#b0b0b0\"></span>no network. 1 m = \(format2(scale)) px.</figcaption>"
        body += "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(format2(width)) \(format2(height))\" width=\"\(format2(width))\" height=\"\(format2(height))\">"
        body += svg.content + "</svg></figure>\n"
        signal(map, colour: colour)
    }

    /// The signal of the transmitter each phone used (RSSI on Wi-Fi, RSRP on cellular, dBm)
    /// over time, on the page's time axis.
    private mutating func signal(_ map: RunSummary.MobilityMap, colour: (String?) -> String) {
        let tracks = map.tracks.filter { $0.points.contains { $0.signal != nil } }
        guard !tracks.isEmpty else { return }
        let shown = Array(tracks.prefix(Self.signalChartPhones))
        let values = shown.flatMap { $0.points.compactMap(\.signal) }
        let top = min(0, ((values.max() ?? -30) / 10).rounded(.up) * 10), bottom = ((values.min() ?? -100) / 10).rounded(.down) * 10
        let height = 160.0, span = max(10, top - bottom)
        let title = "Signal (dBm: RSSI on Wi-Fi, RSRP on cellular)"
            + (tracks.count > shown.count ? ", the first \(shown.count) of \(tracks.count) phones" : "")
        let html = chart("signal", title: title, height: height) { svg in
            svg.add("<rect class=panel x=\"\(Page.left)\" y=\"0\" width=\"\(plotWidth)\" height=\"\(height)\"/>")
            svg.add("<text class=tick x=\"\(Page.left + 4)\" y=\"11\">\(escape(format3(top))) dBm</text>")
            svg.add("<text class=tick x=\"\(Page.left + 4)\" y=\"\(height - 4)\">\(escape(format3(bottom))) dBm</text>")
            for (index, track) in shown.enumerated() {
                svg.add("<text class=label x=\"\(Page.left - 8)\" y=\"\(14 + Double(index) * 12)\" text-anchor=end>\(escape(track.node))</text>")
                var segment: [String] = []
                var segmentNetwork: String?
                func flush() {
                    if segment.count > 1 {
                        svg.add("<polyline class=\"series signal\" stroke=\"\(colour(segmentNetwork))\" points=\"\(segment.joined(separator: " "))\">"
                            + "<title>\(escape(track.node))\(segmentNetwork.map { " on " + escape($0) } ?? "")</title></polyline>")
                    }
                    segment = []
                }
                for point in track.points {
                    guard let signal = point.signal else { flush(); continue }
                    if point.network != segmentNetwork { flush(); segmentNetwork = point.network }
                    segment.append("\(format2(x(point.t))),\(format2((top - signal) / span * height))")
                }
                flush()
            }
        }
        add(chart: html)
    }
}

/// Two decimals, for coordinates.
func format2(_ value: Double) -> String {
    guard value.isFinite else { return "0" }
    return String((value * 100).rounded() / 100)
}
