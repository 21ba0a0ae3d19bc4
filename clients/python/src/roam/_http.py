"""HTTP/1.1 to a run's control API over its Unix socket or loopback port (standard library only)."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any, Iterator, Optional


class _UnixConnection(http.client.HTTPConnection):
    """An HTTPConnection whose transport is a Unix stream socket."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("roam", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class ControlError(Exception):
    """The control API refused a request: `status` is the HTTP status, `message` its reason,
    `diagnostics` the placed problems of a refused change (line, column, message)."""

    def __init__(self, status: int, message: str, diagnostics: Optional[list] = None) -> None:
        super().__init__(f"{message} (HTTP {status})")
        self.status = status
        self.message = message
        self.diagnostics = diagnostics or []


class Transport:
    """Where a run's API is: its socket, or `url` with a bearer token."""

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None, token: Optional[str] = None) -> None:
        if socket_path is None and url is None:
            raise ValueError("a run's control API is a socket path or a url")
        self.socket_path = socket_path
        self.url = url
        self.token = token

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.socket_path is not None:
            return _UnixConnection(self.socket_path, timeout)
        assert self.url is not None
        rest = self.url.split("://", 1)[-1].rstrip("/")
        host, _, port = rest.partition(":")
        return http.client.HTTPConnection(host, int(port or 80), timeout=timeout)

    def _headers(self, body: Optional[bytes]) -> dict:
        headers = {"Connection": "close"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            headers["Content-Type"] = "application/json"
        return headers

    def request(self, method: str, path: str, body: Any = None, timeout: Optional[float] = 60.0) -> Any:
        """Sends one request; returns the decoded JSON answer or raises ControlError."""
        data = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
        if isinstance(data, str):
            data = data.encode()
        connection = self._connection(timeout)
        try:
            connection.request(method, path, body=data, headers=self._headers(data))
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        try:
            answer = json.loads(raw) if raw else None
        except ValueError:
            answer = None
        if not 200 <= response.status < 300:
            if isinstance(answer, dict):
                raise ControlError(response.status, str(answer.get("error", raw[:200])), answer.get("diagnostics"))
            raise ControlError(response.status, raw[:200].decode(errors="replace"))
        return answer

    def events(self, start: int = 0, follow: bool = True, timeout: Optional[float] = None) -> Iterator[dict]:
        """The run's events from sequence number `start`, as dicts with their `seq`; with
        `follow`, as they happen until the run ends. A gap (events no longer held by the run)
        is an event of type `gap` with `from` and `to`."""
        return self.stream(f"/v1/events?from={start}&follow={'true' if follow else 'false'}", timeout=timeout)

    def stream(self, path: str, timeout: Optional[float] = None, last_event_id: Optional[int] = None) -> Iterator[dict]:
        """The Server-Sent Events of `GET path`, each event's data as a dict with its `seq` (its
        `id:`); a `gap` event as `{"type": "gap", "from": …, "to": …}`. Ends when the server ends
        the stream."""
        connection = self._connection(timeout)
        try:
            headers = self._headers(None)
            if last_event_id is not None:
                headers["Last-Event-ID"] = str(last_event_id)
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            if response.status != 200:
                raw = response.read()
                try:
                    message = json.loads(raw).get("error", "")
                except ValueError:
                    message = raw[:200].decode(errors="replace")
                raise ControlError(response.status, message)
            seq: Optional[int] = None
            kind: Optional[str] = None
            while True:
                line = response.readline()
                if not line:
                    return
                text = line.decode().rstrip("\n")
                if text.startswith("id: "):
                    seq = int(text[4:])
                elif text.startswith("event: "):
                    kind = text[7:]
                elif text.startswith("data: "):
                    event = json.loads(text[6:])
                    if kind == "gap":
                        event = {"type": "gap", **event}
                    else:
                        event["seq"] = seq
                    yield event
                elif text == "":
                    seq, kind = None, None
        finally:
            connection.close()
