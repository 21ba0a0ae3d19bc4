"""The app's server: HTTP/3 over QUIC on UDP 443 (aioquic), and HTTP/1.1 over TCP on 8080 for
comparison, on ADDRESS (the first argument; default every address). Every answer is `ok`. It says `listening` once both listen, and `client moved from
A to B` when a QUIC connection's packets start coming from another address (a NAT that
rebound, a phone that changed networks): QUIC follows it; TCP cannot."""

from __future__ import annotations

import asyncio
import datetime
import http.server
import sys
import threading

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ProtocolNegotiated
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

NAME = "chat.example.test"


def self_signed() -> tuple:
    """A certificate for NAME, made now (the client in the example does not verify it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAME)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False)
                   .sign(key, hashes.SHA256()))
    return certificate, key


def address(peer: tuple) -> str:
    return f"{peer[0]}:{peer[1]}"


class HTTP3Server(QuicConnectionProtocol):
    def __init__(self, *arguments, **options) -> None:
        super().__init__(*arguments, **options)
        self._h3 = None
        self._peer = None

    def datagram_received(self, data, addr) -> None:
        if self._peer is not None and addr != self._peer:
            print(f"client moved from {address(self._peer)} to {address(addr)}", flush=True)
        self._peer = addr
        super().datagram_received(data, addr)

    def quic_event_received(self, event) -> None:
        if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self._h3 = H3Connection(self._quic)
        if self._h3 is None:
            return
        for received in self._h3.handle_event(event):
            if isinstance(received, HeadersReceived) and received.stream_ended:
                self._h3.send_headers(received.stream_id, [(b":status", b"200"), (b"content-length", b"2")])
                self._h3.send_data(received.stream_id, b"ok", end_stream=True)
        self.transmit()


class HTTP1Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *arguments) -> None:
        pass


async def main(address: str) -> None:
    configuration = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    configuration.certificate, configuration.private_key = self_signed()
    # Bound to the address clients ask for, so that the answers leave from it (a UDP socket on
    # every address answers from whichever the route chooses, which a NAT does not know).
    await serve(address, 443, configuration=configuration, create_protocol=HTTP3Server)
    tcp = http.server.ThreadingHTTPServer(("0.0.0.0", 8080), HTTP1Handler)
    threading.Thread(target=tcp.serve_forever, daemon=True).start()
    print("listening", flush=True)
    await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "::"))
    except KeyboardInterrupt:
        sys.exit(0)
