"""A request answered by a ``"php"`` application: sent to its php-fpm over FastCGI from the
worker that holds the connection, the answer streamed back through the one response path
(`corral.server.exchange`).

`to_php` runs when routing passes a request to a php application (`actions.application`,
through `to_fpm`, with the address of its php-fpm that the master's supervision publishes):
the script is chosen at once (`corral.php.site`), so a 404, 403 or 301 is answered without
php-fpm; otherwise a `FastCgiReply` answers, in order with the connection's other answers.

The request: ``BEGIN_REQUEST`` (``FCGI_KEEP_CONN``), the CGI variables (`corral.fastcgi.params`)
and the body as ``STDIN`` while it arrives: a body with a ``Content-Length`` is streamed (the
reply starts as soon as the request is first in line, asking ``100 Continue`` when the client
waits for it); at most ``HIGH_WATER`` bytes wait for php-fpm in corral, beyond that the
client's socket is not read until php-fpm takes them. A chunked body is read whole first into
a spooled file (memory up to ``SPOOL_MEMORY``, then disk; ``http.max_body_size`` bounds it),
because php reads no more of ``STDIN`` than ``CONTENT_LENGTH`` says, then sent piece by piece
as php-fpm takes it.

The answer: ``STDOUT`` until the end of the CGI head (`corral.fastcgi.answer`), then the head
through `HttpConnection.begin` (which checks every field: a value with CR or LF never
reaches the wire) and each body piece through `Exchange.frame`; while the client does not
read, php-fpm is not read either. ``STDERR`` goes to corral's error log, a line each.
``END_REQUEST`` ends the answer and gives the connection back to the pool.

Failures: php-fpm unreachable, refusing, or answering what is not FastCGI or not a CGI head:
502; no byte for ``fastcgi_read_timeout`` while corral waits on php-fpm (not on the client):
504 (within a sweep's period after: `client.FastCgiPool.watch`); after the head has gone the
client's connection is closed instead, so that a broken answer never passes for a whole one.
A connection to php-fpm that was not left clean is closed, never reused. A kept connection
found closed as a request went on it, before any answer, is replaced and the request sent
again, once, while its bytes sent are held, if its method is idempotent or the close came
within ``UNSEEN_WINDOW`` (no php ran it). A request that could not be sent again so (a method
not idempotent, a body longer than ``RETRY_HELD``), and one sent again, first has its kept
connection checked for a close the loop has not read yet (`client.Backend.gone`: a system
call the others spare).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.actions.respond import Reply, reply
from corral.fastcgi.answer import AnswerError, HeadReader
from corral.fastcgi.params import encoded_params
from corral.fastcgi.records import END_REQUEST, STDIN_END, STDOUT, begin_request, params_of, stdin
from corral.http.response import InvalidResponse, reason
from corral.php.site import Choice
from corral.server import clock

if TYPE_CHECKING:
    from corral.php.apps import PhpApplication
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange

HIGH_WATER = 256 * 1024  # request body bytes waiting for php-fpm before the client is paused
SPOOL_MEMORY = 1024 * 1024  # a chunked body's bytes kept in memory before its file is on disk
PIECE = 64 * 1024  # a spooled body's bytes read at a time
RETRY_HELD = 64 * 1024  # request bytes held for a retry on a new connection (see the docstring)
STDERR_LINE = 2048  # the longest line of php's stderr logged
BAD_TARGET = Choice(status=400)
IDEMPOTENT = frozenset(("GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"))  # RFC 9110 9.2.2
# a kept connection closed this soon after a request went on it, with no answer, was closing
# already (a child that reached pm.max_requests exits as its last answer leaves, and its
# close can cross the next request): no php ran that request, whatever its method
UNSEEN_WINDOW = 0.05


_status_texts: dict[int, str] = {}  # "200 OK" by code (100-599: the CGI head's Status)


def _status_text(status: int) -> str:
    text = _status_texts.get(status)
    if text is None:
        text = _status_texts[status] = f"{status} {reason(status)}"
    return text


def to_php(conn: HttpConnection, exchange: Exchange, app: PhpApplication, target: int) -> bool:
    route = conn.route
    assert route is not None  # only routed connections have actions
    request = route.request
    site = app.sites[target] if target < len(app.sites) else app.sites[0]
    try:
        choice = site.choose(request.path(), request.query())
    except ValueError:  # a malformed escape, a NUL, a ".." above the root: as routing does
        choice = BAD_TARGET
    if choice.status:
        exchange.action = Reply(choice.status, choice.location)
        return True
    exchange.action = exchange.body = FastCgiReply(app, site, choice, request.host())
    return True


def to_fpm(conn: HttpConnection, exchange: Exchange, name: str, address: str, _: Any) -> bool:
    """`corral.actions.external`'s speaker of FastCGI: the request for the php application
    ``name`` (at ``exchange.target``) goes to its php-fpm at ``address``, one the master's
    board says is ready, over this worker's connections there."""
    php = conn.plan.routing.php[name]
    return to_php(conn, exchange, php.at(address), exchange.target)


class FastCgiReply:
    """The answerer of a php request (``exchange.action``) and the sink of its body
    (``exchange.body``: told when the client goes)."""

    def __init__(self, app: PhpApplication, site: Any, choice: Any, host: str) -> None:
        self.app = app
        self.site = site
        self.choice = choice
        self.host = host
        self.conn: Any = None
        self.exchange: Any = None
        self.backend: Any = None
        self.pool: Any = None  # the application's connections (client.FastCgiPool), from `start`
        self.connecting: Any = None  # the connect's task while it runs (client.FastCgiPool)
        self.pending: list[bytes] = []  # body bytes not yet written to php-fpm
        self.pending_size = 0
        self.sent: list[bytes] | None = []  # body bytes written, while a retry may resend them
        self.sent_size = 0
        self.retried = False
        self.check_kept = True  # a kept connection is checked before use (see the docstring)
        self.spool: Any = None  # a chunked body's file
        self.body_size = 0
        self.body_done = False  # the whole body is in (or there is none)
        self.stdin_done = False  # ... and its end went to php-fpm
        self.head: HeadReader | None = HeadReader(app.head_limit)  # None once the head went
        self.heard = False  # php-fpm answered something
        self.answered = False  # the answer's head went to the client
        self.over = False  # the exchange is finished (or abandoned)
        self.deadline = 0.0
        self.sent_at = 0.0  # when the request went to php-fpm (clock seconds)
        self.watched = False  # in its pool's sweep (`_wait`)
        self.client_paused = False  # php-fpm not read while the client does not read
        self.out: list[bytes] = []  # the answer's bytes from one read of php-fpm's, written once

    # -- the request's body (exchange.body)

    def feed(self, chunk: bytes) -> bool | None:
        self.body_size += len(chunk)
        if self.spool is not None:
            self.spool.write(chunk)
            return None
        self.pending.append(chunk)
        self.pending_size += len(chunk)
        backend = self.backend
        if backend is None:
            return self.pending_size > HIGH_WATER or None
        self._flush()
        return backend.write_paused or None

    def finish(self) -> None:
        self.body_done = True
        if self.backend is not None and self.spool is None:
            self._flush()

    def fail(self) -> None:
        """The client went, or its body never will be whole."""
        if not self.over:
            self._abandon()

    def close(self) -> None:
        """The exchange is over."""
        self.over = True
        self._stop_timer()
        if self.spool is not None:
            self.spool.close()
            self.spool = None
        # the exchange holds this reply as its body: without that cycle reference counting
        # frees both, and the client's connection, now, not the cycle collector later
        self.exchange = None

    # -- the answer (exchange.action)

    def take_body(self, conn: HttpConnection, exchange: Exchange) -> FastCgiReply:
        if exchange.head.chunked:  # its length is known once it is whole
            import tempfile  # here: its import costs every worker 1 MiB (wsgi/input.py)

            self.spool = tempfile.SpooledTemporaryFile(SPOOL_MEMORY, prefix="corral-php-")  # noqa: SIM115
        else:
            exchange.streaming = True
        return self

    def start(self, conn: HttpConnection, exchange: Exchange) -> None:
        self.conn = conn
        self.exchange = exchange
        head = exchange.head
        # sent again, were its kept connection found closed: no need to look for that first
        self.check_kept = head.method not in IDEMPOTENT or (
            not head.chunked and (head.content_length or 0) > RETRY_HELD
        )
        if not (head.chunked or head.content_length):
            self.body_done = True  # no body
        elif not exchange.complete and head.expect_continue:
            conn.send_continue(exchange)
        self.pool = self.app.connections(conn.loop)
        self._wait()  # (a connection may have to be waited for: also within the read timeout)
        self.pool.get(self)

    # -- the connection to php-fpm (client.Backend's user)

    def connected(self, backend: Any) -> None:
        if self.over or self.conn.closed:  # the client went meanwhile
            self.pool.put(backend)
            return
        self.backend = backend
        conn = self.conn
        exchange = self.exchange
        length = self.body_size if self.spool is not None else exchange.head.content_length or 0
        encoded = encoded_params(
            exchange.head,
            self.choice,
            self.site.raw_root,
            conn.peer,
            conn.sockname,
            "https" if conn.encrypted else "http",
            length,
            self.host,
            exchange.forwarded,
        )
        if self.spool is not None:
            self.spool.seek(0)
        self.sent_at = clock.now()
        paused = self.pending_size > HIGH_WATER
        self._flush(begin_request(self.app.keep) + params_of(encoded))
        if paused and not self.body_done and not backend.write_paused:
            conn.resume_body()  # the client was paused while its bytes waited
        self._wait()

    def failed(self, status: int, why: str) -> None:
        self._log("%s: php application %r: %s: answered %d", self.app.name, why, status)
        self._error(status)

    def writable(self) -> None:
        if self.spool is not None:
            self._flush()
        elif not self.body_done:
            self.conn.resume_body()

    def records(self, events: list[tuple[int, object]]) -> None:
        self.deadline = clock.now() + self.app.read_timeout
        self.heard = True  # never sent again
        for kind, content in events:
            if kind == END_REQUEST:
                self._ended()
                return
            if self.over:
                continue
            if kind == STDOUT:
                self._stdout(content)  # type: ignore[arg-type]
            else:
                self._stderr(content)  # type: ignore[arg-type]
            if self.backend is None:  # it failed meanwhile
                return
        if self.out:
            self._write_out()

    def broken(self, why: str) -> None:
        self.backend = None
        self._log("%s: php application %r answered what is not FastCGI (%s)", self.app.name, why)
        self._error(502)

    def lost(self, exc: Exception | None) -> None:
        backend, self.backend = self.backend, None
        if self.over:
            return
        resendable = self.spool is not None or self.sent is not None
        if (
            backend is not None
            and backend.reused
            and not self.heard
            and not self.retried
            and resendable
            and (
                self.exchange.head.method in IDEMPOTENT
                or clock.now() - self.sent_at < UNSEEN_WINDOW
            )
        ):
            # a kept connection php-fpm had closed (a child that ended) as this request went
            # on it (client.Backend.gone missed it): once more, anew; a request php may have
            # run (a POST) only if the connection closed at once
            self.retried = True
            self.check_kept = True  # (no third time)
            self.conn.plan.routing.log.debug(
                "%s: php application %r had closed a kept connection: sent again on another",
                self.exchange.where(),
                self.app.name,
            )
            if self.sent:
                self.pending[:0] = self.sent
                self.pending_size += self.sent_size
            self.sent, self.sent_size, self.stdin_done = [], 0, False
            self.pool.get(self)
            return
        self._log(
            "%s: php application %r closed the connection before its answer ended", self.app.name
        )
        self._error(502)

    # -- helpers

    def _flush(self, first: bytes = b"") -> None:
        """What php-fpm may have of the body now, after ``first``: all that waits (a spool's
        while php-fpm takes it), then the end of ``STDIN`` once the body is whole; in one
        write but for a spool's."""
        backend = self.backend
        spool = self.spool
        out = [first] if first else []
        if spool is not None:
            if first:
                backend.write(first)
                out = []
            while True:
                if backend.write_paused:
                    return
                piece = spool.read(PIECE)
                if not piece:
                    break
                backend.write(stdin(piece))
        elif self.pending:
            data = b"".join(self.pending) if len(self.pending) > 1 else self.pending[0]
            self.pending = []
            self.pending_size = 0
            sent = self.sent
            if sent is not None:
                if self.sent_size + len(data) <= RETRY_HELD:
                    sent.append(data)
                    self.sent_size += len(data)
                else:
                    self.sent = None
            out.append(stdin(data))
        if self.body_done and not self.stdin_done:
            self.stdin_done = True
            out.append(STDIN_END)
        if out:
            backend.write(out[0] if len(out) == 1 else b"".join(out))

    def _wait(self) -> None:
        """php-fpm's next bytes are due within the read timeout (a deadline moved on by each
        read; the pool's sweep, `FastCgiPool.watch`, calls `expired` once it passed: no timer
        made and cancelled per request)."""
        self.deadline = clock.now() + self.app.read_timeout
        if not self.watched:
            self.watched = True
            self.pool.watch(self)

    def expired(self, now: float) -> None:
        """The deadline passed (the pool's sweep, at ``now``)."""
        if self.over:
            self._stop_timer()
            return
        if self.client_paused or self.conn.write_paused or self.connecting is not None:
            self.deadline = now + self.app.read_timeout  # the client's wait, or the connect's
            return
        if self.backend is None:  # every connection busy all that time
            self.pool.leave(self)
            what = "no connection to it came free"
        else:
            what = "it sent nothing"
        self._log(
            "%s: php application %r: %s for %g s: %s",
            self.app.name,
            what,
            self.app.read_timeout,
            "answered 504" if not self.answered else "connection closed",
        )
        self._error(504)

    def _stdout(self, data: bytes) -> None:
        conn = self.conn
        exchange = self.exchange
        head = self.head
        if head is not None:
            try:
                got = head.feed(data)
            except AnswerError as exc:
                self._log("%s: php application %r: %s", self.app.name, str(exc))
                self._error(502)
                return
            if got is None:
                return
            cgi, data = got
            self.head = None
            try:
                out = conn.begin(exchange, _status_text(cgi.status), cgi.fields, None)
            except InvalidResponse as exc:
                self._log("%s: php application %r: %s", self.app.name, str(exc))
                self._error(502)
                return
            self.answered = True
            self.out.append(out)
        if data:
            out = exchange.frame(data)
            if out:
                self.out.append(out)

    def _write_out(self) -> None:
        """What one read of php-fpm's gave, in one write; php-fpm is not read while the
        client does not read."""
        out = self.out
        conn = self.conn
        conn.write(out[0] if len(out) == 1 else b"".join(out))
        out.clear()
        if conn.write_paused and not self.client_paused:
            self.client_paused = True
            self.backend.transport.pause_reading()
            conn.on_writable = self._client_writable

    def _client_writable(self) -> None:
        self.client_paused = False
        if self.backend is not None and not self.over:
            self.backend.transport.resume_reading()
            self.deadline = clock.now() + self.app.read_timeout

    def _stderr(self, data: bytes) -> None:
        for line in data.decode("utf-8", "replace").splitlines():
            if line.strip():
                self._log("%s: php application %r: %s", self.app.name, line[:STDERR_LINE])

    def _ended(self) -> None:
        backend, self.backend = self.backend, None
        pool = self.pool
        if backend is not None:
            if backend.reader.buffer or not self.stdin_done:
                backend.close()  # not clean: the request's bytes are not all sent, or more came
            else:
                pool.put(backend)
        if self.over:
            return
        if self.head is not None:  # the answer ended inside its head, or had none
            self._log("%s: php application %r ended its answer without a head", self.app.name)
            self._error(502)
            return
        self._stop_timer()
        self.over = True
        exchange = self.exchange
        last = exchange.end()
        if self.out:
            self.out.append(last)
            last = b"".join(self.out)
        self.conn.finish(exchange, exchange.keep_alive, last)

    def _error(self, status: int) -> None:
        """The request cannot be answered by php: ``status`` if the answer has not begun,
        else the client's connection closes; php-fpm's connection is closed."""
        self._stop_timer()
        backend, self.backend = self.backend, None
        if backend is not None:
            backend.close()
        if self.over:
            return
        self.over = True
        conn = self.conn
        exchange = self.exchange
        if self.answered or conn.closed:
            conn.finish(exchange, False)
            return
        keep_alive = exchange.complete and exchange.head.keep_alive and not conn.server.draining
        data = reply(status, None, exchange.head, keep_alive, conn.server.prefix)
        exchange.status = status
        exchange.response_bytes = len(data)
        conn.finish(exchange, keep_alive, data)

    def _abandon(self) -> None:
        self.over = True
        self._stop_timer()
        if self.pool is not None:
            self.pool.leave(self)
        if self.connecting is not None:
            self.connecting.cancel()
            self.connecting = None
        backend, self.backend = self.backend, None
        if backend is not None:  # (php-fpm ends the request when it finds it closed)
            backend.close()

    def _stop_timer(self) -> None:
        if self.watched:
            self.watched = False
            self.pool.unwatch(self)

    def _log(self, message: str, *args: Any) -> None:
        conn = self.conn
        exchange = self.exchange
        where = "-" if exchange is None else exchange.where()  # (None: over, a late event)
        conn.plan.routing.log.error(message, where, *args)
