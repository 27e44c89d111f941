"""What the proxy's tests share: a corral in front whose routes proxy, and raw HTTP on a
socket (the tests read what the client really gets, a reset included)."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.integration.server import Server


@contextlib.contextmanager
def front(
    action: dict[str, Any] | None = None,
    upstreams: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    routes: list[dict[str, Any]] | None = None,
) -> Iterator[Server]:
    """A corral whose one route takes ``action`` (or whose ``routes`` are given), with
    ``upstreams`` and ``settings``."""
    doc: dict[str, Any] = {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": routes if routes is not None else [{"action": action}],
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


class ThreadedUpstream:
    """An upstream of the tests' own on a loopback port: a thread accepts, a thread per
    connection answers it (`_answer`, a subclass's); ``accepted``: the connections it took."""

    def __init__(self) -> None:
        self.accepted = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self._took()
            threading.Thread(target=self._answer, args=(sock,), daemon=True).start()

    def _took(self) -> None:
        """A connection was accepted (before its thread starts)."""

    def _answer(self, sock: socket.socket) -> None:
        raise NotImplementedError


class RawUpstream(ThreadedUpstream):
    """An upstream that reads each request's head, then sends ``answer`` as it is (malformed
    on purpose, or cut short; a tuple: its parts a moment apart, each a read of its own at the
    proxy), then closes (``ending`` "close"), resets ("reset"), holds the connection open
    ("hold") or sends chunks for ever ("endless": ``ended`` is set once a send fails)."""

    def __init__(
        self, answer: bytes | tuple[bytes, ...], ending: str = "close", read: bool = True
    ) -> None:
        self.answer = answer
        self.ending = ending
        self.read = read  # False: never reads (a server that does not take a request's body)
        self.ended = threading.Event()
        self.held: list[socket.socket] = []
        super().__init__()

    def _answer(self, sock: socket.socket) -> None:
        try:
            if not self.read:
                self.held.append(sock)
                return
            data = b""
            while b"\r\n\r\n" not in data:
                more = sock.recv(65536)
                if not more:
                    return
                data += more
            parts = self.answer if isinstance(self.answer, tuple) else (self.answer,)
            for number, part in enumerate(parts):
                if number:
                    time.sleep(0.2)
                sock.sendall(part)
            if self.ending == "endless":
                piece = b"10000\r\n" + b"e" * 0x10000 + b"\r\n"
                try:
                    while True:
                        sock.sendall(piece)
                finally:
                    self.ended.set()
            if self.ending == "hold":
                self.held.append(sock)
                return
            if self.ending == "reset":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        except OSError:
            sock.close()

    def close(self) -> None:
        self.listener.close()
        for sock in self.held:
            sock.close()

    def __enter__(self) -> RawUpstream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
