"""What both request parsers share: the limits, the parsed head, the sink they report to.

The parser itself has two builds that behave identically (tests/unit/test_parser_parity.py
holds them to it): `corral.http._parser`, compiled, and `corral.http.parser`, its pure-Python
twin; `corral.core` picks one.
"""

from __future__ import annotations

from typing import Any

from corral.http.errors import BadRequest


class Limits:
    """The request-side limits; one instance per worker, shared by its connections."""

    __slots__ = ("body", "field_size", "fields", "head", "request_line")

    def __init__(
        self,
        request_line: int = 8190,
        fields: int = 100,
        field_size: int = 8190,
        body: int = 1 << 30,
        head: int = 0,
    ) -> None:
        self.request_line = request_line  # the request line's bytes, CRLF excluded
        self.fields = fields
        # a field's name and value (without the whitespace around the value); its line may
        # take two bytes more (": "), CRLF excluded
        self.field_size = field_size
        self.body = body  # 0 = unlimited
        # The whole head, the empty line included: `head` (uWSGI's buffer-size) when it is
        # lower than what the other limits allow (0: those), which it is by default.
        most = request_line + 2 + fields * (field_size + 4) + 2
        self.head = min(head, most) if head else most


class RequestHead:
    """One parsed request line and header block.

    `version` is the HTTP version the exchange is framed in ("1.1" or "1.0"): the answer
    follows it (chunked only for 1.1). `protocol` is the request's own, for logs; `client`
    the client address a proxy named in the request itself (the uwsgi protocol's
    ``REMOTE_ADDR``), None over HTTP: class attributes here, slots of `UwsgiHead`
    (http/uwsgi.py), so an HTTP head pays nothing for them.
    """

    client = None  # str in a UwsgiHead

    __slots__ = (
        "absolute",
        "chunked",
        "content_length",
        "expect_continue",
        "headers",
        "keep_alive",
        "method",
        "target",
        "version",
    )

    def __init__(
        self,
        method: str,
        target: bytes,
        version: str,
        headers: list[tuple[bytes, bytes]],
        keep_alive: bool,
        content_length: int | None,
        chunked: bool,
        expect_continue: bool,
        absolute: Any = None,
    ) -> None:
        self.method = method
        self.target = target
        self.version = version  # "1.1" or "1.0"
        self.headers = headers  # as received, trailers excluded
        self.keep_alive = keep_alive
        self.content_length = content_length
        self.chunked = chunked
        self.expect_continue = expect_continue
        self.absolute = absolute  # the parsed URL of an absolute-form target, else None

    @property
    def protocol(self) -> str:
        return "HTTP/" + self.version


class Parser:
    """What every request parser is to its connection (`corral.http.parser`, its compiled
    twin, `corral.http.uwsgi`): fed the bytes read, detached when the connection closes, and
    telling whether a further request can come (``ended``) and how many bytes of a head it
    holds (``head_bytes``, 0 between requests). ``upgraded`` is None, or, once a request
    upgraded the connection (``Connection: upgrade`` with ``Upgrade``), the bytes read after
    its head (b"" when none): they belong to the other protocol. A base class, not a protocol,
    so that the compiled connection reads these and calls ``feed`` in C."""

    __slots__ = ("ended", "head_bytes", "upgraded")

    def feed(self, data: bytes) -> None:
        """Parse ``data``; raises `corral.http.errors.HttpError` for anything not served."""
        raise NotImplementedError

    def detach(self) -> None:
        """The sink's connection closed: no further event reaches it."""
        raise NotImplementedError


class RequestSink:
    """What the parser reports to: the connection, or on a routed listener its route
    (corral/server/routed.py's RouteState), which passes on to it. A sink with an
    ``on_message_begin()`` is also told where each request begins (its first byte after any
    CRLFs); the parser looks for it once, when it is made, so a sink without it costs nothing.
    A base class, not a protocol, so that the compiled parser calls the connection in C."""

    __slots__ = ()

    def on_request(self, head: RequestHead) -> None:
        raise NotImplementedError

    def on_body(self, chunk: bytes) -> None:
        raise NotImplementedError

    def on_request_end(self) -> None:
        raise NotImplementedError


def parse_absolute_form(url: bytes) -> Any:
    """RFC 9112 3.2.2: an absolute-form target must be a URI with a host."""
    import httptools  # (a proxy's form of target: most servers never receive one)

    try:
        parsed = httptools.parse_url(url)
    except httptools.HttpParserInvalidURLError:
        raise BadRequest("invalid request target") from None
    if not parsed.schema or not parsed.host:
        raise BadRequest("request target without scheme or host")
    return parsed
