"""The app's server: `SIZE` deterministic bytes at /file, with Range, paced so a download takes a
few seconds (a chunk of 16 KiB every 20 ms: about 800 KB/s). Prints `listening` when ready."""

import http.server
import sys
import time

SIZE = int(sys.argv[2]) if len(sys.argv) > 2 else 4 << 20
BODY = bytes((i * 7 + i // 251) & 0xFF for i in range(SIZE))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        start = 0
        if self.headers.get("Range", "").startswith("bytes="):
            start = int(self.headers["Range"][6:].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{SIZE - 1}/{SIZE}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(SIZE - start))
        self.end_headers()
        for offset in range(start, SIZE, 16384):
            try:
                self.wfile.write(BODY[offset:offset + 16384])
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.02)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Handler)
print("listening", flush=True)
server.serve_forever()
