"""Connections from one worker to one FastCGI application (php-fpm): made on demand, kept
open between requests (``FCGI_KEEP_CONN``) up to a count, on the worker's loop.

A `FastCgiPool` is one address's connections in one worker. `FastCgiPool.get` gives a
`Backend` (a connection's protocol) to a user: an idle one at once, else a new one once it
connects, or the user is told it could not (``failed``: 502 when refused or missing, 504
when ``connect_timeout`` passed). While it serves a request the backend passes everything to
its user (``records``, ``lost``, ``writable``); once the request ended cleanly the user gives
it back (`FastCgiPool.put`), and it waits idle, or is closed when ``keep`` are idle already.
An idle connection that php-fpm closes leaves the pool. One php-fpm child serves one
connection at a time: the idle connections a worker keeps hold children, so ``keep`` is
bounded by the children each worker may hold (`corral.php.apps`).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from corral.fastcgi.records import FastCgiError, RecordReader

__all__ = ["Backend", "FastCgiPool"]


class Backend(asyncio.Protocol):
    """One connection to the application."""

    def __init__(self, pool: FastCgiPool) -> None:
        self.pool = pool
        self.transport: Any = None
        self.reader = RecordReader()
        self.user: Any = None  # what serves a request on it now (actions/fastcgi.FastCgiReply)
        self.closed = False
        self.write_paused = False
        self.reused = False  # it served a request before this one

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        user = self.user
        if user is None:  # an idle connection the application writes on: not FastCGI
            self.close()
            return
        try:
            events = self.reader.feed(data)
        except FastCgiError as exc:
            self.close()
            user.broken(str(exc))
            return
        if events:
            user.records(events)

    def eof_received(self) -> bool | None:
        return False  # closes

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        user, self.user = self.user, None
        if user is not None:
            user.lost(exc)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.user is not None:
            self.user.writable()

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)

    def close(self) -> None:
        """Closed at once (a request abandoned, an answer that broke the protocol)."""
        if not self.closed:
            self.closed = True
            self.user = None
            self.pool.forget(self)
            self.transport.abort()


class FastCgiPool:
    """One FastCGI address's connections in one worker (``address``: ``unix:/path`` or
    ``host:port``)."""

    def __init__(self, loop: Any, address: str, *, keep: int, connect_timeout: float) -> None:
        self.loop = loop
        self.address = address
        self.keep = keep
        self.connect_timeout = connect_timeout
        self.idle: list[Backend] = []
        self.all: set[Backend] = set()

    def get(self, user: Any) -> None:
        """``user.connected(backend)`` now or later, or ``user.failed(status, why)``."""
        while self.idle:
            backend = self.idle.pop()
            if not backend.closed:
                backend.user = user
                user.connected(backend)
                return
        task = self.loop.create_task(self._connect(user))
        user.connecting = task

    async def _connect(self, user: Any) -> None:
        address = self.address
        try:
            async with asyncio.timeout(self.connect_timeout or None):
                if address.startswith("unix:"):
                    _, backend = await self.loop.create_unix_connection(
                        lambda: Backend(self), address[5:]
                    )
                else:
                    host, _, port = address.rpartition(":")
                    _, backend = await self.loop.create_connection(
                        lambda: Backend(self), host.strip("[]"), int(port)
                    )
                    backend.transport.get_extra_info("socket").setsockopt(
                        socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
                    )
        except TimeoutError:
            user.connecting = None
            user.failed(504, f"no connection to {address} within {self.connect_timeout:g} s")
            return
        except OSError as exc:
            user.connecting = None
            user.failed(502, f"cannot connect to {address}: {exc.strerror or exc}")
            return
        user.connecting = None
        self.all.add(backend)
        backend.user = user
        user.connected(backend)

    def put(self, backend: Backend) -> None:
        """``backend``'s request ended cleanly: kept for the next, or closed."""
        backend.user = None
        backend.reader.reset()
        backend.reused = True
        if backend.closed:
            return
        if len(self.idle) < self.keep:
            self.idle.append(backend)
        else:
            backend.closed = True
            self.all.discard(backend)
            backend.transport.close()

    def forget(self, backend: Backend) -> None:
        self.all.discard(backend)
        if backend in self.idle:
            self.idle.remove(backend)

    def close(self) -> None:
        """The worker exits: every connection goes."""
        for backend in list(self.all):
            backend.close()
