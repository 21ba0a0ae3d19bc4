"""The app's retry policy under a Wi-Fi that stays up but passes nothing, with Roam's pytest
plugin: the test blackholes the Wi-Fi mid-download and asserts the app finishes over cellular
within its deadline. The same check fails for the app without its retry policy."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
SIZE = 4 << 20
DEADLINE = 20.0


def expected_digest() -> str:
    return hashlib.sha256(bytes((i * 7 + i // 251) & 0xFF for i in range(SIZE))).hexdigest()


def download_survives_wifi_loss(run, tmp_path, retry: bool) -> list:
    """Starts the server and the app, blackholes the Wi-Fi once a quarter has arrived, and
    checks the app completes the file over cellular within its deadline; returns its lines."""
    server = run.spawn("server", ["python3", str(HERE / "server.py"), "8080", str(SIZE)])
    try:
        assert server.stdout.readline().strip() == b"listening"
        env = run.environment
        out = tmp_path / "copy.bin"
        argv = ["python3", str(HERE / "downloader.py"), "--servers", f"{env['ROAM_SERVER_WIFI_ADDR']},{env['ROAM_SERVER_CELL_ADDR']}",
                "--size", str(SIZE), "--out", str(out), "--deadline", str(DEADLINE)]
        app = run.spawn("phone", argv + ([] if retry else ["--no-retry"]))
        lines = []
        started = time.monotonic()
        blackholed = False
        for raw in app.stdout:
            line = raw.decode().strip()
            lines.append(line)
            if not blackholed and line.startswith("progress ") and int(line.split()[1]) >= SIZE // 4:
                run.blackhole("wifi")
                blackholed = True
        status = app.wait(10)
        took = time.monotonic() - started
        assert blackholed, lines[-3:]
        assert status == 0, f"the app failed: {lines[-3:]}"
        assert took < DEADLINE + 5
        assert lines[-1] == f"done {SIZE} via {env['ROAM_SERVER_CELL_ADDR']}", lines[-3:]
        assert hashlib.sha256(out.read_bytes()).hexdigest() == expected_digest()
        return lines
    finally:
        server.kill()
        server.wait(10)


@pytest.mark.roam_scenario(str(HERE / "scenario.yaml"), hold=True, backend="userspace")
def test_the_download_moves_to_cellular_when_wifi_passes_nothing(roam_run, tmp_path):
    lines = download_survives_wifi_loss(roam_run, tmp_path, retry=True)
    moved = [line for line in lines if line.startswith("attempt via")]
    assert len(moved) == 1, moved
    # The path monitor saw nothing wrong: the Wi-Fi is up, it just passes nothing.
    assert roam_run.path("phone")["primaryInterface"] == "wifi"


@pytest.mark.roam_scenario(str(HERE / "scenario.yaml"), hold=True, backend="userspace")
def test_the_same_check_fails_for_the_app_without_its_retry(roam_run, tmp_path):
    with pytest.raises(AssertionError, match="the app failed"):
        download_survives_wifi_loss(roam_run, tmp_path, retry=False)
