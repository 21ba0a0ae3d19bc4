"""toxiproxy's own Python client (toxiproxy-python, from PyPI, unchanged) driving a run through
`roam run --toxiproxy-port`: the calls its README and toxiproxy's describe (create, toxics,
down, reset, populate, destroy), with their effects measured by real connections."""

from __future__ import annotations

import os
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time

import pytest

# toxiproxy-python: installed by scripts/python-env.sh (make python); missing, the tests fail.
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import NotFound, ProxyExists
from toxiproxy.utils import can_connect_to


@pytest.fixture
def run(roam_start):
    run = roam_start("walk-out-of-home", hold=True, backend="userspace", time_scale=0.25, extra_args=["--toxiproxy-port", "0"])
    host, port = run.toxiproxy.rsplit(":", 1)
    APIConsumer.host, APIConsumer.port = host, int(port)
    yield run
    Toxiproxy().destroy_all()


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            self.request.sendall(data)


@pytest.fixture
def echo():
    """A TCP echo server on the host's loopback: an upstream outside the run."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def round_trip(listen: str) -> float:
    """Seconds for 5 bytes to go through the proxy at `listen` and come back."""
    host, port = listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        began = time.monotonic()
        connection.sendall(b"hello")
        received = b""
        while len(received) < 5:
            chunk = connection.recv(5)
            assert chunk, "the proxy closed the connection"
            received += chunk
        assert received == b"hello"
        return time.monotonic() - began


def test_toxiproxy_python_drives_a_run(run, echo):
    server = Toxiproxy()
    assert server.running() is True
    assert b"version" in server.version()
    proxy = server.create(upstream=f"localhost:{echo}", name="echo")
    assert proxy.enabled is True and proxy.listen.startswith("127.0.0.1:") and not proxy.listen.endswith(":0")
    assert round_trip(proxy.listen) < 0.1
    # Another local user reaches the port but gets nothing through: the proxy closes at once.
    if os.geteuid() == 0 and shutil.which("setpriv"):
        host, port = proxy.listen.rsplit(":", 1)
        probe = ("import socket, sys\n"
                 "s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)\n"
                 "s.sendall(b'hello')\n"
                 "try:\n    print(len(s.recv(5)))\nexcept OSError:\n    print('reset')\n")
        other = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", probe, host, port],
                               capture_output=True, text=True, timeout=30)
        assert other.stdout.strip() in ("0", "reset"), other
    with pytest.raises(ProxyExists):
        server.create(upstream=f"localhost:{echo}", name="echo")

    # A latency toxic, downstream by default: the echo comes back 300 ms late.
    proxy.add_toxic(type="latency", attributes={"latency": 300})
    assert {name: (toxic.type, toxic.stream, toxic.attributes["latency"]) for name, toxic in proxy.toxics().items()} == {
        "latency_downstream": ("latency", "downstream", 300)}
    delayed = round_trip(proxy.listen)
    assert 0.27 <= delayed <= 0.33, delayed
    # The same upstream: both ways late.
    proxy.add_toxic(type="latency", stream="upstream", attributes={"latency": 200})
    both = round_trip(proxy.listen)
    assert 0.45 <= both <= 0.55, both
    proxy.destroy_toxic("latency_downstream")
    proxy.destroy_toxic("latency_upstream")
    assert proxy.toxics() == {}
    assert round_trip(proxy.listen) < 0.1

    # Down for a block: nothing listens, then it listens again where it did.
    host, port = proxy.listen.rsplit(":", 1)
    with proxy.down():
        assert can_connect_to(host, int(port)) is False
    assert can_connect_to(host, int(port)) is True

    # reset: every proxy enabled, every toxic gone.
    proxy.disable()
    proxy.add_toxic(type="timeout", attributes={"timeout": 0})
    server.reset()
    assert proxy.toxics() == {} and server.get_proxy("echo").enabled is True
    assert round_trip(proxy.listen) < 0.1

    # populate: made, or replaced where one of the name differs.
    made = server.populate([{"name": "first", "upstream": f"localhost:{echo}", "listen": "127.0.0.1:0"},
                            {"name": "second", "upstream": "server:80", "listen": "127.0.0.1:0"}])
    assert sorted(p.name for p in made) == ["first", "second"]
    assert sorted(server.proxies()) == ["echo", "first", "second"]
    assert round_trip(server.get_proxy("first").listen) < 0.1
    server.destroy(server.get_proxy("first"))
    assert server.get_proxy("first") is None
    with pytest.raises(NotFound):
        APIConsumer.get("/proxies/first")


def test_a_proxy_in_a_node_delays_what_the_phone_fetches(run):
    # An HTTP server in the run's server node, and a proxy in front of it there.
    served = run.spawn("server", ["python3", "-m", "http.server", "80"])
    try:
        proxy = Toxiproxy().create(upstream="server:80", name="web", listen="server:8080")
        assert proxy.listen == "server:8080"
        address = run.environment["ROAM_SERVER_ADDR"]

        def fetch(port: int) -> float:
            for _ in range(50):
                answer = run.exec("phone", ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", f"http://{address}:{port}/"])
                code, seconds = answer.stdout.split()
                if code == "200":
                    return float(seconds)
                time.sleep(0.1)  # the server's Python is still starting
            raise AssertionError(f"no answer on port {port}")

        assert fetch(80) > 0  # the server answers directly
        # Through the proxy without a toxic, then with 400 ms of latency: the difference is the
        # toxic's alone (not the proxy's own connection to the server, which a loaded machine
        # stretched by 42 ms once when the reference was the direct fetch).
        plain = sorted(fetch(8080) for _ in range(3))[1]
        proxy.add_toxic(type="latency", attributes={"latency": 400})
        delayed = fetch(8080)
        assert 0.36 <= delayed - plain <= 0.44, (plain, delayed)
        proxy.add_toxic(type="limit_data", name="cut", attributes={"bytes": 100})
        # The phone reads the answer's raw bytes: 100 of them, then the proxy closes.
        reader = ("import socket, sys\n"
                  "connection = socket.create_connection((sys.argv[1], 8080), timeout=10)\n"
                  "connection.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
                  "count = 0\n"
                  "while chunk := connection.recv(65536):\n"
                  "    count += len(chunk)\n"
                  "print(count)\n")
        cut = run.exec("phone", ["python3", "-c", reader, address], check=True)
        assert cut.stdout.strip() == "100", cut
        # Each change is in the run's timeline.
        run.wait_for(lambda e: e["type"] == "mark" and "toxic cut added" in e.get("text", ""), timeout=10, start=0)
    finally:
        served.terminate()
        served.wait(10)
