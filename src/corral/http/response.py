"""Response heads: validated status and header fields, serialised in one buffer.

Invariants:
- Nothing the application gives reaches the wire unchecked: a status must be three
  digits, a space and a reason; a header name must be a token; no value may hold
  CR, LF or NUL; everything must encode as latin-1. Anything else raises
  :class:`InvalidResponse` and the caller answers 500 instead.
- Hop-by-hop fields are the server's business (PEP 3333): the application's
  ``Connection``, ``Keep-Alive``, ``Transfer-Encoding`` and ``Upgrade`` are not
  copied; ``Connection: close`` from the application is honoured.
- The checks run once per distinct status string and header name (both cached),
  and once per head for the values: the joined head must hold exactly one CR and
  one LF per line, so a stray CR or LF in any value is caught by two counts.
"""

from __future__ import annotations

import re
from email.utils import formatdate

# Header name kinds, from the cache below.
_PLAIN = 0
_CONTENT_LENGTH = 1
_CONNECTION = 2
_HOP = 3

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_STATUS = re.compile(r"[1-9][0-9][0-9] [^\r\n\0]*\Z")
_CACHE_MAX = 1024

_name_kinds: dict[str, int] = {}
_status_lines: dict[str, tuple[str, int]] = {}


class InvalidResponse(Exception):
    """The application produced a status or header that must not be sent."""


def http_date(timestamp: float) -> str:
    """IMF-fixdate, e.g. ``Sun, 06 Nov 1994 08:49:37 GMT``."""
    return formatdate(timestamp, usegmt=True)


def status_line(status: str) -> tuple[str, int]:
    """``("HTTP/1.1 200 OK\\r\\n", 200)`` for a WSGI status string, validated."""
    cached = _status_lines.get(status)
    if cached is not None:
        return cached
    if type(status) is not str or not _STATUS.match(status):
        raise InvalidResponse(f"invalid status {status!r}")
    try:
        status.encode("latin-1")
    except UnicodeEncodeError:
        raise InvalidResponse(f"status not latin-1: {status!r}") from None
    entry = (f"HTTP/1.1 {status}\r\n", int(status[:3]))
    if len(_status_lines) < _CACHE_MAX:
        _status_lines[status] = entry
    return entry


def _name_kind(name: object) -> int:
    if type(name) is not str or not _TOKEN.match(name):
        raise InvalidResponse(f"invalid header name {name!r}")
    lower = name.lower()
    if lower == "content-length":
        kind = _CONTENT_LENGTH
    elif lower == "connection":
        kind = _CONNECTION
    elif lower in ("keep-alive", "transfer-encoding", "upgrade", "proxy-connection", "te"):
        kind = _HOP
    else:
        kind = _PLAIN
    if len(_name_kinds) < _CACHE_MAX:
        _name_kinds[name] = kind
    return kind


class ResponseHead:
    """The serialised head and what the connection needs to frame the body."""

    __slots__ = ("chunked", "close", "content_length", "data", "status")

    def __init__(
        self, data: bytes, status: int, content_length: int | None, chunked: bool, close: bool
    ) -> None:
        self.data = data
        self.status = status
        self.content_length = content_length  # None: chunked, close-delimited or no body
        self.chunked = chunked
        self.close = close


def build_head(
    status: str,
    headers: list[tuple[str, str]],
    prefix: str,
    *,
    chunked: bool,
    keep_alive: bool,
    version: str,
    body_length: int | None = None,
) -> ResponseHead:
    """Serialise a response head.

    ``prefix`` holds the server's own fields (``Date``, ``Server``), already
    terminated by CRLF. ``chunked`` asks for chunked framing when the application
    gave no Content-Length (the caller decides whether the client allows it).
    ``keep_alive`` is whether the connection may stay open after this response.
    ``body_length``, when the whole body is already known, frames it with a
    Content-Length the application did not give.
    """
    line, code = status_line(status)
    parts = [line, prefix]
    content_length: int | None = None
    close = not keep_alive
    kinds = _name_kinds
    for name, value in headers:
        kind = kinds.get(name)
        if kind is None:
            kind = _name_kind(name)
        if type(value) is not str:
            raise InvalidResponse(f"header {name} value is not a str: {value!r}")
        if kind:
            if kind == _CONTENT_LENGTH:
                if content_length is not None or not value.isdigit() or not value.isascii():
                    raise InvalidResponse(f"invalid Content-Length {value!r}")
                content_length = int(value)
            else:
                if kind == _CONNECTION and "close" in value.lower():
                    close = True
                continue
        parts.append(f"{name}: {value}\r\n")
    if code < 200 or code in (204, 304):
        content_length = None  # these never carry a body, so no framing is needed
        chunked = False
    elif content_length is None:
        if body_length is not None:
            content_length = body_length
            chunked = False
            parts.append(f"Content-Length: {body_length}\r\n")
        elif chunked:
            parts.append("Transfer-Encoding: chunked\r\n")
        else:
            close = True  # body delimited by closing the connection
    else:
        chunked = False
    if close:
        parts.append("Connection: close\r\n")
    elif version == "1.0":
        parts.append("Connection: keep-alive\r\n")
    parts.append("\r\n")
    text = "".join(parts)
    # Every part holds exactly one CRLF, but the prefix, which holds its own count.
    crlfs = len(parts) - 1 + prefix.count("\n")
    if text.count("\n") != crlfs or text.count("\r") != crlfs or "\0" in text:
        raise InvalidResponse("CR, LF or NUL in a header value")
    try:
        data = text.encode("latin-1")
    except UnicodeEncodeError:
        raise InvalidResponse("header value not latin-1") from None
    return ResponseHead(data, code, content_length, chunked, close)
