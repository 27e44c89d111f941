"""corral's TLS transport (corral/server/tlstransport.py) through real processes and Python's
own TLS client: the close_notify both ways, a client's half-close over TLS (its answers still
come), flow control of a big answer to a client that reads late, WebSocket over ``wss``.
test_tls.py covers the rest (the door, handshakes, SNI, files through the encryption)."""

from __future__ import annotations

import hashlib
import socket
import ssl
import time
from pathlib import Path

import pytest
import trustme
from websockets.sync.client import connect as ws_connect

from tests.integration.server import Server, read_response
from tests.integration.test_tls import client

# the ca and certificate fixtures are conftest.py's
pytestmark = pytest.mark.usefixtures("each_core")

GET = b"GET %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n"


def tls_server(certificate: tuple[Path, Path], app: str, *flags: str) -> Server:
    chain, key = certificate
    return Server(app, "--certfile", str(chain), "--keyfile", str(key), *flags)


def connect(server: Server, ca: trustme.CA) -> ssl.SSLSocket:
    """A TLS connection whose end must be a close_notify: a bare EOF raises SSLEOFError."""
    raw = socket.create_connection((server.host, server.port), timeout=10)
    return client(ca).wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)


def read_to_end(tls: ssl.SSLSocket) -> bytes:
    received = b""
    while chunk := tls.recv(65536):  # b"": the server's close_notify
        received += chunk
    return received


def test_a_connection_the_server_closes_ends_with_a_close_notify(ca, certificate) -> None:
    with tls_server(certificate, "tls_transport_apps:wsgi") as server, connect(server, ca) as tls:
        tls.sendall(GET % (b"/", b"Connection: close\r\n"))
        answer = read_to_end(tls)  # no SSLEOFError: the close_notify came before the EOF
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nhello")


def test_a_client_that_half_closes_still_gets_its_answer(ca, certificate) -> None:
    # the application answers on a thread half a second later, after the client's end came:
    # first a bare EOF (TCP's), then a close_notify (TLS's) after the request
    with tls_server(certificate, "tls_transport_apps:wsgi", "--threads", "2") as server:
        with connect(server, ca) as tls:
            tls.sendall(GET % (b"/late", b""))
            socket.socket.shutdown(tls, socket.SHUT_WR)  # the socket's, not the TLS layer's
            answer = read_to_end(tls)
            assert answer.endswith(b"\r\n\r\nlate answer"), answer
        with socket.create_connection((server.host, server.port), timeout=10) as raw:
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls_object = client(ca).wrap_bio(incoming, outgoing, server_hostname="localhost")
            _handshake(raw, tls_object, incoming, outgoing)
            tls_object.write(GET % (b"/late", b""))
            with pytest.raises(ssl.SSLWantReadError):
                tls_object.unwrap()  # the client's close_notify; the server's is awaited
            raw.sendall(outgoing.read())
            received = b""
            while data := raw.recv(65536):
                incoming.write(data)
                try:
                    while chunk := tls_object.read(65536):
                        received += chunk
                except ssl.SSLWantReadError:
                    continue
                except ssl.SSLZeroReturnError:  # the server's close_notify (after the client's)
                    break
            assert received.endswith(b"\r\n\r\nlate answer"), received


def _handshake(raw: socket.socket, tls_object, incoming, outgoing) -> None:
    while True:
        try:
            tls_object.do_handshake()
        except ssl.SSLWantReadError:
            raw.sendall(outgoing.read())
            incoming.write(raw.recv(65536))
            continue
        raw.sendall(outgoing.read())
        return


def test_a_big_answer_waits_for_a_client_that_reads_late(ca, certificate) -> None:
    with tls_server(certificate, "tls_transport_apps:wsgi") as server, connect(server, ca) as tls:
        tls.sendall(GET % (b"/big", b""))
        time.sleep(1.0)  # the server's writes pause meanwhile (its buffer is full)
        status, fields, body = read_response(tls)
        assert status == 200 and len(body) == 8 << 20
        assert hashlib.sha256(body).hexdigest() == fields["x-digest"]
        tls.sendall(GET % (b"/", b""))  # and the connection serves on
        assert read_response(tls)[2] == b"hello"


def test_websockets_over_wss(ca, certificate) -> None:
    with tls_server(certificate, "websocket_apps:app") as server:
        url = f"wss://localhost:{server.port}/echo"
        with ws_connect(url, ssl=client(ca), compression=None) as ws:
            ws.send("h\u00e9llo over TLS")
            assert ws.recv() == "h\u00e9llo over TLS"
            ws.send(b"\x00\xff" * 100_000)  # several records each way
            assert ws.recv() == b"\x00\xff" * 100_000
