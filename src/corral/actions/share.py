"""NGINX Unit's ``share`` action: a file, served by the worker's file engine
(`corral.static.files.StaticFiles`, ``Routing.files``: one per worker) and written through the
one response path (`corral.server.exchange`).

The handler serves the share as soon as the request's head is routed (the engine is
synchronous, on the loop's thread), so a share that has no file for the request takes its
``fallback`` then: the routes' next action, acted on by its own handler (`RouteState.act`; a
pass to the application is then exactly a pass); a share without one answers the engine's
status (403, 404, 405) with Unit's error page. The answer is written in order with the
connection's other answers by a :class:`FileReply`: from memory in one write
(`HttpConnection.whole`, which leaves the body out for HEAD and 304), or from the descriptor the
engine opened, by sendfile when no body step stands between the file and the wire
(`Exchange.sends_files`), else read and framed piece by piece while the client takes them (a
body step encodes it: compression of a file without a precompressed sibling).

That descriptor is closed on every path: once the body is sent, when sending fails, and when
the connection goes before the answer began (the answerer is then the exchange's body, which
the connection fails, or closes once the exchange is over). The request's body is read and
dropped, as for a ``return``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from corral.actions.respond import answer_unread, error_page
from corral.http.errors import error_response
from corral.http.response import InvalidResponse, reason
from corral.static.answer import SERVER_ERROR, StaticAnswer

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange

# shares one request may go through by their fallbacks: more means fallbacks that lead back
# to the same shares (a pass built from variables, which the compiler cannot see)
MAX_FALLBACKS = 16
PIECE = 64 * 1024  # bytes read at a time from a file that is copied rather than sent by sendfile
PIECES_PER_TURN = 16  # copied before the loop runs its other callbacks (a client reading fast)

_status_texts: dict[int, str] = {}


def share(conn: HttpConnection, exchange: Exchange, action: Any) -> bool:
    route = conn.route
    assert route is not None  # only routed connections have actions
    request = route.request
    answer = route.files.serve(action, request)
    if answer.fallback and action.fallback is not None:
        route.fallbacks += 1
        if route.fallbacks <= MAX_FALLBACKS:
            return route.act(exchange, route.router.resolve_fallback(action, request))
        conn.plan.routing.log.error(
            "%s: the shares' fallbacks loop: answered 500", exchange.where()
        )
        answer = SERVER_ERROR
    reply = exchange.action = FileReply(answer)
    if answer.fd >= 0:
        exchange.body = reply  # failed by the connection if it goes before the answer begins
    return True


class FileReply:
    """The answerer of a share's request (``exchange.action``), and the sink of its body,
    which it drops (``exchange.body``, also for a request without one when the answer holds a
    descriptor: see the module's docstring)."""

    __slots__ = ("answer", "conn", "count", "exchange", "offset")

    def __init__(self, answer: StaticAnswer) -> None:
        self.answer = answer
        self.conn: Any = None  # set when the answer begins, for the callbacks of its body
        self.exchange: Any = None
        self.offset = answer.offset  # what remains of the file's range
        self.count = answer.count

    # -- the request's body: read and dropped

    def feed(self, chunk: bytes) -> None:
        return None

    def finish(self) -> None: ...

    def fail(self) -> None:
        self.answer.close()

    def close(self) -> None:
        self.answer.close()

    # -- the answer

    def take_body(self, conn: HttpConnection, exchange: Exchange) -> FileReply:
        answer_unread(exchange)
        return self

    def start(self, conn: HttpConnection, exchange: Exchange) -> None:
        answer = self.answer
        if not exchange.complete:
            exchange.keep_alive = False  # its body was never asked for: the connection closes
        wire = answer.wire
        if wire is None:
            wire = answer.wire = _wire(answer)
        status, fields, body, length = wire
        try:
            if answer.fd < 0:
                if exchange.discard:  # HEAD: the head a GET gets (a body step's Vary too)
                    data = conn.begin(exchange, status, fields, length)
                else:
                    data = conn.whole(exchange, status, fields, body)
                conn.finish(exchange, exchange.keep_alive, data)
                return
            head = conn.begin(exchange, status, fields, length)
        except InvalidResponse as exc:  # a type or a field of the configuration's
            answer.close()
            conn.plan.routing.log.error("%s: share answer refused: %s", exchange.where(), exc)
            exchange.status = 500
            conn.finish(exchange, False, error_response(500, conn.server.prefix))
            return
        self.conn = conn
        self.exchange = exchange
        if exchange.sends_files:
            count, before = exchange.frame_file(self.count)
            self.count = count
            conn.write(head + before)
            conn.sendfile(answer.fd, self.offset, count, self._sent)
            return
        conn.write(head)
        self._copy()

    def _sent(self, ok: bool) -> None:
        """sendfile's end: ``ok``, the whole range went."""
        self.answer.close()
        conn = self.conn
        exchange = self.exchange
        if not ok:  # the client left, or has a cut body: the connection closes
            conn.finish(exchange, False)
            return
        last = exchange.file_sent(self.count) + exchange.end()
        conn.finish(exchange, exchange.keep_alive, last)

    def _copy(self) -> None:
        """The file's range through the body's framing (and its body step), piece by piece
        while the client reads; again when it can take more (``on_writable``)."""
        conn = self.conn
        exchange = self.exchange
        answer = self.answer
        for _ in range(PIECES_PER_TURN):
            if conn.closed:
                answer.close()
                conn.finish(exchange, False)
                return
            if not self.count:
                answer.close()
                last = exchange.end()
                conn.finish(exchange, exchange.keep_alive, last)
                return
            if conn.write_paused:
                conn.on_writable = self._copy
                return
            try:
                piece = os.pread(answer.fd, min(self.count, PIECE), self.offset)
            except OSError as exc:
                piece = b""
                problem = exc.strerror
            else:
                problem = "it is shorter than when it was opened"
            if not piece:
                answer.close()
                conn.plan.routing.log.error(
                    "%s: could not read the file (%s): connection closed", exchange.where(), problem
                )
                conn.finish(exchange, False)
                return
            self.offset += len(piece)
            self.count -= len(piece)
            out = exchange.frame(piece)
            if out:
                conn.write(out)
        conn.loop.call_soon(self._copy)


def _wire(answer: StaticAnswer) -> tuple[str, list[tuple[str, str]], bytes, int]:
    """An answer as `HttpConnection.whole` and `begin` take it: its status text, its fields
    with ``Content-Length`` (right for HEAD too; none on a 304, whose would be the 200's), its
    body (Unit's error page for an error the engine gives without one) and that length."""
    status = answer.status
    text = _status_texts.get(status)
    if text is None:
        text = _status_texts[status] = f"{status} {reason(status)}"
    if answer.fd >= 0:  # framed by `begin` from its length
        return text, answer.fields, b"", answer.length
    fields = answer.fields
    body = answer.body
    length = answer.length
    if status >= 400 and not body:
        body = error_page(status)
        fields = [*fields, ("Content-Type", "text/html")]
        length = len(body)
    if status != 304:
        fields = [*fields, ("Content-Length", str(length))]
    return text, fields, body, length
