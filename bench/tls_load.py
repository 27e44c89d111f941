"""Scenario T's TLS parts for bench/run.py (issue 33): the certificates, the client sockets,
ab for new connections with full handshakes, the resumption check and the idle-connection
memory probe.

Why two load clients: wrk keeps each connection's TLS session when it reconnects (its
`SSL_clear` keeps the session, and the next handshake offers it), so a wrk load with
`Connection: close` measures *resumed* handshakes (nginx logs `$ssl_session_reused` as `r` for
all but the first of each connection). ab makes a new `SSL` object for every connection and
never offers a session: every one of its connections is a full handshake (nginx logs `.`).
Both were checked that way against bench/nginx-tls.conf (see bench/README.md).

Standard library only; the certificates are made with the `openssl` command.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CERTIFICATES = {"ecdsa": "ECDSA P-256", "rsa": "RSA 2048"}  # kind -> what it is
_NEW_KEY = {
    "ecdsa": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
    "rsa": ["-newkey", "rsa:2048"],
}
IDLE_CONNECTIONS = 1000


def certificate_files(directory: Path, kind: str) -> tuple[Path, Path]:
    """The certificate and key of a kind in directory (make_certificates writes them)."""
    return directory / f"{kind}.crt", directory / f"{kind}.key"


def make_certificates(directory: Path) -> None:
    """A fresh self-signed certificate of each kind for 127.0.0.1 and localhost, 30 days,
    keys in PKCS#8 (Granian reads no other) and mode 0600."""
    directory.mkdir(parents=True, exist_ok=True)
    for kind, new_key in _NEW_KEY.items():
        cert, key = certificate_files(directory, kind)
        argv = [
            shutil.which("openssl") or "openssl", "req", "-x509", *new_key, "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "30",
            "-subj", f"/CN=corral bench {kind}",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ]  # fmt: skip
        subprocess.run(argv, check=True, capture_output=True)
        key.chmod(0o600)


def client_context() -> ssl.SSLContext:
    """A client that takes any certificate (they are self-signed) and asks for http/1.1."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    return context


def connect(host: str, port: int, timeout: float, tls: bool) -> socket.socket:
    """A connected socket, TLS (handshake made) when tls."""
    sock = socket.create_connection((host, port), timeout=timeout)
    if not tls:
        return sock
    try:
        return client_context().wrap_socket(sock)
    except BaseException:
        sock.close()
        raise


def resumes(host: str, port: int, path: str) -> str | None:
    """None when the server resumes a session a client kept from its last connection (a GET
    on each, so TLS 1.3's tickets, sent after the handshake, have arrived); else why not."""
    context = client_context()
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
    session = None
    for attempt in range(2):
        raw = socket.create_connection((host, port), timeout=5)
        with raw, context.wrap_socket(raw, session=session) as sock:
            sock.sendall(request)
            while sock.recv(65536):
                pass
            if attempt and not sock.session_reused:
                return f"a {sock.version()} session was offered and not resumed"
            session = sock.session
            if session is None:
                return "no session to keep after the first connection"
    return None


# --------------------------------------------------------------------------- ab


def ab_argv(cpu: str, connections: int, url: str, duration: float) -> list[str]:
    """ab for `duration` seconds (-n only lifts -t's 50,000 cap): HTTP/1.0, a new connection
    and a full handshake per request."""
    flags = f"-q -r -t {duration:g} -n 100000000 -c {connections}"
    return ["taskset", "-c", cpu, "ab", *flags.split(), url]


def parse_ab(text: str) -> dict[str, Any]:
    """ab's report in wrk's terms (run.py's parse_wrk): req/s, requests, bytes read,
    errors, latency percentiles in ms (ab's whole milliseconds)."""
    out: dict[str, Any] = {
        "rps": None,
        "requests": None,
        "bytes_read": None,
        "bytes_per_s": None,
        "non2xx": 0,
        "socket_errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0},
        "latency_ms": {},
    }
    if m := re.search(r"Requests per second:\s+([\d.]+)", text):
        out["rps"] = float(m.group(1))
    if m := re.search(r"Complete requests:\s+(\d+)", text):
        out["requests"] = int(m.group(1))
    if m := re.search(r"Total transferred:\s+(\d+) bytes", text):
        out["bytes_read"] = int(m.group(1))
    if m := re.search(r"Non-2xx responses:\s+(\d+)", text):
        out["non2xx"] = int(m.group(1))
    if m := re.search(
        r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", text
    ):
        connect, receive, length, exceptions = map(int, m.groups())
        out["socket_errors"] = {
            "connect": connect,
            "read": receive + length,
            "write": exceptions,
            "timeout": 0,
        }
    for pct, ms in re.findall(r"^\s+(\d+)%\s+(\d+)", text, re.M):
        out["latency_ms"][f"p{pct}"] = float(ms)
    return out


# --------------------------------------------------------------------------- idle connections


def idle_connections(
    host: str, port: int, rss_kib: Callable[[], int], count: int = IDLE_CONNECTIONS
) -> dict[str, Any]:
    """Open count TLS connections (handshake made, no request), hold them, and read the
    server's RSS before and while they are open: what an idle TLS connection costs it.
    open_after_s: how many were still open when the RSS was read (a server may close idle
    connections on a timer)."""
    before = rss_kib()
    return asyncio.run(_hold(host, port, count, before, rss_kib))


async def _hold(
    host: str, port: int, count: int, before: int, rss_kib: Callable[[], int]
) -> dict[str, Any]:
    context = client_context()
    gate = asyncio.Semaphore(50)  # at most 50 handshakes in flight: no backlog overflow
    start = time.monotonic()

    async def open_one() -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        async with gate:
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=context, server_hostname=""), 10
                )
            except (OSError, TimeoutError, ssl.SSLError):
                return None

    opened = [pair for pair in await asyncio.gather(*(open_one() for _ in range(count))) if pair]
    took = time.monotonic() - start
    await asyncio.sleep(1.0)  # let the server settle what the handshakes left
    during = rss_kib()
    still_open = sum(1 for reader, _ in opened if not reader.at_eof())
    for _, writer in opened:
        writer.close()
    for _, writer in opened:
        with contextlib.suppress(OSError, ssl.SSLError, ConnectionError):
            await writer.wait_closed()
    per = (during - before) / still_open if still_open else None
    return {
        "asked": count,
        "opened": len(opened),
        "open_when_measured": still_open,
        "open_s": round(took, 2),
        "rss_before_kib": before,
        "rss_with_kib": during,
        "kib_per_connection": round(per, 1) if per is not None else None,
    }
