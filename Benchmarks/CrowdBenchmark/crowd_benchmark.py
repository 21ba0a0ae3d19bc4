#!/usr/bin/env python3
"""Crowd benchmark: N phones wandering (random waypoint) under access points and a cell site,
every one downloading through one FQ-CoDel bottleneck, in one `roam run` on the userspace
emulator, as `scenarios/crowd.yaml` with N phones.

A network has at most 40 members, so the phones are split into groups of at most 34, each with a
Wi-Fi network of its own (two access points, at the same places for every group) and an LTE
network (one cell site); the bottleneck is the server's link, 0.8 Mbit/s a phone. For each N the
run is played for DURATION seconds and measured from outside (CPU time and peak memory of the
run and everything it started) and from its report:

  - CPU per phone, memory per phone;
  - Jain's fairness index of the downloads' throughputs, the least and the most, and their sum
    against the bottleneck;
  - roams and network changes the movement derived (the report's map);
  - packets the emulator itself lost (a TUN interface refused them: it could not keep up).

    python3 Benchmarks/CrowdBenchmark/crowd_benchmark.py [--phones 30,100] [--duration 60] [--roam PATH] [--quick]

Needs root. Writes its scenarios and reports in a directory of its own under /tmp, removed at
the end.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time


def scenario(phones: int, duration: int) -> str:
    names = [f"p{i:03d}" for i in range(1, phones + 1)]
    groups = [names[i:i + 34] for i in range(0, phones, 34)]
    lines = [f"name: crowd-{phones}", f"duration: {duration}s", "seed: 7", "nodes:"]
    lines += [f"  {name}: {{}}" for name in names] + ["  cdn: {internet: true}", "networks:"]
    for index, group in enumerate(groups):
        lines.append(f"  - {{name: office{index}, type: wifi, profile: home-wifi, members: [{', '.join(group)}]}}")
        lines.append(f"  - {{name: lte{index}, type: cellular, profile: lte, members: [{', '.join(group)}]}}")
    lines += ["mobility:", "  step: 1s", "  accessPoints:"]
    for index in range(len(groups)):
        lines.append(f"    - {{name: north{index}, network: office{index}, at: [15, 14]}}")
        lines.append(f"    - {{name: south{index}, network: office{index}, at: [45, 2]}}")
    lines.append("  cells:")
    for index in range(len(groups)):
        lines.append(f"    - {{name: tower{index}, network: lte{index}, at: [250, 180]}}")
    lines += ["  obstacles:", "    - {name: meeting-room, from: [52, 10], to: [60, 16], attenuation: 15dB}", "  phones:"]
    lines += [f"    {name}: {{randomWaypoint: {{area: [[0, 0], [60, 16]], speed: [0.5, 1.5], pause: [0s, 10s]}}}}" for name in names]
    lines += ["timeline:", f"  - {{at: 0s, link: cdn.internet, set: {{rate: {0.8 * phones:.1f}mbit, queue: fq-codel}}}}", "workloads:"]
    lines += [f"  - {{name: dl-{name}, kind: bulk, from: cdn, to: {name}, mode: handover}}" for name in names]
    return "\n".join(lines) + "\n"


def measure(roam, directory, phones, duration):
    path = os.path.join(directory, f"crowd-{phones}.yaml")
    with open(path, "w") as file:
        file.write(scenario(phones, duration))
    report = os.path.join(directory, f"crowd-{phones}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    result = subprocess.run(["/usr/bin/time", "-f", "%M", roam, "run", path, "--backend", "userspace", "--quiet", "--report", report],
                            capture_output=True, text=True, timeout=duration * 6 + 300)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode not in (0, 1):
        sys.exit(f"crowd benchmark: {phones} phones: roam run exited {result.returncode}: {result.stderr.strip()[-2000:]}")
    peak_kb = int(result.stderr.strip().splitlines()[-1])
    with open(os.path.join(report, "summary.json")) as file:
        summary = json.load(file)
    rates = [w.get("throughputBps") or 0 for w in summary["workloads"] if w.get("kind") == "bulk"]
    fairness = sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates)) if rates and any(rates) else 0
    refused = 0
    for note in summary.get("notes", []):
        if "could not keep up" in note:
            refused = int(note.split(": ", 1)[1].split(" ", 1)[0])
    roams = handovers = 0
    for track in (summary.get("map") or {}).get("tracks", []):
        points = track["points"]
        for a, b in zip(points, points[1:]):
            if a[4] and b[4] and a[4] != b[4]:
                if a[3] == b[3]:
                    roams += 1
                else:
                    handovers += 1
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu / wall / phones, "peak": peak_kb / 1024, "fairness": fairness, "min": min(rates) / 1e6, "max": max(rates) / 1e6,
            "sum": sum(rates) / (0.8e6 * phones), "roams": roams, "handovers": handovers, "refused": refused,
            "passed": summary["passed"], "wall": wall}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phones", default="30,100")
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--roam", default=os.environ.get("ROAM_BINARY", ".build/release/roam"))
    parser.add_argument("--quick", action="store_true", help="10 phones for 15 s: that it runs, not figures")
    options = parser.parse_args()
    if options.quick:
        options.phones, options.duration = "10", 15
    directory = tempfile.mkdtemp(prefix="roam-crowd-benchmark-")
    try:
        print(f"Crowd benchmark: phones wandering under access points, one FQ-CoDel bottleneck of 0.8 Mbit/s a phone, "
              f"{options.duration} s, userspace emulator")
        print(f"{'phones':>7} {'CPU/phone':>10} {'peak MB':>8} {'MB/phone':>9} {'Jain':>6} {'min..max Mbit/s':>16} {'of bottleneck':>14} "
              f"{'roams':>6} {'changes':>8} {'refused':>8}")
        for phones in [int(n) for n in options.phones.split(",")]:
            f = measure(options.roam, directory, phones, options.duration)
            print(f"{phones:>7} {f['cpu']:>9.1%} {f['peak']:>8.0f} {f['peak'] / phones:>9.2f} {f['fairness']:>6.3f} "
                  f"{f['min']:>7.2f}..{f['max']:<7.2f} {f['sum']:>13.0%} {f['roams']:>6} {f['handovers']:>8} {f['refused']:>8}", flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
