"""An upstream server's answers, parsed: the response side of the proxy (`corral.actions.proxy`).

Sans I/O, as the request parser is: bytes in (`ResponseParser.feed`, `ResponseParser.feed_eof`),
events out to a sink (``on_response(head)``, ``on_body(chunk)``, ``on_response_end()``). It
never touches a socket, a clock or the client.

An upstream is checked as strictly as a client (corral's request parser, `corral.http.parser`,
whose field and chunk grammars it reuses), because whatever it lets through reaches a client
as corral's own answer: a proxy that frames an answer otherwise than its upstream did is the
way a response is smuggled. Every refusal is an `UpstreamError`; the proxy answers 502 when
nothing went to the client yet, and aborts the client's connection otherwise, so a cut or
malformed answer is never taken for a whole one. Refused (RFC 9112 unless said):

- a status line other than ``HTTP/1.x SP 3DIGIT [SP reason]`` (4), a version other than 1.0
  and 1.1, a status below 100; a reason with a control byte but HTAB;
- a field line other than ``token ":" OWS value OWS`` (5; no obs-fold, no whitespace before
  the colon, no control byte in a value), lines not ending in CRLF;
- Content-Length that is not one run of digits, given twice (even with the same value),
  above 2^64 - 1, or beside Transfer-Encoding (6.3); Transfer-Encoding whose final coding is
  not chunked (a body delimited by close is allowed only without either field); a chunk-size
  line other than ``HEXDIG+ [extensions]``, chunk data not followed by CRLF; Content-Length
  or Transfer-Encoding among the trailers (RFC 9110 6.5.1);
- a head longer than ``head_limit`` bytes, more than ``fields`` fields;
- the end of the stream before the body's end (`feed_eof`): a body cut short.

Interim answers (1xx but 101) are read and dropped: the proxy answers ``Expect`` itself. A
101 is reported, and what follows its head is the tunnel's (`ResponseParser.upgraded`).
"""

from __future__ import annotations

import re
from typing import Any

from corral.http.parser import _BAD_VALUE, _CHUNK_SIZE_LINE, _FIELD_BLOCK, _MAX_LENGTH, _TOKEN

__all__ = ["ResponseHead", "ResponseParser", "UpstreamError"]

_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: ([\t\x20-\x7e\x80-\xff]*))?")

# states
_HEAD = 0  # a status line and its fields
_LENGTH = 1  # a body of known length
_CHUNK_SIZE = 2
_CHUNK_DATA = 3
_CHUNK_END = 4  # the CRLF after chunk data
_TRAILERS = 5
_UNTIL_CLOSE = 6  # a body delimited by the end of the stream
_DONE = 7  # the answer is over: nothing more may come (but an upgrade's bytes)


class UpstreamError(Exception):
    """An upstream's answer that must not reach a client: malformed, or cut short."""


class ResponseHead:
    """One parsed status line and its fields (names and values as received): ``status``,
    ``reason``, ``version`` ("1.1" or "1.0"), ``headers`` (the answer's own list: its user may
    change it), ``keep_alive`` (the upstream keeps its connection open after it),
    ``content_length`` (None: chunked, until close, or no body) and ``chunked``. Made by
    `_Parsed.head`, one per answer.

    ``fields``: the same fields as parsed, a tuple shared by the answers whose heads had the
    same bytes (while they are kept): what a user derives from the fields alone can be kept
    by it, found by its identity first (the common case: the same head again) or its value."""

    __slots__ = (
        "chunked",
        "content_length",
        "fields",
        "headers",
        "keep_alive",
        "reason",
        "status",
        "version",
    )

    status: int
    reason: bytes
    version: str
    headers: list[tuple[bytes, bytes]]
    fields: tuple[tuple[bytes, bytes], ...]
    keep_alive: bool
    content_length: int | None
    chunked: bool


class _Parsed:
    """What a head's bytes say, checked (`_parsed`): kept by those bytes, shared by every
    answer with the same head; what depends on the request is decided in `head`."""

    __slots__ = (
        "chunked",
        "close",
        "fields",
        "keep_alive_option",
        "length",
        "reason",
        "status",
        "te",
        "version",
    )

    def __init__(
        self,
        status: int,
        reason: bytes,
        version: str,
        fields: tuple[tuple[bytes, bytes], ...],
        length: int | None,
        te: bool,
        chunked: bool,
        close: bool,
        keep_alive_option: bool,
    ) -> None:
        self.status = status
        self.reason = reason
        self.version = version
        self.fields = fields
        self.length = length  # Content-Length, or None
        self.te = te  # a Transfer-Encoding came
        self.chunked = chunked  # ... and its final coding is chunked
        self.close = close  # Connection says close
        self.keep_alive_option = keep_alive_option  # Connection says keep-alive

    def head(self, bodiless: bool) -> ResponseHead:
        """The answer's head, ``bodiless`` (a HEAD's, a 101, 204 or 304) or not."""
        head = ResponseHead.__new__(ResponseHead)
        head.status = self.status
        head.reason = self.reason
        head.version = self.version
        head.fields = self.fields
        head.headers = list(self.fields)  # (the answer's own)
        close = self.close
        if bodiless:
            head.content_length = None
            head.chunked = False
        else:
            head.content_length = self.length
            head.chunked = self.chunked
            if self.length is None and not self.chunked:
                close = True  # delimited by the end of the stream
        head.keep_alive = not close and (self.version == "1.1" or self.keep_alive_option)
        return head


# heads already parsed, by their bytes: an upstream answers most requests with the same few
# heads (a Date changes once a second), and parsing one costs more than the rest of the
# answer's way through the proxy (a pure function of the bytes: the same bytes, the same
# fields; errors are never kept). Bounded: emptied when full.
_PARSED: dict[bytes, _Parsed] = {}
_PARSED_KEPT = 64
_PARSED_SIZE = 2048  # the longest head kept
# the last head found or parsed: most answers repeat it, and comparing it where it lies in
# the data costs neither a copy of the head nor a hash of it
_last_raw = b""  # (none yet: no head is empty)
_NOTHING = _Parsed(0, b"", "1.1", (), None, False, False, False, False)  # (never matched)
_last_parsed = _NOTHING


def _forget() -> None:
    """Forget every head kept (the tests' clean start)."""
    global _last_raw, _last_parsed
    _PARSED.clear()
    _last_raw = b""
    _last_parsed = _NOTHING


def _parsed(raw: bytes, most: int) -> _Parsed:
    """A head's status line and fields (``raw``: each line with its CRLF, at most ``most``
    fields), checked. Raises `UpstreamError`."""
    lines = raw.split(b"\r\n")
    lines.pop()  # (after the last CRLF)
    match = _STATUS_LINE.fullmatch(lines[0])
    if match is None:
        raise UpstreamError("invalid status line")
    minor, code, reason = match.groups()
    if len(lines) - 1 > most:
        raise UpstreamError("too many header fields")
    version = "1.1" if minor == b"1" else "1.0"
    status = int(code)
    headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    te = chunked = close = keep_alive_option = False
    # every field line well formed, checked in one match (the request parser's); a line
    # at a time only to say which rule one broke
    whole = _FIELD_BLOCK.fullmatch(raw, len(lines[0]) + 2) is not None
    for index in range(1, len(lines)):
        name, colon, value = lines[index].partition(b":")
        if not whole and (not colon or _TOKEN.fullmatch(name) is None):
            raise UpstreamError("invalid header field line")
        value = value.strip(b" \t")
        if not whole and _BAD_VALUE.search(value) is not None:
            raise UpstreamError("invalid character in a header field value")
        headers.append((name, value))
        size = len(name)
        if size != 14 and size != 17 and size != 10:
            continue  # (not one of the three below: no lower case made)
        lower = name.lower()
        if lower == b"content-length":
            if length is not None:
                raise UpstreamError("repeated Content-Length")
            if te:
                raise UpstreamError("Content-Length with Transfer-Encoding")
            if not value.isdigit() or int(value) > _MAX_LENGTH:
                raise UpstreamError("invalid Content-Length")
            length = int(value)
        elif lower == b"transfer-encoding":
            if length is not None:
                raise UpstreamError("Transfer-Encoding with Content-Length")
            if te:
                raise UpstreamError("repeated Transfer-Encoding")
            te = True
            codings = [c.strip(b" \t").lower() for c in value.split(b",")]
            if codings[-1] != b"chunked" or b"chunked" in codings[:-1]:
                raise UpstreamError("Transfer-Encoding whose final coding is not chunked")
            chunked = True
        elif lower == b"connection":
            for option in value.split(b","):
                option = option.strip(b" \t").lower()
                if option == b"close":
                    close = True
                elif option == b"keep-alive":
                    keep_alive_option = True
    return _Parsed(
        status,
        reason or b"",
        version,
        tuple(headers),
        length,
        te,
        chunked,
        close,
        keep_alive_option,
    )


class ResponseParser:
    """Parses the answers to requests sent on one upstream connection, one at a time:
    `expect` says what the next one answers (a HEAD has no body)."""

    __slots__ = (
        "_fields",
        "_head_limit",
        "_partial",
        "_remaining",
        "_sink",
        "_state",
        "_trailers",
        "head_method",
        "received",
        "upgraded",
    )

    def __init__(self, sink: Any, head_limit: int = 65536, fields: int = 100) -> None:
        self._sink = sink
        self._head_limit = head_limit
        self._fields = fields
        self._partial = b""
        self._state = _DONE
        self._remaining = 0
        self._trailers = 0
        self.head_method = False
        self.received = 0  # bytes of the present answer so far (0: nothing came yet)
        # after a 101: the bytes that followed its head (the tunnel's); None before
        self.upgraded: bytes | None = None

    def expect(self, head_method: bool) -> None:
        """The next answer is to a request just sent (``head_method``: a HEAD, no body)."""
        self._state = _HEAD
        self._partial = b""
        self.head_method = head_method
        self.received = 0

    @property
    def done(self) -> bool:
        """The answer expected is over."""
        return self._state == _DONE

    def feed(self, data: bytes) -> None:
        """Parse ``data``; raises `UpstreamError`."""
        if not data:
            return
        if self._state == _DONE:
            if self.upgraded is not None:
                self.upgraded += data
                return
            raise UpstreamError("bytes after the answer's end")
        self.received += len(data)
        if self._partial:
            data = self._partial + data
            self._partial = b""
        pos = 0
        end = len(data)
        sink = self._sink
        while pos < end:
            state = self._state
            if state == _HEAD:
                pos = self._head(data, pos)
            elif state in (_LENGTH, _CHUNK_DATA):
                take = end - pos
                if self._remaining < take:
                    take = self._remaining
                sink.on_body(data if pos == 0 and take == end else data[pos : pos + take])
                pos += take
                self._remaining -= take
                if not self._remaining:
                    if state == _LENGTH:
                        self._end()
                    else:
                        self._state = _CHUNK_END
            elif state == _UNTIL_CLOSE:
                sink.on_body(data if pos == 0 else data[pos:])
                return
            elif state == _CHUNK_END:
                # the CRLF after chunk data, read where it lies (a copy only when cut)
                if end - pos >= 2 and data[pos] == 13 and data[pos + 1] == 10:
                    pos += 2
                    self._state = _CHUNK_SIZE
                    continue
                have = data[pos : pos + 2]
                if have != b"\r\n"[: len(have)]:
                    raise UpstreamError("chunk data not followed by CRLF")
                self._partial = have
                return
            elif state in (_CHUNK_SIZE, _TRAILERS):
                if state == _CHUNK_SIZE:
                    line_end = self._plain_chunk_size(data, pos, end)
                    if line_end >= 0:  # the common line: read where it lies
                        pos = line_end
                        continue
                elif end - pos >= 2 and data[pos] == 13 and data[pos + 1] == 10:
                    pos += 2  # the empty line that ends the trailers (the common one: none)
                    self._end()
                    continue
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    if end - pos > self._head_limit:
                        raise UpstreamError("chunk-size or trailer line too long")
                    self._partial = data[pos:]
                    return
                line = data[pos:eol]
                pos = eol + 2
                # (find, not `in`: `bytes in bytes` tries the needle as an int first)
                if line.find(b"\n") >= 0 or line.find(b"\r") >= 0:
                    raise UpstreamError("a bare CR or LF in a chunk-size or trailer line")
                if state == _CHUNK_SIZE:
                    self._chunk_size(line)
                elif line:
                    self._trailer(line)
                else:
                    self._end()
            else:  # _DONE: only an upgrade's bytes may follow
                if self.upgraded is None:
                    raise UpstreamError("bytes after the answer's end")
                self.upgraded += data[pos:]
                return

    def feed_eof(self) -> None:
        """The upstream closed its side: the end of a body delimited by close, else (but
        between answers) an answer cut short. Raises `UpstreamError`."""
        state = self._state
        if state == _UNTIL_CLOSE:
            self._end()
        elif state != _DONE:
            raise UpstreamError("the upstream closed before the answer's end")

    # -- the head

    def _head(self, data: bytes, pos: int) -> int:
        global _last_raw, _last_parsed
        stop = data.find(b"\r\n\r\n", pos)
        if stop < 0:
            if len(data) - pos > self._head_limit:
                raise UpstreamError("answer head too large")
            self._partial = data[pos:]
            return len(data)
        if stop + 4 - pos > self._head_limit:
            raise UpstreamError("answer head too large")
        # the status line and the field lines, each with its CRLF: data[pos : stop + 2]
        if stop + 2 - pos == len(_last_raw) and data.startswith(_last_raw, pos):
            parsed = _last_parsed
        else:
            raw = data[pos : stop + 2]
            known = _PARSED.get(raw)
            if known is None:
                parsed = _parsed(raw, self._fields)
                if len(raw) <= _PARSED_SIZE:
                    if len(_PARSED) >= _PARSED_KEPT:
                        _PARSED.clear()
                    _PARSED[raw] = parsed
            else:
                parsed = known
            if len(raw) <= _PARSED_SIZE:
                _last_raw = raw
                _last_parsed = parsed
        if len(parsed.fields) > self._fields:
            raise UpstreamError("too many header fields")
        pos = stop + 4
        status = parsed.status
        if 100 <= status < 200 and status != 101:
            return pos  # interim: the answer proper follows
        if parsed.te and parsed.version == "1.0":
            raise UpstreamError("Transfer-Encoding in an HTTP/1.0 answer")
        bodiless = self.head_method or status == 101 or status == 204 or status == 304
        self._sink.on_response(parsed.head(bodiless))
        if status == 101:
            self.upgraded = data[pos:]
            self._state = _DONE
            return len(data)
        if bodiless or parsed.length == 0:
            self._end()
        elif parsed.chunked:
            self._state = _CHUNK_SIZE
        elif parsed.length is not None:
            self._remaining = parsed.length
            self._state = _LENGTH
        else:
            self._state = _UNTIL_CLOSE
        return pos

    # -- the chunked body

    def _plain_chunk_size(self, data: bytes, pos: int, end: int) -> int:
        """Where the chunk-size line at ``pos`` ends when it is the common one, 1 to 15 hex
        digits and CRLF (its size taken), read where it lies: no copy of the line, no match.
        -1 for any other line, or one not whole before ``end``: the full grammar decides
        those (`_chunk_size`)."""
        size = 0
        at = pos
        most = end if end < pos + 16 else pos + 16
        while at < most:
            byte = data[at]
            if 48 <= byte <= 57:  # 0-9
                size = size * 16 + byte - 48
            elif 97 <= byte <= 102:  # a-f
                size = size * 16 + byte - 87
            elif 65 <= byte <= 70:  # A-F
                size = size * 16 + byte - 55
            else:
                break
            at += 1
        if at == pos or at - pos > 15 or at + 1 >= end or data[at] != 13 or data[at + 1] != 10:
            return -1
        self._sized(size)
        return at + 2

    def _chunk_size(self, line: bytes) -> None:
        match = _CHUNK_SIZE_LINE.fullmatch(line)
        if match is None:
            raise UpstreamError("invalid chunk-size line")
        size = int(match.group(1), 16)
        if size > _MAX_LENGTH:
            raise UpstreamError("chunk size overflow")
        self._sized(size)

    def _sized(self, size: int) -> None:
        """A chunk of ``size`` bytes follows, or the trailers (size 0)."""
        if not size:
            self._trailers = 0
            self._state = _TRAILERS
            return
        self._remaining = size
        self._state = _CHUNK_DATA

    def _trailer(self, line: bytes) -> None:
        """A trailer field: checked, then dropped (the proxy's answer ends without them)."""
        name, colon, value = line.partition(b":")
        if not colon or _TOKEN.fullmatch(name) is None:
            raise UpstreamError("invalid trailer field line")
        if _BAD_VALUE.search(value.strip(b" \t")) is not None:
            raise UpstreamError("invalid character in a trailer field value")
        if name.lower() in (b"content-length", b"transfer-encoding"):
            raise UpstreamError("a framing field in the trailers")
        self._trailers += 1
        if self._trailers > self._fields:
            raise UpstreamError("too many trailer fields")

    def _end(self) -> None:
        self._state = _DONE
        self._sink.on_response_end()
