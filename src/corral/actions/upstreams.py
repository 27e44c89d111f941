"""Upstream servers as one worker sees them: where each is, its weight, whether it failed
lately, and the keep-alive connections it holds open (`corral.actions.proxy` sends requests on
them).

One `Upstream` per ``proxy`` address or ``upstreams`` object, made when the routes are
compiled (in the master, before the fork): from the fork on, each worker has its own copy, so
the state here (idle connections, failures, the weighted turn) is the worker's and needs no
lock. `forward`'s callers that name an address at run time get one `Upstream` per address
(`upstream_at`).

- **Choice**: smooth weighted round robin over the servers not failed lately (each turn, every
  server gains its weight; the one with the most is chosen and pays the total back): a
  server of weight 3 beside one of weight 1 gets 3 requests of 4, interleaved, not in a burst.
  Weight 0 is never chosen. When every server failed lately, the one failed the longest ago is
  tried all the same: a 502 can only be worse.
- **Failure**: a connection refused or timed out, or an answer that never came, marks the
  server failed for ``fail_timeout`` seconds (nginx's ``fail_timeout`` with ``max_fails=1``).
- **Keep-alive**: up to ``keepalive`` idle connections per server, the most recent reused first
  (the oldest then time out at the upstream, not here); one idle longer than
  ``keepalive_timeout`` is closed when next looked at, one the upstream closes leaves the pool
  when it does.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

from corral.http.upstream import ResponseParser, UpstreamError
from corral.net.upstream import DEFAULT_OPTIONS, ProxyOptions, parse_address
from corral.server import clock

__all__ = ["Upstream", "UpstreamConnection", "UpstreamServer", "upstream_at"]


class UpstreamServer:
    """One server of an upstream: its address, weight, failures and idle connections."""

    __slots__ = (
        "address",
        "current",
        "failed_at",
        "failed_until",
        "family",
        "idle",
        "name",
        "weight",
    )

    def __init__(self, name: str, weight: float) -> None:
        self.name = name  # as the configuration writes it (logs)
        self.family, self.address = parse_address(name)
        self.weight = weight
        self.current = 0.0  # its standing in the weighted turn
        self.failed_until = 0.0
        self.failed_at = 0.0
        self.idle: list[UpstreamConnection] = []

    def failed(self, options: ProxyOptions) -> None:
        now = clock.now()
        self.failed_at = now
        self.failed_until = now + options.fail_timeout

    def take_idle(self, options: ProxyOptions) -> UpstreamConnection | None:
        """A kept connection to reuse, the most recent first; None when none is left."""
        idle = self.idle
        now = clock.now()
        while idle:
            kept = idle.pop()
            if kept.closed:
                continue
            if now - kept.idle_since > options.keepalive_timeout:
                kept.close()
                continue
            return kept
        return None

    def keep(self, kept: UpstreamConnection, options: ProxyOptions) -> None:
        """An answer is over on ``kept``, which may serve another request."""
        if len(self.idle) >= options.keepalive:
            kept.close()
            return
        kept.call = None
        kept.idle_since = clock.now()
        self.idle.append(kept)

    def connect(
        self, loop: asyncio.AbstractEventLoop, options: ProxyOptions, then: Callable[..., None]
    ) -> Callable[..., object]:
        """Open a connection; ``then(connection)`` once made, ``then(None, timed_out)`` when
        it fails or takes more than ``connect_timeout``. Returns what cancels the attempt."""

        def protocol() -> UpstreamConnection:
            return UpstreamConnection(self, options.buffer_size)

        if self.family == socket.AF_UNIX:
            making: Any = loop.create_unix_connection(protocol, self.address)
        else:
            host, port = self.address
            making = loop.create_connection(protocol, host, port)
        task = loop.create_task(making)
        timer = loop.call_later(options.connect_timeout, task.cancel)

        def made(task: asyncio.Task[Any]) -> None:
            timer.cancel()
            if task.cancelled():
                then(None, True)
            elif task.exception() is not None:
                then(None, False)
            else:
                then(task.result()[1])

        task.add_done_callback(made)
        return task.cancel


class Upstream:
    """The servers one ``proxy`` or ``upstreams`` object names, with the proxy's settings."""

    __slots__ = ("name", "options", "servers", "total")

    def __init__(
        self, name: str, servers: list[tuple[str, float]], options: ProxyOptions = DEFAULT_OPTIONS
    ) -> None:
        self.name = name
        self.servers = [UpstreamServer(address, weight) for address, weight in servers]
        self.total = sum(server.weight for server in self.servers)
        self.options = options

    def choose(self, tried: list[UpstreamServer]) -> UpstreamServer | None:
        """The next server for a request (not one in ``tried``); None when none is left."""
        now = clock.now()
        best = None
        total = 0.0
        for server in self.servers:
            if server in tried or server.weight <= 0 or server.failed_until > now:
                continue
            server.current += server.weight
            total += server.weight
            if best is None or server.current > best.current:
                best = server
        if best is not None:
            best.current -= total
            return best
        failed = [
            s for s in self.servers if s not in tried and s.weight > 0 and s.failed_until > now
        ]
        return min(failed, key=lambda s: s.failed_at) if failed else None


_by_address: dict[tuple[str, ProxyOptions], Upstream] = {}


def upstream_at(address: str, options: ProxyOptions = DEFAULT_OPTIONS) -> Upstream:
    """The worker's one `Upstream` for a single ``address`` (made at its first use)."""
    key = (address, options)
    upstream = _by_address.get(key)
    if upstream is None:
        upstream = _by_address[key] = Upstream(address, [(address, 1.0)], options)
    return upstream


class UpstreamConnection:
    """The asyncio protocol of one connection to an upstream server: its answers parsed and
    handed to the request being proxied on it (``call``, a `corral.actions.proxy.ProxyCall`),
    or, idle, any sign of life ending it."""

    __slots__ = (
        "call",
        "closed",
        "idle_since",
        "parser",
        "server",
        "transport",
        "write_paused",
    )

    def __init__(self, server: UpstreamServer, head_limit: int) -> None:
        self.server = server
        self.transport: Any = None
        self.call: Any = None
        self.closed = False
        self.write_paused = False
        self.idle_since = 0.0
        self.parser = ResponseParser(self, head_limit)

    # -- the parser's sink: to the call

    def on_response(self, head: Any) -> None:
        self.call.on_response(head)

    def on_body(self, chunk: bytes) -> None:
        self.call.on_body(chunk)

    def on_response_end(self) -> None:
        self.call.on_response_end()

    # -- asyncio.Protocol

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        call = self.call
        if call is None:  # idle: an upstream speaking out of turn is not reused
            self.close()
            return
        call.activity = clock.now()
        try:
            self.parser.feed(data)
        except UpstreamError as exc:
            if self.call is not None:
                self.call.upstream_failed(str(exc))
            self.close()

    def eof_received(self) -> bool:
        call = self.call
        if call is not None:
            try:
                self.parser.feed_eof()
            except UpstreamError as exc:
                if self.call is not None:
                    self.call.upstream_failed(str(exc), self.parser.received == 0)
        self.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        call = self.call
        if call is not None:
            self.call = None
            call.upstream_failed(
                f"connection lost: {exc}" if exc else "connection closed",
                self.parser.received == 0,
            )

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.call is not None:
            self.call.activity = clock.now()  # send_timeout runs from now

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.call is not None:
            self.call.upstream_drained()

    def close(self, abort: bool = False) -> None:
        if not self.closed:
            self.closed = True
            if abort:
                self.transport.abort()
            else:
                self.transport.close()
