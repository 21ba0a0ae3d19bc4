#!/usr/bin/env python3
"""Path managers side by side: `roam daemon --mptcp handover` against Debian's mptcpd (0.12,
its address-advertiser plug-in with `--addr-flags=subflow`, the usual client setup), each as the
phone's only MPTCP path manager in the same bundled scenario with the same seed, for an
unmodified program: a TCP download run under `mptcpize run` from a server that sends 1 KiB every
10 ms. Reported per scenario and manager: the longest gap between two reads of the download
(after its first byte), its bytes, and whether its connection lived to the end.

    python3 Benchmarks/PathManagerComparison/compare.py [--roam .build/debug/roam]
        [--scenarios walk-out-of-home,blackholed-wifi,hotel-wifi] [--backend userspace|netem]

The scenarios keep their links, networks and timelines; their workloads are replaced by the
manager, the server and the download (Roam's own path manager does nothing: mode none). In a
scenario with networks the daemon validates connectivity against the internet's check
(`http://connectivity.roam.test/generate_204`), as it would on a laptop; mptcpd has no such
notion. Needs root, mptcpd and mptcpd-plugins, mptcpize.
"""
import argparse
import copy
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

MPTCPD = "/usr/libexec/mptcpd"

SOURCE = """
import os, socket, time
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)  # IPPROTO_MPTCP
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("0.0.0.0", 5201))
listener.listen()
while True:
    connection, _ = listener.accept()
    try:
        while True:
            connection.sendall(bytes(1024))
            time.sleep(0.01)
    except OSError:
        pass
"""

DOWNLOAD = """
import os, socket, time
t0 = float(os.environ["ROAM_T0"])
end = float(os.environ["DOWNLOAD_END"])
s = socket.create_connection((os.environ["ROAM_PEER_ADDR"], 5201), timeout=10)
s.settimeout(0.5)
received, first, last, gap, gap_at, alive = 0, None, None, 0.0, 0.0, True
while time.monotonic() - t0 < end:
    try:
        data = s.recv(65536)
    except socket.timeout:
        continue
    except OSError:
        alive = False
        break
    if not data:
        alive = False
        break
    now = time.monotonic()
    if last is not None and now - last > gap:
        gap, gap_at = now - last, last - t0
    first = first if first is not None else now
    last = now
    received += len(data)
# A connection that went quiet until the end counts that silence as its gap.
if last is not None and time.monotonic() - last > gap:
    gap, gap_at = time.monotonic() - last, last - t0
print("received %d gap %.3f at %.1f alive %s" % (received, gap, gap_at, alive))
"""


def manager_workload(manager: str, validate: bool) -> dict:
    if manager == "roam":
        command = 'exec "$ROAM_EXECUTABLE" daemon --socket "$ROAM_REPORT_DIR/path.sock" --mptcp handover'
        if validate:
            command += " --validate http://connectivity.roam.test/generate_204 --validate-interval 5"
        run = ["sh", "-c", command]
    else:
        run = [MPTCPD, "--log=stderr", "--path-manager=addr_adv", "--addr-flags=subflow",
               "--notify-flags=existing,skip_link_local,skip_loopback,check_route"]
    return {"name": "manager", "kind": "command", "from": "phone", "run": run}


def variant(path: str, manager: str) -> dict:
    with open(path) as file:
        scenario = yaml.safe_load(file)
    scenario = copy.deepcopy(scenario)
    networks = bool(scenario.get("networks"))
    server = next(name for name in scenario["nodes"] if name != "phone")
    duration = int(str(scenario["duration"]).rstrip("s"))
    scenario["name"] = "%s-%s" % (scenario["name"], manager)
    scenario["workloads"] = [
        manager_workload(manager, validate=networks),
        {"name": "source", "kind": "command", "from": server, "run": ["python3", "-c", SOURCE]},
        {"name": "download", "kind": "command", "from": "phone", "to": server, "start": "2s", "mptcpize": True,
         "env": {"DOWNLOAD_END": str(duration - 1)}, "run": ["python3", "-c", DOWNLOAD]},
    ]
    scenario.pop("expect", None)
    return scenario


def play(roam: str, scenario: dict, directory: str, backend: str) -> dict:
    name = scenario["name"]
    path = os.path.join(directory, name + ".yaml")
    with open(path, "w") as file:
        yaml.safe_dump(scenario, file, sort_keys=False)
    report = os.path.join(directory, name)
    subprocess.run([roam, "run", path, "--backend", backend, "--report", report, "--quiet"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, timeout=600)
    try:
        with open(os.path.join(report, "download.stdout")) as file:
            words = file.read().split()
        return {"received": int(words[1]), "gap": float(words[3]), "at": float(words[5]), "alive": words[7] == "True"}
    except (OSError, IndexError, ValueError):
        with open(os.path.join(report, "download.stderr")) as file:
            return {"error": file.read().strip().splitlines()[-1:] or ["no output"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roam", default=".build/debug/roam")
    parser.add_argument("--scenarios", default="walk-out-of-home,blackholed-wifi,hotel-wifi")
    parser.add_argument("--backend", default="userspace", choices=["userspace", "netem"])
    parser.add_argument("--keep", action="store_true", help="keep the scenarios and reports (their directory is printed)")
    parser.add_argument("--repeat", type=int, default=1, help="play each pair N times (the same seed); each cell shows every run's gap, the longest first")
    options = parser.parse_args()
    if not os.access(MPTCPD, os.X_OK):
        print("compare: mptcpd is not installed: apt-get install mptcpd mptcpd-plugins", file=sys.stderr)
        return 2
    roam = os.path.abspath(options.roam)
    directory = tempfile.mkdtemp(prefix="roam-pm-compare-")
    rows = []
    try:
        for name in options.scenarios.split(","):
            path = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios", name + ".yaml")
            row = [name]
            for manager in ("roam", "mptcpd"):
                outcomes = []
                for attempt in range(options.repeat):
                    scenario = variant(path, manager)
                    scenario["name"] += "-%d" % attempt
                    outcomes.append(play(roam, scenario, directory, options.backend))
                failed = [o for o in outcomes if "error" in o]
                if failed:
                    row.append("failed: %s" % failed[0]["error"][0][:60])
                    continue
                worst = max(outcomes, key=lambda o: o["gap"])
                others = sorted((o["gap"] for o in outcomes), reverse=True)[1:]
                row.append("%.2f s (at %.1f s)%s%s" % (worst["gap"], worst["at"], "".join(", %.2f" % g for g in others),
                                                     "" if all(o["alive"] for o in outcomes) else ", a connection lost"))
            rows.append(row)
            print(" | ".join(row), flush=True)
    finally:
        if options.keep:
            print("compare: scenarios and reports in %s" % directory, file=sys.stderr)
        else:
            shutil.rmtree(directory, ignore_errors=True)
    print()
    print("| scenario | roam daemon --mptcp handover: longest gap | mptcpd (addr_adv, subflow): longest gap |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
