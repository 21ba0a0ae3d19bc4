#!/usr/bin/env python3
"""Flagship benchmark: `scenarios/walk-out-of-home.yaml` played RUNS times for each way of keeping
the flow (`--multipath`), on one backend, one run after another: how often the stream survives
the walk out of Wi-Fi range without a playout stall over 2 s (the scenario's expectation), and
how many handovers it took.

For each mode it prints every run's longest stall, handovers, connections and whether every
expectation held, then the tally: runs that passed, the worst stall, handovers (min, median,
max). The reference is the scenario's own bound: no stall over 2 s, in every run.

    python3 Benchmarks/FlagshipBenchmark/flagship_benchmark.py [--runs 20] [--backend userspace]
        [--modes auto,mptcp,application] [--roam PATH] [--keep DIR [--keep-all]] [--quick]

The netem backend needs a kernel with sch_netem; on one without, run it in the VM:

    scripts/vm.sh --rwdir /tmp -- python3 Benchmarks/FlagshipBenchmark/flagship_benchmark.py --backend netem

Needs root. Writes its reports in a directory of its own under /tmp, removed at the end, or in
--keep DIR (a new directory it makes; the reports of runs that failed stay there, and with
--keep-all every run's, to read why a run that passed took more handovers or connections). Exit
status 0 when every run of every mode passed, 1 when one did not, 2 for bad arguments.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = ("auto", "mptcp", "mptcp-userspace", "application")


def play(roam, scenario, report, backend, mode):
    result = subprocess.run([roam, "run", scenario, "--backend", backend, "--multipath", mode, "--quiet", "--report", report],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    try:
        with open(os.path.join(report, "summary.json")) as file:
            summary = json.load(file)
    except (OSError, ValueError):
        return {"exit": result.returncode, "error": result.stdout.strip()[-400:]}
    video = next(w for w in summary["workloads"] if w["name"] == "video")
    stream = video.get("stream") or {}
    return {
        "exit": result.returncode,
        "multipath": summary.get("multipath", mode),
        "passed": all(e["passed"] for e in summary["expectations"]),
        "longestStall": (stream.get("longestStallMs") or 0) / 1000,
        "stalls": stream.get("stallCount", 0),
        "handovers": video.get("handovers", 0),
        "connections": video.get("connections", 0),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per mode (1 to 1000; default 20)")
    parser.add_argument("--backend", default="userspace", choices=("userspace", "netem"))
    parser.add_argument("--modes", default="auto,mptcp,application", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--roam", default=os.environ.get("ROAM_BINARY", os.path.join(ROOT, ".build", "debug", "roam")))
    parser.add_argument("--keep", help="make this directory and keep the reports of failed runs there")
    parser.add_argument("--keep-all", action="store_true", help="with --keep: keep every run's report, passed or not")
    parser.add_argument("--quick", action="store_true", help="2 runs of auto only, to check that it still runs")
    args = parser.parse_args()
    modes = ["auto"] if args.quick else [m for m in args.modes.split(",") if m]
    runs = 2 if args.quick else args.runs
    if not 1 <= runs <= 1000:
        parser.error("--runs must be between 1 and 1000")
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes: unknown {', '.join(unknown) or 'nothing given'}; the modes are {', '.join(MODES)}")
    if args.keep_all and not args.keep:
        parser.error("--keep-all needs --keep DIR (where the reports go)")
    if not os.access(args.roam, os.X_OK):
        parser.error(f"no roam at {args.roam}: build it (swift build) or pass --roam")
    scenario = os.path.join(ROOT, "scenarios", "walk-out-of-home.yaml")
    if args.keep:
        try:
            os.mkdir(args.keep, 0o700)
        except OSError as error:
            parser.error(f"--keep {args.keep}: {error.strerror} (give a directory that does not exist yet)")
    directory = args.keep or tempfile.mkdtemp(prefix="roam-flagship-")
    everything_passed = True
    try:
        kernel = os.uname().release
        print(f"walk-out-of-home, {runs} runs per mode, backend {args.backend}, kernel {kernel}")
        print(f"{'mode':<16} {'run':>4} {'exit':>4} {'longest stall':>14} {'handovers':>9} {'connections':>11}  passed")
        for mode in modes:
            results = []
            for run in range(1, runs + 1):
                result = play(args.roam, scenario, os.path.join(directory, f"{mode}-{run}"), args.backend, mode)
                results.append(result)
                if args.keep and not args.keep_all and result.get("passed"):
                    shutil.rmtree(os.path.join(directory, f"{mode}-{run}"), ignore_errors=True)
                if "error" in result:
                    print(f"{mode:<16} {run:>4} {result['exit']:>4}  no report: {result['error']}")
                    continue
                print(f"{mode:<16} {run:>4} {result['exit']:>4} {result['longestStall']:>12.2f} s {result['handovers']:>9} "
                      f"{result['connections']:>11}  {'yes' if result['passed'] else 'NO'} ({result['multipath']})", flush=True)
            played = [r for r in results if "error" not in r]
            passed = sum(1 for r in played if r["passed"])
            everything_passed = everything_passed and passed == runs
            if played:
                handovers = sorted(r["handovers"] for r in played)
                print(f"== {mode}: {passed} of {runs} passed (no stall over 2 s); worst stall {max(r['longestStall'] for r in played):.2f} s; "
                      f"handovers min {handovers[0]}, median {statistics.median(handovers):g}, max {handovers[-1]}")
            else:
                print(f"== {mode}: no run produced a report")
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    return 0 if everything_passed else 1


if __name__ == "__main__":
    sys.exit(main())
