"""Routing: NGINX Unit's routes resolved per request, in the worker, on a routed listener.

Routing is a step of the listener's plan (`corral.server.plan.ListenerPlan.routing`, a
:class:`Routing`, what one worker's routed listeners share), not a kind of connection: every
connection is an :class:`HttpConnection`, and one of a routed listener carries a
:class:`RouteState` (``conn.route``, made in its ``__init__`` by :meth:`Routing.attach`). The
route state is its parser's sink, routing each head, and the connection calls it at a few hook
points of its own after one test of ``route``; on a listener that passes straight to the
worker's own application ``route`` is None, its parser reports to the connection itself, and
nothing here runs. The route state routes each head for the connection's one request path
(`HttpConnection.on_request` asks `RouteState.route`); what each action does is
`corral.actions`' (one handler per kind, in one table). Owned here: the mechanism that hands
a connection to another application's worker (with ``handoff.py``): the bytes kept for it,
the hand-off itself, and the adoption of one handed here (:func:`adopt_factory`).

A hand-off (``pass`` to another application): the connection stops parsing at once
(callbacks for anything after that head are ignored, and so are parse errors there: those
bytes are the other application's to judge), stops reading, lets the earlier requests'
answers finish and leave the write buffer, then passes the socket with the bytes of this
request and everything after it to a worker of that application. ``100 Continue`` is never
sent for it here. If the hand-off fails, the client gets 502 or 503 (``Connection: close``)
from this worker, which serves on.

On a listener with the PROXY protocol (``corral/server/proxied.py``) the client its header named is
the connection's peer (``given_peer``), and a hand-off carries it in the frame (``peer``).

On a TLS listener the session cannot leave this worker: the hand-off passes one end of a
socketpair instead of the client's socket, and this worker relays between the session and the
pair (``corral/server/relay.py``); the frame then carries the client's address, the local
address and the TLS facts (``peer``, ``local``, ``tls``), and the receiver's connection is
``encrypted`` with those facts (``given_tls``), which go on with any later hand-off of it, with
the relay's ``watch`` (a second descriptor: once it reads EOF, the relaying worker drains and
the connection's next request is its last, answered with ``Connection: close``).

On a listener with ``forwarded`` (``forwarding``), a trusted proxy's request is routed as from
the client and scheme its headers name (``source``, ``scheme`` and ``$remote_addr`` see them:
Unit replaces the request's remote address before routing); a connection handed off is
adopted with its listener's ``forwarding`` and read again by the receiver. Without it, a
routed request pays one attribute test (``trusted``).

Where a request starts in the bytes received (the parser gives no offsets). The route state keeps
``raw``: the bytes received from the start of request number ``raw_first`` (counting the
requests the parser began on this connection), or nothing when that start is lost
(``raw_first`` None). The boundary rule:

- a read that arrives between requests starts ``raw`` afresh: its first request starts at
  its first byte (after CRLFs at most). This is every request on a keep-alive connection
  whose client waits for each answer, so the common hand-off costs no search at all;
- a read that finishes a request and begins the next (pipelining) is appended; when the
  later request is handed off, :func:`corral.server.handoff.message_end` finds its start by
  re-parsing ``raw`` (a bisection with llhttp as the measure), only then;
- bytes of a request already routed to this worker are kept only up to ``KEEP_MAX`` (a large
  body is not held twice): beyond, the start is lost until the next read that arrives
  between requests, and a request that routes elsewhere while it is lost (one pipelined in
  the same read as the end of a body above ``KEEP_MAX``) is answered 503 and the connection
  closed. Real clients do not pipeline behind large uploads.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.actions import HANDLERS
from corral.actions import load as load_handlers
from corral.http.errors import error_response
from corral.http.head import RequestHead, RequestSink
from corral.routing.actions import Share
from corral.routing.request import RouteRequest
from corral.routing.router import Router
from corral.server.connection import BUSY, NEVER, HttpConnection, ServerState
from corral.server.exchange import Exchange
from corral.server.handoff import (
    BAD_GATEWAY,
    HANDED,
    HandoffSender,
    HandoffServer,
    encode_frame,
    message_end,
)
from corral.server.plan import Plans
from corral.server.relay import Relay
from corral.tls.facts import relayed

if TYPE_CHECKING:
    from corral.actions.application import HandOff

KEEP_MAX = 256 * 1024  # bytes of requests routed here kept in case a later one is handed off


class Routing:
    """What the routed listeners of one worker share, as their plans' ``routing`` (one
    instance per worker); it gives each of their connections its :class:`RouteState`.
    ``static``: ``settings.http.static`` (None: its defaults), for the worker's one file
    engine, ``files``, which serves every share (`corral.actions.share`)."""

    def __init__(
        self,
        router: Router,
        application: str,
        addresses: dict[str, str],
        *,
        timeout: float,
        log: logging.Logger,
        static: Any = None,
        limiters: dict[str, Any] | None = None,
        php: dict[str, Any] | None = None,
    ) -> None:
        self.router = router
        # the document's "php" applications by name (corral.php.apps): reached over FastCGI
        self.php = php or {}
        # the rate limits of route steps (filters/ratelimit.Limiter), by the step's JSON path
        self.limiters = limiters or {}
        self.application = application  # this worker's own application
        # the hand-off socket of every application, this worker's own too: a request a
        # retired worker routes to an application the same change removed goes there, to be
        # routed by the new table (``RouteState._handed``)
        self.addresses = addresses
        self.timeout = timeout
        self.log = log
        # connections received by hand-off and not yet made connections of this worker: a
        # drain waits for them as for its connections
        self.adopting: set[asyncio.Task[Any]] = set()
        # TLS connections whose requests go to another worker through this one (relay.py):
        # a drain waits for them too
        self.relays: set[Relay] = set()
        # the handlers of the kinds of action the routes give, imported now (None: any, each
        # imported as it first comes); the file engine only for routes that share
        kinds = router.kinds
        load_handlers(kinds if kinds is not None else ())
        self.files: Any = None
        if kinds is None or Share in kinds:
            from corral.static.files import StaticFiles

            self.files = (
                StaticFiles()
                if static is None
                else StaticFiles(static.mime_types, valid=static.cache_valid)
            )

    def close(self) -> None:
        """The worker exits: forget what the file engine holds; close the connections to
        php-fpm."""
        if self.files is not None:
            self.files.close()
        for php in self.php.values():
            php.close()

    def drain(self) -> None:
        """The worker drains: each relayed connection's next request is its last (relay.py);
        its connections to php-fpm are kept no more (the children they hold are its
        successors')."""
        for relay in self.relays:
            relay.drain()
        for php in self.php.values():
            php.drain()

    def attach(self, conn: HttpConnection) -> RouteState:
        """The routing of a new connection on a routed listener (``HttpConnection.__init__``):
        its ``route``, and its parser's sink."""
        return RouteState(conn)


class RouteState(RequestSink):
    """A connection's routing (``HttpConnection.route``, on a routed listener only).

    It is the parser's sink: the parser tells it where each request begins
    (``on_message_begin``: a plain connection has no such method, so its parser makes no call
    for it), it routes each head (``on_request``) and passes the rest on to the connection
    while nothing is handed off (``on_body``, ``on_request_end``). The connection calls it at
    its own hook points: ``made`` (end of ``connection_made``), ``received`` (each read, before
    parsing), ``lost`` (end of ``connection_lost``), and where ``take_client``,
    ``_resume_reading`` and ``_reject`` read ``given_peer`` and ``handoff``."""

    __slots__ = (
        "begun",
        "conn",
        "counted_ahead",
        "fallbacks",
        "files",
        "given_peer",
        "given_tls",
        "handoff",
        "hops",
        "in_message",
        "initial",
        "local",
        "pair",
        "pass_target",
        "raw",
        "raw_first",
        "relay_draining",
        "request",
        "routed",
        "router",
        "sender",
        "watch",
    )

    def __init__(self, conn: HttpConnection) -> None:
        self.conn = conn
        # a connection's plan never changes (a reconfiguration makes new plans for new
        # connections): what it routes by, read once
        routing = conn.plan.routing
        self.router = routing.router
        self.files = routing.files
        self.pass_target = conn.plan.pass_target
        # the client a PROXY protocol header named (corral/server/proxied.py), here or in the worker
        # that handed the connection off: the peer, instead of the socket's
        self.given_peer: tuple[str, int] | None = None
        # the TLS facts a relay's hand-off brought (corral/tls/facts.py): this connection is
        # the far end of a socketpair, its client's session held by the relaying worker
        self.given_tls: dict[str, Any] | None = None
        self.initial = b""  # bytes a hand-off brought, parsed before the socket's
        self.hops = 0  # hand-offs the connection's first request has had
        # its first request was counted by the rate limits of the worker that handed it here
        self.counted_ahead = False
        self.local: Any = None
        self.raw: bytes | bytearray = b""
        self.raw_first: int | None = 0
        self.begun = 0  # requests begun on this connection
        self.routed = 0  # requests whose head was routed
        self.in_message = False
        self.handoff: Exchange | None = None  # the request handed off, once one is
        self.sender: HandoffSender | None = None
        # a relay's near ends (the connection's, the watch's) while their far ends are sent
        self.pair: tuple[socket.socket, socket.socket] | None = None
        # a relayed end's watch (relay.py), and whether it said the relaying worker drains
        self.watch: socket.socket | None = None
        self.relay_draining = False
        # the request being routed as routing sees it, for its action's handler (a share
        # serves it), and the fallbacks it took (corral.actions.share: a bound on them)
        self.request: RouteRequest | None = None
        self.fallbacks = 0

    # -- the connection's hook points -----------------------------------------------

    def made(self, transport: Any) -> None:
        """The end of ``connection_made``."""
        conn = self.conn
        if self.hops:
            # counted as accepted by the worker that accepted it: the status counts each
            # client connection once, however many workers it went through
            conn.server.accepted -= 1
        if self.watch is not None:
            conn.loop.add_reader(self.watch.fileno(), self._relay_drains)
        if self.given_peer is not None:
            conn.peer = self.given_peer
            if conn.plan.forwarding is not None:
                conn.trusted = conn.plan.forwarding.trusts(conn.peer)
        if self.initial:
            data, self.initial = self.initial, b""
            conn.data_received(data)

    def received(self, data: bytes) -> bool:
        """Bytes read (after a PROXY header, which is this worker's, never handed off), before
        they are parsed: kept for a hand-off. True: they go with the hand-off under way, not
        to the parser."""
        if self.handoff is not None:
            # read before the pause took effect (see `_frame`): it goes with the hand-off
            self.raw = bytes(self.raw) + data
            self.conn.transport.pause_reading()  # (now that the transport reads, it stops)
            return True
        if not self.in_message:
            self.raw = data  # between requests: a clean boundary
            self.raw_first = self.begun
        elif self.raw_first is not None:
            raw = self.raw
            if raw.__class__ is bytes:
                raw = self.raw = bytearray(raw)  # appended to from now on
            raw += data
            if len(self.raw) > KEEP_MAX and self.routed == self.begun:
                self.raw = b""  # only a request routed here: its bytes are not needed
                self.raw_first = None
        return False

    def lost(self) -> None:
        """The end of ``connection_lost``."""
        if self.sender is not None:
            self.sender.cancel()
            self.sender = None
        self._drop_pair()
        if self.watch is not None:
            self.conn.loop.remove_reader(self.watch.fileno())
            self.watch.close()
            self.watch = None

    def _relay_drains(self) -> None:
        """The relaying worker closed its end of the watch: it drains (or is gone)."""
        assert self.watch is not None
        conn = self.conn
        conn.loop.remove_reader(self.watch.fileno())
        self.relay_draining = True
        log = conn.plan.routing.log
        if log.isEnabledFor(logging.DEBUG):
            log.debug("the worker relaying a connection drains: its next request is its last")

    # -- parser sink ------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.begun += 1
        self.in_message = True

    def on_request(self, head: RequestHead) -> None:
        if self.handoff is None:
            self.routed = self.begun
            if self.relay_draining:
                head.keep_alive = False  # the relaying worker drains: the last request
            self.conn.on_request(head)  # the one request path, which asks `route`

    def route(self, exchange: Exchange) -> bool:
        """Route ``exchange`` and act on its action (its handler in `corral.actions`); True
        when it joins the connection's pipeline, False when the action took it elsewhere."""
        self.fallbacks = 0
        return self.act(exchange, self.resolve(exchange))

    def act(self, exchange: Exchange, action: Any) -> bool:
        """Act on another action for ``exchange`` than its route's (a share's fallback), as
        `route` does."""
        return HANDLERS[action.__class__](self.conn, exchange, action)

    def resolve(self, exchange: Exchange) -> Any:
        """The action of the routes for ``exchange`` (corral.routing.actions); the request as
        routing read it stays as ``request`` for the action's handler."""
        router = self.router
        local = self.local_address() if router.reads_destination else self.local
        request = self.request = route_request(self.conn, exchange, local)
        return router.resolve(self.pass_target, request)

    def local_address(self) -> Any:
        """The address the client reached: a relayed end's hand-off said the client's, the
        others ask their socket once (only when asked: routes that match on ``destination``,
        a hand-off of a TLS session)."""
        if self.local is None:
            self.local = self.conn.transport.get_extra_info("sockname")
        return self.local

    def on_body(self, chunk: bytes) -> None:
        if self.handoff is None:
            self.conn.on_body(chunk)

    def on_request_end(self) -> None:
        if self.handoff is None:
            self.in_message = False
            self.conn.on_request_end()

    # -- hand-off -----------------------------------------------------------------

    def begin_handoff(self, exchange: Exchange) -> None:
        """``exchange`` goes to another application's worker (its action: a
        `corral.actions.application.HandOff`), with its connection, once the answers before it
        are written: nothing after its head is parsed or read here from now on."""
        conn = self.conn
        self.handoff = exchange
        conn.pipeline.append(exchange)
        conn.receiving = None
        conn.state = BUSY
        conn.deadline = NEVER  # the sender has its own timeout
        conn.pause_reading()

    def hand_off(self) -> None:
        """Send the connection to the other application's worker, once the earlier answers
        left the write buffer (`corral.actions.application.HandOff.start`)."""
        conn = self.conn
        if conn.closed:
            return
        if conn.transport.get_write_buffer_size():
            # the earlier answers must be on the wire before another process writes
            conn.loop.call_later(0.001, self.hand_off)
            return
        exchange = self.handoff
        assert exchange is not None and self.raw_first is not None
        handoff = exchange.action
        before = handoff.index - self.raw_first
        if before:
            self.raw = self.raw[message_end(self.raw, before) :]
        self.raw_first = handoff.index
        self._send(handoff)

    def _frame(self) -> bytes:
        """The hand-off's frame, made when it is sent (after the greeting): everything read
        from the handed request's start until then goes with it. (Bytes may come after the
        pause: uvloop starts reading a socket once its ``connection_made`` returns, whatever
        that asked, so an adopted connection handed on at once reads on for a while.)"""
        conn = self.conn
        exchange = self.handoff
        assert exchange is not None
        header = {"pass": conn.plan.pass_target, "sockname": conn.sockname, "hops": self.hops + 1}
        peer, tls = self.given_peer, self.given_tls
        if conn.plan.tls is not None:  # the session is this worker's: it relays (relay.py)
            peer, tls = conn.peer, relayed(conn.transport.get_extra_info("ssl_object"))
        if isinstance(peer, tuple):
            header["peer"] = peer[:2]
        if tls is not None:  # the far end of a pair says nothing of the client by itself
            header["tls"] = tls
            header["local"] = self.local_address()
        if conn.limiter is not None or conn.plan.routing.limiters:
            # its rate limits counted it here (the listener's, its step's): not again there
            header["counted"] = True
        payload = bytes(self.raw)
        exchange.action.carried = len(payload)
        return encode_frame(header, payload)

    def _send(self, handoff: HandOff) -> None:
        conn = self.conn
        fars: tuple[socket.socket, ...] = ()
        if conn.plan.tls is None:
            fd = conn.transport.get_extra_info("socket").fileno()
            watch = -1 if self.watch is None else self.watch.fileno()  # a relayed end's
        else:  # a TLS session does not move: the far end of a pair goes instead (relay.py)
            self._drop_pair()
            near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            near_watch, far_watch = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self.pair, fars = (near, near_watch), (far, far_watch)
            fd, watch = far.fileno(), far_watch.fileno()
        self.sender = HandoffSender(
            conn.loop,
            handoff.address,
            fd,
            self._frame,
            self._handed,
            conn.plan.routing.timeout,
            watch,
        )
        for end in fars:
            end.close()  # the sender has its own copies
        self.sender.start()

    def _drop_pair(self) -> None:
        if self.pair is not None:
            for end in self.pair:
                end.close()
            self.pair = None

    def _handed(self, result: int) -> None:
        self.sender = None
        conn = self.conn
        if conn.closed:
            self._drop_pair()
            return
        exchange = self.handoff
        assert exchange is not None
        handoff = exchange.action
        routing = conn.plan.routing
        if result == HANDED:
            # what a hand-off carried: the receiver reads the rest of the request (a body that
            # was still arriving) from the socket itself. Asked first: no logging call (nor
            # decoding the target) on the request path unless the configuration asks for it
            if routing.log.isEnabledFor(logging.DEBUG):
                routing.log.debug(
                    "handed %s %s to %s with the %d bytes read from its start",
                    exchange.head.method,
                    exchange.head.target.decode("latin-1"),
                    handoff.application,
                    handoff.carried,
                )
            self.raw = b""
            pair, self.pair = self.pair, None
            if pair is not None:
                Relay(conn, *pair)
            self.forget(relayed=pair is not None)
            return
        self._drop_pair()
        own = routing.addresses.get(routing.application)
        if result == BAD_GATEWAY and own is not None and handoff.address != own:
            # Nothing listens there: a change removed the application and retired this
            # worker, which routes by the old table while it drains. Its own application's
            # new workers route by the new table, so the client gets the new answer (a 404
            # where no route is left), not a 502 the new configuration would never give.
            handoff.application, handoff.address = routing.application, own
            self._send(handoff)
            return
        routing.log.warning(
            "hand-off of %s %s to %s failed: %d",
            exchange.head.method,
            exchange.head.target.decode("latin-1"),
            handoff.application,  # (the address is abstract: it starts with a NUL byte)
            result,
        )
        conn.server.served += 1
        conn.transport.write(error_response(result, conn.server.prefix))
        conn.close()

    def forget(self, relayed: bool = False) -> None:
        """The connection is another worker's now: close this copy, send nothing (or, when
        ``relayed``, leave the transport to its new protocol, the relay)."""
        conn = self.conn
        conn.closed = True
        conn.server.closed -= 1  # connection_lost will count it, but it moved: not closed
        conn.server.connections.discard(conn)
        for exchange in conn.pipeline:
            exchange.body.fail()
        conn.pipeline.clear()
        conn.active = None
        if relayed:
            conn.connection_lost(None)  # the transport never tells this connection again
        else:
            conn.transport.close()  # a close, not a shutdown: the socket lives on in the receiver


def route_request(conn: HttpConnection, exchange: Exchange, local: Any) -> RouteRequest:
    """``exchange``'s request as routing reads it (its variables too: a rate limit's key),
    on the connection whose listener is at ``local``."""
    head = exchange.head
    peer = conn.peer
    scheme = "https" if conn.encrypted else "http"
    forwarded = exchange.forwarded
    if forwarded is not None:
        # a trusted proxy's request is routed as from the client and scheme it names: Unit
        # replaces the request's remote address before routing
        if forwarded.address is not None:
            peer = (forwarded.address, forwarded.port or 0)
        if forwarded.scheme is not None:
            scheme = forwarded.scheme
    return RouteRequest(head.method, head.target, head.headers, peer, local, scheme, head.absolute)


def adopt_factory(
    server: ServerState, routing: Routing, plans: Plans
) -> Callable[[socket.socket, dict[str, Any], bytes, socket.socket | None], None]:
    """What the hand-off server calls with each connection it receives (its plan made by
    ``plans``, with the features of the listener it came from)."""
    loop = server.loop
    assert loop is not None

    def adopt(
        client: socket.socket,
        header: dict[str, Any],
        payload: bytes,
        watch: socket.socket | None,
    ) -> None:
        sockname = header.get("sockname")
        if isinstance(sockname, list):
            sockname = tuple(sockname)
        pass_target = header.get("pass")
        tls = header.get("tls")  # a relay's far end (relay.py): the client's TLS facts
        if not isinstance(pass_target, str) or (watch is None) != (tls is None):
            routing.log.warning("hand-off without a pass target or with a stray watch: dropped")
            client.close()
            if watch is not None:
                watch.close()
            return

        peer = header.get("peer")
        given = (str(peer[0]), int(peer[1])) if isinstance(peer, list) and len(peer) == 2 else None
        local = header.get("local")
        plan = plans.for_handoff(sockname, pass_target)

        def factory() -> HttpConnection:
            conn = HttpConnection(server, plan)
            route = conn.route  # what the hand-off brought: read before the socket's bytes
            assert route is not None  # the plan routes
            route.initial = payload
            route.hops = int(header.get("hops", 1))
            route.given_peer = given
            route.counted_ahead = header.get("counted") is True
            if tls is not None:
                conn.encrypted = True
                route.given_tls = tls
                route.local = tuple(local) if isinstance(local, list) else local
                route.watch = watch
            return conn

        task = loop.create_task(loop.connect_accepted_socket(factory, client))  # type: ignore[type-var]
        routing.adopting.add(task)
        task.add_done_callback(_report_adoption)

    def _report_adoption(task: asyncio.Task[Any]) -> None:
        routing.adopting.discard(task)
        if not task.cancelled() and task.exception() is not None:
            routing.log.warning("hand-off: could not adopt the connection: %s", task.exception())

    return adopt


__all__ = [
    "KEEP_MAX",
    "HandoffServer",
    "RouteState",
    "Routing",
    "adopt_factory",
    "route_request",
]
