"""NGINX Unit's ``proxy`` action and ``pass: upstreams/NAME``: a request answered by an HTTP/1.1
server elsewhere, through the connection's one response path.

The entry point for any request the worker sends to another server (a ``proxy`` route, an
upstream group, an ``external`` application's pool) is :func:`forward`: ``forward(conn,
exchange, address)`` with an address as Unit writes one (``127.0.0.1:8080``, ``[::1]:8080``,
``unix:/path``), or :func:`proxy`, the route action's handler, with an `Upstream` of several
servers. Both return what an action handler returns (`corral.actions.HANDLERS`).

A request (one :class:`ProxyCall`, the exchange's answerer and its body's sink):

- **Streaming both ways.** It starts as soon as it is first in line, its body still arriving
  (``exchange.streaming``): the head goes upstream, then each piece of the body as the client
  sends it (chunked upstream when the client sent it chunked; trailers are dropped). At most
  ``buffer_size`` bytes wait for the upstream connection; past that, or while the upstream's
  socket does not take more, the client is not read. The answer goes back piece by piece
  through `Exchange.frame`; while the client does not read it, the upstream is not read.
- **Timeouts**: ``connect_timeout`` (504), ``send_timeout`` while the upstream does not take the
  request's body and ``read_timeout`` between two reads of its answer (504 before the answer
  began, else the client's connection aborted), within a quarter of the shorter of the two (a
  second at most) after it: the worker's requests under way are looked at by one sweep
  (`ProxySweep`), no timer made and cancelled per request. A refused connection is 502.
- **A server at its cap** (``max_conns``, `corral.actions.upstreams`): the request waits in
  the server's line for a connection given back or a place freed, at most ``connect_timeout``
  (then 504), watched by the sweep as the others; a client that goes leaves the line.
- **Retry**: a server that refuses or times out a connection is marked failed
  (`corral.actions.upstreams`) and the request, which never reached it, tries the next one;
  a kept connection that turns out closed before any byte of the answer (the upstream's
  keep-alive ran out meanwhile) is retried on a new connection for a request without a body
  whose method is idempotent.
- **An upstream's answer is checked** (`corral.http.upstream`): a malformed one, or one cut
  short, is a 502 when nothing of it went to the client, else the client's connection is
  aborted (a reset, not a close: a body delimited by close would otherwise look whole).
- **Upgrades** (WebSocket and the others): a request with ``Connection: upgrade`` goes with its
  ``Upgrade``; a 101 makes both connections a tunnel (`corral.actions.tunnel`).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
from typing import TYPE_CHECKING, Any

from corral.actions.proxy_head import answer_of, request_head, upgrade_of
from corral.actions.respond import reply
from corral.actions.upstreams import Upstream, UpstreamConnection, UpstreamServer, upstream_at
from corral.http.chunked import LAST, chunk
from corral.http.response import InvalidResponse
from corral.net.upstream import DEFAULT_OPTIONS, ProxyOptions
from corral.observe.errorlog import LOGGER_NAME
from corral.server import clock

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange

__all__ = ["ProxyCall", "forward", "proxy"]

_log = logging.getLogger(LOGGER_NAME)
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 seconds: close() sends RST
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})


def forward(
    conn: HttpConnection,
    exchange: Exchange,
    address: str,
    options: ProxyOptions = DEFAULT_OPTIONS,
) -> bool:
    """Answer ``exchange`` by forwarding it to the HTTP/1.1 server at ``address``
    (``host:port``, ``[v6]:port``, ``unix:/path`` or ``/path``), with ``options`` (the
    ``proxy_*`` settings: `ProxyOptions.of(settings)`). An action handler's result: True."""
    return proxy_to(conn, exchange, upstream_at(address, options))


# this worker's upstreams, by the Proxy action naming them: by its identity (the routes hold
# each action for the worker's life; the entry holds it too, so its id is never reused), as
# hashing the action's fields would cost every request. It holds no more than the worker's
# routes name: they are compiled in the master, once per generation of workers, never again in
# a worker (a new configuration is new workers)
_by_action: dict[int, tuple[Any, Upstream]] = {}


def proxy(conn: HttpConnection, exchange: Exchange, action: Any) -> bool:
    """``Proxy`` (`corral.routing.Proxy`): a ``proxy`` route action or an upstreams pass."""
    entry = _by_action.get(id(action))
    if entry is None:
        upstream = Upstream(action.name, list(action.servers), action.options)
        entry = _by_action[id(action)] = (action, upstream)
    return proxy_to(conn, exchange, entry[1])


def proxy_to(conn: HttpConnection, exchange: Exchange, upstream: Upstream) -> bool:
    exchange.action = ProxyCall(upstream)
    return True


class ProxySweep:
    """The worker's proxied requests under way, each told the time (`ProxyCall.expired`)
    every `period` seconds while there are any: one timer for all, as the worker's connections
    have one (`corral.server.expiry`), not one made and cancelled per request (which cost a
    tenth of what the proxy spends on a request). ``period`` is a quarter of the shortest
    send or read timeout seen, a second at most."""

    __slots__ = ("calls", "loop", "options", "period", "timer")

    def __init__(self) -> None:
        self.calls: set[ProxyCall] = set()
        self.loop: Any = None
        self.options: Any = None  # the last options seen (a worker's calls mostly share one)
        self.period = 1.0
        self.timer: Any = None

    def watch(self, call: ProxyCall) -> None:
        loop = call.conn.loop
        if loop is not self.loop:  # (a process running a new loop: its calls are all new)
            self._stop()
            self.calls = set()
            self.loop = loop
        options = call.options
        if options is not self.options:
            self.options = options
            period = min(1.0, options.shortest / 4)
            if period < self.period:
                self.period = period
                self._stop()
        self.calls.add(call)
        if self.timer is None:
            self.timer = loop.call_later(self.period, self._sweep)

    def unwatch(self, call: ProxyCall) -> None:
        self.calls.discard(call)

    def _stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _sweep(self) -> None:
        self.timer = None
        if not self.calls:
            return  # (started again by the next `watch`)
        now = clock.now()
        for call in list(self.calls):
            call.expired(now)
        if self.calls and self.timer is None:
            self.timer = self.loop.call_later(self.period, self._sweep)


_SWEEP = ProxySweep()


class ProxyCall:
    """One request proxied: the exchange's answerer (``take_body``, ``start``), its body's
    sink (``feed``, ``finish``, ``fail``, ``close``) and the sink of the upstream's answer."""

    __slots__ = (
        "activity",
        "body_done",
        "chunked",
        "conn",
        "delivered",
        "ended",
        "exchange",
        "held",
        "options",
        "pending",
        "pending_size",
        "queued",
        "reused",
        "server",
        "timed_out",
        "tried",
        "tunnel",
        "upgrade",
        "upstream",
        "upstream_keeps",
        "watched",
        "wire",
    )

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.options = upstream.options
        self.conn: Any = None
        self.exchange: Any = None
        self.server: UpstreamServer | None = None
        self.wire: UpstreamConnection | None = None  # the upstream connection in use
        self.tried: list[UpstreamServer] = []
        self.pending: list[bytes] = []  # body pieces (framed) waiting for the connection
        self.pending_size = 0
        self.body_done = False  # the client's body is all here (or there is none)
        self.chunked = False  # the body goes chunked
        self.upgrade: bytes | None = None
        self.held = b""  # what one read of the upstream's gave the client, until `deliver`
        self.delivered = False  # some of the answer went to the client
        self.ended = False  # the exchange is over (finished or failed)
        self.timed_out = False  # the last failure to connect was a timeout
        self.activity = 0.0  # the last sign of the upstream (clock seconds)
        self.watched = False  # in the worker's sweep (`ProxySweep`), from the first send
        self.tunnel: Any = None
        self.reused = False  # the connection in use was kept from an earlier request
        self.upstream_keeps = False  # the answer lets its connection serve another request
        self.queued = False  # in its server's line (`UpstreamServer.waiting`)

    # -- the request's body, from the client

    def take_body(self, conn: HttpConnection, exchange: Exchange) -> ProxyCall:
        exchange.streaming = True  # started while its body arrives: streamed upstream
        self.chunked = exchange.head.chunked
        return self

    def feed(self, data: bytes) -> bool:
        if self.ended:
            return False
        if self.chunked:
            data = chunk(data)
        wire = self.wire
        if wire is None or wire.closed:
            self.pending.append(data)
            self.pending_size += len(data)
            return self.pending_size >= self.options.buffer_size
        wire.transport.write(data)
        return wire.write_paused

    def finish(self) -> None:
        self.body_done = True
        if self.ended:
            return
        if self.chunked:
            self.feed_raw(LAST)

    def feed_raw(self, data: bytes) -> None:
        wire = self.wire
        if wire is None or wire.closed:
            self.pending.append(data)
            self.pending_size += len(data)
        else:
            wire.transport.write(data)

    def fail(self) -> None:
        """The client's connection went, or its body never will be whole."""
        if not self.ended:
            self._over()
            self._drop_wire(abort=True)
            conn = self.conn
            if conn is not None and conn.closed:  # started, its client gone: counted, logged
                conn.on_writable = None
                conn.finish(self.exchange, False)

    def close(self) -> None:
        return None

    # -- the answer

    def start(self, conn: HttpConnection, exchange: Exchange) -> None:
        self.conn = conn
        self.exchange = exchange
        head = exchange.head
        if exchange.body is conn.server.empty_body:
            self.body_done = True
        if head.expect_continue and not exchange.complete:
            conn.send_continue(exchange)
        self.upgrade = upgrade_of(head) if conn.parser.upgraded is not None else None
        self._connect()

    def _connect(self) -> None:
        server = self.upstream.choose(self.tried)
        if server is None:
            self._refuse(504 if self.timed_out else 502, "no upstream server could be reached")
            return
        self.server = server
        self.tried.append(server)
        kept = server.take_idle(self.options)
        if kept is not None:
            self._send(kept, reused=True)
            return
        # capped: in line (`handed`) when at the cap, or behind others waiting for a place
        if server.max_conns > 0 and (server.open >= server.max_conns or server.waiting):
            self.queued = True
            server.waiting.append(self)
            self.activity = clock.now()  # connect_timeout runs from now (`expired`)
            if not self.watched:
                self.watched = True
                _SWEEP.watch(self)
            return
        server.connect(self.conn.loop, self.options, self._connected)

    def handed(self, wire: UpstreamConnection | None) -> bool:
        """Out of its server's line: a kept connection given back, or (None) a place freed
        for a new one. False when its client went meanwhile (the next in line takes it)."""
        self.queued = False
        if self.conn.closed:
            self.fail()
            return False
        if wire is not None:
            self._send(wire, reused=True)
        else:
            server = self.server
            assert server is not None
            server.connect(self.conn.loop, self.options, self._connected)
        return True

    def _connected(self, wire: UpstreamConnection | None, timed_out: bool = False) -> None:
        server = self.server
        assert server is not None
        if wire is None:
            server.failed(self.options)
            if not self.ended:
                _log.warning(
                    "proxy: %s %s (%s)",
                    server.name,
                    "connect timed out" if timed_out else "refused the connection",
                    self.exchange.where(),
                )
                self.timed_out = timed_out
                self._connect()
            return
        if self.ended:
            server.keep(wire, self.options)
            return
        self._send(wire, reused=False)

    def _send(self, wire: UpstreamConnection, reused: bool) -> None:
        self.wire = wire
        wire.call = self
        head = self.exchange.head
        wire.parser.expect(head.method == "HEAD")
        conn = self.conn
        client = _client_address(conn, self.exchange)
        scheme = _scheme(conn, self.exchange)
        data = request_head(head, client, scheme, self.upgrade, self.chunked)
        if self.pending:
            data += b"".join(self.pending)
            self.pending = []
            self.pending_size = 0
        wire.transport.write(data)
        self.reused = reused
        self.activity = clock.now()
        if not self.watched:
            self.watched = True
            _SWEEP.watch(self)
        if conn.reading_paused and not self.body_done and not wire.write_paused:
            conn.resume_body()

    # -- the upstream's answer (UpstreamConnection calls these)

    def on_response(self, response: Any) -> None:
        conn = self.conn
        exchange = self.exchange
        if response.status == 101:
            if self.upgrade is None:
                self.upstream_failed("101 to a request that asked for no upgrade")
                return
            from corral.actions.tunnel import open_tunnel

            self._over()
            self.tunnel = open_tunnel(conn, exchange, self, response)
            return
        try:
            status, fields = answer_of(response.status, response.reason, response.fields)
            data = conn.begin(exchange, status, fields, response.content_length)
        except (InvalidResponse, UnicodeDecodeError) as exc:
            self.upstream_failed(f"answer refused: {exc}")
            return
        self.upstream_keeps = response.keep_alive
        self.held = data

    def on_body(self, data: bytes) -> None:
        if self.ended:
            return
        out = self.exchange.frame(data)
        if out:
            self.held = self.held + out if self.held else out

    def deliver(self) -> None:
        """One read of the upstream's is parsed: what it gave the client goes in one write
        (most answers arrive whole in one read: head, body and end in one syscall, not three);
        while the client does not read, the upstream is not read either."""
        out = self.held
        if self.ended or not out:
            return
        self.held = b""
        conn = self.conn
        if conn.closed:  # the client went: nobody reads the rest (an endless stream, say)
            self._refuse(502, "the client went away")
            return
        self.delivered = True
        conn.write(out)
        if conn.write_paused and conn.on_writable is None:
            wire = self.wire
            if wire is not None:
                wire.transport.pause_reading()
            conn.on_writable = self._client_drained

    def _client_drained(self) -> None:
        wire = self.wire
        if wire is not None and not wire.closed and not self.ended:
            self.activity = clock.now()
            wire.transport.resume_reading()

    def on_response_end(self) -> None:
        if self.ended:
            return
        wire = self.wire
        assert wire is not None
        self._over()
        self.wire = None
        # reused only after a whole exchange: the body all sent, no upgrade asked for
        if self.upstream_keeps and self.body_done and self.upgrade is None and not wire.closed:
            self.server.keep(wire, self.options)  # type: ignore[union-attr]
        else:
            wire.call = None
            wire.close()
        exchange = self.exchange
        conn = self.conn
        conn.on_writable = None
        last = exchange.end()
        if self.held:
            last = self.held + last
            self.held = b""
        conn.finish(exchange, exchange.keep_alive, last)

    def upstream_drained(self) -> None:
        """The upstream's socket takes the body again: read the client's again."""
        self.activity = clock.now()
        conn = self.conn
        if conn is not None and conn.reading_paused and not self.body_done and not self.ended:
            conn.resume_body()

    def upstream_failed(self, why: str, nothing_came: bool = False) -> None:
        """The upstream connection failed (malformed answer, cut short, closed, reset)."""
        if self.ended:
            return
        wire = self.wire
        self.wire = None
        if wire is not None:
            wire.call = None
            wire.close(abort=True)
        server = self.server
        assert server is not None
        if nothing_came and not self.reused:
            server.failed(self.options)  # a new connection closed unanswered: it is failing
        if (
            nothing_came
            and self.exchange.body is self.conn.server.empty_body
            and self.exchange.head.method in _IDEMPOTENT
        ):
            # nothing came back: a request without a body that is safe to send again goes to
            # the next server, or (a kept connection the upstream closed meanwhile) to the
            # same one on a new connection
            if self.reused:
                self.tried.remove(server)
            self.reused = False
            self._connect()
            return
        _log.warning("proxy: %s: %s (%s)", server.name, why, self.exchange.where())
        self._refuse(502, why)

    # -- timeouts

    def expired(self, now: float) -> None:
        """The sweep's look at ``now``: the upstream silent (or not taking the body) for its
        timeout is a 504, or the client's connection aborted once the answer began."""
        if self.ended:
            self._over()
            return
        wire = self.wire
        options = self.options
        if wire is None:  # connecting: connect_timeout runs there; or in its server's line
            if self.queued and self.conn.closed:  # its client went: out of the line
                self.fail()
            elif self.queued and self.activity + options.connect_timeout <= now:
                _log.warning(
                    "proxy: %s: no connection free in time (%s)",
                    self.server.name,  # type: ignore[union-attr]
                    self.exchange.where(),
                )
                self._refuse(504, "no connection to the upstream server came free in time")
            return
        if self.conn.on_writable is not None:  # the client is slow: its send_timeout runs
            self.activity = now
            return
        limit = options.send_timeout if wire.write_paused else options.read_timeout
        if self.activity + limit > now:
            return
        what = "send" if wire.write_paused else "read"
        self.server.failed(options)  # type: ignore[union-attr]
        self.wire = None
        wire.call = None
        wire.close(abort=True)
        _log.warning(
            "proxy: %s: %s timed out (%s)",
            self.server.name,  # type: ignore[union-attr]
            what,
            self.exchange.where(),
        )
        self._refuse(504, f"{what} timed out")

    # -- ends

    def _over(self) -> None:
        self.ended = True
        if self.queued:  # it leaves its server's line
            self.queued = False
            self.server.waiting.remove(self)  # type: ignore[union-attr]
        if self.watched:
            self.watched = False
            _SWEEP.unwatch(self)

    def _drop_wire(self, abort: bool) -> None:
        wire = self.wire
        if wire is not None:
            self.wire = None
            wire.call = None
            wire.close(abort)

    def _refuse(self, status: int, why: str) -> None:
        """The upstream cannot answer: ``status`` when the client got nothing yet, else its
        connection aborted, so a cut answer never passes for a whole one."""
        self._over()
        self._drop_wire(abort=True)
        conn = self.conn
        exchange = self.exchange
        conn.on_writable = None
        if self.delivered or conn.closed:
            reset(conn)
            conn.finish(exchange, False)
            return
        head = exchange.head
        keep_alive = head.keep_alive and exchange.complete and not conn.server.draining
        data = reply(status, None, head, keep_alive, conn.server.prefix)
        exchange.status = status
        exchange.response_bytes = len(data)
        conn.finish(exchange, keep_alive, data)


def reset(conn: Any) -> None:
    """Abort the client's connection with a reset (RST): a close (FIN) would end a body
    delimited by close as if it were whole, and tell an HTTP/1.0 client nothing went wrong."""
    if conn.closed:
        return
    sock = conn.transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    conn.close(abort=True)


def _client_address(conn: Any, exchange: Any) -> str:
    forwarded = exchange.forwarded
    if forwarded is not None and forwarded.address is not None:
        return str(forwarded.address)
    peer = conn.peer
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return "unknown"


def _scheme(conn: Any, exchange: Any) -> str:
    forwarded = exchange.forwarded
    if forwarded is not None and forwarded.scheme is not None:
        return str(forwarded.scheme)
    return "https" if conn.encrypted else "http"
