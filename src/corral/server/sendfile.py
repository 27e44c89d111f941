"""A file range copied to a connection's socket with os.sendfile (`HttpConnection.sendfile`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol


class SendingConnection(Protocol):
    """The connection a file goes to, as read here: `corral.server.connection`'s
    `HttpConnection`, which imports this module."""

    transport: Any  # its asyncio transport, whose socket the job writes to
    loop: Any  # the worker's event loop, which says when the socket is writable
    closed: bool
    sendfile_job: Any  # the job under way, while the socket is watched

    def send_wait(self, waiting: bool) -> None: ...


class SendfileJob:
    """Copies a file to the socket with os.sendfile, waiting for writability on the loop.

    The transport owns the socket's descriptor and the loop refuses a second
    watcher on it, so the job watches a duplicate of the descriptor.
    """

    __slots__ = ("conn", "count", "done", "dup", "fd", "offset", "watching")

    def __init__(
        self,
        conn: SendingConnection,
        fd: int,
        offset: int,
        count: int,
        done: Callable[[bool], None],
    ) -> None:
        self.conn = conn
        self.fd = fd
        self.offset = offset
        self.count = count
        self.done = done
        self.dup = os.dup(conn.transport.get_extra_info("socket").fileno())
        self.watching = False

    def step(self) -> None:
        ok = True
        try:
            while self.count > 0:
                if self.conn.closed:
                    ok = False
                    break
                try:
                    sent = os.sendfile(self.dup, self.fd, self.offset, min(self.count, 1 << 20))
                except BlockingIOError:
                    conn = self.conn
                    conn.send_wait(True)  # each wait for the client restarts the clock
                    if not self.watching:
                        self.watching = True
                        conn.sendfile_job = self
                        conn.loop.add_writer(self.dup, self.step)
                    return
                if sent == 0:  # the file is shorter than promised: framing is broken
                    ok = False
                    break
                self.offset += sent
                self.count -= sent
        except OSError:
            ok = False
        self._end(ok)

    def cancel(self) -> None:
        """The connection is gone: the duplicate must not keep its socket open."""
        self._end(False)

    def _end(self, ok: bool) -> None:
        if self.dup < 0:
            return
        conn = self.conn
        if self.watching:
            conn.loop.remove_writer(self.dup)
            conn.sendfile_job = None
            conn.send_wait(False)
        os.close(self.dup)
        self.dup = -1
        self.done(ok)
