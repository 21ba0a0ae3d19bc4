extension Scenario {
    /// The same story played `factor` times as fast (0 < factor ≤ 1 shortens it): the duration,
    /// every event time, ramp span and flap period and end, every workload's start, stop and
    /// request interval, a captive portal's session length, a cellular radio's tail and paging
    /// cycle (its timers on the scenario's clock) and the time a connectivity expectation names
    /// (`at:`) are scaled. What a user perceives is not: delays, a radio's promotion, rates,
    /// stream buffers, timeouts and expectation limits keep their values. For shortened runs in
    /// tests and CI.
    public func timeScaled(by factor: Double) -> Scenario {
        guard factor > 0, factor != 1 else { return self }
        func scale(_ duration: Duration) -> Duration { duration * factor }
        var scaled = self
        scaled.duration = scale(duration)
        scaled.timeline = timeline.map { event in
            var event = event
            event.at = scale(event.at)
            switch event.action {
            case let .ramp(target, over): event.action = .ramp(to: target, over: scale(over))
            case let .flap(period, duty, until): event.action = .flap(period: scale(period), duty: duty, until: scale(until))
            default: break
            }
            return event
        }
        scaled.proxyEvents = proxyEvents.map { event in
            var event = event
            event.at = scale(event.at)
            return event
        }
        scaled.workloads = workloads.map { workload in
            var workload = workload
            workload.start = scale(workload.start)
            workload.stop = workload.stop.map(scale)
            if case let .requests(requestSize, responseSize, interval, count) = workload.kind {
                workload.kind = .requests(requestSize: requestSize, responseSize: responseSize, interval: scale(interval), count: count)
            }
            return workload
        }
        scaled.links = links.map { link in
            var link = link
            if var radio = link.radio {
                radio.tail = max(RadioStates.tailRange.lowerBound, scale(radio.tail))
                radio.pagingCycle = scale(radio.pagingCycle)
                link.radio = radio
            }
            return link
        }
        scaled.networks = networks.map { network in
            var network = network
            if var portal = network.portal {
                portal.expires = portal.expires.map(scale)
                network.portal = portal
            }
            return network
        }
        scaled.expectations = expectations.map { expectation in
            var expectation = expectation
            if case .connectivity(var wanted) = expectation.check, case .at(let time) = wanted.timing {
                wanted.timing = .at(scale(time))
                expectation.check = .connectivity(wanted)
            }
            return expectation
        }
        return scaled
    }
}
