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

--backend netem runs on this kernel if it has sch_netem, else inside scripts/vm.sh (several
times slower; said in the output).
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
    options = parser.parse_args()
    backends = options.backend or ["userspace"]
    out = options.out or tempfile.mkdtemp(prefix="roam-replay-fidelity-")
    os.makedirs(out, exist_ok=True)
    scenario = os.path.join(out, "replay.yaml")
    imported = subprocess.run([options.roam, "import", "gnettrack", options.log, "--name", "replay", "--start", "%ds" % START, "-o", scenario],
                              capture_output=True, text=True)
    if imported.returncode != 0:
        sys.exit("replay-fidelity: import failed: " + imported.stderr)
    text = open(scenario).read()
    rates = played_rates(text)
    with open(scenario, "a") as f:
        f.write("workloads:\n  - {name: download, kind: bulk, from: server, to: phone, size: 1gb, start: 1s}\n")
    print("replay fidelity: %s, %d s recorded, played from %d s; a bulk TCP download over it" % (os.path.basename(options.log), len(rates) - START, START))
    print("seconds compared: the link carried at least 1 Mbit/s in the second and in the one before (a step up takes TCP a round trip or more)")
    print()
    print("| backend | seconds | received / recorded, median (p10-p90) | total received / recorded | received in the %s seconds at zero |" % sum(1 for r in rates[START:] if r == 0))
    print("|---|---|---|---|---|")
    for backend in backends:
        where, samples = run(options.roam, backend, scenario, os.path.join(out, backend))
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
    print()
    print("reports: " + out)


if __name__ == "__main__":
    main()
