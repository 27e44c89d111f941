"""What the proxy's tests share: a corral in front whose routes proxy, and raw HTTP on a
socket (the tests read what the client really gets, a reset included)."""

from __future__ import annotations

import contextlib
import json
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.integration.server import Server


@contextlib.contextmanager
def front(
    action: dict[str, Any],
    upstreams: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
) -> Iterator[Server]:
    """A corral whose one route takes ``action``, with ``upstreams`` and ``settings``."""
    doc: dict[str, Any] = {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": action}],
        "settings": settings or {},
    }
    if upstreams is not None:
        doc["upstreams"] = upstreams
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "front.json"
        path.write_text(json.dumps(doc))
        with Server(f"--config={path}", bind=None) as server:
            yield server


def exchange(server: Server, data: bytes, timeout: float = 10.0) -> bytes:
    """``data`` sent on a new connection; everything read until the server closes it."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as sock:
        sock.sendall(data)
        return read_until_closed(sock)


def read_until_closed(sock: socket.socket) -> bytes:
    """What comes until EOF; a reset raises ConnectionResetError."""
    out = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return out
        out += data
