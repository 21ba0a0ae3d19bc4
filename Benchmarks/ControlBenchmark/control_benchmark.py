"""The control API's latency and its event stream's throughput, beside `ip` in the node.

    ROAM_BINARY=.build/release/roam python Benchmarks/ControlBenchmark/control_benchmark.py [--changes 1000] [--flap 5] [--period 1ms]

As root: a run of walk-out-of-home (`--control --hold`, the backend `auto` picks), and in the
phone's namespace an `ip monitor link` whose lines are stamped as they arrive. For N carrier
changes of the Wi-Fi (down, then up), sent as `POST /v1/links/wifi` over one keep-alive
connection, it measures the time to the API's answer (the change is applied before it), to
`ip monitor`'s line about the carrier, and to the phone's path update on the event stream
(`GET /v1/events`). The reference makes the same N changes with `ip link set wifi down|up`
written to one `ip -batch` process in the phone (no process start per change), seen by the same
two observers. Then a flap at the shortest period the format allows (1 ms: a carrier change every half
millisecond) for `--flap` seconds: events per second delivered on the stream, and whether every
sequence number arrived.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

import roam  # noqa: E402
from roam._http import _UnixConnection  # noqa: E402


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


class Observers:
    """`ip monitor link` in the phone and the run's event stream, each line stamped on arrival."""

    def __init__(self, run: roam.Run, namespace: str) -> None:
        self.lock = threading.Condition()
        self.carrier: list = []  # (ns, "up"|"down")
        self.paths: list = []  # (ns, wifi state)
        self.events: list = []  # (ns, seq, type)
        self.monitor = subprocess.Popen(["ip", "-n", namespace, "monitor", "link"], stdout=subprocess.PIPE, bufsize=0)
        threading.Thread(target=self._read_monitor, daemon=True).start()
        start = run.info()["nextEvent"]
        threading.Thread(target=self._read_events, args=(run, start), daemon=True).start()

    def _read_monitor(self) -> None:
        for line in iter(self.monitor.stdout.readline, b""):
            now = time.monotonic_ns()
            text = line.decode(errors="replace")
            if ": wifi" not in text:
                continue
            state = "down" if ("NO-CARRIER" in text or "state DOWN" in text) else "up"
            with self.lock:
                self.carrier.append((now, state))
                self.lock.notify_all()

    def _read_events(self, run: roam.Run, start: int) -> None:
        for event in run.events(start, follow=True):
            now = time.monotonic_ns()
            with self.lock:
                self.events.append((now, event.get("seq"), event.get("type")))
                if event.get("type") == "path" and event.get("node") == "phone":
                    # The Wi-Fi as the phone's monitor sees it (its routes may not come back after
                    # an `ip link set down`, so the primary interface is not asked).
                    wifi = next((i for i in event["path"]["interfaces"] if i["name"] == "wifi"), None)
                    self.paths.append((now, "up" if wifi is not None and wifi["state"] == "up" else "down"))
                self.lock.notify_all()

    def wait(self, series: str, after: int, state: str, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                for stamp, value in getattr(self, series):
                    if stamp >= after and value == state:
                        return stamp
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no {series} {state} within {timeout} s")
                self.lock.wait(remaining)


missed: dict = {}


def measure(name, changes, apply, observers):
    """Applies down/up `changes` times with `apply(state) -> answer stamp or None`."""
    answered, carrier, path = [], [], []
    began = time.monotonic()
    for index in range(changes):
        if index and index % 50 == 0:
            print(f"  {name}: {index} changes in {time.monotonic() - began:.1f} s", flush=True)
        state = "down" if index % 2 == 0 else "up"
        start = time.monotonic_ns()
        stamp = apply(state)
        if stamp is not None:
            answered.append(stamp - start)
        # A notification the kernel never sent (or merged) is counted, not waited for forever.
        for series, values in (("carrier", carrier), ("paths", path)):
            try:
                values.append(observers.wait(series, start, state, timeout=3.0) - start)
            except TimeoutError:
                missed[name, series] = missed.get((name, series), 0) + 1
    return name, answered, carrier, path


def row(name, observer, values):
    if not values:
        return f"| {name} | {observer} | - | - | - |"
    us = [v / 1000 for v in values]
    return f"| {name} | {observer} | {percentile(us, 0.5):.1f} | {percentile(us, 0.99):.1f} | {max(us):.1f} |"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--flap", type=float, default=5.0, help="seconds of flapping")
    parser.add_argument("--period", default="1ms", help="the flap's period (the format's shortest: 1ms)")
    parser.add_argument("--quick", action="store_true", help="50 changes and a 1 s flap")
    options = parser.parse_args()
    if options.quick:
        options.changes, options.flap = 50, 1.0
    if os.geteuid() != 0:
        print("control benchmark: needs root (the reference runs ip in the run's namespaces)", file=sys.stderr)
        return 2
    scenario = ROOT / "scenarios" / "walk-out-of-home.yaml"
    children: list = []
    # The run's report goes under a directory of this process's own (never a name another user
    # could make first), removed at the end.
    scratch = tempfile.mkdtemp(prefix="roam-control-bench-")
    try:
        return bench(options, scenario, children, os.path.join(scratch, "report"))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(10)
        shutil.rmtree(scratch, ignore_errors=True)


def bench(options, scenario, children, report) -> int:
    with roam.start(scenario, hold=True, rootless=False, report=report) as run:
        info = run.info()
        namespace = f"roam-{run.run_id}-phone"
        print(f"control benchmark: run {run.run_id}, backend {info['backend']}, {options.changes} changes each")
        observers = Observers(run, namespace)
        children.append(observers.monitor)
        time.sleep(0.5)  # the observers are up (ip monitor has subscribed, the stream is open)

        connection = _UnixConnection(run.transport.socket_path, 30)

        def through_api(state):
            connection.request("POST", "/v1/links/wifi", body=json.dumps({state: True}), headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(body)
            return time.monotonic_ns()

        api = measure("POST /v1/links/wifi", options.changes, through_api, observers)
        batch = subprocess.Popen(["ip", "-n", namespace, "-batch", "-"], stdin=subprocess.PIPE, bufsize=0)
        children.append(batch)

        def through_ip(state):
            batch.stdin.write(f"link set wifi {state}\n".encode())
            return None

        reference = measure("ip -batch in the node", options.changes, through_ip, observers)
        batch.stdin.close()
        batch.wait(10)

        print()
        print("| change | observer | p50 µs | p99 µs | max µs |")
        print("|---|---|---|---|---|")
        for name, answered, carrier, path in (api, reference):
            if answered:
                print(row(name, "the API's answer", answered))
            print(row(name, "ip monitor: carrier", carrier))
            print(row(name, "event stream: phone's path", path))
        for (name, series), count in sorted(missed.items()):
            print(f"{name}: {count} of {options.changes} changes never seen by {series} within 3 s")
        for index, label in ((2, "carrier"), (3, "path")):
            ratio = percentile(api[index], 0.5) / max(1, percentile(reference[index], 0.5))
            ratio99 = percentile(api[index], 0.99) / max(1, percentile(reference[index], 0.99))
            print(f"ratio API / ip, {label}: p50 {ratio:.2f}x, p99 {ratio99:.2f}x")

        # The stream under the fastest flap the format allows (by default).
        run.up("wifi")
        time.sleep(0.3)
        with observers.lock:
            before = len(observers.events)
        start_seq = run.info()["nextEvent"]
        began = time.monotonic_ns()
        run.flap("wifi", period=options.period, for_=f"{options.flap}s")
        time.sleep(options.flap + 1.0)
        end_seq = run.info()["nextEvent"]
        deadline = time.monotonic() + 10
        while True:
            with observers.lock:
                seqs = [seq for _, seq, _ in observers.events[before:] if seq is not None and start_seq <= seq < end_seq]
                last = observers.events[-1][0] if observers.events else began
            if len(seqs) >= end_seq - start_seq or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        missing = (end_seq - start_seq) - len(set(seqs))
        ordered = seqs == sorted(seqs)
        elapsed = (last - began) / 1e9
        print()
        print(f"flap {options.period} for {options.flap:g} s: {end_seq - start_seq} events recorded, {len(set(seqs))} delivered on the stream "
              f"({len(seqs) / max(elapsed, 1e-9):.0f} events/s), {missing} missing, {'in order' if ordered else 'OUT OF ORDER'}")
        observers.monitor.terminate()
        connection.close()
        result = run.stop()
        if missing or not ordered:
            print("control benchmark: the event stream lost or reordered events", file=sys.stderr)
            return 1
        print(f"report: {result.get('reportDirectory')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
