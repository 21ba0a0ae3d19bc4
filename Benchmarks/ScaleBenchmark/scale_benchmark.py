#!/usr/bin/env python3
"""Scale benchmark: N phones in one `roam run` on the userspace emulator.

Each phone has a Wi-Fi link (20 Mbit/s, 8 ms, 0.1% loss) and a cellular link (10 Mbit/s,
45 ms) to one server, a 2 Mbit/s video stream from it and a 50 KB request every second. For
each N the run is played for DURATION seconds and measured from outside and from its report:

  - CPU: the run's CPU time (user + system, roam and everything it started) per phone and
    per second of scenario;
  - memory: the run's peak resident set, per phone above the one-phone run;
  - delivered against configured: each stream's bytes over what its live source offered
    while it was active (2 s of buffer, then 2 Mbit/s): min and median;
  - stalls: streams that stalled at all, and the longest stall;
  - requests: answered, failed, time to first byte p50 / p95 (the link's round trip is 16 ms);
  - the emulator's own loss: packets a TUN interface refused because the emulator could not
    keep up (the run's note), which should stay 0;
  - fidelity, as the run judged itself (summary.json's `fidelity`): faithful or not, the
    packets' delivery lateness p99 and the timeline's scheduling lateness p99; the table ends
    with the first N at which the run was not faithful (where fidelity breaks on this machine).

    python3 Benchmarks/ScaleBenchmark/scale_benchmark.py [--counts 1,10,50] [--duration 20]
        [--roam .build/release/roam] [--threads N] [--backend userspace|netem] [--quick]

Needs root (or runs rootless like `roam run` does). Writes its scenarios and reports in a
directory of its own under /tmp, removed at the end.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def scenario(phones: int, duration: int) -> str:
    lines = [
        f"name: scale-{phones}",
        f"duration: {duration}s",
        "seed: 5",
        "nodes:",
        "  server: {}",
    ]
    lines += [f"  phone{i}: {{}}" for i in range(1, phones + 1)]
    lines.append("links:")
    for i in range(1, phones + 1):
        lines += [
            f"  - {{ name: wifi{i}, between: [phone{i}, server], type: wifi, delay: 8ms, rate: 20mbit, loss: 0.1% }}",
            f"  - {{ name: cell{i}, between: [phone{i}, server], type: cellular, expensive: true, delay: 45ms, rate: 10mbit }}",
        ]
    lines.append("workloads:")
    for i in range(1, phones + 1):
        lines += [
            f"  - {{ name: video{i}, kind: stream, from: server, to: phone{i}, bitrate: 2mbit }}",
            f"  - {{ name: api{i}, kind: requests, from: server, to: phone{i}, size: 50kb, interval: 1s }}",
        ]
    return "\n".join(lines) + "\n"


def measure(roam: str, directory: str, phones: int, duration: int, threads, backend: str):
    path = os.path.join(directory, f"scale-{phones}.yaml")
    with open(path, "w") as handle:
        handle.write(scenario(phones, duration))
    report = os.path.join(directory, f"report-{phones}")
    command = [roam, "run", path, "--backend", backend, "--quiet", "--report", report]
    if threads:
        command += ["--emulator-threads", str(threads)]
    started = time.monotonic()
    # A fresh process per N: RUSAGE_CHILDREN's peak is the largest child's so far, so each run
    # is measured in a child of its own that reports its own child's figures. It also counts the
    # run's open descriptors every 50 ms (their peak), and reads the soft limit the run raised
    # itself to from 1,024 (the descriptors it reserved: ScenarioRunner.descriptorsNeeded, at
    # least 4,096).
    probe = subprocess.run(
        [sys.executable, "-c", (
            "import os, resource, subprocess, sys, json, time\n"
            "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
            "process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,"
            " preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard)))\n"
            "peak, reserved, errors = 0, None, []\n"
            "import threading\n"
            "reader = threading.Thread(target=lambda: errors.append(process.stderr.read()))\n"
            "reader.start()\n"
            "while process.poll() is None:\n"
            "    try:\n"
            "        peak = max(peak, len(os.listdir(f'/proc/{process.pid}/fd')))\n"
            "        with open(f'/proc/{process.pid}/limits') as limits:\n"
            "            for line in limits:\n"
            "                if line.startswith('Max open files'): reserved = max(reserved or 0, int(line.split()[3]))\n"
            "    except (OSError, ValueError):\n"
            "        pass\n"
            "    time.sleep(0.05)\n"
            "reader.join()\n"
            "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(json.dumps({'status': process.returncode, 'cpu': usage.ru_utime + usage.ru_stime,"
            " 'maxrss': usage.ru_maxrss, 'descriptors': peak, 'reserved': reserved,"
            " 'stderr': b''.join(errors).decode(errors='replace')[-2000:]}))\n"
        )] + command,
        capture_output=True, text=True, timeout=duration * 4 + 300)
    wall = time.monotonic() - started
    if probe.returncode != 0 or not probe.stdout.strip():
        raise SystemExit(f"scale_benchmark: the probe failed for N={phones}: {probe.stderr[-2000:]}")
    outcome = json.loads(probe.stdout.strip().splitlines()[-1])
    try:
        with open(os.path.join(report, "summary.json")) as handle:
            summary = json.load(handle)
    except OSError as error:
        raise SystemExit(f"scale_benchmark: N={phones}: no summary.json (roam exited {outcome['status']}): "
                         f"{error}\n{outcome['stderr']}")
    streams, requests = [], []
    for workload in summary.get("workloads", []):
        if workload.get("kind") == "stream":
            streams.append(workload)
        elif workload.get("kind") == "requests":
            requests.append(workload)
    ratios = []
    for stream in streams:
        # What the live source offered while the stream was active: its 2 s buffer at the
        # start, then the bitrate (250 KB a second).
        active = stream.get("activeSeconds") or 0
        offered = 250_000 * (active + 2)
        ratios.append((stream.get("bytesReceived") or 0) / offered if offered else 0)
    stalled = [s for s in streams if (s.get("stream") or {}).get("stallCount", 0) > 0]
    longest = max([(s.get("stream") or {}).get("longestStallMs") or 0 for s in streams] or [0])
    answered = sum((r.get("requests") or {}).get("succeeded", 0) for r in requests)
    failed = sum((r.get("requests") or {}).get("failed", 0) for r in requests)
    ttfb50 = [((r.get("requests") or {}).get("timeToFirstByteMs") or {}).get("p50") for r in requests]
    ttfb95 = [((r.get("requests") or {}).get("timeToFirstByteMs") or {}).get("p95") for r in requests]
    fidelity = summary.get("fidelity") or {}
    refused = 0
    for note in summary.get("notes", []):
        if "could not keep up" in note:
            refused = int(note.split(": ", 1)[1].split(" ", 1)[0])
    return {
        "phones": phones, "wall": wall, "cpu": outcome["cpu"], "maxrss_mb": outcome["maxrss"] / 1024,
        "status": outcome["status"], "ratio_min": min(ratios or [0]), "ratio_median": statistics.median(ratios or [0]),
        "stalled": len(stalled), "streams": len(streams), "longest_stall_ms": longest,
        "answered": answered, "failed": failed,
        "ttfb50": statistics.median([v for v in ttfb50 if v is not None] or [0]),
        "ttfb95": max([v for v in ttfb95 if v is not None] or [0]),
        "refused": refused, "stderr": outcome["stderr"],
        "descriptors": outcome.get("descriptors"), "reserved": outcome.get("reserved"),
        "faithful": fidelity.get("faithful"),
        "delivery_p99": (fidelity.get("deliveryLatenessMs") or {}).get("p99"),
        "timeline_p99": fidelity.get("timelineP99Ms"),
    }


def milliseconds(value):
    return "-" if value is None else f"{value:.3f} ms" if value < 1 else f"{value:.1f} ms"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="1,10,50")
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--roam", default=os.environ.get("ROAM_BINARY", ".build/release/roam"))
    parser.add_argument("--threads", type=int)
    parser.add_argument("--backend", default="userspace", choices=["userspace", "netem"],
                        help="netem needs a kernel with sch_netem: scripts/vm.sh -- python3 ... --backend netem")
    parser.add_argument("--quick", action="store_true", help="N = 2 for 5 s: checks that it runs")
    arguments = parser.parse_args()
    counts = [2] if arguments.quick else [int(part) for part in arguments.counts.split(",")]
    duration = 5 if arguments.quick else arguments.duration
    if duration < 5 or any(count < 1 or count > 1000 for count in counts):
        raise SystemExit("scale_benchmark: counts in 1...1000 (a run has at most 1,022 nodes) and a duration of at least 5 s")
    if not os.access(arguments.roam, os.X_OK):
        raise SystemExit(f"scale_benchmark: no roam binary at {arguments.roam} (swift build -c release --product roam)")
    directory = tempfile.mkdtemp(prefix="roam-scale-")
    try:
        results = [measure(arguments.roam, directory, count, duration, arguments.threads, arguments.backend) for count in counts]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    base = results[0]
    print(f"{os.cpu_count()} cores; each phone: Wi-Fi 20 Mbit/s 8 ms 0.1% loss, cellular 10 Mbit/s 45 ms, "
          f"a 2 Mbit/s stream and a 50 KB request a second; {duration} s each; {arguments.backend} backend")
    print()
    print("| phones | links | CPU per phone | memory | per phone above 1 | stream delivered / offered (min, median) "
          "| streams that stalled | longest stall | requests answered / failed | TTFB p50 / p95 | refused by TUN "
          "| faithful | delivery lateness p99 | timeline p99 | descriptors, peak (per phone) / reserved |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        extra = (result["maxrss_mb"] - base["maxrss_mb"]) / max(1, result["phones"] - base["phones"]) if result is not base else 0
        print(f"| {result['phones']} | {2 * result['phones']} | {100 * result['cpu'] / result['phones'] / duration:.1f}% of a core "
              f"| {result['maxrss_mb']:.0f} MB | {extra:.2f} MB | {result['ratio_min']:.2f}, {result['ratio_median']:.2f} "
              f"| {result['stalled']} of {result['streams']} | {result['longest_stall_ms']:.0f} ms "
              f"| {result['answered']} / {result['failed']} | {result['ttfb50']:.0f} / {result['ttfb95']:.0f} ms | {result['refused']} "
              f"| {'yes' if result['faithful'] else 'no' if result['faithful'] is not None else '?'} "
              f"| {milliseconds(result['delivery_p99'])} | {milliseconds(result['timeline_p99'])} "
              f"| {result['descriptors']} ({result['descriptors'] / result['phones']:.1f}) / {result['reserved']} |")
    broken = next((r["phones"] for r in results if r["faithful"] is False), None)
    print()
    print(f"fidelity breaks at {broken} phones" if broken else f"faithful at every count measured (up to {results[-1]['phones']} phones)")
    failures = [r for r in results if r["status"] not in (0, 1)]
    if failures:
        for failure in failures:
            print(f"N={failure['phones']}: roam exited {failure['status']}: {failure['stderr']}", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
