"""The uwsgi binary protocol (nginx's ``uwsgi_pass``), sans I/O: packets in, request events out.

A request is one packet and its body: a 4-byte header (``modifier1``, the vars block's size as
an unsigned 16-bit little-endian integer, ``modifier2``), the vars block (key/value pairs, each
a u16 LE length then the bytes, the key first) filling exactly that size, then
``CONTENT_LENGTH`` bytes of body. The vars are the CGI variables the proxy built
(``REQUEST_METHOD``, ``REQUEST_URI``, ``PATH_INFO``, ``QUERY_STRING``, ``HTTP_*``...).

:class:`UwsgiParser` has :class:`~corral.http.parser.RequestParser`'s interface (``feed``,
``ended``, ``head_bytes``) and reports to the same sink (``on_request``, ``on_body``,
``on_request_end``), so a listener whose protocol is uwsgi runs the same connection, adapter
and response code as an HTTP one; only its parser differs, chosen once per listener.

Invariants:
- One request per connection (what nginx's uwsgi module sends without upstream keepalive):
  after it, ``ended`` is set and nothing more is parsed. The head it reports says version
  "1.0" and no keep-alive, so the answer is a plain HTTP/1.x response, never chunked (nginx
  reads it to the end of the connection, or its Content-Length), and the connection closes.
- The same limits as HTTP, checked before memory is spent: the vars block against the head
  limit (uWSGI's buffer-size) from the header alone, ``HTTP_*`` vars against the field count
  and field size, ``REQUEST_URI`` against the request line, the body against
  ``limit_request_body`` (413) from ``CONTENT_LENGTH`` alone.
- Anything malformed is an :class:`~corral.http.errors.HttpError` (400, or the limit's status)
  from ``feed``, never another exception: a modifier1 other than 0 (WSGI), a var running past
  the block, an empty key, no or a bad ``REQUEST_METHOD``, a ``CONTENT_LENGTH`` that is not
  digits.
- A var given twice is joined as HTTP joins repeated fields (``HTTP_COOKIE`` with "; ", the
  others with ", "): nginx sends one ``HTTP_*`` var per header line.
"""

from __future__ import annotations

import re
from typing import Any

from corral.http.errors import BadRequest, ContentTooLarge, HeaderFieldsTooLarge, UriTooLong
from corral.http.head import Limits, Parser, RequestHead, RequestSink

HEADER_SIZE = 4
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_SCHEMES = {"http": "http", "https": "https"}
_TRUE = ("on", "1", "true", "yes")


class UwsgiHead(RequestHead):
    """A request head read from a uwsgi packet, with the vars it came in."""

    __slots__ = ("client", "protocol", "scheme", "vars")

    def __init__(
        self,
        variables: dict[str, str],
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        content_length: int | None,
    ) -> None:
        # framed as for an HTTP/1.0 client: not chunked, then closed
        super().__init__(method, target, "1.0", headers, False, content_length, False, False)
        self.vars = variables  # decoded as latin-1, PEP 3333's native strings
        # the packet's own: an attribute where an HTTP head computes the property
        self.protocol = variables.get("SERVER_PROTOCOL") or "HTTP/1.1"  # type: ignore[misc]
        self.client = variables.get("REMOTE_ADDR") or None  # type: ignore[assignment]
        self.scheme = _scheme(variables)


def _scheme(variables: dict[str, str]) -> str:
    """uWSGI's ``UWSGI_SCHEME`` first, then ``HTTPS`` (``on``), then nginx's
    ``REQUEST_SCHEME``; plain http otherwise."""
    scheme = _SCHEMES.get(variables.get("UWSGI_SCHEME", "").lower())
    if scheme is not None:
        return scheme
    if variables.get("HTTPS", "").lower() in _TRUE:
        return "https"
    return _SCHEMES.get(variables.get("REQUEST_SCHEME", "").lower(), "http")


class UwsgiParser(Parser):
    """Reads one uwsgi request (packet and body) and reports it to a sink."""

    # what tells its listeners' plans apart (ListenerPlan.uwsgi: the WSGI adapter's environ)
    # without importing this module where no listener speaks uwsgi
    uwsgi = True

    __slots__ = (
        "_body_limit",
        "_buffer",
        "_field_size",
        "_fields",
        "_head_limit",
        "_line_limit",
        "_remaining",
        "_sink",
        "_size",
    )  # and Parser's: ended, head_bytes

    def __init__(self, sink: RequestSink, limits: Limits) -> None:
        self._sink = sink
        self._head_limit = limits.head  # never above 65535 in effect: the size is a u16
        self._line_limit = limits.request_line
        self._fields = limits.fields
        self._field_size = limits.field_size
        self._body_limit = limits.body
        self._buffer = bytearray()  # the header and vars block, until complete
        self._size = -1  # the vars block's size, once the header is in
        self._remaining = -1  # body bytes still to come; -1 while in the head
        self.ended = False
        self.head_bytes = 0
        self.upgraded = None  # a uwsgi packet is one request: never an upgrade

    def detach(self) -> None:
        """The sink's connection closed: as RequestParser.detach."""
        self.ended = True
        self._sink = None  # type: ignore[assignment]  # detached: never used again

    def feed(self, data: bytes) -> None:
        """Parse ``data``; raises :class:`HttpError` for anything not to be served."""
        if self.ended:
            return  # one request per connection: what follows it is not read
        if self._remaining < 0:
            data = self._head(data)
            if self._remaining < 0:
                return
        if data and self._remaining:
            if len(data) > self._remaining:
                data = data[: self._remaining]
            self._remaining -= len(data)
            self._sink.on_body(data)
        if not self._remaining:
            self.ended = True
            self._sink.on_request_end()

    def _head(self, data: bytes) -> bytes:
        """Take head bytes; once the packet is whole, report it and return what follows."""
        buffer = self._buffer
        buffer += data
        self.head_bytes = len(buffer)
        if self._size < 0:
            if len(buffer) < HEADER_SIZE:
                return b""
            modifier1 = buffer[0]
            if modifier1 != 0:
                raise BadRequest(f"uwsgi modifier1 {modifier1}: only 0 (a WSGI request) is served")
            size = buffer[1] | buffer[2] << 8
            if size > self._head_limit:
                raise HeaderFieldsTooLarge(f"uwsgi vars block of {size} bytes, over the limit")
            self._size = size
        end = HEADER_SIZE + self._size
        if len(buffer) < end:
            return b""
        block = bytes(buffer[HEADER_SIZE:end])
        rest = bytes(buffer[end:])
        self._buffer = bytearray()
        head = self._request(block)
        self._remaining = head.content_length or 0
        self._sink.on_request(head)
        return rest

    def _request(self, block: bytes) -> UwsgiHead:
        # One pass over the block, decoded once: a var is sliced from the text (the names and
        # values the environ gets) at the offsets its lengths give in the bytes.
        text = block.decode("latin-1")
        variables: dict[str, str] = {}
        headers: list[tuple[bytes, bytes]] = []
        fields, field_size = self._fields, self._field_size
        size = len(block)
        position = 0
        while position < size:
            start = position + 2
            if start > size:
                raise BadRequest("uwsgi vars block ends inside a key's length")
            middle = start + (block[position] | block[position + 1] << 8)  # the key's end
            if middle + 2 > size:
                raise BadRequest("uwsgi var key, or its value's length, runs past the block")
            if middle == start:
                raise BadRequest("uwsgi var with an empty name")
            position = middle + 2 + (block[middle] | block[middle + 1] << 8)
            if position > size:
                raise BadRequest("uwsgi var value runs past the vars block")
            name = text[start:middle]
            value = text[middle + 2 : position]
            if name.startswith("HTTP_"):
                if len(headers) >= fields:
                    raise HeaderFieldsTooLarge("too many header fields")
                if position - start - 7 > field_size:  # the field's name and value
                    raise HeaderFieldsTooLarge("header field too large")
                headers.append(
                    (
                        block[start + 5 : middle].replace(b"_", b"-").lower(),
                        block[middle + 2 : position],
                    )
                )
            if name in variables:
                separator = "; " if name == "HTTP_COOKIE" else ", "
                variables[name] = variables[name] + separator + value
            else:
                variables[name] = value
        method = variables.get("REQUEST_METHOD", "")
        if not _TOKEN.match(method):  # also a REQUEST_METHOD given twice ("GET, POST")
            raise BadRequest("uwsgi request without a valid REQUEST_METHOD")
        uri = variables.get("REQUEST_URI")
        if uri is None:
            path = variables.get("PATH_INFO", "") or "/"
            query = variables.get("QUERY_STRING", "")
            uri = path + "?" + query if query else path
        if len(uri) + len(method) + 10 > self._line_limit:
            raise UriTooLong("REQUEST_URI too long")
        length: int | None = None
        declared = variables.get("CONTENT_LENGTH")
        if declared:
            if not (declared.isdigit() and declared.isascii()):
                raise BadRequest("uwsgi CONTENT_LENGTH is not a number")
            length = int(declared)
            if self._body_limit and length > self._body_limit:
                raise ContentTooLarge("declared body larger than limit_request_body")
        return UwsgiHead(variables, method, uri.encode("latin-1"), headers, length)


def packet(variables: Any, body: bytes = b"", modifier1: int = 0, modifier2: int = 0) -> bytes:
    """A uwsgi request as a client (nginx) writes it: ``variables`` are (key, value) pairs of
    str (latin-1) or bytes, or a mapping. For tests and tools; the server never sends one."""
    items = variables.items() if hasattr(variables, "items") else variables
    block = bytearray()
    for key, value in items:
        for part in (key, value):
            data = part.encode("latin-1") if isinstance(part, str) else part
            block += len(data).to_bytes(2, "little") + data
    return bytes([modifier1]) + len(block).to_bytes(2, "little") + bytes([modifier2]) + block + body


__all__ = ["HEADER_SIZE", "UwsgiHead", "UwsgiParser", "packet"]
