"""The Python client and its pytest plugin against real runs of Roam (rootless, userspace backend)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import roam

def test_a_run_describes_itself(run):
    info = run.info()
    assert info["api"] == "v1"
    assert info["runId"] == run.run_id
    assert [link["name"] for link in info["links"]] == ["wifi", "cell"]
    assert {node["name"] for node in info["nodes"]} == {"phone", "server"}
    assert info["hold"] is True
    assert info["state"] in ("running", "held")


def test_a_link_change_reaches_the_node_the_link_and_the_event_stream(run):
    start = run.info()["nextEvent"]
    answer = run.down("wifi")
    assert [change["carrier"] for change in answer["applied"]] == ["down"]
    assert run.link("wifi")["carrier"] == "down"
    # The phone's own view of its radio: the carrier is gone.
    shown = run.exec("phone", ["ip", "-o", "link", "show", "wifi"], check=True).stdout
    assert "NO-CARRIER" in shown or "state DOWN" in shown, shown
    event = run.wait_for(lambda e: e["type"] == "link" and e.get("link") == "wifi" and e.get("live"), timeout=10, start=start)
    assert event["action"] == "down" and event["carrier"] == "down"
    # The phone's path monitor moves it to cellular.
    path = run.wait_for_path("phone", lambda p: p["primaryInterface"] == "cell", timeout=15)
    assert path["isExpensive"] is True
    run.up("wifi")
    assert run.link("wifi")["carrier"] == "up"


def test_conditions_are_set_and_ramped_from_where_the_link_is(run):
    run.set("wifi", delay="200ms", direction="down")
    state = run.link("wifi")
    assert state["down"]["delayMs"] == 200.0
    assert state["up"]["delayMs"] != 200.0
    answer = run.ramp("wifi", over="300ms", delay="500ms")
    # The first step now (a 300 ms ramp is cut into steps of 100 ms at most), the rest in time.
    assert all(change["action"] == "ramp" for change in answer["applied"])
    deadline = time.monotonic() + 10
    while run.link("wifi")["down"]["delayMs"] != 500.0:
        assert time.monotonic() < deadline, run.link("wifi")
        time.sleep(0.05)
    assert run.link("wifi")["up"]["delayMs"] == 500.0


def test_a_flow_gets_conditions_of_its_own_until_it_is_reset(run):
    dns = {"protocol": "udp", "port": 53}
    answer = run.set("wifi", delay="700ms", match=dns)
    assert [change["action"] for change in answer["applied"]] == ["set", "set"]
    state = run.link("wifi")
    assert state["up"]["flows"] == [{"match": "{protocol: udp, port: 53}", "delayMs": 700.0}]
    assert state["up"].get("delayMs") != 700.0, "the link's own delay is its own"
    run.reset("wifi", match=dns)
    assert "flows" not in run.link("wifi")["up"]


def test_bad_changes_are_refused_as_the_scenario_reader_refuses_them(run):
    with pytest.raises(roam.ControlError) as refused:
        run.change_link("wifi", {"set": {"delay": "soon"}})
    assert refused.value.status == 400
    assert "'soon' is not a duration" in refused.value.message
    assert refused.value.diagnostics[0]["line"] == 1 and refused.value.diagnostics[0]["column"] > 1
    with pytest.raises(roam.ControlError) as unknown:
        run.down("wlan0")
    assert unknown.value.status == 404 and "links: wifi, cell" in unknown.value.message
    with pytest.raises(roam.ControlError) as two:
        run.change_link("wifi", {"down": True, "blackhole": True})
    assert two.value.status == 400 and "one action" in two.value.message
    with pytest.raises(roam.ControlError) as traced:
        run.change_link("wifi", {"set": {"trace": "/etc/shadow"}})
    assert traced.value.status == 400 and "trace" in traced.value.message
    with pytest.raises(roam.ControlError) as large:
        run.change_link("wifi", {"set": {"delay": "1ms"}, "pad": "x" * 70000})
    assert large.value.status == 413
    with pytest.raises(roam.ControlError) as node:
        run.path("router")
    assert node.value.status == 404 and "phone" in node.value.message
    # Nothing refused changed the link.
    assert run.link("wifi")["carrier"] == "up"


def test_a_program_spawned_in_a_node_reaches_the_server_over_the_scenarios_links(run):
    server = run.spawn("server", ["python3", "-c", "import socket,sys\n"
                                  "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', 9009)); s.listen()\n"
                                  "print('listening', flush=True)\n"
                                  "c,_=s.accept(); c.sendall(b'hello over ' + c.recv(16))"])
    assert server.stdout.readline().strip() == b"listening"
    # Programs get the run's environment, as command workloads do: the server's address on the Wi-Fi.
    address = run.exec("phone", ["sh", "-c", "echo $ROAM_SERVER_WIFI_ADDR"]).stdout.strip()
    assert address == run.environment["ROAM_SERVER_WIFI_ADDR"] and address.startswith("198.18.")
    client = run.exec("phone", ["python3", "-c", "import socket,sys\n"
                                "c=socket.create_connection((sys.argv[1], 9009), timeout=10); c.sendall(b'wifi'); print(c.recv(64).decode())",
                                address], check=True)
    assert client.stdout.strip() == "hello over wifi"
    assert server.wait(10) == 0


def test_event_sequence_numbers_have_no_gap_under_a_fast_flap(run):
    start = run.info()["nextEvent"]
    run.flap("wifi", period="10ms", for_="1s")
    # The events as they come (a read that waits 10 s for one, or 30 s in all, fails the test),
    # until the run's clock is a tenth of a second past the 200th change: two changes per 10 ms
    # period for a second, every one recorded (and live), and none after.
    def is_flap(event):
        return event["type"] == "link" and event.get("action") == "flap"
    events = []
    last_flap = None
    deadline = time.monotonic() + 30
    for event in run.transport.events(start, True, timeout=10):
        assert event["type"] != "gap", event
        assert time.monotonic() < deadline, "200 changes of the flap were not recorded in 30 s"
        events.append(event)
        if is_flap(event) and sum(1 for seen in events if is_flap(seen)) == 200:
            last_flap = event["t"]
        if last_flap is not None and event["t"] >= last_flap + 0.1:
            break
    assert last_flap is not None, "the run ended before 200 changes of the flap were recorded"
    sequence = [event["seq"] for event in events]
    assert sequence == list(range(start, start + len(sequence)))
    flaps = [event for event in events if is_flap(event)]
    assert len(flaps) == 200, len(flaps)
    assert all(event.get("live") for event in flaps)


def test_stop_writes_the_report_and_the_run_answers_410_after(run):
    result = run.stop()
    assert result["passed"] in (True, False)
    with open(result["summary"]) as summary:
        assert json.load(summary)["runId"] == run.run_id
    assert run.process.returncode in (0, 1)
    assert "report:" in run.output
    assert run.stop() is result


@pytest.mark.roam_scenario("walk-out-of-home", hold=True, backend="userspace", time_scale=0.25)
def test_the_fixture_starts_a_marked_scenario(roam_run):
    assert roam_run.info()["scenario"] == "walk-out-of-home"
    roam_run.blackhole("cell", direction="up")
    assert roam_run.link("cell")["up"].get("blackhole") is True


def test_a_run_that_cannot_start_says_why(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nduration: 5s\nnodes: [a]\nlinks:\n  - {name: l, between: [a, b]}\n")
    with pytest.raises(roam.RoamError) as failed:
        roam.start(str(broken))
    assert "exited 2" in str(failed.value) and "b" in str(failed.value)


def test_attach_finds_a_run_by_its_id(run):
    other = roam.attach(run.run_id, binary=run.binary)
    assert other.info()["runId"] == run.run_id


def test_the_api_answers_as_its_openapi_document_says(roam_start, tmp_path):
    """schemathesis against the loopback port: every answer's status and body are the document's,
    none is a server error, whatever the request (the stop and the event stream, which end or
    hold the run, are left out)."""
    run = roam_start("walk-out-of-home", hold=True, backend="userspace", time_scale=0.25, extra_args=["--control-port", "0"])
    url = run.announcement["url"]
    with open(run.announcement["tokenFile"]) as file:
        token = file.read().strip()
    document = Path(__file__).resolve().parents[3] / "docs" / "control-api.openapi.yaml"
    result = subprocess.run([str(Path(sys.executable).parent / "schemathesis"), "run", str(document), "--url", url,
                             "-H", f"Authorization: Bearer {token}", "--exclude-path", "/v1/stop", "--exclude-path", "/v1/events",
                             "--max-examples", "30", "--request-timeout", "10", "--exclude-checks", "positive_data_acceptance",
                             "--seed", "1", "--no-color"],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
    # The run is still the one it was: the API's refusals changed nothing they should not have.
    assert run.info()["runId"] == run.run_id


def test_an_impostor_on_the_port_cannot_set_what_programs_in_nodes_get():
    """A server that is not the run (another user's, on a loopback port a run freed) answers
    /v1/run with LD_PRELOAD and PATH: only the run's ROAM_ variables, each one line, reach the
    environment `exec` and `spawn` give programs."""
    import http.server
    import threading

    answer = {"api": "v1", "runId": "abc123", "environment": {
        "LD_PRELOAD": "/tmp/evil.so", "PATH": "/tmp/evil", "ROAM_RUN_ID": "abc123", "ROAM_PHONE_ADDR": "198.19.0.1",
        "ROAM_TWO_LINES": "a\nLD_PRELOAD=/tmp/evil.so", "roam_lower": "x", "ROAM_": "empty", "ROAM_LONG": "x" * 5000,
    }}

    class Impostor(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Impostor)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        transport = roam.Transport(url=f"http://127.0.0.1:{server.server_address[1]}", token="0" * 64)
        run = roam.Run("abc123", transport, "roam")
        assert run.environment == {"ROAM_RUN_ID": "abc123", "ROAM_PHONE_ADDR": "198.19.0.1"}
        environment = run._env(None)
        assert environment.get("LD_PRELOAD") == os.environ.get("LD_PRELOAD")
        assert environment.get("PATH") == os.environ.get("PATH")
    finally:
        server.shutdown()
        server.server_close()
