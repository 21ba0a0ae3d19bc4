"""QUIC's connection migration through a carrier NAT that rebinds, with Roam's pytest plugin:
the same app over HTTP/3 (aioquic) keeps its one connection while the one over HTTP/1.1 on TCP
breaks; then UDP 443 alone loses 10% of its packets (a `match:` on the network) and QUIC
carries on."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

import aioquic  # noqa: F401  (installed by scripts/python-env.sh; missing, the test fails)

HERE = Path(__file__).resolve().parent.parent


def lines_of(process) -> list:
    """Reads the process's standard output to its end on a thread; the list fills as it goes."""
    lines: list = []

    def read() -> None:
        for raw in process.stdout:
            lines.append(raw.decode().strip())

    threading.Thread(target=read, daemon=True).start()
    return lines


@pytest.mark.roam_scenario(str(HERE / "scenario.yaml"), hold=True, backend="userspace")
def test_quic_keeps_its_connection_through_a_nat_rebinding_that_breaks_tcp(roam_run):
    run = roam_run
    host = run.environment["ROAM_CHAT_ADDR"]
    server = run.spawn("chat", [sys.executable, str(HERE / "server.py"), host])
    try:
        assert server.stdout.readline().strip() == b"listening"
        said = lines_of(server)
        app = [sys.executable, str(HERE / "client.py"), host, "--seconds", "8"]
        quic, tcp = run.spawn("phone", app), run.spawn("phone", app + ["--tcp"])
        # Both answered once: then the carrier's NAT forgets its mappings.
        assert quic.stdout.readline().startswith(b"ok ") and tcp.stdout.readline().startswith(b"ok ")
        quic_lines, tcp_lines = lines_of(quic), lines_of(tcp)
        run.change_network("lte", {"rebind": True})
        # UDP 443 alone loses 10% each way from now; TCP to the same server would not.
        run.change_network("lte", {"match": {"protocol": "udp", "port": 443}, "set": {"loss": "10%"}})
        assert quic.wait(30) == 0, quic_lines[-5:]
        assert tcp.wait(30) == 1, tcp_lines[-5:]
        assert any(line.startswith("request failed") for line in tcp_lines), tcp_lines[-3:]
        assert quic_lines[-1].startswith("longest gap ") and float(quic_lines[-1].split()[2]) < 2, quic_lines[-3:]
        # A request each 100 ms plus a round trip of about 60 ms allows about 48 answers in 8 s;
        # 10% loss each way puts a retransmission timer in about one exchange in five (39 to 45
        # answers seen). Half of the ceiling or more: the connection carried on, not limped.
        assert sum(line.startswith("ok ") for line in quic_lines) >= 24, len(quic_lines)
        # The server saw the client's packets come from a new port, and answered there.
        assert any(line.startswith("client moved from ") for line in said), said
        latencies = sorted(float(line.split()[2]) for line in quic_lines if line.startswith("ok "))
        print(f"quic: {len(latencies)} answers, median {latencies[len(latencies) // 2] * 1000:.1f} ms, {quic_lines[-1]}; "
              f"tcp: {next(line for line in tcp_lines if line.startswith('request failed'))}; server: {[l for l in said if 'moved' in l]}")
    finally:
        server.kill()
        server.wait(10)
