"""Connections from one worker to one FastCGI application (php-fpm): made on demand, at
most ``limit`` of them, kept open between requests (``FCGI_KEEP_CONN``), on the worker's loop.

A `FastCgiPool` is one address's connections in one worker. `FastCgiPool.get` gives a
`Backend` (a connection's protocol) to a user: an idle one at once, else a new one once it
connects while fewer than ``limit`` are open, else the first one another request gives
back (requests wait their turn here, in order, rather than in php-fpm's listen backlog on
connections of their own: a php-fpm child serves one connection at a time, and keeps serving
it while it stays open, so connections past its children would only wait, and be made and
closed for each request). A user that cannot connect is told so (``failed``: 502 when
refused or missing, 504 when ``connect_timeout`` passed). While it serves a request the
backend passes everything to its user (``records``, ``lost``, ``writable``, ``broken``);
once the request ended cleanly the user gives it back (`FastCgiPool.put`). An idle
connection that php-fpm closes (a child that ended) leaves the pool: the loop reads it, and
a close it has not read yet is looked for (`Backend.gone`, a system call) only for a user
that asks (``user.check_kept``: one that could not be sent again on another connection if
this one turned out closed). When php-fpm's children are recycled (``pm.max_requests``,
``recycled``) such a user gets a new connection instead: a child that reached its count
closes its connection as its last answer leaves, and that close can cross the next request
after any look at it; a new connection is accepted by a child that reads it.

The pool also keeps its users' read deadlines (`FastCgiPool.watch`): one timer a period
(``sweep``) while any request is under way, which tells each user whose ``deadline`` passed
(``expired``), rather than a timer made and cancelled for each request.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from typing import Any

from corral.fastcgi.records import FastCgiError, RecordReader
from corral.net.upstream import parse_address
from corral.server import clock

__all__ = ["Backend", "FastCgiPool"]

_PEEK = socket.MSG_PEEK | socket.MSG_DONTWAIT


class Backend:
    """One connection to the application (an `asyncio.Protocol`: the loop's only calls)."""

    __slots__ = ("closed", "peek", "pool", "reader", "reused", "transport", "user", "write_paused")

    def __init__(self, pool: FastCgiPool) -> None:
        self.pool = pool
        self.transport: Any = None
        self.reader = RecordReader()
        self.user: Any = None  # what serves a request on it now (actions/fastcgi.FastCgiReply)
        self.closed = False
        self.write_paused = False
        self.reused = False  # it served a request before this one
        # a socket object on the transport's descriptor, made once for `gone` (making one per
        # request cost more than the rest of the check); detached, never closed, by `_ended`
        self.peek: socket.socket | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        self.peek = socket.socket(sock.family, socket.SOCK_STREAM, 0, fileno=sock.fileno())

    def gone(self) -> bool:
        """Whether php-fpm closed (or wrote on) this idle connection, though the loop has not
        read it yet: a child that ended after its request (``pm.max_requests``) closes the
        connection as the answer leaves, often before the next request takes it."""
        peek = self.peek
        if peek is None:
            return True
        try:
            peek.recv(1, _PEEK)
        except BlockingIOError:
            return False  # nothing to read: open and quiet
        except OSError:
            return True
        return True

    def _ended(self) -> None:
        """The transport is closing its descriptor: the peeking socket lets go of it first."""
        peek, self.peek = self.peek, None
        if peek is not None:
            peek.detach()

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
        self._ended()
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
            self._ended()
            self.transport.abort()


class FastCgiPool:
    """One FastCGI address's connections in one worker (``address``: ``unix:/path`` or
    ``host:port``), at most ``limit``."""

    __slots__ = (
        "address",
        "all",
        "connect_timeout",
        "connecting",
        "idle",
        "keep",
        "limit",
        "loop",
        "recycled",
        "sweep",
        "sweeping",
        "waiting",
        "watched",
    )

    def __init__(
        self,
        loop: Any,
        address: str,
        *,
        limit: int,
        connect_timeout: float,
        keep: bool = True,
        sweep: float = 1.0,
        recycled: bool = False,
    ) -> None:
        self.loop = loop
        self.address = address
        self.limit = max(1, limit)
        # connections kept from one request to the next (FCGI_KEEP_CONN); False: each closes
        # after its request (php-fpm has fewer children than the workers that reach it)
        self.keep = keep
        # php-fpm's children end after pm.max_requests: a kept connection may be closing as
        # a request goes on it, too late for `Backend.gone` to see
        self.recycled = recycled
        self.connect_timeout = connect_timeout
        self.idle: list[Backend] = []
        self.all: set[Backend] = set()
        self.connecting = 0
        self.waiting: deque[Any] = deque()  # users waiting for a connection, in order
        self.sweep = max(0.01, sweep)  # seconds between two looks at the users' deadlines
        self.watched: set[Any] = set()  # users whose deadline is kept (`watch`)
        self.sweeping: Any = None  # the sweep's timer while there are users

    def get(self, user: Any) -> None:
        """``user.connected(backend)`` now or later, or ``user.failed(status, why)``; a kept
        connection is checked first (`Backend.gone`) when ``user.check_kept``, or not used
        at all when children are recycled: a new one takes an idle one's place."""
        if user.check_kept and self.recycled:
            if self.idle and len(self.all) + self.connecting >= self.limit:
                self.idle[0].close()  # (the oldest; `forget` takes it out of `idle`)
        else:
            while self.idle:
                backend = self.idle.pop()
                if backend.closed:
                    continue
                if user.check_kept and backend.gone():
                    backend.close()
                    continue
                backend.user = user
                user.connected(backend)
                return
        if len(self.all) + self.connecting < self.limit:
            self.connecting += 1
            user.connecting = self.loop.create_task(self._connect(user))
        else:
            self.waiting.append(user)

    def watch(self, user: Any) -> None:
        """``user.expired(now)`` once ``user.deadline`` (a `corral.server.clock` time, which
        the user may move on) passed, within ``sweep`` seconds after, until `unwatch`."""
        self.watched.add(user)
        if self.sweeping is None:
            self.sweeping = self.loop.call_later(self.sweep, self._sweep)

    def unwatch(self, user: Any) -> None:
        self.watched.discard(user)

    def _sweep(self) -> None:
        self.sweeping = None
        if not self.watched:
            return  # (kept through quiet periods: started again by the next `watch`)
        now = clock.now()
        for user in [user for user in self.watched if user.deadline <= now]:
            user.expired(now)
        if self.watched and self.sweeping is None:
            self.sweeping = self.loop.call_later(self.sweep, self._sweep)

    def leave(self, user: Any) -> None:
        """``user`` no longer waits (its client went, or it timed out)."""
        if user in self.waiting:
            self.waiting.remove(user)

    async def _connect(self, user: Any) -> None:
        address = self.address
        family, where = parse_address(address)  # (the proxy's reading: Unit's forms)
        try:
            async with asyncio.timeout(self.connect_timeout or None):
                if family == socket.AF_UNIX:
                    _, backend = await self.loop.create_unix_connection(
                        lambda: Backend(self), where
                    )
                else:
                    _, backend = await self.loop.create_connection(lambda: Backend(self), *where)
                    backend.transport.get_extra_info("socket").setsockopt(
                        socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
                    )
        except TimeoutError:
            self._failed(user, 504, f"no connection within {self.connect_timeout:g} s")
            return
        except OSError as exc:
            self._failed(user, 502, f"cannot connect to {address}: {exc.strerror or exc}")
            return
        except asyncio.CancelledError:  # its client went
            self.connecting -= 1
            self._next()
            return
        self.connecting -= 1
        user.connecting = None
        self.all.add(backend)
        backend.user = user
        user.connected(backend)

    def _failed(self, user: Any, status: int, why: str) -> None:
        self.connecting -= 1
        user.connecting = None
        user.failed(status, why)
        # the others waiting would fail alike: each tries for itself, in turn
        self._next()

    def put(self, backend: Backend) -> None:
        """``backend``'s request ended cleanly: to the next request waiting, or kept idle."""
        backend.user = None
        backend.reader.reset()
        backend.reused = True
        if backend.closed:
            return
        if not self.keep:
            backend.close()  # (php-fpm closes it too: the request did not ask to keep it)
            return
        if self.waiting:
            if self.waiting[0].check_kept and self.recycled:
                backend.close()  # (its place to a new connection: `forget` calls `_next`)
                return
            user = self.waiting.popleft()
            backend.user = user
            user.connected(backend)
            return
        self.idle.append(backend)

    def forget(self, backend: Backend) -> None:
        """``backend`` is closed: its place is free for a request waiting."""
        self.all.discard(backend)
        if backend in self.idle:
            self.idle.remove(backend)
        self._next()

    def _next(self) -> None:
        if self.waiting and len(self.all) + self.connecting < self.limit:
            self.get(self.waiting.popleft())

    def drain(self) -> None:
        """No connection kept from now on (the worker drains): the idle ones close, each
        busy one after its request."""
        self.keep = False
        for backend in list(self.idle):
            backend.close()

    def close(self) -> None:
        """The worker exits: every connection goes."""
        self.waiting.clear()
        self.watched.clear()
        if self.sweeping is not None:
            self.sweeping.cancel()
            self.sweeping = None
        for backend in list(self.all):
            backend.close()
