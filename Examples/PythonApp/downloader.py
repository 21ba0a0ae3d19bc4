"""A small app's download with a retry policy, as a phone app would have one.

    python3 downloader.py --servers 198.18.0.2,198.18.1.2 --port 8080 --path /file --out copy.bin

It fetches `--path` from the first server address; when no byte arrives for `--stall` seconds
(Wi-Fi that stays up but passes nothing) or the connection fails, it moves to the next
address (the server's address over the other network) and resumes where it was with a Range
request, until the file is whole or `--deadline` passes. `--no-retry` is the same app without
the policy: it waits on its one connection, as many apps do. Progress lines go to standard
output: `progress BYTES via ADDRESS`, then `done BYTES via ADDRESS` (exit 0) or `failed REASON`
(exit 1).
"""

from __future__ import annotations

import argparse
import http.client
import sys
import time


def fetch(address: str, port: int, path: str, offset: int, out, stall: float, deadline: float) -> int:
    """Fetches from `offset` into `out` until the end; returns the bytes written. Raises
    OSError (or TimeoutError) when the connection fails or stalls, with what arrived written."""
    connection = http.client.HTTPConnection(address, port, timeout=stall)
    try:
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        if response.status not in (200, 206):
            raise OSError(f"HTTP {response.status}")
        if offset and response.status != 206:
            raise OSError("the server ignored the range")
        written = 0
        while time.monotonic() < deadline:
            chunk = response.read1(65536)
            if not chunk:
                return written
            out.write(chunk)
            written += len(chunk)
            print(f"progress {offset + written} via {address}", flush=True)
        raise TimeoutError("deadline")
    finally:
        connection.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", required=True, help="the server's addresses, one per network, in order of preference")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--path", default="/file")
    parser.add_argument("--out", required=True)
    parser.add_argument("--size", type=int, required=True, help="the file's size")
    parser.add_argument("--stall", type=float, default=1.5, help="seconds without a byte before moving on")
    parser.add_argument("--deadline", type=float, default=30)
    parser.add_argument("--no-retry", action="store_true", help="the app without its retry policy")
    options = parser.parse_args()
    addresses = options.servers.split(",")
    deadline = time.monotonic() + options.deadline
    received = 0
    attempt = 0
    with open(options.out, "wb") as out:
        while received < options.size and time.monotonic() < deadline:
            address = addresses[attempt % len(addresses)]
            try:
                fetch(address, options.port, options.path, received, out,
                      options.stall if not options.no_retry else max(0.1, deadline - time.monotonic()), deadline)
                received = out.tell()
            except (OSError, TimeoutError) as error:
                # Resume after what arrived, whole or not, before the connection failed.
                received = out.tell()
                print(f"attempt via {address} failed after {received} bytes: {error}", flush=True)
                if options.no_retry:
                    print(f"failed {error}", flush=True)
                    return 1
                attempt += 1
    if received < options.size:
        print("failed deadline", flush=True)
        return 1
    print(f"done {received} via {address}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
