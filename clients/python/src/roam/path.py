"""The network path `roam daemon` serves on a host (docs/daemon.md), for Python programs:
the path now, each change as it happens (an iterator, or a callback on a thread of its own), and
asking for a connectivity check.

    from roam.path import PathMonitor

    monitor = PathMonitor()                 # this user's daemon, else the system's
    print(monitor.current()["primaryInterface"])
    for path in monitor:                    # the current path first, then every change
        if path["isExpensive"]:
            defer_the_backup()

A path is the object `roam monitor --json` prints, with the daemon's `sequence` first. Only the
standard library is needed.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Iterator, Optional

from ._http import ControlError, Transport

SYSTEM_SOCKET = "/run/roam/path.sock"


def default_socket() -> str:
    """This user's daemon's socket when there is one ($XDG_RUNTIME_DIR/roam/path.sock), else the
    system's, as `roam monitor --daemon` picks it."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if os.geteuid() != 0 and runtime and runtime.startswith("/"):
        own = os.path.join(runtime, "roam", "path.sock")
        if os.path.exists(own):
            return own
    return SYSTEM_SOCKET


class PathMonitor:
    """A reader of `roam daemon`'s path, as `NWPathMonitor` is of the system's."""

    def __init__(self, socket_path: Optional[str] = None, timeout: Optional[float] = 10.0) -> None:
        self.socket_path = socket_path or default_socket()
        self.timeout = timeout
        self._transport = Transport(socket_path=self.socket_path)

    def current(self) -> dict:
        """The path now (raises ControlError 503 before the daemon knows one)."""
        return self._transport.request("GET", "/v1/path", timeout=self.timeout)

    def __iter__(self) -> Iterator[dict]:
        """The current path, then each change, until the daemon stops. Changes the daemon no
        longer held when this reader fell behind are skipped (it holds the last 256)."""
        for event in self._transport.stream("/v1/path/events", timeout=None):
            if event.get("type") != "gap":
                event.pop("seq", None)  # the path's own `sequence` says it
                yield event

    def on_update(self, callback: Callable[[dict], None]) -> "Subscription":
        """Calls `callback` with the current path and each change, on a thread of its own, until
        the subscription is cancelled or the daemon stops."""
        return Subscription(self, callback)

    def revalidate(self, interface: Optional[str] = None) -> dict:
        """Asks the daemon to check connectivity now (one interface, or all): for the daemon's
        user and root only (ControlError 403), and a daemon started with --validate (409)."""
        query = "" if interface is None else f"?interface={interface}"
        return self._transport.request("POST", "/v1/revalidate" + query, timeout=self.timeout)


class Subscription:
    """A callback's thread; `cancel()` stops it (at the next path, or when the daemon stops)."""

    def __init__(self, monitor: PathMonitor, callback: Callable[[dict], None]) -> None:
        self._cancelled = threading.Event()
        self.error: Optional[BaseException] = None

        def follow() -> None:
            try:
                for path in monitor:
                    if self._cancelled.is_set():
                        return
                    callback(path)
            except (OSError, ControlError) as error:
                self.error = error

        self._thread = threading.Thread(target=follow, name="roam-path", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: Optional[float] = None) -> None:
        self._thread.join(timeout)


__all__ = ["PathMonitor", "Subscription", "default_socket", "SYSTEM_SOCKET", "ControlError"]
