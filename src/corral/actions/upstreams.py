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
- **Cap**: with ``max_conns`` (the ``proxy_max_conns`` setting, or the one a ruby or perl
  application's capacity gives: `corral.actions.external`), a worker has at most that many
  connections to a server, in use, idle or opening (nginx's ``max_conns``). A request that
  finds none idle and the server at its cap, or others waiting, waits in the server's line
  (`waiting`), in turn: a kept connection given back goes to the first in line at once (not
  idle), a place freed by a close lets it open one. Behind Puma, whose threads close a
  connection when more wait on its listener, opening more connections than it has threads
  made it close them one request in three; capped, it kept them (docs/polyglot.md). An
  upgraded connection (a tunnel) leaves the count: it is no longer the pool's.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections import deque
from collections.abc import Callable
from typing import Any

from corral.http.upstream import ResponseParser, UpstreamError
from corral.net.upstream import DEFAULT_OPTIONS, ProxyOptions, parse_address
from corral.server import clock
from corral.server.acceptor import Accepted

__all__ = ["Upstream", "UpstreamConnection", "UpstreamServer", "upstream_at"]

_STREAM_NONBLOCK = socket.SOCK_STREAM | socket.SOCK_NONBLOCK  # a connect that does not wait
_IN_PROGRESS = (errno.EINPROGRESS, errno.EINTR)


class UpstreamServer:
    """One server of an upstream: its address, weight, failures and idle connections."""

    __slots__ = (
        "address",
        "current",
        "failed_at",
        "failed_until",
        "family",
        "idle",
        "max_conns",
        "name",
        "open",
        "protocol",
        "waiting",
        "weight",
    )

    def __init__(self, name: str, weight: float, max_conns: int = 0) -> None:
        self.name = name  # as the configuration writes it (logs)
        self.family, self.address = parse_address(name)
        self.protocol = 0 if self.family == socket.AF_UNIX else socket.IPPROTO_TCP
        self.weight = weight
        self.current = 0.0  # its standing in the weighted turn
        self.failed_until = 0.0
        self.failed_at = 0.0
        self.idle: list[UpstreamConnection] = []
        self.max_conns = max_conns  # 0: no cap
        self.open = 0  # its connections in use, idle or opening (UpstreamConnection.counted)
        self.waiting: deque[Any] = deque()  # the ProxyCalls waiting for one, first first

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
        """An answer is over on ``kept``, which may serve another request: the first one
        waiting, at once, else a later one."""
        waiting = self.waiting
        if waiting:
            kept.call = None
            while waiting:
                if waiting.popleft().handed(kept):
                    return
        if len(self.idle) >= options.keepalive:
            kept.close()
            return
        kept.call = None
        kept.idle_since = clock.now()
        self.idle.append(kept)

    def connect(
        self, loop: asyncio.AbstractEventLoop, options: ProxyOptions, then: Callable[..., None]
    ) -> None:
        """Open a connection; ``then(connection)`` once made, ``then(None, timed_out)`` when
        it fails or takes more than ``connect_timeout`` (always later than this call)."""
        UpstreamConnection(self, options.buffer_size).dial(loop, options.connect_timeout, then)

    def closed_one(self, loop: Any) -> None:
        """One of its connections ended: its place goes to the first request waiting, once
        the loop has closed its socket (else, for that moment, the server would see one more
        connection than the cap)."""
        self.open -= 1
        if self.waiting and self.open < self.max_conns:
            loop.call_soon(self._free_place)

    def _free_place(self) -> None:
        waiting = self.waiting
        while waiting and self.open < self.max_conns:
            if waiting.popleft().handed(None):
                return


class Upstream:
    """The servers one ``proxy`` or ``upstreams`` object names, with the proxy's settings."""

    __slots__ = ("name", "options", "servers", "total")

    def __init__(
        self, name: str, servers: list[tuple[str, float]], options: ProxyOptions = DEFAULT_OPTIONS
    ) -> None:
        self.name = name
        cap = options.max_conns
        self.servers = [UpstreamServer(address, weight, cap) for address, weight in servers]
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
        oldest = None  # every server left failed lately: the one failed the longest ago
        for server in self.servers:
            if server in tried or server.weight <= 0 or server.failed_until <= now:
                continue
            if oldest is None or server.failed_at < oldest.failed_at:
                oldest = server
        return oldest


_by_address: dict[tuple[str, ProxyOptions], Upstream] = {}  # equal options share one
# ... and by the options' identity, as their hash (ProxyOptions.__hash__, its fields in Python)
# cost ~11,000 instructions a request; each entry holds its options, so no id is reused while
# it stays, and a caller making new options for each request only refills it
_by_identity: dict[tuple[str, int], tuple[ProxyOptions, Upstream]] = {}
_IDENTITIES = 256


def upstream_at(address: str, options: ProxyOptions = DEFAULT_OPTIONS) -> Upstream:
    """The worker's one `Upstream` for a single ``address`` (made at its first use)."""
    known = _by_identity.get((address, id(options)))
    if known is not None:
        return known[1]
    key = (address, options)
    upstream = _by_address.get(key)
    if upstream is None:
        upstream = _by_address[key] = Upstream(address, [(address, 1.0)], options)
    if len(_by_identity) >= _IDENTITIES:
        _by_identity.clear()
    _by_identity[address, id(options)] = (options, upstream)
    return upstream


class UpstreamConnection:
    """The asyncio protocol of one connection to an upstream server: its answers parsed and
    handed to the request being proxied on it (``call``, a `corral.actions.proxy.ProxyCall`),
    or, idle, any sign of life ending it.

    It makes its connection itself (`dial`), without a coroutine and a task of its own: a
    non-blocking socket's ``connect``, which on loopback is over when it returns (else the
    loop says when the socket is writable), then the socket handed to the loop's
    ``connect_accepted_socket`` for a transport, its coroutine driven by hand as
    `corral.server.acceptor` does. The loop's ``create_connection`` in a task cost ~42,000
    instructions more per new connection (bench/polyglot.py --instructions, perl's case).
    """

    __slots__ = (
        "call",
        "closed",
        "counted",
        "idle_since",
        "loop",
        "making",
        "parser",
        "server",
        "sock",
        "then",
        "timer",
        "transport",
        "write_paused",
    )

    def __init__(self, server: UpstreamServer, head_limit: int) -> None:
        self.server = server
        server.open += 1
        self.counted = True  # in its server's `open` until it ends (`uncount`)
        self.transport: Any = None
        self.call: Any = None
        self.closed = False
        self.write_paused = False
        self.idle_since = 0.0
        self.parser = ResponseParser(self, head_limit)
        self.loop: Any = None
        self.sock: Any = None  # connecting: the socket, until its transport holds it
        self.then: Any = None  # connecting: whom to tell how it went
        self.timer: Any = None  # connecting, not yet over: connect_timeout's
        self.making: Any = None  # connect_accepted_socket's coroutine, until it returns

    # -- connecting (UpstreamServer.connect)

    def dial(self, loop: Any, timeout: float, then: Callable[..., None]) -> None:
        self.loop = loop
        self.then = then
        server = self.server
        try:
            # (IPPROTO_TCP named: both loops' transports then set TCP_NODELAY on it)
            sock = self.sock = Accepted(server.family, _STREAM_NONBLOCK, server.protocol)
            error = sock.connect_ex(server.address)
        except OSError:  # no descriptor left (EMFILE), no memory
            loop.call_soon(self._failed, False)
            return
        if error == 0:  # a unix socket's connect is over at once
            self._open()
            return
        if error not in _IN_PROGRESS:  # refused, no such path, a unix backlog full...
            loop.call_soon(self._failed, False)
            return
        try:
            sock.getpeername()  # a loopback TCP handshake is over already
        except OSError:
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error != 0:  # refused already
                loop.call_soon(self._failed, False)
                return
            loop.add_writer(sock.fileno(), self._writable)
            self.timer = loop.call_later(timeout, self._failed, True)
            return
        self._open()

    def _writable(self) -> None:
        """The socket's connect is over, made or failed."""
        sock = self.sock
        self.loop.remove_writer(sock.fileno())
        self.timer.cancel()
        self.timer = None
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            self._failed(False)
        else:
            self._open()

    def _open(self) -> None:
        """The socket is connected: a transport for it, the loop's."""
        sock = self.sock
        self.sock = None  # the transport's from here
        making = self.loop.connect_accepted_socket(self._itself, sock)
        try:
            waiting = making.send(None)  # up to its wait for connection_made
        except StopIteration:  # pragma: no cover - both loops wait for connection_made
            return
        except Exception:
            sock.close()
            self._failed(False)
            return
        self.making = making
        waiting.add_done_callback(self._made)

    def _itself(self) -> UpstreamConnection:
        return self

    def _made(self, _: Any) -> None:
        """connect_accepted_socket's wait is over: its coroutine ends (were it dropped
        unfinished, closing it would close the transport)."""
        making = self.making
        self.making = None
        try:
            making.send(None)
        except StopIteration:
            pass
        except Exception:  # the transport failed before it was made
            self._failed(False)

    def _failed(self, timed_out: bool) -> None:
        then = self.then
        if then is None:
            return  # told already
        self.then = None
        sock = self.sock
        if sock is not None:
            self.sock = None
            if self.timer is not None:  # waiting for it to be writable
                self.loop.remove_writer(sock.fileno())
                self.timer.cancel()
                self.timer = None
            sock.close()
        self.closed = True
        then(None, timed_out)
        self.uncount()

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
        then = self.then
        if then is not None:
            self.then = None
            then(self)

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
            return
        call.deliver()  # (the call's, even if the answer ended: what it held went already)

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
        self.uncount()

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
        self.uncount()

    def uncount(self) -> None:
        """It ended, or became a tunnel: out of its server's count (once)."""
        if self.counted:
            self.counted = False
            self.server.closed_one(self.loop)
