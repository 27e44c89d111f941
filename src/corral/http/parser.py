"""The request parser, pure Python: the twin of the compiled `corral.http._parser`.

Both builds implement one algorithm and must behave identically: the same requests reported,
the same error statuses, at the same byte (tests/unit/test_parser_parity.py feeds both the
corpus and generated input). Keep them in step: a change here is a change there.

The algorithm. The bytes are taken one line at a time while a head (or a chunk-size line, or
trailers) is read, and as they come while a body is. Every check runs on a line as soon as it
is complete, in the order of the bytes, and an incomplete line is checked only against the
limits on its length; so an input gives the same outcome however it is split into reads.

What is refused, and why (RFC 9112 unless said):
- A request line other than ``token SP target SP HTTP/d.d`` (3): one space exactly, a target
  of visible ASCII; a version other than 1.0 and 1.1 is 505, and so is HTTP/0.9's GET
  without a version. Empty lines before it are skipped (2.2: CRLF, or a bare LF); a bare CR
  there is 400.
- A field line other than ``token ":" OWS value OWS`` (5): whitespace before the colon and
  obs-fold (a line beginning with whitespace) are 400; a value may hold HTAB, SP, visible
  ASCII and obs-text, never another control byte (RFC 9110 5.5). Lines end in CRLF; a bare LF
  or CR is 400.
- Content-Length that is not one run of digits, repeated, above 2^64 - 1, or beside
  Transfer-Encoding (6.3); Transfer-Encoding that is empty, whose final coding is not chunked,
  that names a coding after chunked, or that comes in HTTP/1.0 (6.1), and 501 when it names
  a coding before chunked (``gzip, chunked``: corral decodes none, and the application would
  read coded bytes as the body; 6.1's answer, and nginx's); a chunk-size line other than
  ``HEXDIG+ *( ";" token [ "=" ( token / quoted-string ) ] ) CRLF`` (7.1); chunk data not
  followed by CRLF.
- Content-Length or Transfer-Encoding among the trailer fields (RFC 9110 6.5.1).
- Host missing in HTTP/1.1, repeated, or not ``uri-host [ ":" port ]`` (3.2); an ``Expect``
  other than 100-continue (417, RFC 9110 10.1.1); CONNECT (405); ``*`` with a method other
  than OPTIONS (3.2.4); an absolute-form target without a scheme and a host (3.2.2).
- Limits: the request line (414), a field line and the number of fields (431, trailers
  included), the whole head (431), the body by its declared length or chunk sizes (413), a
  chunk-size line with its extensions as a field (``limit_request_field_size``; 400, RFC 9112
  7.1.1: "an appropriate 4xx").

After a request that does not keep the connection alive, bytes other than CR and LF end
parsing (``ended``): the request is answered and the connection closes. After an upgrade
(``Connection: upgrade`` with ``Upgrade``) parsing ends too: what follows is another
protocol, and the request is reported without a body.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from corral.http.errors import (
    BadRequest,
    ContentTooLarge,
    HeaderFieldsTooLarge,
    HttpError,
    UriTooLong,
    VersionNotSupported,
)
from corral.http.head import Limits, Parser, RequestHead, RequestSink, parse_absolute_form

_TCHAR = rb"!#$%&'*+\-.^_`|~0-9A-Za-z"
_TOKEN = re.compile(rb"[%s]+" % _TCHAR)
# without a version: HTTP/0.9's GET, refused with 505 like the other versions
_REQUEST_LINE = re.compile(rb"([%s]+) ([\x21-\x7e]+)(?: HTTP/([0-9])\.([0-9]))?" % _TCHAR)
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
# RFC 9112 3.2: uri-host [ ":" port ]: a name (unreserved, sub-delims, pct-encoded; an IPv4
# address is one too) or an IP literal in brackets (a zone's "%25" included); empty for a
# target without an authority
_REG_NAME = rb"A-Za-z0-9\-._~!$&'()*+,;="
_HOST_VALUE = re.compile(
    rb"(?:(?:[%s]|%%[0-9A-Fa-f]{2})*|\[[%s:%%]+\])(?::[0-9]*)?" % (_REG_NAME, _REG_NAME)
)


@lru_cache(maxsize=1024)  # every request has a Host, and most repeat one another's
def _valid_host(value: bytes) -> bool:
    return _HOST_VALUE.fullmatch(value) is not None


# field lines with their CRLFs, every one well formed: the syntax of a whole head in one match
_FIELD_BLOCK = re.compile(rb"(?:[%s]+:[\t\x20-\x7e\x80-\xff]*\r\n)*" % _TCHAR)
_CHUNK_SIZE_LINE = re.compile(
    rb'([0-9A-Fa-f]+)(?:;[%s]+(?:=(?:[%s]+|"(?:[\t !#-\[\]-~\x80-\xff]|\\[\t -~\x80-\xff])*"))?)*'
    % (_TCHAR, _TCHAR)
)
_MAX_LENGTH = (1 << 64) - 1

# states
_START = 0  # before a request line: empty lines are skipped
_LINE = 1  # the request line
_FIELDS = 2  # the header fields
_LENGTH = 3  # a body of known length
_CHUNK_SIZE = 4
_CHUNK_DATA = 5
_CHUNK_END = 6  # the CRLF after chunk data
_TRAILERS = 7
_CLOSED = 8  # after a request that closes the connection
_UPGRADED = 9  # after an upgrade: never a state, only where a request leaves the parser

# the fields that frame a request, by kind (their names lower-cased); others are 0
_PLAIN, _HOST, _CONTENT_LENGTH, _TRANSFER_ENCODING, _EXPECT, _CONNECTION, _UPGRADE = range(7)
_FRAMING = {
    b"host": _HOST,
    b"content-length": _CONTENT_LENGTH,
    b"transfer-encoding": _TRANSFER_ENCODING,
    b"expect": _EXPECT,
    b"connection": _CONNECTION,
    b"upgrade": _UPGRADE,
}
_KINDS_MAX = 1024
_kinds: dict[bytes, int] = {}  # names as received -> kind (bounded)
_METHODS = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")}
_VERSIONS = {(b"1", b"1"): "1.1", (b"1", b"0"): "1.0"}


def _too_long(state: int) -> HttpError:
    if state == _LINE:
        return UriTooLong("request line too long")
    if state == _CHUNK_SIZE:
        return BadRequest("chunk-size line too long")
    return HeaderFieldsTooLarge("header field too large")


def _kind(name: bytes) -> int:
    kind = _kinds.get(name)
    if kind is None:
        kind = _FRAMING.get(name.lower(), _PLAIN)
        if len(_kinds) < _KINDS_MAX:
            _kinds[name] = kind
    return kind


class RequestParser(Parser):
    """Parses requests from the bytes fed to it and reports them to a sink."""

    __slots__ = (
        "_begin",
        "_body_limit",
        "_body_seen",
        "_chunked",
        "_close",
        "_coded",
        "_connection_upgrade",
        "_content_length",
        "_expect",
        "_field_size",
        "_fields",
        "_head_done",
        "_head_limit",
        "_headers",
        "_host_count",
        "_keep_alive_option",
        "_line_limit",
        "_method",
        "_partial",
        "_previous",
        "_remaining",
        "_sink",
        "_state",
        "_target",
        "_te",
        "_then",
        "_trailers",
        "_upgrade",
        "_version",
    )  # and Parser's: ended, head_bytes

    def __init__(self, sink: RequestSink, limits: Limits) -> None:
        self._sink = sink
        self._line_limit = limits.request_line
        self._fields = limits.fields
        self._field_size = limits.field_size
        self._body_limit = limits.body
        self._head_limit = limits.head
        # a sink that wants to know where each request begins (a routed listener's route:
        # server/routed.py); a connection's own sink has none, so a plain one pays nothing
        self._begin = getattr(sink, "on_message_begin", None)
        self.ended = False
        self.upgraded: bytes | None = None
        self._state = _START
        self._partial = b""
        self._then = _START  # where the request being parsed leaves the connection
        # the fields of the request before, by position: a field sent again byte for byte is
        # given as the same object (as the compiled parser does; what the environ's
        # ConnectionEnviron relies on to reuse its keys)
        self._previous: list[tuple[bytes, bytes]] = []
        self._reset()

    def _reset(self) -> None:
        self.head_bytes = 0
        self._head_done = 0  # bytes of the head's complete lines
        self._method = ""
        self._target = b""
        self._version = ""
        self._headers: list[tuple[bytes, bytes]] = []
        self._host_count = 0
        self._content_length: int | None = None
        self._te = False
        self._coded = False  # a transfer coding other than chunked (not implemented: 501)
        self._chunked = False
        self._expect = False
        self._close = False
        self._keep_alive_option = False  # Connection: keep-alive (HTTP/1.0)
        self._connection_upgrade = False
        self._upgrade = False
        self._body_seen = 0
        self._remaining = 0
        self._trailers = 0

    def detach(self) -> None:
        """The sink's connection closed: parse nothing more, and let go of the sink.

        The sink holds this parser too: without the cycle, both are freed by reference
        counting when the connection goes, instead of waiting for the cycle collector (a
        collection every ~60 connections under close-per-request traffic)."""
        self.ended = True
        self._sink = self._begin = None  # type: ignore[assignment]  # detached: never used

    def feed(self, data: bytes) -> None:
        """Parse ``data``; raises :class:`HttpError` for anything not to be served."""
        if self._partial:
            data = self._partial + data
            self._partial = b""
        pos = 0
        end = len(data)
        while pos < end and not self.ended:
            state = self._state
            if state == _START:
                # empty lines before a request line are skipped (CRLF, or a bare LF); a CR
                # that is not the start of one is refused, as it would be in the line
                while pos < end:
                    byte = data[pos]
                    if byte == 10:
                        pos += 1
                    elif byte != 13:
                        break
                    elif pos + 1 == end:
                        self._partial = b"\r"
                        return
                    elif data[pos + 1] == 10:
                        pos += 2
                    else:
                        raise BadRequest("a bare CR before the request line")
                if pos == end:
                    break
                self._state = _LINE
                if self._begin is not None:
                    self._begin()
            elif state == _CLOSED:
                while pos < end and (data[pos] == 13 or data[pos] == 10):
                    pos += 1
                if pos < end:
                    self.ended = True  # data after a request that closes: left unread
                break
            elif state in (_LENGTH, _CHUNK_DATA):
                take = min(self._remaining, end - pos)
                chunk = data if take == end and pos == 0 else data[pos : pos + take]
                pos += take
                self._remaining -= take
                self._sink.on_body(chunk)
                if not self._remaining:
                    if state == _LENGTH:
                        self._message_end()
                    else:
                        self._state = _CHUNK_END
            elif state == _CHUNK_END:
                have = data[pos : pos + 2]
                if have != b"\r\n"[: len(have)]:
                    raise BadRequest("chunk data not followed by CRLF")
                if len(have) < 2:
                    self._partial = have
                    break
                pos += 2
                self._state = _CHUNK_SIZE
            else:
                pos = self._lines(data, pos, end)
        if self.upgraded is not None and pos < end:
            self.upgraded += data[pos:]  # the other protocol's first bytes

    def _lines(self, data: bytes, pos: int, end: int) -> int:
        """Take the complete lines of a head, a chunk-size line or trailers."""
        if self._state == _LINE:
            whole = self._whole_head(data, pos)
            if whole:
                return whole
        while pos < end and not self.ended:
            state = self._state
            if state == _LINE:
                limit = self._line_limit
            elif state == _CHUNK_SIZE:
                limit = self._field_size  # its extensions: limited as a field is
            elif state in (_FIELDS, _TRAILERS):
                limit = self._field_size + 2
            else:
                return pos
            in_head = state <= _FIELDS
            eol = data.find(b"\n", pos)
            if eol < 0:
                length = end - pos
                if data[end - 1] == 13:
                    length -= 1  # the CR of the CRLF, perhaps
                if length > limit:
                    raise _too_long(state)
                if in_head:
                    self.head_bytes = self._head_done + end - pos
                    if self.head_bytes > self._head_limit:
                        raise HeaderFieldsTooLarge("request head too large")
                self._partial = data[pos:]
                return end
            cr = eol > pos and data[eol - 1] == 13
            if (eol - pos - cr) > limit:
                raise _too_long(state)
            if in_head:
                self.head_bytes = self._head_done = self._head_done + eol + 1 - pos
                if self.head_bytes > self._head_limit:
                    raise HeaderFieldsTooLarge("request head too large")
            if not cr:
                raise BadRequest("line ending in a bare LF")
            line = data[pos : eol - 1]
            pos = eol + 1
            if state == _LINE:
                self._request_line(line)
            elif state == _CHUNK_SIZE:
                self._chunk_size(line)
                return pos
            elif line:
                self._fields_of((line,), 0, trailers=state == _TRAILERS)
            elif state == _FIELDS:
                self._head_end()
                return pos
            else:
                self._message_end()
                return pos
        return pos

    def _whole_head(self, data: bytes, pos: int) -> int:
        """The common case, faster: a whole head from ``pos``, within the head limit and
        without a bare LF, taken in one split (the checks of `_lines`, in its order). 0 when
        the head is not like that: `_lines` takes it then."""
        stop = data.find(b"\r\n\r\n", pos)
        if (
            stop < 0
            or stop + 4 - pos > self._head_limit
            or data.count(b"\n", pos, stop) != data.count(b"\r\n", pos, stop)
        ):
            return 0
        first = data.find(b"\r\n", pos)
        if first < stop and _FIELD_BLOCK.fullmatch(data, first + 2, stop + 2) is None:
            return 0  # a bad field line: `_lines` finds which, and what comes before it
        lines = data[pos:stop].split(b"\r\n")
        line = lines[0]
        if len(line) > self._line_limit:
            raise UriTooLong("request line too long")
        self._request_line(line)
        self._fields_of(lines, 1, checked=True)
        self.head_bytes = stop + 4 - pos
        self._head_end()
        return stop + 4

    def _request_line(self, line: bytes) -> None:
        match = _REQUEST_LINE.fullmatch(line)
        if match is None:
            raise BadRequest("invalid request line")
        method, target, major, minor = match.groups()
        if major is None:  # HTTP/0.9's simple request is a GET: anything else is no request
            if method != b"GET":
                raise BadRequest("invalid request line")
            raise VersionNotSupported("HTTP/0.9 is not supported")
        version = _VERSIONS.get((major, minor))
        if version is None:
            raise VersionNotSupported(f"HTTP/{major.decode()}.{minor.decode()} is not supported")
        self._method = _METHODS.get(method) or method.decode("ascii")
        self._target = target
        self._version = version
        self._state = _FIELDS

    def _fields_of(
        self, lines: Any, first: int, trailers: bool = False, checked: bool = False
    ) -> None:
        """The field lines ``lines[first:]``, in order: the head's, or ``trailers`` (checked
        and counted as fields, never shown to the app). One loop for a whole head, since a
        call per field would cost as much as its checks; ``checked``: their syntax is known
        to be good (`_FIELD_BLOCK`)."""
        headers = self._headers
        previous = self._previous
        most = self._fields
        size = self._field_size
        limit = size + 2
        token = _TOKEN.fullmatch
        bad = _BAD_VALUE.search
        for index in range(first, len(lines)):
            line = lines[index]
            if len(line) > limit:  # `_lines` checked it already; `_whole_head` did not
                raise HeaderFieldsTooLarge("header field too large")
            name, colon, value = line.partition(b":")
            value = value.strip(b" \t")
            if not checked:
                if not colon or token(name) is None:
                    raise BadRequest("invalid header field name")
                if bad(value) is not None:
                    raise BadRequest("invalid character in a header field value")
            if len(name) + len(value) > size:
                raise HeaderFieldsTooLarge("header field too large")
            if trailers:
                self._trailers += 1
                if self._trailers > most:
                    raise HeaderFieldsTooLarge("too many trailer fields")
                if _kind(name) in (_CONTENT_LENGTH, _TRANSFER_ENCODING):
                    # RFC 9110 6.5.1: framing is not for trailers; a proxy merging them into
                    # the head would frame the message otherwise than corral did
                    raise BadRequest("a framing field in the trailers")
                continue
            position = len(headers)
            if position >= most:
                raise HeaderFieldsTooLarge("too many header fields")
            if position < len(previous):
                field = previous[position]
                if field[0] != name or field[1] != value:
                    field = previous[position] = (name, value)
            else:
                field = (name, value)
                previous.append(field)
            headers.append(field)
            kind = _kinds.get(name)
            if kind is None:
                kind = _kind(name)
            if kind == _HOST:
                self._host_count += 1
                if not _valid_host(value):
                    raise BadRequest("invalid Host")
            elif kind:
                self._framing_field(kind, value)

    def _framing_field(self, kind: int, value: bytes) -> None:
        if kind == _CONTENT_LENGTH:
            if self._content_length is not None:
                raise BadRequest("repeated Content-Length")
            if self._te:
                raise BadRequest("Content-Length with Transfer-Encoding")
            if not value.isdigit():  # ASCII digits only, for bytes
                raise BadRequest("invalid Content-Length")
            length = int(value)
            if length > _MAX_LENGTH:
                raise BadRequest("Content-Length overflow")
            self._content_length = length
        elif kind == _TRANSFER_ENCODING:
            if self._content_length is not None:
                raise BadRequest("Transfer-Encoding with Content-Length")
            if not value:  # no coding at all: no framing a proxy would agree on
                raise BadRequest("empty Transfer-Encoding")
            self._te = True
            for coding in value.split(b","):
                if self._chunked:
                    raise BadRequest("a transfer coding after chunked")
                coding = coding.strip(b" \t").lower()
                self._chunked = coding == b"chunked"
                self._coded = self._coded or coding not in (b"chunked", b"")
        elif kind == _EXPECT:
            if value.lower() != b"100-continue":
                raise HttpError("unsupported expectation", 417)
            self._expect = True
        elif kind == _CONNECTION:
            for option in value.split(b","):
                option = option.strip(b" \t").lower()
                if option == b"close":
                    self._close = True
                elif option == b"keep-alive":
                    self._keep_alive_option = True
                elif option == b"upgrade":
                    self._connection_upgrade = True
        else:  # Upgrade
            self._upgrade = True

    def _head_end(self) -> None:
        version = self._version
        if self._te:
            if not self._chunked:
                raise BadRequest("Transfer-Encoding whose final coding is not chunked")
            if version == "1.0":
                raise BadRequest("Transfer-Encoding in an HTTP/1.0 request")
            if self._coded:
                raise HttpError("a transfer coding other than chunked", 501)
        if self._host_count != 1 and (self._host_count or version == "1.1"):
            raise BadRequest("missing Host header" if not self._host_count else "repeated Host")
        method = self._method
        if method == "CONNECT":
            raise HttpError("CONNECT is not supported", 405)
        target = self._target
        absolute = None
        if target[0] != 47:  # not "/...": asterisk-form or absolute-form
            if target != b"*":
                absolute = parse_absolute_form(target)
            elif method != "OPTIONS":
                raise BadRequest("asterisk-form target with a method other than OPTIONS")
        length = self._content_length
        if length is not None and self._body_limit and length > self._body_limit:
            raise ContentTooLarge("declared body larger than limit_request_body")
        keep_alive = not self._close and (version == "1.1" or self._keep_alive_option)
        chunked = self._chunked
        upgrading = self._upgrade and self._connection_upgrade
        self._then = _UPGRADED if upgrading else _START if keep_alive else _CLOSED
        self.head_bytes = self._head_done = 0
        self._sink.on_request(
            RequestHead(
                method,
                target,
                version,
                self._headers,
                keep_alive,
                length,
                chunked,
                # RFC 9110 10.1.1: an HTTP/1.0 expectation is ignored
                self._expect and version == "1.1" and (chunked or bool(length)),
                absolute,
            )
        )
        if upgrading or not (chunked or length):
            self._message_end()  # an upgrade's bytes are the other protocol's
        elif chunked:
            self._state = _CHUNK_SIZE
        else:
            self._remaining = length  # type: ignore[assignment]
            self._state = _LENGTH

    def _chunk_size(self, line: bytes) -> None:
        match = _CHUNK_SIZE_LINE.fullmatch(line)
        if match is None:
            raise BadRequest("invalid chunk-size line")
        size = int(match.group(1), 16)
        if size > _MAX_LENGTH:
            raise BadRequest("chunk size overflow")
        if not size:
            self._state = _TRAILERS
            return
        seen = self._body_seen = self._body_seen + size
        if self._body_limit and seen > self._body_limit:
            raise ContentTooLarge("chunked body larger than limit_request_body")
        self._remaining = size
        self._state = _CHUNK_DATA

    def _message_end(self) -> None:
        then = self._then
        self._reset()
        if then == _UPGRADED:
            self.ended = True
            self.upgraded = b""
        else:
            self._state = then
        self._sink.on_request_end()
