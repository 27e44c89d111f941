"""The PROXY protocol (``--proxy-protocol``, ``--proxy-allow-from``, a listener's
``proxy_protocol``/``proxy_allow_from``) through real corral processes and real headers.

The application (``apps/forwarded_apps.py``) answers what the environ says of the client.
A header's client becomes ``REMOTE_ADDR``/``REMOTE_PORT`` and the access log's address, for
every request of the connection; ``LOCAL`` and ``UNKNOWN`` keep the socket's peer; a
connection without a valid header, or from a peer not allowed, is closed with nothing written.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.http.proxyheader import V2_SIGNATURE
from tests.integration.server import Server, read_all, read_response, run_cli, wait_for
from tests.integration.sockets import send_each_in_its_own_read
from tests.integration.test_forwarded import ports, write_config

OTHER = "127.0.0.2"  # another loopback source (Linux routes all of 127/8 to lo)
ACCESS = re.compile(r"^(\S+) .*\"GET /(\S*) HTTP/1\.1\" 200 ", re.M)


def v1(client: str, port: int, destination: str = "127.0.0.1", family: str = "TCP4") -> bytes:
    return f"PROXY {family} {client} {destination} {port} 8000\r\n".encode()


def v2(client: str, port: int, *, command: int = 1) -> bytes:
    if ":" in client:
        family = 0x21
        addresses = socket.inet_pton(socket.AF_INET6, client) + socket.inet_pton(
            socket.AF_INET6, "::1"
        )
    else:
        family = 0x11
        addresses = socket.inet_aton(client) + socket.inet_aton("127.0.0.1")
    block = addresses + struct.pack(">HH", port, 8000) + b"\x04\x00\x02hi"  # a TLV, skipped
    return V2_SIGNATURE + bytes([0x20 | command, family]) + struct.pack(">H", len(block)) + block


def request(path: str = "/", close: bool = False) -> bytes:
    connection = "Connection: close\r\n" if close else ""
    return f"GET {path} HTTP/1.1\r\nHost: example.test\r\n{connection}\r\n".encode()


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def answer(sock: socket.socket) -> dict:
    status, _, body = read_response(sock)
    assert status == 200, (status, body)
    return json.loads(body)


def client_of(port: int, header: bytes, source: str = "127.0.0.1") -> tuple[str, str | None]:
    with connect(port, source) as sock:
        sock.sendall(header + request(close=True))
        found = answer(sock)
    return found["remote_addr"], found["remote_port"]


def closed_unanswered(port: int, data: bytes, source: str = "127.0.0.1") -> None:
    with connect(port, source) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return  # closed before all was sent: nothing was answered either
        assert read_all(sock) == b""


@pytest.fixture(scope="module")
def proxied() -> Iterator[Server]:
    with Server("forwarded_apps", "--proxy-protocol", "--access-logfile", "-") as server:
        yield server
        assert server.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in server.stderr, server.stderr


@pytest.mark.parametrize(
    ("header", "client"),
    [
        (v1("203.0.113.7", 56324), ("203.0.113.7", "56324")),
        (v1("2001:db8::7", 1, "::1", "TCP6"), ("2001:db8::7", "1")),
        (v2("198.51.100.9", 4444), ("198.51.100.9", "4444")),
        (v2("2001:db8::9", 65535), ("2001:db8::9", "65535")),
    ],
    ids=["v1-tcp4", "v1-tcp6", "v2-ipv4", "v2-ipv6"],
)
def test_the_header_names_the_client(proxied: Server, header: bytes, client: tuple) -> None:
    assert client_of(proxied.port, header) == client


@pytest.mark.parametrize(
    "header",
    [v2("198.51.100.9", 4444, command=0), b"PROXY UNKNOWN\r\n"],
    ids=["v2-local", "v1-unknown"],
)
def test_local_and_unknown_keep_the_sockets_peer(proxied: Server, header: bytes) -> None:
    with connect(proxied.port) as sock:
        sock.sendall(header + request(close=True))
        found = answer(sock)
        assert (found["remote_addr"], found["remote_port"]) == (
            "127.0.0.1",
            str(sock.getsockname()[1]),
        )


def test_every_request_of_the_connection_and_the_access_log_see_the_client(
    proxied: Server,
) -> None:
    with connect(proxied.port) as sock:
        header = v1("192.0.2.44", 1234)
        # the header byte by byte, each read alone: the connection waits for the rest
        send_each_in_its_own_read(sock, [bytes([byte]) for byte in header])
        for number in range(3):
            sock.sendall(request(f"/seen-{number}"))
            assert answer(sock)["remote_addr"] == "192.0.2.44"
    wait_for(lambda: "seen-2" in proxied.stdout)
    logged = {path: host for host, path in ACCESS.findall(proxied.stdout)}
    assert [logged[f"seen-{n}"] for n in range(3)] == ["192.0.2.44"] * 3


@pytest.mark.parametrize(
    "data",
    [
        request(),  # no header: never taken as plain HTTP
        b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 80\r\n" + request(),
        b"PROXY TCP4 not.an.address 5.6.7.8 1 80\r\n" + request(),
        b"PROXY UNKNOWN " + b"x" * 200 + b"\r\n" + request(),  # longer than 107 bytes
        V2_SIGNATURE + b"\x21\x12\x00\x0c" + b"\0" * 12 + request(),  # datagram
    ],
    ids=["missing", "bad-port", "bad-address", "oversize", "v2-datagram"],
)
def test_a_missing_or_malformed_header_closes_the_connection(proxied: Server, data: bytes):
    before = proxied.stderr.count("PROXY protocol: connection from 127.0.0.1")
    closed_unanswered(proxied.port, data)
    wait_for(lambda: proxied.stderr.count("PROXY protocol: connection from 127.0.0.1") > before)
    assert proxied.stderr.count("PROXY protocol: connection from 127.0.0.1") == before + 1


def test_after_the_header_http_errors_are_http(proxied: Server) -> None:
    with connect(proxied.port) as sock:
        sock.sendall(v1("192.0.2.1", 1) + b"GET / HTTP/1.1\r\n\r\n")  # no Host
        status, headers, _ = read_response(sock)
        assert status == 400 and headers["connection"] == "close"


@pytest.mark.wallclock
def test_an_incomplete_header_is_closed_quietly_at_the_header_timeout() -> None:
    with (
        Server("forwarded_apps", "--proxy-protocol", "--header-timeout", "1") as server,
        connect(server.port) as sock,
    ):
        start = time.monotonic()
        sock.sendall(b"PROXY TCP4 192.0.2.1 ")
        assert read_all(sock) == b""  # no 408: there was no HTTP yet
        assert time.monotonic() - start < 3


def test_only_allowed_peers_may_send_a_header() -> None:
    with Server("forwarded_apps", "--proxy-protocol", "--proxy-allow-from", OTHER) as server:
        closed_unanswered(server.port, v1("203.0.113.1", 1) + request())
        server.wait_log(r"PROXY protocol: connection from 127\.0\.0\.1:\d+ refused")
        assert client_of(server.port, v1("203.0.113.1", 1), source=OTHER) == ("203.0.113.1", "1")
    with Server("forwarded_apps", "--proxy-protocol", "--proxy-allow-from", "*") as server:
        assert client_of(server.port, v1("203.0.113.2", 2), source=OTHER)[0] == "203.0.113.2"
    # Gunicorn's default: 127.0.0.1 and ::1 only
    with Server("forwarded_apps", "--proxy-protocol") as server:
        closed_unanswered(server.port, v1("203.0.113.3", 3) + request(), source=OTHER)
        assert client_of(server.port, v1("203.0.113.3", 3))[0] == "203.0.113.3"


@pytest.mark.parametrize(
    ("mode", "taken", "refused"),
    [
        ("v1", v1("192.0.2.5", 5), v2("192.0.2.5", 5)),
        ("v2", v2("192.0.2.5", 5), v1("192.0.2.5", 5)),
    ],
)
def test_a_mode_takes_its_version_only(mode: str, taken: bytes, refused: bytes) -> None:
    with Server("forwarded_apps", f"--proxy-protocol={mode}") as server:
        assert client_of(server.port, taken) == ("192.0.2.5", "5")
        closed_unanswered(server.port, refused + request())


def test_listener_keys_choose_per_listener(tmp_path: Path) -> None:
    """A Unit document: one listener with the PROXY protocol (from 127.0.0.2 only), one
    without; the server-wide setting stays off."""
    path = write_config(
        tmp_path,
        {
            "127.0.0.1:0": {
                "pass": "applications/a",
                "proxy_protocol": True,
                "proxy_allow_from": [f"{OTHER}/32"],
            },
            f"{OTHER}:0": {"pass": "applications/a"},
        },
    )
    with Server(f"--config={path}", bind=None) as server:
        wait_for(lambda: len(ports(server)) == 2)
        proxied_port, plain_port = ports(server)["127.0.0.1"], ports(server)[OTHER]
        assert client_of(proxied_port, v2("198.51.100.1", 7), source=OTHER)[0] == "198.51.100.1"
        closed_unanswered(proxied_port, v2("198.51.100.1", 7) + request())  # from 127.0.0.1
        with socket.create_connection((OTHER, plain_port), timeout=10) as sock:
            sock.sendall(request(close=True))
            assert answer(sock)["remote_addr"] == "127.0.0.1"


def test_a_bad_listener_key_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        {"127.0.0.1:0": {"pass": "applications/a", "proxy_allow_from": ["10.0.0.0/40"]}},
    )
    result = run_cli(f"--config={path}", "--check-config")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f'corral: error: {path}: $.listeners["127.0.0.1:0"].proxy_allow_from[0]: address pattern '
        "'10.0.0.0/40': expected a CIDR prefix length 0-32 after '/'"
    ]


def test_a_routed_listener_and_its_handoffs_keep_the_client(tmp_path: Path) -> None:
    """Both applications accept on the routed listener; a connection alternating between them
    is handed off at each change, and the receiving worker sees the header's client too. With
    `forwarded`, the trust goes by that client: 192.0.2.99 is not a trusted proxy."""
    routes = [
        {"match": {"uri": "/b"}, "action": {"pass": "applications/b"}},
        {"action": {"pass": "applications/a"}},
    ]
    forwarded = {"client_ip": "X-Forwarded-For", "source": ["192.0.2.10"]}
    listener = {"pass": "routes", "proxy_protocol": "auto", "forwarded": forwarded}
    path = write_config(tmp_path, {"127.0.0.1:0": listener}, routes=routes)
    with Server(f"--config={path}", bind=None, wait_ready=False) as server:
        server.wait_log(r"worker \d+ of \w+ ready", count=2, timeout=30)
        port = ports(server)["127.0.0.1"]
        # whichever worker accepts, one of the two orders hands off the request that came
        # in the read after the header: the header itself must not go with it
        cases = [
            (client, expected, order)
            for client, expected in (("192.0.2.99", "192.0.2.99"), ("192.0.2.10", "203.0.113.50"))
            for order in (("/", "/b", "/", "/b"), ("/b", "/", "/b", "/"))
        ]
        for client, expected, order in cases:
            with connect(port) as sock:
                sock.sendall(v1(client, 4000))
                for target in order:
                    sock.sendall(
                        f"GET {target} HTTP/1.1\r\nHost: t\r\n"
                        "X-Forwarded-For: 203.0.113.50\r\n\r\n".encode()
                    )
                    found = answer(sock)
                    assert found["app"] == ("b" if target == "/b" else "a")
                    assert found["remote_addr"] == expected, (client, target, found)
        assert "hand-off of" not in server.stderr  # none failed
