"""The app: a GET every 100 ms over one connection for SECONDS, HTTP/3 over QUIC (aioquic) or,
with --tcp, HTTP/1.1 over one kept-alive TCP connection. It never reconnects: a connection that
breaks ends it with status 1. Each answer prints `ok T LATENCY` (T: seconds since it began);
at the end, `longest gap G` (the longest time between two answers) and status 0 if no request
failed and no gap reached 2 s."""

from __future__ import annotations

import argparse
import asyncio
import http.client
import ssl
import sys
import time

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration

NAME = "chat.example.test"


class HTTP3Client(QuicConnectionProtocol):
    def __init__(self, *arguments, **options) -> None:
        super().__init__(*arguments, **options)
        self._h3 = H3Connection(self._quic)
        self._waiting: dict = {}

    async def get(self, path: str) -> bytes:
        stream = self._quic.get_next_available_stream_id()
        self._h3.send_headers(stream, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", NAME.encode()),
                                       (b":path", path.encode())], end_stream=True)
        answer = asyncio.get_running_loop().create_future()
        self._waiting[stream] = [answer, b""]
        self.transmit()
        return await answer

    def quic_event_received(self, event) -> None:
        for received in self._h3.handle_event(event):
            if not isinstance(received, (HeadersReceived, DataReceived)) or received.stream_id not in self._waiting:
                continue
            entry = self._waiting[received.stream_id]
            if isinstance(received, DataReceived):
                entry[1] += received.data
            if received.stream_ended:
                del self._waiting[received.stream_id]
                if not entry[0].done():
                    entry[0].set_result(entry[1])


def report(began: float, answers: list) -> int:
    times = [began] + answers
    longest = max(b - a for a, b in zip(times, times[1:])) if answers else float("inf")
    print("longest gap %.2f s" % longest, flush=True)
    return 0 if longest < 2 else 1


async def over_quic(host: str, seconds: float, interval: float) -> int:
    configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE, server_name=NAME)
    began = time.monotonic()
    answers = []
    async with connect(host, 443, configuration=configuration, create_protocol=HTTP3Client) as client:
        while time.monotonic() - began < seconds:
            sent = time.monotonic()
            try:
                body = await asyncio.wait_for(client.get("/"), 5)
            except asyncio.TimeoutError:
                print("request failed: no answer in 5 s", flush=True)
                return 1
            now = time.monotonic()
            answers.append(now)
            print("ok %.3f %.4f %s" % (now - began, now - sent, body.decode()), flush=True)
            await asyncio.sleep(interval)
    return report(began, answers)


def over_tcp(host: str, seconds: float, interval: float) -> int:
    connection = http.client.HTTPConnection(host, 8080, timeout=5)
    began = time.monotonic()
    answers = []
    while time.monotonic() - began < seconds:
        sent = time.monotonic()
        try:
            connection.request("GET", "/")
            body = connection.getresponse().read()
        except OSError as error:
            print("request failed: %s" % error, flush=True)
            return 1
        now = time.monotonic()
        answers.append(now)
        print("ok %.3f %.4f %s" % (now - began, now - sent, body.decode()), flush=True)
        time.sleep(interval)
    return report(began, answers)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--tcp", action="store_true")
    options = parser.parse_args()
    if options.tcp:
        sys.exit(over_tcp(options.host, options.seconds, options.interval))
    sys.exit(asyncio.run(over_quic(options.host, options.seconds, options.interval)))
