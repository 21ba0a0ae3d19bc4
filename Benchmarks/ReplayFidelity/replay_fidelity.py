#!/usr/bin/env python3
"""Replay fidelity: a recorded drive played back, and what a TCP download over it received.

A G-NetTrack Pro log (default: the vendored excerpt of Raca et al.'s 5G dataset) is imported
with `roam import gnettrack`; a bulk download from the server to the phone is added, started
before the recording so that it is running when the recording begins; the scenario is run on
each backend asked for. Each second the download's received throughput (the run's own samples)
is set beside the rate the recording said the link carried then, which is what the link plays:
the reference is the recording itself (mahimahi's mm-link, the usual reference, is in neither
Debian nor PyPI). Seconds the recording has at zero (the link passing nothing) are counted
apart: what arrived then is what was in flight.

    replay_fidelity.py --roam BIN [--backend userspace] [--backend netem] [--log FILE] [--out DIR]
    replay_fidelity.py --roam BIN --mahimahi [--backend ...] [--trace-down FILE --trace-up FILE] [--out DIR]

--backend netem runs on this kernel if it has sch_netem, else inside scripts/vm.sh (several
times slower; said in the output).

--mahimahi: a mahimahi trace pair (default: the vendored first minute of mahimahi's own
Verizon-LTE-short) on a link of 20 ms each way, with a bulk TCP download and, beside it, a small
request every 100 ms (100 bytes each way) whose time to first byte is the round trip through the
download's queue. The userspace emulator plays each delivery opportunity (mahimahi's model: one
1500-byte packet may leave at each listed millisecond; 1,000 packets of queue, as here); netem
plays the trace's rate stepped every 100 ms. Each second's received throughput is set beside
the trace's capacity in that second, and the probes' round trips are given as percentiles.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START = 3  # where the recording's first second falls in the scenario


def played_rates(yaml_text, link="cell"):
    """The downlink's rate (bit/s, 0 when passing nothing) in each second of the scenario."""
    duration = int(re.search(r"^duration: (\d+)ms", yaml_text, re.M).group(1)) // 1000
    line = re.search(r"^  - \{name: %s,.*down: \{rate: (\d+)(k?)bit, delay: [^,]+, loss: ([\d.]+)%%\}\}" % link, yaml_text, re.M)
    rate = int(line.group(1)) * (1000 if line.group(2) else 1)
    loss = float(line.group(3))
    changes = {}
    for m in re.finditer(r"\{at: (\d+)ms, link: %s, direction: down, set: \{([^}]*)\}\}" % link, yaml_text):
        changes[int(m.group(1)) // 1000] = m.group(2)
    rates = []
    for second in range(duration):
        if second in changes:
            for key, value in (part.split(": ") for part in changes[second].split(", ")):
                if key == "rate":
                    rate = int(value.rstrip("kbit").rstrip("bit")) * (1000 if value.endswith("kbit") else 1)
                elif key == "loss":
                    loss = float(value.rstrip("%"))
        rates.append(0 if loss >= 100 else rate)
    return rates


def recorded_pings(path):
    """The log's pings: (seconds from its first row, PINGAVG, PINGMIN) in ms, as G-NetTrack wrote them."""
    import csv
    import datetime
    pings, first = [], None
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            at = datetime.datetime.strptime(row["Timestamp"], "%Y.%m.%d_%H.%M.%S")
            first = first or at
            if row.get("PINGAVG", "-") not in ("-", ""):
                least = row.get("PINGMIN", "-")
                pings.append(((at - first).total_seconds(), float(row["PINGAVG"]), float(least) if least not in ("-", "") else float("nan")))
    return pings


def probe_round_trips(report):
    """The probe requests' times to first byte (ms) by the second they were sent in (a request's
    event is written when it completes); and how many were sent and answered."""
    by_second, answered, sent = {}, 0, 0
    with open(os.path.join(report, "timeline.jsonl")) as timeline:
        for line in timeline:
            event = json.loads(line)
            if event.get("type") == "request" and event.get("workload") == "probe":
                sent += 1
                if event.get("ok"):
                    answered += 1
                    by_second.setdefault(int(event["t"] - event["completionMs"] / 1000), []).append(event["ttfbMs"])
    return by_second, answered, sent


def trace_capacity(path, seconds):
    """Bits the trace can carry in each second from its start, repeating from its last millisecond."""
    opportunities = [int(line) for line in open(path) if line.strip()]
    period = opportunities[-1]
    capacity = [0] * seconds
    for cycle in range(seconds * 1000 // period + 1):
        for millisecond in opportunities:
            second = (cycle * period + millisecond) // 1000
            if second < seconds:
                capacity[second] += 1500 * 8
    return capacity


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def mahimahi(options, backends, out):
    import shutil
    for path in (options.trace_down, options.trace_up):
        shutil.copy(path, out)
    down, up = os.path.basename(options.trace_down), os.path.basename(options.trace_up)
    seconds = 63
    scenario = os.path.join(out, "mahimahi.yaml")
    with open(scenario, "w") as f:
        f.write("name: replay-mahimahi\nseed: 1\nduration: %ds\nnodes: {phone: {}, server: {}}\n" % seconds)
        f.write("links:\n  - {name: cell, between: [phone, server], type: cellular, delay: 20ms, up: {trace: %s}, down: {trace: %s}}\n" % (up, down))
        f.write("workloads:\n  - {name: download, kind: bulk, from: server, to: phone, start: 1s}\n")
        f.write("  - {name: probe, kind: requests, from: server, to: phone, requestSize: 100b, size: 100b, interval: 100ms, timeout: 20s, start: 1s}\n")
    capacity = trace_capacity(options.trace_down, seconds)
    print("replay fidelity, mahimahi: %s (down) and %s (up), 20 ms each way; a bulk TCP download from 1 s, and a 100-byte request every 100 ms beside it"
          % (down, up))
    print("seconds compared: 3 to %d (the download under way), received against the trace's capacity in that second" % (seconds - 1))
    print()
    print("| backend | received / capacity, median (p10-p90) | total received / capacity | probe round trip p50 / p90 / p99 (ms) | probes answered |")
    print("|---|---|---|---|---|")
    for backend in backends:
        report = os.path.join(out, "mahimahi-" + backend)
        where, samples = run(options.roam, backend, scenario, report)
        ratios, received, offered = [], 0.0, 0.0
        for second in range(3, seconds - 1):
            got = samples.get(second + 1)
            if got is None or capacity[second] == 0:
                continue
            ratios.append(got / capacity[second])
            received += got
            offered += capacity[second]
        by_second, answered, sent = probe_round_trips(report)
        probes = [rtt for rtts in by_second.values() for rtt in rtts]
        deciles = statistics.quantiles(ratios, n=10) if len(ratios) >= 2 else [float("nan")] * 9
        print("| %s | %.2f (%.2f-%.2f) | %.2f | %.0f / %.0f / %.0f | %d of %d |" % (
            where, statistics.median(ratios) if ratios else float("nan"), deciles[0], deciles[-1], received / offered if offered else 0,
            percentile(probes, 0.5), percentile(probes, 0.9), percentile(probes, 0.99), answered, sent))
    print()
    print("reports: " + out)


def run(roam, backend, scenario, report):
    command = [roam, "run", scenario, "--backend", backend, "--quiet", "--report", report]
    if backend == "netem" and not os.path.isdir("/sys/module/sch_netem") and subprocess.run(["modprobe", "-q", "sch_netem"]).returncode != 0:
        os.makedirs(report, exist_ok=True)
        command = [os.path.join(ROOT, "scripts/vm.sh"), "--rwdir", os.path.dirname(report), "--"] + command
        where = "netem (in the VM: Debian's 6.1 kernel under QEMU without KVM, several times slower than the host)"
    else:
        where = backend + " (this machine)"
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if result.returncode not in (0, 1):
        sys.exit("replay-fidelity: %s run failed (%d):\n%s%s" % (backend, result.returncode, result.stdout, result.stderr))
    samples = {}
    with open(os.path.join(report, "timeline.jsonl")) as timeline:
        for line in timeline:
            event = json.loads(line)
            if event.get("type") == "sample" and event.get("workload") == "download":
                samples[round(event["t"])] = event.get("throughputBps", 0)
    return where, samples


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--roam", required=True)
    parser.add_argument("--backend", action="append", choices=["userspace", "netem"])
    parser.add_argument("--log", default=os.path.join(ROOT, "Tests/Fixtures/traces/gnettrack/download-driving-start.csv"))
    parser.add_argument("--out")
    parser.add_argument("--mahimahi", action="store_true")
    fixtures = os.path.join(ROOT, "Tests/Fixtures/traces/mahimahi")
    parser.add_argument("--trace-down", default=os.path.join(fixtures, "Verizon-LTE-short-60s.down"))
    parser.add_argument("--trace-up", default=os.path.join(fixtures, "Verizon-LTE-short-60s.up"))
    options = parser.parse_args()
    backends = options.backend or ["userspace"]
    out = options.out or tempfile.mkdtemp(prefix="roam-replay-fidelity-")
    os.makedirs(out, exist_ok=True)
    if options.mahimahi:
        mahimahi(options, backends, out)
        return
    scenario = os.path.join(out, "replay.yaml")
    imported = subprocess.run([options.roam, "import", "gnettrack", options.log, "--name", "replay", "--start", "%ds" % START, "-o", scenario],
                              capture_output=True, text=True)
    if imported.returncode != 0:
        sys.exit("replay-fidelity: import failed: " + imported.stderr)
    text = open(scenario).read()
    rates = played_rates(text)
    with open(scenario, "a") as f:
        f.write("workloads:\n  - {name: download, kind: bulk, from: server, to: phone, size: 1gb, start: 1s}\n")
        # As the phone's pings were taken while its app downloaded: a small request beside the
        # download, whose time to first byte is the round trip through the download's queue.
        f.write("  - {name: probe, kind: requests, from: server, to: phone, requestSize: 100b, size: 100b, interval: 250ms, timeout: 20s, start: 1s}\n")
    pings = recorded_pings(options.log)
    print("replay fidelity: %s, %d s recorded, played from %d s; a bulk TCP download over it, and a 100-byte request every 250 ms beside it"
          % (os.path.basename(options.log), len(rates) - START, START))
    print("seconds compared: the link carried at least 1 Mbit/s in the second and in the one before (a step up takes TCP a round trip or more)")
    print()
    print("| backend | seconds | received / recorded, median (p10-p90) | total received / recorded | received in the %s seconds at zero |" % sum(1 for r in rates[START:] if r == 0))
    print("|---|---|---|---|---|")
    round_trips = []
    for backend in backends:
        where, samples = run(options.roam, backend, scenario, os.path.join(out, backend))
        by_second, answered, sent = probe_round_trips(os.path.join(out, backend))
        round_trips.append((where, by_second, answered, sent))
        ratios, received, recorded, at_zero = [], 0.0, 0.0, 0.0
        for second in range(START, len(rates)):
            got = samples.get(second + 1)
            if got is None:
                continue
            if rates[second] == 0:
                at_zero += got / 8
                continue
            received += got
            recorded += rates[second]
            if rates[second] >= 1e6 and rates[second - 1] >= 1e6:
                ratios.append(got / rates[second])
        if not ratios:
            print("| %s | 0 | - | - | - |" % where)
            continue
        deciles = statistics.quantiles(ratios, n=10) if len(ratios) >= 2 else [ratios[0]] * 9
        print("| %s | %d | %.2f (%.2f-%.2f) | %.2f | %d bytes |" % (where, len(ratios), statistics.median(ratios), deciles[0], deciles[-1],
                                                                  received / recorded if recorded else 0, at_zero))
    # Round trips: each recorded ping (taken while the phone's app downloaded) beside the
    # replayed probes sent in the same second and the next (the ping is logged at a
    # second's resolution).
    print()
    print("round trips under the download: each recorded ping (PINGAVG, its least PINGMIN) beside the median of the replay's probes sent in its second and the next")
    print()
    print("| backend | ping at | link then | recorded PINGAVG / PINGMIN (ms) | replayed probes, median (ms) | replayed / PINGAVG |")
    print("|---|---|---|---|---|---|")
    for where, by_second, answered, sent in round_trips:
        for at, mean, least in pings:
            second = START + int(at)
            replayed = by_second.get(second, []) + by_second.get(second + 1, [])
            rate = rates[second] if second < len(rates) else 0
            median = statistics.median(replayed) if replayed else float("nan")
            print("| %s | %d s | %s | %.0f / %.0f | %s | %s |" % (
                where, second, "%.2f Mbit/s" % (rate / 1e6) if rate else "passing nothing", mean, least,
                "%.0f (%d probes)" % (median, len(replayed)) if replayed else "none sent", "%.2f" % (median / mean) if replayed else "-"))
        # Every probe sent in a second the throughput is compared in (the link carried 1 Mbit/s
        # or more in it and the one before), beside the median of every recorded ping.
        compared = [rtt for second in range(START, len(rates)) if rates[second] >= 1e6 and rates[second - 1] >= 1e6
                    for rtt in by_second.get(second, [])]
        recorded = statistics.median(mean for _, mean, _ in pings) if pings else float("nan")
        print("| %s | the seconds compared above | 1 Mbit/s or more | %.0f (the pings' median) | %s; p90 %.0f; %d of %d probes answered in all | %s |" % (
            where, recorded, "%.0f (%d probes)" % (statistics.median(compared), len(compared)) if compared else "none sent",
            percentile(compared, 0.9), answered, sent, "%.2f" % (statistics.median(compared) / recorded) if compared else "-"))
    print()
    print("reports: " + out)


if __name__ == "__main__":
    main()
