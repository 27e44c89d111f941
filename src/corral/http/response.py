"""Response heads: validated status and header fields, serialised in one buffer.

Every head corral writes goes through this module, the one place for heads:
:func:`build_head` for the application's answers, :func:`server_head` for the answers the
server writes itself (protocol errors, 500/504, route replies, hand-off failures, the control
API). Both carry the same ``prefix``, the worker's fields (``Date``, ``Server``, the ``headers``
setting's): :mod:`corral.http.fields` writes it and says which field names are the server's.

Invariants:
- Nothing the application gives reaches the wire unchecked: a status must be three
  digits, a space and a reason; a header name must be a token; no value may hold
  CR, LF or NUL; everything must encode as latin-1. Anything else raises
  :class:`InvalidResponse` and the caller answers 500 instead.
- Hop-by-hop fields are the server's business (PEP 3333): the application's
  ``Connection``, ``Keep-Alive``, ``Transfer-Encoding`` and ``Upgrade`` are not
  copied; ``Connection: close`` from the application is honoured. Its
  ``Content-Length`` frames the body (sent once, the same value given twice too).
- A field of the prefix the application gives itself (``Date``, ``Server``) is sent as the
  application gave it, instead of the server's, never beside it (RFC 9110 6.6.1: one
  ``Date``). The names are told apart when a name is first seen (its kind, cached), so
  an answer without them pays nothing. docs/settings.md ("Responses") lists every field.
- The checks run once per distinct status string and header field: a validated
  field is cached with its serialised line (bounded; fields of varying values
  such as cookies simply miss and are checked again). A whole head is cached too, by
  everything it is made of (the same status and fields, framing and prefix: an application
  answering alike every time, as most answers of one route are; its ``Date`` is in the
  prefix, so a head is reused within its second only); heads are immutable, so a hit
  returns the same object.
"""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any

# Header name kinds (`fields.field_kind`, cached per name below). From `_DATE` up they are bits
# (Date, Server: the prefix's fields an application may give itself), gathered in one int.
from corral.http.fields import CONNECTION as _CONNECTION
from corral.http.fields import CONTENT_LENGTH as _CONTENT_LENGTH
from corral.http.fields import DATE as _DATE
from corral.http.fields import TOKEN as _TOKEN
from corral.http.fields import field_kind, prefix_without

_STATUS = re.compile(r"[1-9][0-9][0-9] [^\r\n\0]*\Z")
# RFC 9110 5.5: no CTL but HTAB in a field value (CR, LF and NUL are the dangerous ones)
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_CACHE_MAX = 1024
_FIELD_CACHE_MAX = 4096
_FIELD_CACHE_LINE = 512  # longer lines are checked every time, not kept
_HEAD_CACHE_MAX = 256

_name_kinds: dict[str, int] = {}
# (name, value) -> (kind, "Name: value\r\n", content length or -1)
_fields: dict[tuple[str, str], tuple[int, str, int]] = {}
_status_lines: dict[str, tuple[str, int]] = {}


class InvalidResponse(Exception):
    """The application produced a status or header that must not be sent."""


# the reason phrase of each code that has one (an enum's look-up cost more than a whole
# FastCGI answer's head: every php answer asks)
_PHRASES = {int(status): status.phrase for status in HTTPStatus}


def reason(status: int) -> str:
    """The reason phrase of ``status`` ("" for a code without one, as Unit's ``return`` may
    give any code from 0 to 999)."""
    return _PHRASES.get(status, "")


def server_head(status: int, prefix: str, fields: str, close: bool) -> bytes:
    """The head of an answer the server writes itself: the status line, ``prefix`` (see
    :mod:`corral.http.fields`), ``fields`` (each line CRLF-terminated, ``Content-Length``
    included: the caller knows its body) and ``Connection: close`` when the connection
    closes after it."""
    end = "Connection: close\r\n\r\n" if close else "\r\n"
    return f"HTTP/1.1 {status:03d} {reason(status)}\r\n{prefix}{fields}{end}".encode("latin-1")


def switching_head(prefix: str, fields: str, headers: Any) -> bytes:
    """The head of a 101 (Switching Protocols) answer: ``prefix`` (:mod:`corral.http.fields`),
    ``fields`` (the server's own, CRLF-terminated: ``Upgrade``, ``Connection`` and what the
    new protocol's handshake says), then the application's ``headers``, each validated as
    for any answer. Its hop-by-hop fields, ``Content-Length`` and the fields named in
    ``fields`` are dropped, the server's being the ones that count (the handshake is the
    server's); its ``Date`` and ``Server`` replace the prefix's, as in any head. Raises
    :class:`InvalidResponse`."""
    handshake = {line.partition(":")[0].lower() for line in fields.split("\r\n")}
    lines = []
    given = 0
    for header in headers:
        kind, line, _ = _field(header)
        if kind >= _DATE:
            given |= kind
            lines.append(line)
        elif not kind and header[0].lower() not in handshake:
            lines.append(line)
    if given:
        prefix = prefix_without(prefix, given)
    head = f"HTTP/1.1 101 Switching Protocols\r\n{prefix}{fields}{''.join(lines)}\r\n"
    return head.encode("latin-1")


def trailer_lines(headers: Any) -> str:
    """Field lines from the application, each CRLF-terminated and validated as in any head;
    hop-by-hop fields and ``Content-Length`` are dropped (RFC 9110 6.5.1 forbids framing
    fields in trailers). Raises :class:`InvalidResponse`."""
    lines = []
    for header in headers:
        entry = _field(header)
        if not entry[0] or entry[0] >= _DATE:
            lines.append(entry[1])
    return "".join(lines)


def redirection(status: Any) -> bool:
    """A 3xx status (given as the application gave it), which a listener's body steps see
    whatever its body's length: a 304 has no body of its own, its fields are those of the 200
    it stands for."""
    if type(status) is not str:
        return False
    text = status  # typed str when compiled: its first character read in place
    return len(text) > 0 and text[0] == "3"


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
    kind = field_kind(name)
    if len(_name_kinds) < _CACHE_MAX:
        _name_kinds[name] = kind
    return kind


class ResponseHead:
    """The serialised head and what the connection needs to frame the body."""

    __slots__ = ("bodiless", "chunked", "close", "content_length", "data", "status")

    def __init__(
        self, data: bytes, status: int, content_length: int | None, chunked: bool, close: bool
    ) -> None:
        self.data = data
        self.status = status
        # RFC 9110 6.4.1: an answer with this status has no body, whatever it says
        self.bodiless = status < 200 or status == 204 or status == 304
        self.content_length = content_length  # None: chunked, close-delimited or no body
        self.chunked = chunked
        self.close = close


def _field(header: object) -> tuple[int, str, int]:
    """Validate one header field from the application and serialise it."""
    if type(header) is not tuple or len(header) != 2:
        raise InvalidResponse(f"a header must be a (name, value) tuple, not {header!r}")
    name, value = header
    kind = _name_kinds.get(name) if type(name) is str else None
    if kind is None:
        kind = _name_kind(name)
    if type(value) is not str:
        raise InvalidResponse(f"header {name} value is not a str: {value!r}")
    if _BAD_VALUE.search(value):
        raise InvalidResponse(f"control character (CR, LF, NUL...) in the value of header {name}")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise InvalidResponse(f"header {name} value is not latin-1") from None
    length = -1
    if kind == _CONTENT_LENGTH:
        digits = value.strip()
        if not (digits.isdigit() and digits.isascii()):
            raise InvalidResponse(f"invalid Content-Length {value!r}")
        length = int(digits)
    line = f"{name}: {value}\r\n"
    entry = (kind, line, length)
    if len(line) <= _FIELD_CACHE_LINE:
        if len(_fields) >= _FIELD_CACHE_MAX:
            _fields.clear()
        _fields[header] = entry
    return entry


# (status, fields as a tuple, prefix, chunked, keep_alive, version, body_length) -> the head;
# the prefix changes once a second (its Date), so older heads are never hit again and go when
# the cache is full
_heads: dict[tuple[Any, ...], ResponseHead] = {}


class _LastHead:
    """The head `build_head` returned last, with what it was made of: most answers are the
    same as the one before (one application, a few routes), and comparing with it spares
    hashing the whole key for the cache. Replaced whole, never changed: a thread reading it
    sees one head's fields, never two heads' mixed."""

    __slots__ = (
        "body_length",
        "chunked",
        "fields",
        "head",
        "keep_alive",
        "prefix",
        "status",
        "version",
    )

    def __init__(self, key: tuple[Any, ...], head: ResponseHead | None) -> None:
        (
            self.status,
            self.fields,
            self.prefix,
            self.chunked,
            self.keep_alive,
            self.version,
            self.body_length,
        ) = key
        self.head = head


_last = _LastHead((None, (), "", False, False, "", None), None)


def _same_fields(fields: tuple[Any, ...], headers: list[Any]) -> bool:
    if len(fields) != len(headers):
        return False
    for index in range(len(fields)):
        field = fields[index]
        header = headers[index]
        if field is not header and field != header:
            return False
    return True


def build_head(
    status: str,
    headers: list[tuple[str, str]],
    prefix: str,
    chunked: bool,
    keep_alive: bool,
    version: str,
    body_length: int | None = None,
) -> ResponseHead:
    """Serialise a response head (see `make_head`), or return the same head made before."""
    global _last
    last = _last
    if (
        last.prefix is prefix
        and last.chunked == chunked
        and last.keep_alive == keep_alive
        and (last.status is status or last.status == status)
        and (last.version is version or last.version == version)
        and last.body_length == body_length
        and type(headers) is list
        and _same_fields(last.fields, headers)
    ):
        return last.head  # type: ignore[return-value]
    try:
        key = (status, tuple(headers), prefix, chunked, keep_alive, version, body_length)
        head = _heads.get(key)
    except TypeError:  # an unhashable field (a list instead of a tuple): made and refused below
        return make_head(status, headers, prefix, chunked, keep_alive, version, body_length)
    if head is None:
        head = make_head(status, headers, prefix, chunked, keep_alive, version, body_length)
        if len(_heads) >= _HEAD_CACHE_MAX:
            _heads.clear()
        _heads[key] = head
    _last = _LastHead(key, head)
    return head


def make_head(
    status: str,
    headers: list[tuple[str, str]],
    prefix: str,
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
    line, code = _status_lines.get(status) or status_line(status)
    parts = [line, prefix]
    content_length: int | None = None
    length_line = ""
    close = not keep_alive
    given = 0  # the server's own fields the application gave (_DATE, _SERVER)
    fields = _fields
    for header in headers:
        try:
            entry = fields.get(header)
        except TypeError:  # unhashable: a list instead of a tuple
            entry = None
        if entry is None:
            entry = _field(header)
        kind = entry[0]
        if not kind:
            parts.append(entry[1])
        elif kind == _CONTENT_LENGTH:  # placed below, once the status says it may go
            if content_length is None:
                content_length = entry[2]
                length_line = entry[1]
            elif entry[2] != content_length:  # the same length again is sent once
                raise InvalidResponse(f"two Content-Length values, {content_length} and {entry[2]}")
        elif kind >= _DATE:  # the application's Date or Server, sent instead of the server's
            given |= kind
            parts.append(entry[1])
        elif kind == _CONNECTION and "close" in header[1].lower():
            close = True
        # other hop-by-hop fields are dropped: the server frames the connection itself
    if given:
        parts[1] = prefix_without(prefix, given)
    if code < 200 or code == 204 or code == 304:
        # these never carry a body; RFC 9110 8.6: no Content-Length on 1xx and 204
        if code == 304 and length_line:
            parts.append(length_line)
        content_length = None
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
        parts.append(length_line)
        chunked = False
    if close:
        parts.append("Connection: close\r\n\r\n")
    elif version == "1.0":
        parts.append("Connection: keep-alive\r\n\r\n")
    else:
        parts.append("\r\n")
    return ResponseHead("".join(parts).encode("latin-1"), code, content_length, chunked, close)
