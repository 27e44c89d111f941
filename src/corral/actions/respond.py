"""NGINX Unit's ``return`` action, and the answers routing gives itself (404, a route error):
answered in order with the connection's other requests, as Unit does.

400-599 get Unit's small HTML error page, any other status an empty body and the
``Location`` when given, unless the answer has a body of its own (the probes',
server/health.py). The request's body is read and dropped, so the connection stays open as
far as the request allows (``Expect: 100-continue``: answered at once, the body never asked
for, then closed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from corral.http.head import RequestHead
from corral.http.response import server_head
from corral.observe.refusals import refused

if TYPE_CHECKING:
    from corral.server.exchange import Exchange


class AnsweringConnection(Protocol):
    """The connection an answer of the server's own goes out on, as read here (and by the
    filters that refuse with `refuse`): `corral.server.connection`'s `HttpConnection`, which
    imports this module (through its listener's plan)."""

    server: Any  # its ServerState: whether the worker drains, the Server field's prefix
    plan: Any  # its ListenerPlan: the listener's refusals (`corral.observe.refusals`)

    def finish(self, exchange: Exchange, keep_alive: bool, last: bytes = b"") -> None: ...


class Discard:
    """The body of a request answered without an application: read and dropped."""

    def feed(self, chunk: bytes) -> None:
        return None

    def finish(self) -> None: ...
    def fail(self) -> None: ...
    def close(self) -> None: ...


DISCARD = Discard()


class Reply:
    """The answerer of a request routing answers itself (``exchange.action``)."""

    __slots__ = ("body", "fields", "location", "status")

    def __init__(
        self,
        status: int,
        location: str | None = None,
        fields: str = "",
        body: bytes | None = None,
    ) -> None:
        self.status = status
        self.location = location
        self.fields = fields  # more head lines, each ending in CRLF (a rate limit's Retry-After)
        self.body = body  # None: Unit's (an error page, or nothing)

    def take_body(self, conn: AnsweringConnection, exchange: Exchange) -> Discard:
        answer_unread(exchange)
        return DISCARD

    def start(self, conn: AnsweringConnection, exchange: Exchange) -> None:
        server = conn.server
        head = exchange.head
        keep_alive = head.keep_alive and exchange.complete and not server.draining
        data = reply(
            self.status, self.location, head, keep_alive, server.prefix, self.fields, self.body
        )
        exchange.status = self.status
        exchange.response_bytes = len(data)
        conn.finish(exchange, keep_alive, data)


def refuse(
    conn: AnsweringConnection,
    exchange: Exchange,
    status: int,
    reason: str,
    fields: str = "",
    close: bool = False,
) -> bool:
    """The server answers ``exchange`` ``status`` itself (with more head ``fields``): it is
    refused for ``reason`` (`corral.observe.refusals`: counted on its listener, named in the
    access log); ``close``: its connection closes after the answer. True: a limit's
    ``refuses``."""
    if close:
        exchange.head.keep_alive = False
    exchange.action = Reply(status, None, fields)
    exchange.refusal = reason
    refused(conn, exchange)
    return True


def answer_unread(exchange: Exchange) -> None:
    """An answer the server gives itself does not ask for the request's body: one that
    expects ``100 Continue`` is answered at once, without it (then closed)."""
    if exchange.head.expect_continue:
        exchange.streaming = True


def respond(conn: AnsweringConnection, exchange: Exchange, action: Any) -> bool:
    """``Respond``: answered in order, by a `Reply`."""
    exchange.action = Reply(action.status, action.location)
    return True


def error_page(status: int) -> bytes:
    """Unit's small HTML page of an error status (400-599)."""
    return f"<!DOCTYPE html><title>Error {status:03d}</title><p>Error {status:03d}.\r\n".encode(
        "latin-1"
    )


def reply(
    status: int,
    location: str | None,
    head: RequestHead,
    keep_alive: bool,
    prefix: str,
    more: str = "",
    body: bytes | None = None,
) -> bytes:
    """The bytes of Unit's answer to a ``return`` action (with ``more`` head lines), or of
    one with its own ``body`` (its Content-Type among ``more``)."""
    fields = [more]
    if body is None and 400 <= status <= 599:
        body = error_page(status)
        fields.append("Content-Type: text/html\r\n")
    elif body is None:
        body = b""
    if location is not None:
        fields.append(f"Location: {location}\r\n")
    if not (100 <= status <= 199 or status == 204 or status == 304):
        # RFC 9110 8.6: none on 1xx and 204; a 304's would be the length of a representation
        # that a ``return`` does not have
        fields.append(f"Content-Length: {len(body)}\r\n")
    data = server_head(status, prefix, "".join(fields), not keep_alive)
    return data if head.method == "HEAD" else data + body
