import RoamReport
import RoamSystem

/// How a run's end is written, for `roam run` and `roam attach` alike: the run's last event in
/// its timeline, then `summary.json` and, when the timeline is small enough to be drawn from,
/// `report.html` (a longer one keeps every verdict and event, and the report says why it has no
/// page rather than the run failing at its end).
enum ReportWriter {
    static func write(_ report: inout RunReport, log: RunLog, to directory: SecureDirectory, started: String, timeScale: Double,
                      renderedTimelineLimit: Int) throws(SimulatorError) {
        log.record(.run(report.cancelled ? .cancelled(passed: report.passed) : .ended(passed: report.passed)))
        let undrawable = log.undrawable(limit: renderedTimelineLimit)
        report.wroteHTML = undrawable == nil
        if let undrawable { report.notes.append(undrawable) }
        do throws(SafePathError) {
            try directory.replaceFile(named: "summary.json",
                                      contents: (report.summary(started: started, timeScale: timeScale, events: log.eventCount).json.serialized + "\n").utf8,
                                      mode: RunReportFiles.mode)
        } catch {
            throw SimulatorError(error)
        }
        do {
            if undrawable == nil { try HTMLReport.write(to: directory) }
        } catch {
            throw SimulatorError(.environment, "cannot write the run's HTML report: \(error.message)")
        }
    }
}

/// The clock `roam run` and `roam attach` play a scenario by, from its log's start: wakes at
/// every sample and at whatever the caller's next moment is, ends at the scenario's end or,
/// held (`--hold`), when stopped, after marking once in the timeline that it is over.
struct PlayClock {
    let log: RunLog
    let duration: Duration
    let sampleInterval: Duration
    let hold: Bool
    /// The mark recorded once when a held run passes its timeline's end.
    let heldMark: String
    let stop: EventSignal

    /// Calls `tick` at each wake with the time and whether a sample is due (every
    /// `sampleInterval`, and at the end), until the end or ``stop``. `nextMoment`: the caller's
    /// next moment to be woken at, before the next sample (a workload's stop), or nil.
    func run(nextMoment: () -> MonotonicInstant?, tick: (_ now: MonotonicInstant, _ sampleDue: Bool) -> Void) {
        let scenarioEnd = log.start + duration
        // Held open: the network stays until the run is stopped (checked once a day of waiting).
        let end = hold ? MonotonicInstant.now + .seconds(100 * 365 * 86_400) : scenarioEnd
        var held = false
        var nextSample = log.start + sampleInterval
        while true {
            guard stop.wait(until: min(nextSample, nextMoment() ?? end, end)) else { break }
            let now = MonotonicInstant.now
            if hold, !held, now >= scenarioEnd {
                held = true
                log.record(.mark(text: heldMark, node: nil))
            }
            let sampleDue = now >= nextSample || now >= end
            tick(now, sampleDue)
            if sampleDue {
                while nextSample <= now { nextSample = nextSample + sampleInterval }
            }
            if now >= end { break }
        }
    }
}
