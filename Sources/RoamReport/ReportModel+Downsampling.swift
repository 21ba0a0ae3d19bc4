// Long runs (an hour of a commuter train, a night of flaky Wi-Fi) record tens of thousands of
// samples, link changes, path changes and connections. A chart has about 800 pixels across, so
// the page keeps about one point, band, span or marker per pixel, chosen to keep what matters at
// that scale (the worst conditions, the mean throughput, the lowest buffer, the path that held
// longest), and says how many were merged. Short runs are drawn exactly as recorded.
import ScenarioModel

extension ReportModel {
    /// About one per pixel of a chart's plot area.
    static let columns = 800

    /// Thins every series, band, span and marker list longer than `columns` to about that many.
    mutating func downsample(columns: Int = ReportModel.columns) {
        let width = duration / Double(columns)
        func over<T>(_ items: [T]) -> Bool { items.count > columns }
        for index in links.indices {
            for (direction, series) in links[index].delay where over(series.points) { links[index].delay[direction] = Self.worst(series, width, >) }
            for (direction, series) in links[index].loss where over(series.points) { links[index].loss[direction] = Self.worst(series, width, >) }
            for (direction, series) in links[index].rate where over(series.points) { links[index].rate[direction] = Self.worst(series, width, <) }
            // What was carried: each column's mean (nothing counted where nothing was read).
            for (direction, series) in links[index].carried where over(series.points) {
                links[index].carried[direction] = Self.mean(series, width)
            }
            if over(links[index].down) { links[index].down = Self.merged(links[index].down, width) }
            for (direction, intervals) in links[index].blackholed where over(intervals) { links[index].blackholed[direction] = Self.merged(intervals, width) }
        }
        for index in workloads.indices {
            if over(workloads[index].throughput) {
                workloads[index].throughput = Self.bucketed(workloads[index].throughput.map { ($0.t, $0.mbit) }, width) { values in
                    values.reduce(0, +) / Double(values.count)
                }.map { (t: $0.0, mbit: $0.1) }
            }
            if over(workloads[index].buffered) {
                workloads[index].buffered = Self.bucketed(workloads[index].buffered.map { ($0.t, $0.seconds) }, width) { $0.min()! }
                    .map { (t: $0.0, seconds: $0.1) }
            }
            if over(workloads[index].stalls) { workloads[index].stalls = Self.merged(workloads[index].stalls, width) }
            for keyPath in [\Workload.connects, \Workload.disconnects, \Workload.failedRequests, \Workload.subflows, \Workload.commands]
            where over(workloads[index][keyPath: keyPath]) {
                workloads[index][keyPath: keyPath] = Self.markers(workloads[index][keyPath: keyPath], width)
            }
        }
        for index in nodes.indices where over(nodes[index].spans) {
            nodes[index].spans = Self.dominant(nodes[index].spans, width)
        }
        if over(marks) { marks = Self.markers(marks.map { (t: $0.t, label: $0.text) }, width).map { (t: $0.t, text: $0.label) } }
        if over(mptcpChanges) { mptcpChanges = Self.markers(mptcpChanges, width) }
    }

    private static func column(_ t: Double, _ width: Double) -> Int {
        let value = t / width
        return value.isFinite ? Int(min(max(value, 0), 1e9)) : 0
    }

    /// A step series with one point per column: the worst value in it (`better` says which of
    /// two is better: the other is kept), at the column's first point.
    static func worst(_ series: Series, _ width: Double, _ worse: (Double, Double) -> Bool) -> Series {
        var result = Series()
        var current: (column: Int, t: Double, value: Double?)?
        for point in series.points {
            let column = column(point.t, width)
            if let open = current, open.column == column {
                if let value = point.value { current!.value = open.value.map { worse(value, $0) ? value : $0 } ?? value }
                continue
            }
            if let open = current { result.points.append((open.t, open.value)) }
            current = (column, point.t, point.value)
        }
        if let open = current { result.points.append((open.t, open.value)) }
        return result
    }

    /// One point per column, from the column's first time: the mean of its values (nil where it
    /// has none).
    static func mean(_ series: Series, _ width: Double) -> Series {
        var result = Series()
        var open: (column: Int, t: Double, sum: Double, count: Int)?
        func close() {
            if let open { result.points.append((open.t, open.count > 0 ? open.sum / Double(open.count) : nil)) }
        }
        for point in series.points {
            let column = column(point.t, width)
            if open?.column != column {
                close()
                open = (column, point.t, 0, 0)
            }
            if let value = point.value {
                open!.sum += value
                open!.count += 1
            }
        }
        close()
        return result
    }

    /// One point per column, at the column's last time, combining its values with `combine`.
    static func bucketed(_ points: [(Double, Double)], _ width: Double, _ combine: ([Double]) -> Double) -> [(Double, Double)] {
        var result: [(Double, Double)] = []
        var values: [Double] = []
        var last: (column: Int, t: Double)?
        for (t, value) in points {
            let column = column(t, width)
            if let open = last, open.column != column {
                result.append((open.t, combine(values)))
                values = []
            }
            values.append(value)
            last = (column, t)
        }
        if let open = last, !values.isEmpty { result.append((open.t, combine(values))) }
        return result
    }

    /// Intervals less than a column apart merged into one, labelled with how many it holds.
    static func merged(_ intervals: [Interval], _ width: Double) -> [Interval] {
        var result: [(interval: Interval, count: Int)] = []
        for interval in intervals.sorted(by: { $0.start < $1.start }) {
            if let last = result.last, interval.start - last.interval.end < width {
                result[result.count - 1].interval.end = max(last.interval.end, interval.end)
                result[result.count - 1].count += 1
            } else {
                result.append((interval, 1))
            }
        }
        return result.map { entry in
            var interval = entry.interval
            if entry.count > 1 { interval.label = "\(entry.count) × \(interval.label), too close together to draw apart:" }
            return interval
        }
    }

    /// One marker per column, its label saying how many others it stands for.
    static func markers(_ markers: [(t: Double, label: String)], _ width: Double) -> [(t: Double, label: String)] {
        var result: [(t: Double, label: String, count: Int, column: Int)] = []
        for marker in markers {
            let column = column(marker.t, width)
            if let last = result.last, last.column == column {
                result[result.count - 1].count += 1
            } else {
                result.append((marker.t, marker.label, 1, column))
            }
        }
        return result.map { (t: $0.t, label: $0.count > 1 ? "\($0.label) (and \($0.count - 1) more within \(format3(width)) s)" : $0.label) }
    }

    /// Path spans with, per column, the one that held longest in it; neighbours that look the
    /// same (type, flags) joined.
    static func dominant(_ spans: [PathSpan], _ width: Double) -> [PathSpan] {
        guard let last = spans.last else { return [] }
        var result: [PathSpan] = []
        var index = 0
        let columns = column(last.end, width) + 1
        for columnIndex in 0..<columns {
            let start = Double(columnIndex) * width, end = start + width
            var best: (span: PathSpan, overlap: Double)?
            while index < spans.count, spans[index].end <= start { index += 1 }
            var probe = index
            while probe < spans.count, spans[probe].start < end {
                let overlap = min(end, spans[probe].end) - max(start, spans[probe].start)
                if overlap > (best?.overlap ?? -1) { best = (spans[probe], overlap) }
                probe += 1
            }
            guard var chosen = best?.span else { continue }
            chosen.start = max(start, chosen.start)
            chosen.end = min(end, max(chosen.end, chosen.start))
            if let previous = result.last, previous.satisfied == chosen.satisfied, previous.type == chosen.type,
               previous.interface == chosen.interface, previous.expensive == chosen.expensive, previous.constrained == chosen.constrained,
               previous.ultraConstrained == chosen.ultraConstrained, previous.quality == chosen.quality {
                result[result.count - 1].end = chosen.end
            } else {
                result.append(chosen)
            }
        }
        return result
    }
}
