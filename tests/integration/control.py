"""A client of the control API for the tests: raw HTTP/1.1 over its unix or TCP socket.

Each request opens a connection, sends the bytes and reads until the server closes it: the
control API answers one request per connection, and a worker that kept a copy of the
connection (forked while the change waited for it) would keep the close from arriving, which
the read's timeout then shows.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.server import Server

ROOT = Path(__file__).resolve().parents[2]
CONTROL_AT = re.compile(r"control API on (unix:\S+|http://\S+)")
LISTENING_ON = re.compile(r"listening on https?://([\d.]+):(\d+) \((\S+)\)")


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    raw: bytes  # the body

    @property
    def json(self) -> Any:
        return json.loads(self.raw)


class Control:
    """The control API at ``address``: ``unix:PATH`` or ``http://HOST:PORT``."""

    def __init__(self, address: str, token: str | None = None, timeout: float = 60.0) -> None:
        self.address = address
        self.token = token
        self.timeout = timeout

    @classmethod
    def of(cls, server: Server, token: str | None = None) -> Control:
        """The control API a server logged that it serves."""
        return cls(server.wait_log(CONTROL_AT.pattern)[-1], token)

    def connect(self) -> socket.socket:
        if self.address.startswith("unix:"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: Any = self.address[5:]
        else:
            host, _, port = self.address.removeprefix("http://").rpartition(":")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            target = (host, int(port))
        sock.settimeout(self.timeout)
        sock.connect(target)
        return sock

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: tuple[tuple[str, str], ...] = (),
        *,
        token: str | None = None,
    ) -> Answer:
        """``body``: bytes as they are, anything else as JSON."""
        data = _encode(body)
        lines = [f"{method} {path} HTTP/1.1", "Host: localhost"]
        bearer = token if token is not None else self.token
        if bearer is not None:
            lines.append(f"Authorization: Bearer {bearer}")
        if body is not None:
            lines.append(f"Content-Length: {len(data)}")
        lines += [f"{name}: {value}" for name, value in headers]
        with self.connect() as sock:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        return parse(received)

    def get(self, path: str, **kwargs: Any) -> Answer:
        return self.request("GET", path, **kwargs)

    def put(self, path: str, body: Any, **kwargs: Any) -> Answer:
        return self.request("PUT", path, body, **kwargs)

    def post(self, path: str, body: Any, **kwargs: Any) -> Answer:
        return self.request("POST", path, body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Answer:
        return self.request("DELETE", path, **kwargs)


def _encode(body: Any) -> bytes:
    if body is None:
        return b""
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def parse(received: bytes) -> Answer:
    """One complete response, strictly: a status line, headers, a Content-Length body and
    nothing after it, ``Connection: close``."""
    head, sep, body = received.partition(b"\r\n\r\n")
    assert sep, f"no complete head in {received!r}"
    status_line, *fields = head.decode("latin-1").split("\r\n")
    match = re.fullmatch(r"HTTP/1\.1 (\d{3}) [^\r\n]+", status_line)
    assert match, status_line
    headers = {}
    for field in fields:
        name, colon, value = field.partition(":")
        assert colon and name == name.strip(), field
        headers[name.lower()] = value.strip()
    assert headers["content-length"] == str(len(body)), (headers, body)
    assert headers["connection"] == "close"
    assert headers["content-type"] in (  # JSON, or Prometheus' text for /metrics
        "application/json",
        "text/plain; version=0.0.4; charset=utf-8",
    )
    return Answer(int(match[1]), headers, body)


def listening_port(server: Server, key: str) -> int:
    """The real port of the listener whose document key is ``key`` (``127.0.0.1:0``), from
    the last time the log says it was bound."""
    ports = [int(port) for _, port, name in LISTENING_ON.findall(server.stderr) if name == key]
    assert ports, server.stderr
    return ports[-1]


@contextmanager
def short_dir() -> Iterator[Path]:
    """A directory with a short path (a unix socket path has at most 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="cc", dir="/tmp") as path:
        yield Path(path)


def ctl(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``corral ctl ARGS`` run to its end: exit code, stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, "-m", "corral", "ctl", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})},
    )
