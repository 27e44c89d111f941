"""The oracle of the differential fuzz: the request parser corral had on llhttp (httptools).

corral's own parsers (corral.http.parser and its compiled twin) must agree with it: every
input refused by both, or parsed to the same requests; tests/unit/test_parser_differential.py
runs the comparison. What follows is that parser as it was, with its checks over llhttp.

Invariants:
- llhttp runs strict (no leniency flags): it rejects CL with TE, duplicate or
  non-decimal Content-Length, bad chunk sizes, obs-fold, bare CR/LF, CTLs in names
  and values and whitespace before the colon. Everything it rejects becomes a
  :class:`BadRequest`; what it accepts but HTTP/1.1 still forbids (missing or
  repeated Host, versions other than 1.0/1.1, Transfer-Encoding in HTTP/1.0, the
  asterisk-form target with a method other than OPTIONS) is checked here.
- Every limit is enforced while the bytes arrive, before memory is spent on them:
  the request line and each header as the callbacks fire, the whole head by the
  bytes fed while it is incomplete (llhttp buffers a header line before handing
  it over), the body by its declared length or by the chunk bytes counted.
- The parser never raises across the sink: errors leave :meth:`RequestParser.feed`.
"""

from __future__ import annotations

import httptools

from corral.http.errors import (
    BadRequest,
    ContentTooLarge,
    HeaderFieldsTooLarge,
    HttpError,
    UriTooLong,
    VersionNotSupported,
)
from corral.http.head import Limits, Parser, RequestHead, RequestSink, parse_absolute_form

_VERSIONS = {"1.1", "1.0"}
# The fields that frame a request, by kind; every other name is kind 0. Names
# are classified once and cached exactly as received (bounded).
_PLAIN, _HOST, _CONTENT_LENGTH, _TRANSFER_ENCODING, _EXPECT = range(5)
_FRAMING = {
    b"host": _HOST,
    b"content-length": _CONTENT_LENGTH,
    b"transfer-encoding": _TRANSFER_ENCODING,
    b"expect": _EXPECT,
}
_FIELD_KINDS_MAX = 1024
_field_kinds: dict[bytes, int] = {}


def _field_kind(name: bytes) -> int:
    kind = _FRAMING.get(name.lower(), _PLAIN)
    if len(_field_kinds) < _FIELD_KINDS_MAX:
        _field_kinds[name] = kind
    return kind


_METHODS = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")}


class RequestParser(Parser):
    """Feeds bytes to llhttp and reports heads, body chunks and ends to a sink."""

    __slots__ = (
        "_body_limit",
        "_body_seen",
        "_check_fields",
        "_chunked",
        "_content_length",
        "_expect",
        "_field_size",
        "_fields",
        "_head_limit",
        "_headers",
        "_host_count",
        "_in_head",
        "_line_limit",
        "_parser",
        "_sink",
        "_small_head",
        "_te_seen",
        "_trailers",
        "_url",
    )  # and Parser's: ended, head_bytes

    def __init__(self, sink: RequestSink, limits: Limits) -> None:
        self._sink = sink
        self._line_limit = limits.request_line
        self._fields = limits.fields
        self._field_size = limits.field_size
        self._body_limit = limits.body
        self._head_limit = limits.head
        self._small_head = min(limits.field_size, 4 * limits.fields, limits.head)
        self._parser = httptools.HttpRequestParser(self)
        self.ended = False
        self._reset()

    def _reset(self) -> None:
        # Per-request state is reset at the end of a message (and at the start),
        # which spares llhttp an on_message_begin callback per request.
        self._in_head = True
        self.head_bytes = 0
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._host_count = 0
        self._content_length: int | None = None
        self._chunked = False
        self._expect = False
        self._body_seen = 0
        self._trailers = 0
        self._te_seen = False
        # the rest of the current read may hold a pipelined head of any size
        self._check_fields = True

    def feed(self, data: bytes) -> None:
        """Parse ``data``; raises :class:`HttpError` for anything not to be served."""
        over = False
        if self._in_head:
            head_bytes = self.head_bytes = self.head_bytes + len(data)
            over = head_bytes > self._head_limit
            # No field of a head this small can break a field limit: skip the checks.
            self._check_fields = head_bytes > self._small_head
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, HttpError):
                raise cause from None
            raise
        except httptools.HttpParserUpgrade:
            # The request before the upgrade was parsed and reported; what follows
            # is another protocol, which a WSGI server does not speak.
            self.ended = True
        except httptools.HttpParserError as exc:
            detail = str(exc)
            if detail.startswith("Data after `Connection: close`"):
                # the request before it is answered, then the connection closes
                self.ended = True
                return
            if detail == "Invalid HTTP version":
                raise VersionNotSupported(detail) from None
            raise BadRequest(detail) from None
        # A head still incomplete past the limit (parsed all the same, so that an overlong
        # request line still gets its 414; llhttp holds at most this one read beyond the
        # limit). A message that ended in this read reset the count: the bytes were its
        # body or the next head's, not this head's.
        if over and self._in_head and self.head_bytes > self._head_limit:
            raise HeaderFieldsTooLarge("request head too large")

    # -- llhttp callbacks -------------------------------------------------------

    def on_url(self, url: bytes) -> None:
        if self._url:
            url = self._url + url
        self._url = url
        if len(url) > self._line_limit:
            raise UriTooLong("request line too long")

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._in_head:
            if self._check_fields:
                self._check_field(name, value)
            # RFC 9112 5: trailing whitespace is not part of the value (llhttp keeps it)
            self._headers.append((name, value.rstrip(b" \t")))
            kind = _field_kinds.get(name)
            if kind is None:
                kind = _field_kind(name)
            if kind == _HOST:  # in every request: counted here, not in a call
                self._host_count += 1
            elif kind:
                self._framing_header(kind, value)
        else:
            self._check_field(name, value)
            self._trailer()

    def _check_field(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > self._field_size:
            raise HeaderFieldsTooLarge("header field too large")
        if len(self._headers) >= self._fields:
            raise HeaderFieldsTooLarge("too many header fields")

    def _framing_header(self, kind: int, value: bytes) -> None:
        if kind == _CONTENT_LENGTH:
            self._content_length = int(value)  # llhttp let only plain digits through
        elif kind == _TRANSFER_ENCODING:
            # llhttp checks the list, but reports a final coding other than chunked
            # only after the head; refuse it here, before the request is reported
            self._chunked = value.rpartition(b",")[2].strip().lower() == b"chunked"
            self._te_seen = True
        elif value.lower().strip() != b"100-continue":  # Expect
            raise HttpError("unsupported expectation", 417)
        else:
            self._expect = True

    def _trailer(self) -> None:
        """A trailer field: never shown to the app, but limited all the same."""
        self._trailers += 1
        if self._trailers > self._fields:
            raise HeaderFieldsTooLarge("too many trailer fields")

    def on_headers_complete(self) -> None:
        self._in_head = False
        parser = self._parser
        version = parser.get_http_version()
        if self._te_seen:
            if not self._chunked:
                raise BadRequest("Transfer-Encoding whose final coding is not chunked")
            if version == "1.0":
                # RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing
                raise BadRequest("Transfer-Encoding in an HTTP/1.0 request")
        if version not in _VERSIONS:
            raise VersionNotSupported(f"HTTP/{version} is not supported")
        if self._host_count != 1 and (self._host_count or version == "1.1"):
            raise BadRequest("missing Host header" if not self._host_count else "repeated Host")
        raw_method = parser.get_method()
        method = _METHODS.get(raw_method) or raw_method.decode("ascii")
        if method == "CONNECT":
            raise HttpError("CONNECT is not supported", 405)
        url = self._url
        if len(url) + len(method) + 10 > self._line_limit:
            raise UriTooLong("request line too long")
        if (
            self._check_fields  # False for every small head: one test per request
            and self.head_bytes > self._head_limit
            and self._head_size(method) > self._head_limit
        ):
            # a head that ended in the read that took the count past the limit: measured
            # (only then) as its request line and fields would be written
            raise HeaderFieldsTooLarge("request head too large")
        absolute = None
        if url[0] != 47:  # not "/...": asterisk-form, absolute-form or authority-form
            if url != b"*":
                absolute = parse_absolute_form(url)
            elif method != "OPTIONS":  # RFC 9112 3.2.4: "*" is for a server-wide OPTIONS only
                raise BadRequest("asterisk-form target with a method other than OPTIONS")
        length = self._content_length
        if length is not None and self._body_limit and length > self._body_limit:
            raise ContentTooLarge("declared body larger than limit_request_body")
        self._sink.on_request(
            RequestHead(
                method,
                url,
                version,
                self._headers,
                parser.should_keep_alive(),
                length,
                self._chunked,
                # RFC 9110 10.1.1: an HTTP/1.0 expectation is ignored
                self._expect and version == "1.1" and (self._chunked or bool(length)),
                absolute,
            )
        )

    def _head_size(self, method: str) -> int:
        """The head's size without optional whitespace: ``METHOD TARGET HTTP/1.x``, each
        ``name: value`` and the CRLFs."""
        fields = sum(len(name) + len(value) + 4 for name, value in self._headers)
        return len(method) + len(self._url) + 12 + fields + 2

    def on_body(self, chunk: bytes) -> None:
        if self._chunked:
            self._body_seen += len(chunk)
            limit = self._body_limit
            if limit and self._body_seen > limit:
                raise ContentTooLarge("chunked body larger than limit_request_body")
        self._sink.on_body(chunk)

    def on_message_complete(self) -> None:
        self._reset()
        self._sink.on_request_end()
