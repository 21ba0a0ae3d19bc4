"""roam.path.PathMonitor against `roam daemon` running inside a run's phone: the daemon serves
the path the phone's own monitor sees, and each change the run makes reaches the reader."""

from __future__ import annotations

import os
import socket
import threading

import pytest

import roam
from roam.path import ControlError

@pytest.fixture
def daemon(run, tmp_path):
    """`roam daemon` in the phone, ready (its READY=1 on a notify socket, as systemd gets it)."""
    notify_path = str(tmp_path / "notify")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    notify.settimeout(30)
    socket_path = str(tmp_path / "path.sock")
    process = run.spawn("phone", [run.binary, "daemon", "--socket", socket_path], env={"NOTIFY_SOCKET": notify_path})
    try:
        ready = notify.recv(4096).decode()
        assert "READY=1" in ready, ready
        yield socket_path, process, notify
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(30)
        notify.close()


def test_the_daemon_in_a_phone_serves_the_phones_path_and_each_change(run, daemon):
    socket_path, process, notify = daemon
    monitor = roam.PathMonitor(socket_path)
    current = monitor.current()
    assert current["sequence"] >= 0
    assert current["primaryInterface"] == "wifi"
    # The phone's own monitor (the run's) and the daemon agree on the path.
    mine = run.path("phone")
    assert {i["name"] for i in current["interfaces"]} == {i["name"] for i in mine["interfaces"]}
    assert current["primaryInterface"] == mine["primaryInterface"]

    # A callback on a thread of its own, and an iterator: both see the Wi-Fi go.
    seen = []
    moved = threading.Event()

    def on_path(path):
        seen.append(path)
        if path["primaryInterface"] == "cell":
            moved.set()

    subscription = monitor.on_update(on_path)
    stream = iter(monitor)
    first = next(stream)
    assert first["primaryInterface"] == "wifi", "the current path first"
    run.down("wifi")
    assert moved.wait(15), seen
    changed = next(path for path in stream if path["primaryInterface"] == "cell")
    assert changed["isExpensive"] is True and changed["sequence"] > first["sequence"]
    assert run.wait_for_path("phone", lambda p: p["primaryInterface"] == "cell", timeout=15)
    subscription.cancel()

    # Asking for a check: this user is the daemon's, but it validates nothing.
    with pytest.raises(ControlError) as refused:
        monitor.revalidate("wifi")
    assert refused.value.status == 409

    # SIGTERM: STOPPING=1, exit 0, the socket removed, the iterator ends.
    process.terminate()
    assert process.wait(30) == 0, process.stderr.read().decode()
    assert "STOPPING=1" in notify.recv(4096).decode()
    assert not os.path.exists(socket_path)
    assert all("primaryInterface" in path for path in list(stream)), "the stream ends with the daemon"


def test_a_reader_without_a_daemon_says_so(tmp_path):
    with pytest.raises(OSError):
        roam.PathMonitor(str(tmp_path / "nothing.sock")).current()
