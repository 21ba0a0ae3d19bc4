#!/usr/bin/env python3
"""Queue benchmark: latency under load behind a bottleneck, drop-tail against CoDel and FQ-CoDel.

One link (20 ms each way, RATE, a buffer of one second at the rate in packets) carries a bulk
download (TCP with CUBIC, the loss-based congestion control that fills buffers; from 2 s) while
the phone pings the server every 50 ms; the echo replies queue behind the download. (Roam's own
bulk workload uses the system's default congestion control, BBR on some machines, which keeps
its own queue short and would hide what the queue does.) For each rate, discipline and backend the run is
played for DURATION seconds and measured:

  - queueing delay: each echo's round trip minus the link's 40 ms, p50 / p95 / p99, over the
    echoes sent after the download's first 5 s (its slow start over);
  - the download's mean throughput against the rate;
  - packets dropped by the queue's AQM and by its limit (the report's counters; userspace).

The userspace backend is Roam's emulator (its own CoDel and FQ-CoDel); the netem backend is the
kernel's tbf with codel or fq_codel grafted under it, the reference. Run the netem backend
where the kernel has sch_netem and sch_codel (this machine's kernel does not):

    python3 Benchmarks/QueueBenchmark/queue_benchmark.py [--rates 1,10,50] [--duration 20]
        [--disciplines drop-tail,codel,fq-codel] [--backends userspace,netem] [--roam PATH] [--quick]
    scripts/vm.sh -- python3 Benchmarks/QueueBenchmark/queue_benchmark.py --backends userspace,netem

Needs root. Writes its scenarios and reports in a directory of its own under /tmp, removed at
the end.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile


# A TCP sender with CUBIC (server) and a reader that prints what it received (phone).
PEER = r"""
import signal, socket, sys
if sys.argv[1] == "send":
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")
    listener.bind(("0.0.0.0", 5201))
    listener.listen()
    connection, _ = listener.accept()
    block = bytes(65536)
    try:
        while True:
            connection.sendall(block)
    except OSError:
        pass
else:
    received = 0
    def report(*_):
        print(received, flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, report)
    connection = socket.create_connection((sys.argv[2], 5201))
    while True:
        data = connection.recv(1 << 20)
        if not data:
            report()
        received += len(data)
"""


def scenario(rate: int, discipline: str, duration: int, peer: str) -> str:
    # One second of buffer at the rate, in full-size packets (at least 64): bufferbloat for
    # drop-tail, the hard limit behind CoDel.
    limit = max(64, rate * 1_000_000 // 8 // 1514)
    return "\n".join([
        f"name: queue-{discipline}-{rate}",
        f"duration: {duration}s",
        "seed: 3",
        "nodes: {phone: {}, server: {}}",
        "links:",
        f"  - {{name: lte, between: [phone, server], type: cellular, delay: 20ms, rate: {rate}mbit, limit: {limit}, queue: {discipline}}}",
        "workloads:",
        f"  - {{name: sender, kind: command, from: server, run: [python3, {peer}, send]}}",
        "  - name: download",
        "    kind: command",
        "    from: phone",
        "    start: 2s",
        f"    run: [sh, -c, 'exec python3 {peer} receive \"$ROAM_SERVER_LTE_ADDR\"']",
        "  - name: ping",
        "    kind: command",
        "    from: phone",
        f"    run: [sh, -c, 'exec ping -n -D -i 0.05 -w {duration - 1} \"$ROAM_SERVER_LTE_ADDR\"']",
    ]) + "\n"


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(roam, directory, rate, discipline, backend, duration):
    name = f"{backend}-{discipline}-{rate}"
    path = os.path.join(directory, name + ".yaml")
    peer = os.path.join(directory, "peer.py")
    with open(path, "w") as file:
        file.write(scenario(rate, discipline, duration, peer))
    report = os.path.join(directory, name)
    result = subprocess.run([roam, "run", path, "--backend", backend, "--quiet", "--report", report],
                            capture_output=True, text=True, timeout=duration * 4 + 120)
    if result.returncode not in (0, 1):
        sys.exit(f"queue benchmark: {name}: roam run exited {result.returncode}: {result.stderr.strip()}")
    with open(os.path.join(report, "summary.json")) as file:
        summary = json.load(file)
    with open(os.path.join(report, "ping.stdout")) as file:
        lines = file.read().splitlines()
    echoes = []
    for line in lines:
        match = re.match(r"\[(\d+\.\d+)\].*time=([\d.]+) ms", line)
        if match:
            echoes.append((float(match.group(1)), float(match.group(2))))
    if len(echoes) < 20:
        sys.exit(f"queue benchmark: {name}: only {len(echoes)} echoes came back")
    start = echoes[0][0]
    # The download starts at 2 s; its first 5 s are slow start and the queue filling.
    loaded = [rtt - 40 for sent, rtt in echoes if sent - start >= 7]
    with open(os.path.join(report, "download.stdout")) as file:
        received = int((file.read().split() or ["0"])[-1])
    throughput = received * 8 / (duration - 2)
    links = [l for l in summary.get("links", []) if l["direction"] == "down"]
    return {
        "p50": percentile(loaded, 0.50), "p95": percentile(loaded, 0.95), "p99": percentile(loaded, 0.99),
        "echoes": len(loaded), "throughput": throughput / (rate * 1e6),
        "aqm": sum(l.get("aqmDropped", 0) for l in links), "overflow": sum(l.get("overflowed", 0) for l in links),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1,10,50")
    parser.add_argument("--disciplines", default="drop-tail,codel,fq-codel")
    parser.add_argument("--backends", default="userspace")
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--roam", default=os.environ.get("ROAM_BINARY", ".build/release/roam"))
    parser.add_argument("--quick", action="store_true", help="10 Mbit/s, drop-tail and CoDel, 12 s each: that it runs, not figures")
    options = parser.parse_args()
    if options.quick:
        options.rates, options.disciplines, options.duration = "10", "drop-tail,codel", 12
    rates = [int(r) for r in options.rates.split(",")]
    disciplines = options.disciplines.split(",")
    backends = options.backends.split(",")
    # A VM's kernel may not have loaded them yet (a module that is built in or missing is no matter).
    modules = (["tun"] if "userspace" in backends else []) + (["sch_netem", "sch_tbf", "sch_codel", "sch_fq_codel"] if "netem" in backends else [])
    for module in modules:
        subprocess.run(["modprobe", module], capture_output=True)
    directory = tempfile.mkdtemp(prefix="roam-queue-benchmark-")
    os.chmod(directory, 0o755)
    with open(os.path.join(directory, "peer.py"), "w") as file:
        file.write(PEER)
    try:
        print(f"Queue benchmark: queueing delay under a bulk download (ms beyond the 40 ms round trip, p50 / p95 / p99), "
              f"{options.duration} s per run, kernel {os.uname().release}")
        print(f"{'rate':>8} {'queue':>10} {'backend':>10} {'p50':>8} {'p95':>8} {'p99':>8} {'echoes':>7} {'goodput':>8} {'AQM drops':>10} {'overflow':>9}")
        for rate in rates:
            for discipline in disciplines:
                for backend in backends:
                    figures = measure(options.roam, directory, rate, discipline, backend, options.duration)
                    print(f"{rate:>5}mbit {discipline:>10} {backend:>10} {figures['p50']:>8.1f} {figures['p95']:>8.1f} {figures['p99']:>8.1f} "
                          f"{figures['echoes']:>7} {figures['throughput']:>7.0%} {figures['aqm']:>10} {figures['overflow']:>9}", flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
