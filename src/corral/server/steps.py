"""The body steps of a listener's plan: what stands between an answer's status and fields and
the wire, the same for every answer (WSGI, ASGI, the actions' files and replies), because
every answer goes through `HttpConnection.begin` or `HttpConnection.whole`.

A step has two methods: ``begin(exchange, status, fields, body_length) -> fields``, for an
answer whose body comes in pieces (it may set ``exchange.encoder``, which
`corral.server.exchange.Exchange.frame` then feeds every piece through, and the response is
framed by chunks), and ``whole(exchange, status, fields, body) -> (fields, body)`` for an answer
known in full (framed by its length). A listener whose settings ask for none has no step at
all: its connections pay one test of ``steps`` per answer.

`Compress` is NGINX Unit's ``settings.http.compression`` (`corral.compression`); TLS is not a
body step (it wraps the transport, under the framing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.compression import CompressionRules
    from corral.server.exchange import Exchange


class Compress:
    """Compression of the answers `CompressionRules` admit: whole bodies compressed at once,
    streamed ones piece by piece with a flush after each (every piece leaves when the
    application sends it)."""

    __slots__ = ("least", "rules")

    def __init__(self, rules: CompressionRules) -> None:
        self.rules = rules
        # below it, nothing is compressed: the connection does not call the step (but for a
        # 3xx), and the rules say no again for a length they are given
        self.least = rules.least_length

    def begin(
        self,
        exchange: Exchange,
        status: Any,
        fields: list[tuple[str, str]],
        body_length: int | None,
    ) -> list[tuple[str, str]]:
        outcome = self._decide(exchange, status, fields, body_length)
        if outcome is None:
            return fields
        if outcome.codec is not None:
            exchange.encoder = outcome.codec.stream()
        return outcome.headers

    def whole(
        self, exchange: Exchange, status: Any, fields: list[tuple[str, str]], body: bytes
    ) -> tuple[list[tuple[str, str]], bytes]:
        outcome = self._decide(exchange, status, fields, len(body))
        if outcome is None:
            return fields, body
        if outcome.codec is not None:
            body = outcome.codec.whole(body)
        return outcome.headers, body

    def _decide(self, exchange: Exchange, status: Any, fields: Any, length: int | None) -> Any:
        # a status or fields the head will refuse are left alone: build_head says what is wrong
        if type(status) is not str or not status[:3].isdigit() or type(fields) is not list:
            return None
        code = int(status[:3])
        if code == 304:  # no body of its own: the fields are those of the 200 it stands for
            length = None
        request = exchange.head
        return self.rules.decide(request.method, code, fields, request.headers, length)


def body_steps(settings: Any) -> Compress | None:
    """The body steps a worker's settings ask for (None: none). Imports the compression
    libraries only when compression is configured."""
    if settings.compression is None:
        return None
    from corral.compression import build_rules

    rules = build_rules(settings.compression)
    return None if rules is None else Compress(rules)
