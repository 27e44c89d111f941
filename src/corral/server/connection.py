"""One asyncio protocol per client connection: the HTTP/1.1 exchange over a transport.

Every connection runs its listener's plan (`corral.server.plan.ListenerPlan`, made once per
listener): the parser (HTTP/1.1, or uwsgi packets from a proxy: `corral.http.uwsgi`, one
request per connection; both report the same events, so the rest is one code path), a
PROXY header read before anything else (`corral.server.proxied`: the peer allowed, the client it
names taken as the peer; a bad one closes the connection unanswered), and a trusted
proxy's ``forwarded`` headers read for each request (`corral.filters.forwarded`), and routes
(`corral.server.routed`): a routed listener's connection carries a ``route``
(`corral.server.routed.RouteState`), which is its parser's sink and which the connection calls
at its hook points (``connection_made``, each read, ``connection_lost``, ...) after one test of
``route``. A feature the listener does not have costs its connections that one test where it
would act, never a subclass: there is one connection class.

Owns: the parser, the pipeline (requests answered strictly in order), the
connection's single deadline (header, body, keep-alive), read and write flow
control, ``100 Continue``, sendfile, and the error answers of the protocol layer.
Knows nothing of WSGI: every request takes one path (`on_request`: an `Exchange`, routed
when the listener routes, its action acted on by `corral.actions`) and is handed to the
adapter (``make_body(conn, exchange)``, ``run(conn, exchange)``, and ``empty_body``, the body
of every request without one) or to its action, which have the same two methods. They
answer through one response path: `begin` (the head, once status and fields are known) or
`whole` (a whole answer), the exchange's `Exchange.frame`/`Exchange.end` for the body
(corral/server/exchange.py: the framing is decided there and by the plan's body steps, never
by an adapter), then :meth:`HttpConnection.write`, :meth:`HttpConnection.sendfile` and
:meth:`HttpConnection.finish`. Every method here runs on the loop thread, but `begin` and
`whole`, which an application thread may call; adapters running the application on other
threads hop back with ``loop.call_soon_threadsafe``.

Timers: there is no timer object per connection. Each connection keeps one
deadline, moved on state changes and set from the clock read then (CLOCK_MONOTONIC, a vDSO
read: a clock the tick moved once a second made a 1 s deadline pass after a few milliseconds
of silence); the worker's one-second tick calls `corral.server.expiry.sweep`, which ends
whatever has passed its deadline: a timeout is cut no sooner than it says and within a second after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from corral.http.errors import HttpError, error_response
from corral.http.head import Limits, RequestHead, RequestSink
from corral.http.response import build_head, redirection
from corral.server import clock
from corral.server.bodyclock import BodyClock
from corral.server.exchange import Exchange
from corral.server.overload import shed
from corral.server.plan import PLAIN, ListenerPlan
from corral.server.sendfile import SendfileJob

IDLE = 0  # between requests: the keep-alive deadline runs
HEAD = 1  # receiving a request head: the header deadline runs
BUSY = 2  # answering, the body complete: no deadline, but while the client does not read
BODY = 3  # receiving a request body: the body deadline runs from each read
NEVER = float("inf")

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class Body(Protocol):
    def feed(self, chunk: bytes) -> bool | None: ...  # True: stop reading the socket
    def finish(self) -> None: ...  # the body is complete
    def fail(self) -> None: ...  # it never will be: wake a reader with an error
    def close(self) -> None: ...  # the exchange is over: release its storage


class Adapter:
    """What answers a worker's requests (`corral.apps.wsgi.runner.WsgiAdapter`); its class
    also has ``empty_body``, the body of every request without one. A base class rather than
    a protocol, so that the compiled connection reaches its methods in C."""

    def make_body(self, conn: HttpConnection, exchange: Exchange) -> Body:
        raise NotImplementedError

    def run(self, conn: HttpConnection, exchange: Exchange) -> None:
        raise NotImplementedError

    def client_gone(self, conn: HttpConnection) -> None:
        """The client closed its side while answers to ``conn``'s requests are still due
        (an ASGI application is told it disconnected; a WSGI one is not: nothing to do)."""

    def drain(self) -> None:
        """The worker's graceful stop began (what never ends by itself, such as a WebSocket,
        is asked to)."""


class ServerState:
    """What every connection of one worker shares (one instance per worker)."""

    def __init__(
        self,
        adapter: Adapter,
        limits: Limits,
        *,
        keep_alive: float,
        header_timeout: float,
        body_timeout: float,
        send_timeout: float,
        on_finish: Callable[[HttpConnection, Exchange], None] | None = None,
        body_min_rate: float = 0.0,
        body_min_rate_grace: float = 5.0,
    ) -> None:
        self.adapter = adapter
        # every request without a body has this one (each adapter defines it)
        self.empty_body = adapter.empty_body  # type: ignore[attr-defined]
        self.limits = limits
        self.keep_alive = keep_alive
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        # the slow POST's bound (bodyclock.py): bytes a second on average, after the grace
        self.body_min_rate = body_min_rate
        self.body_min_rate_grace = body_min_rate_grace
        self.send_timeout = send_timeout
        # the access log and/or the latency histogram (they time from Exchange.request_start)
        self.on_finish = on_finish
        self.connections: set[HttpConnection] = set()
        self.prefix = ""  # "Date: ...\r\nServer: ...\r\n", refreshed every second
        self.draining = False
        self.served = 0
        self.accepted = 0  # connections, counted once each for the control API's status
        self.closed = 0
        self.retire_after = 0  # tell the adapter's owner when `served` reaches it; 0: never
        # Uvicorn's --limit-concurrency: more open connections than this, a request is shed
        # (503, Retry-After, closed: server/overload.py); 0: no limit
        self.max_connections = 0
        self.on_retire: Callable[[], None] | None = None
        # told when a client closes its side of a connection that stays open for the answers
        # still due (a balanced pool's `connections`: it then no longer counts as held)
        self.on_client_gone: Callable[[HttpConnection], None] | None = None
        # the worker's loop, set before the first connection is made
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]


class HttpConnection(RequestSink):
    """One client connection, running its listener's plan (corral/server/plan.py): an
    asyncio protocol (no asyncio base class: compiled, it is an extension type, never
    subclassed) and its parser's sink."""

    __slots__ = (
        "_dispatching",
        "_pending_error",
        "active",
        "adapter_state",
        "body_clock",
        "closed",
        "conns",
        "conns_held",
        "deadline",
        "encrypted",
        "gate",
        "given_client",
        "limiter",
        "loop",
        "on_writable",
        "parser",
        "peer",
        "pipeline",
        "plan",
        "probes",
        "reader",
        "reading_paused",
        "receiving",
        "route",
        "sendfile_job",
        "server",
        "sockname",
        "state",
        "steps",
        "steps_least",
        "transport",
        "trusted",
        "waiting_since",
        "write_paused",
    )

    def __init__(self, server: ServerState, plan: ListenerPlan = PLAIN) -> None:
        self.server = server
        self.loop = server.loop
        self.plan = plan
        self.sockname = plan.sockname
        steps = self.steps = plan.steps  # the body steps of its answers (HttpConnection.begin)
        # a body shorter than this is none of theirs (but a 304's: it stands for a 200), so
        # an answer their rules exclude by its length pays one comparison
        self.steps_least = 0 if steps is None else steps.least
        self.transport: Any = None
        self.encrypted = plan.tls is not None  # TLS: the transport encrypts (no sendfile)
        # the client a PROXY header named before the TLS handshake (corral/server/tlsdoor.py)
        self.given_client: Any = None
        # routes (routed.RouteState, listeners with them only): the connection's routing, which
        # stands between the parser and the connection (the parser's sink: it routes each
        # head, and it alone tells the parser to report where each request begins)
        routing = plan.routing
        route = self.route = None if routing is None else routing.attach(self)
        # the listener's wire protocol: HTTP/1.1, or uwsgi packets (http/uwsgi.py), which
        # report the same events; everything else here is the same for both
        self.parser = plan.parser(self if route is None else route, server.limits)
        self.reader: Any = None  # the PROXY header's parser until the header is whole
        # whether the peer is a proxy whose `forwarded` headers count (listeners with it only)
        self.trusted = False
        self.limiter = plan.limiter  # its `rate_limit` (filters/ratelimit.py), None: none
        # allow and deny (filters/gate.py): asked for each request until its client is known
        self.gate = plan.gate  # then what that client is answered (None: served)
        self.conns = plan.conns  # its connection counts (filters/connlimit.py), None: none
        self.probes = plan.probes  # readiness and liveness (server/health.py), None: none
        self.conns_held: Any = None  # (client, slots) they counted it at
        # a list, not a deque: it holds one exchange but for pipelined requests, and compiled
        # its append, first item and removal are C calls, not method calls
        self.pipeline: list[Exchange] = []
        self.active: Exchange | None = None
        self.receiving: Exchange | None = None
        self.state = HEAD
        self.deadline = NEVER
        self.body_clock: BodyClock = None  # type: ignore[assignment]  # at the first body
        self.closed = False
        self.write_paused = False
        self.waiting_since = 0.0  # clock.now() when an answer began to wait for the client
        self.reading_paused = False
        # set while it waits for the socket: a SendfileJob, or a server.buffering.BufferedAnswer
        self.sendfile_job: Any = None
        self.on_writable: Callable[[], None] | None = None
        self.adapter_state: Any = None  # the adapter's per-connection cache
        self._dispatching = False
        self._pending_error: HttpError | None = None
        self.peer: Any = None

    # -- asyncio.Protocol -------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        if self.sockname is None:
            self.sockname = transport.get_extra_info("sockname")
        server = self.server
        server.accepted += 1
        server.connections.add(self)
        # one accepted in the same batch as a drain began is served like the others (its
        # request, if it sends one, is answered with "Connection: close"); if it stays idle,
        # the worker's drain closes it with the other idle ones
        self.deadline = clock.now() + server.header_timeout
        plan = self.plan
        if plan.forwarding is not None:
            self.trusted = plan.forwarding.trusts(self.peer)
        if plan.proxy is not None:
            plan.proxy.greet(self)
        elif self.given_client is not None:
            self.take_client(self.given_client)
        elif plan.gate is not None:
            self.gate = plan.gate.for_client(self)
        if self.route is not None:
            self.route.made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        server = self.server
        server.closed += 1
        server.connections.discard(self)
        if self.sendfile_job is not None:
            self.sendfile_job.cancel()
        for exchange in self.pipeline:
            exchange.body.fail()  # wakes an application thread blocked on it
        if self.on_writable is not None:
            callback, self.on_writable = self.on_writable, None
            callback()
        # the parser, the adapter's output and the route hold this connection: without those
        # cycles reference counting frees it now, not the cycle collector later (which
        # otherwise runs every ~60 connections under close-per-request traffic); a closed
        # connection reaches none of the route's hook points again
        if self.route is not None:
            self.route.lost()
            self.route = None
        if self.conns_held is not None:
            self.conns.release(self)
        self.parser.detach()
        self.adapter_state = None

    def data_received(self, data: bytes) -> None:
        if self.reader is not None:  # the PROXY header is this worker's, never handed off
            data = self.plan.proxy.read(self, data)
            if not data:
                return
        if self.route is not None and self.route.received(data):
            return  # read once a hand-off began: the bytes go with it
        if self.state == IDLE:
            self.state = HEAD
            self.deadline = clock.now() + self.server.header_timeout
        try:
            self.parser.feed(data)
        except HttpError as error:
            self._reject(error)
            return
        if self.parser.ended:
            self.pause_reading()
        if self.active is None and self.pipeline:
            self._dispatch()

    def eof_received(self) -> bool | None:
        # A half-closed client still gets the answers to what it sent in full (over TLS
        # too: corral's TLS transport keeps its side open on True); a request whose head or
        # body will now never be complete is dropped.
        if self._abandon_receiving(400):
            return True
        if self.active is None and not self.pipeline:
            self.close()
        else:
            self.parser.ended = True
            server = self.server
            server.adapter.client_gone(self)
            if server.on_client_gone is not None:
                server.on_client_gone(self)
        return True

    def pause_writing(self) -> None:
        self.write_paused = True
        self.send_wait(True)

    def resume_writing(self) -> None:
        self.write_paused = False
        self.send_wait(False)
        if self.on_writable is not None:
            callback, self.on_writable = self.on_writable, None
            callback()

    def take_client(self, client: tuple[str, int]) -> None:
        """The PROXY header named the client: it is the peer from now on."""
        self.peer = client
        forwarding = self.plan.forwarding
        if forwarding is not None:  # a `forwarded` listener trusts, or not, this peer
            self.trusted = forwarding.trusts(client)
        if self.plan.gate is not None:
            self.gate = self.plan.gate.for_client(self)
        if self.route is not None:
            self.route.given_peer = client  # a hand-off carries it to the receiving worker

    # -- parser sink (on a routed listener, the route's, which passes on to these) -------

    def on_request(self, head: RequestHead) -> None:
        """A request's head: the one path of every request, routed or not."""
        exchange = Exchange(head, self.server.empty_body)
        if self.encrypted:
            exchange.copies_files = True
        if self.trusted:
            exchange.forwarded = self.plan.forwarding.resolve(head.headers)
        if (
            (self.probes is not None and self.probes.answers(self, exchange))
            or (self.gate is not None and self.gate.refuses(self, exchange))
            or (
                self.limiter is not None
                and self.limiter.refuses(self, exchange, self.peer, self.route)
            )
            or (
                0 < self.server.max_connections < len(self.server.connections)
                and shed(self, exchange)
            )
            # (counted once; a trusted proxy's next request may be another client's)
            or (
                self.conns is not None
                and (self.conns_held is None or self.trusted)
                and self.conns.refuses(self, exchange, self.peer, self.conns_held)
            )
        ):
            self._enqueue(exchange)  # answered in its turn by the refusal
            return
        if self.route is not None and not self.route.route(exchange):
            return  # the route's action took it elsewhere (a hand-off)
        self._enqueue(exchange)

    def _enqueue(self, exchange: Exchange) -> Exchange:
        """The request joins the pipeline; its body (if any) is read from now on."""
        server = self.server
        head = exchange.head
        if not server.keep_alive:
            head.keep_alive = False  # keep_alive 0: every response says it closes
        has_body = head.chunked or bool(head.content_length)
        if has_body:
            action = exchange.action
            if action is None:
                exchange.body = server.adapter.make_body(self, exchange)
            else:
                exchange.body = action.take_body(self, exchange)
            self.state = BODY
        else:
            self.state = BUSY
            self.deadline = NEVER
        self.pipeline.append(exchange)
        self.receiving = exchange
        if len(self.pipeline) > 1:
            self.pause_reading()  # parse no further ahead than one read while answers wait
        if has_body:  # (its rate's clock stopped if it waits for the answers before it)
            self._body_start(exchange)
        return exchange

    def on_body(self, chunk: bytes) -> None:
        self.deadline = self.body_clock.read(clock.now(), len(chunk), self.reading_paused)
        if self.receiving.body.feed(chunk) and not self.reading_paused:  # type: ignore[union-attr]
            # the application is slower than the client: stop reading, and stop
            # the body deadline too, since the wait is not the client's fault
            self.pause_reading()
            self.deadline = NEVER

    def on_request_end(self) -> None:
        exchange = self.receiving
        assert exchange is not None
        exchange.complete = True
        self.receiving = None
        if self.parser.upgraded is not None:
            # what follows its head is another protocol's: unless the adapter switches to it
            # (a WebSocket), the answer says the connection closes, as it then does
            exchange.head.keep_alive = False
        if self.state == BODY:
            exchange.body.finish()
            self.state = BUSY
            self.deadline = NEVER

    # -- dispatch ---------------------------------------------------------------

    def _dispatch(self) -> None:
        """Start the next request if it is ready; loops over inline answers."""
        if self._dispatching:
            return
        self._dispatching = True
        try:
            while self.active is None and self.pipeline and not self.closed:
                exchange = self.pipeline[0]
                if not (exchange.complete or exchange.streaming):
                    if exchange.head.expect_continue:  # a buffered body: read from now on
                        self.send_continue(exchange)
                    return
                if exchange.not_before != 0.0 and not exchange.due(self.loop, self._dispatch):
                    return
                self.active = exchange
                exchange.started = True
                if exchange.action is None:
                    self.server.adapter.run(self, exchange)
                else:  # a route's action (corral.actions)
                    exchange.action.start(self, exchange)
            if self.active is None and not self.pipeline and not self.closed:
                if self._pending_error is not None:
                    self._send_error(self._pending_error.status)
                elif self.parser.ended:
                    self.close()
        finally:
            self._dispatching = False

    def resume_body(self) -> None:
        """The application drained the body buffer: read the socket again."""
        if self.reading_paused and not self.closed and len(self.pipeline) <= 1:
            self._resume_reading()
            if self.state == BODY:
                self._body_start(self.receiving)  # type: ignore[arg-type]

    def _body_start(self, exchange: Exchange) -> None:
        """The clocks of ``exchange``'s body start, or start again as the loop reads it again
        (corral/server/bodyclock.py)."""
        server = self.server
        if self.body_clock is None:
            rate, grace = server.body_min_rate, server.body_min_rate_grace
            self.body_clock = BodyClock(server.body_timeout, rate, grace)
        self.deadline = self.body_clock.start(clock.now(), exchange, self.reading_paused)

    # -- answering (adapter side) -----------------------------------------------

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)

    def begin(
        self,
        exchange: Exchange,
        status: str,
        headers: list[tuple[str, str]],
        body_length: int | None,
    ) -> bytes:
        """The head of the answer to ``exchange``, once its status and fields are known
        (``body_length``: the whole body's, when known), with the framing that the connection
        and its listener plan's body steps choose for it (see corral/server/exchange.py);
        the body follows through `Exchange.frame` and `Exchange.end`. Raises
        `InvalidResponse`."""
        if self.steps is not None and self._stepped(
            status, -1 if body_length is None else body_length
        ):
            headers = self.steps.begin(exchange, status, headers, body_length)
            if exchange.encoder is not None:
                body_length = None
        return self._head(exchange, status, headers, body_length)

    def whole(
        self, exchange: Exchange, status: str, headers: list[tuple[str, str]], data: bytes
    ) -> bytes:
        """A whole answer at once, head and body, as the bytes for the wire. Raises
        `InvalidResponse`."""
        if self.steps is not None and self._stepped(status, len(data)):
            headers, data = self.steps.whole(exchange, status, headers, data)
        head = self._head(exchange, status, headers, len(data))
        if exchange.discard:
            return head
        if exchange.remaining == len(data):  # framed by its own length: nothing to check
            exchange.remaining = 0
            exchange.ended = True
            exchange.response_bytes = len(data)
            return head + data
        return head + exchange.frame(data) + exchange.end()

    def _stepped(self, status: Any, body_length: int) -> bool:
        """Whether the body steps (there are some) see this answer, whose body is
        ``body_length`` bytes long (-1: not known yet): not a body shorter than any of theirs
        (one comparison), but a 3xx's (a 304 stands for a 200)."""
        return body_length < 0 or body_length >= self.steps_least or redirection(status)

    def _head(
        self,
        exchange: Exchange,
        status: str,
        headers: list[tuple[str, str]],
        body_length: int | None,
    ) -> bytes:
        """`build_head` (its checks and cache) with what this connection allows: the server's
        fields, chunked framing for HTTP/1.1, keep-alive unless the worker drains or the
        request or the answer says it closes. The exchange records its status and fields (for
        the access log and the hooks) and the framing of its body."""
        server = self.server
        request = exchange.head
        version = request.version
        head = build_head(
            status,
            headers,
            server.prefix,
            version == "1.1",
            exchange.keep_alive and request.keep_alive and not server.draining,
            version,
            body_length,
        )
        exchange.status = head.status
        exchange.response_headers = headers
        exchange.head_sent = True
        exchange.chunked = head.chunked
        exchange.remaining = head.content_length
        if head.close:
            exchange.keep_alive = False
        if head.bodiless:
            exchange.discard = True
        return head.data

    def send_continue(self, exchange: Exchange) -> None:
        if not exchange.continue_sent and not exchange.complete and not self.closed:
            exchange.continue_sent = True
            self.transport.write(CONTINUE)
            if exchange is self.receiving and self.state == BODY:
                self._body_start(exchange)

    def finish(self, exchange: Exchange, keep_alive: bool, last: bytes = b"") -> None:
        """The answer to ``exchange`` is complete once ``last`` (its last bytes, if any) is
        written; go on with the connection."""
        if last and not self.closed:
            self.transport.write(last)
        server = self.server
        served = server.served = server.served + 1
        if served == server.retire_after:
            server.on_retire()  # type: ignore[misc]
        if server.on_finish is not None:
            server.on_finish(self, exchange)
        if self.pipeline and self.pipeline[0] is exchange:
            del self.pipeline[0]
        self.active = None
        body = exchange.body
        if body is not server.empty_body:
            body.close()  # a spilled body's temporary file goes now, not at GC
        exchange.action = None  # it and its answerer, a cycle, go now, not at the next GC
        if self.closed:
            return
        # a response that promised keep-alive before a drain began is followed by one more
        # request at most: it is answered with "Connection: close" (see the worker's drain)
        if not (keep_alive and exchange.complete and exchange.head.keep_alive):
            self.close()
            return
        if self.pipeline:
            if not self.parser.ended:
                self.resume_body()  # a pipelined request's body, its clocks (again) with it
            self._dispatch()
            return
        self.state = IDLE
        self.deadline = clock.now() + server.keep_alive
        if self._pending_error is not None:
            self._send_error(self._pending_error.status)
        elif self.parser.ended:
            self.close()
        else:
            self._resume_reading()

    def send_wait(self, waiting: bool) -> None:
        """An answer waits (or no longer does) for the client to read: the send deadline
        runs meanwhile, from each wait, and the wait is the client's time, not the
        application's (`Exchange.client_time`: what the master's timeout does not count)."""
        if waiting:
            if not self.waiting_since:
                self.waiting_since = clock.now()
        elif self.waiting_since:
            exchange = self.active
            if exchange is not None:
                exchange.client_time += clock.now() - max(
                    self.waiting_since, exchange.request_start
                )
            self.waiting_since = 0.0
        if self.state == BUSY:
            self.deadline = clock.now() + self.server.send_timeout if waiting else NEVER

    def pause_reading(self) -> None:
        """Stop reading the socket (also for an adapter holding a request back)."""
        if not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.reading_paused:
            if self.route is not None and self.route.handoff is not None:
                return  # once handing off, the socket's bytes are the receiver's
            self.reading_paused = False
            self.transport.resume_reading()

    def sendfile(self, fd: int, offset: int, count: int, done: Callable[[bool], None]) -> None:
        """Send ``count`` bytes of ``fd`` from ``offset`` with os.sendfile; then ``done(ok)``."""
        if self.closed:
            done(False)
            return
        if self.transport.get_write_buffer_size():
            # the head must be on the wire before file bytes go around the transport
            self.loop.call_later(0.001, self.sendfile, fd, offset, count, done)
            return
        SendfileJob(self, fd, offset, count, done).step()

    # -- errors and closing -----------------------------------------------------

    def _reject(self, error: HttpError) -> None:
        if self.route is not None and self.route.handoff is not None:
            # after the handed-off head, errors are the receiver's: the read goes on as if
            # it parsed, the requests before the hand-off answered, then the hand-off
            if self.active is None:
                self._dispatch()
            return
        self.state = BUSY
        self.deadline = NEVER
        if self._abandon_receiving(error.status):  # the error is in this request's body
            return
        if self.active is None and not self.pipeline:
            self._send_error(error.status)
            return
        # complete requests before it are answered first, then the error, then close
        self._pending_error = error
        self.pause_reading()
        if self.active is None:
            self._dispatch()

    def _abandon_receiving(self, status: int) -> bool:
        """The request being received will never be complete.

        If its application already runs, it is given up (True: the connection is
        closed); else it leaves the pipeline unanswered and the caller goes on.
        """
        exchange = self.receiving
        if exchange is None:
            return False
        if exchange.started:
            self._give_up(exchange, status)
            return True
        exchange.body.fail()
        self.pipeline.remove(exchange)
        self.receiving = None
        return False

    def _give_up(self, exchange: Exchange, status: int) -> None:
        """Fail the request's body; answer ``status`` unless its response began; close."""
        exchange.body.fail()  # its application, if running, sees the body fail
        if exchange.status == 0:
            self._send_error(status)
        else:
            self.close()

    def _send_error(self, status: int) -> None:
        if not self.closed:
            self.transport.write(error_response(status, self.server.prefix))
        self.close()

    def close(self, abort: bool = False) -> None:
        """Close after what is buffered is sent, or at once (``abort``)."""
        if not self.closed:
            self.closed = True
            self.server.connections.discard(self)
            if abort:
                self.transport.abort()
            else:
                self.transport.close()

    def waiting_for_client(self) -> bool:
        """The answer is held up by a client that does not read it."""
        return self.write_paused or self.sendfile_job is not None

    def idle(self) -> bool:
        """No request in progress or queued: safe to close when draining."""
        return self.active is None and not self.pipeline
