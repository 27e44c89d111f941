# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The request parser, compiled: the twin of the pure-Python `corral.http.parser`.

Both builds implement one algorithm and behave identically; the algorithm, and what it
refuses with the RFC that says so, are written in corral/http/parser.py's docstring, which
this module follows function for function (`_lines`, `_request_line`, `_field` and
`_trailer` for its `_fields_of`, `_framing_field`, `_head_end`, `_chunk_size`,
`_message_end`). The difference is only how: here the bytes are scanned in C, with a table
per character class, a header name becomes one interned bytes object, and no Python call is
made per byte, line or header.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memchr, memcmp

from corral.http.errors import (
    BadRequest,
    ContentTooLarge,
    HeaderFieldsTooLarge,
    HttpError,
    UriTooLong,
    VersionNotSupported,
)
from corral.http._fieldgrammar cimport element_is as _element_is
from corral.http._fieldgrammar cimport lower as _lower
from corral.http._fieldgrammar cimport same_lowered as _is
from corral.http._fieldgrammar cimport valid_host as _valid_host
from corral.http.head cimport Limits, Parser, RequestHead, RequestSink

from corral.http.head import parse_absolute_form

# character classes (the same as the regular expressions of parser.py)
cdef unsigned char TCHAR[256]  # token
cdef unsigned char TARGET[256]  # visible ASCII
cdef unsigned char VALUE[256]  # HTAB, SP, visible ASCII, obs-text
cdef unsigned char QDTEXT[256]  # quoted-string text
cdef unsigned char QPAIR[256]  # what a backslash may quote
cdef unsigned char HEXVAL[256]  # hex digit value + 1, 0 for a non-digit


cdef void _tables():
    cdef int c
    for c in range(256):
        TCHAR[c] = (
            (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122)
            or c in b"!#$%&'*+-.^_`|~"
        )
        TARGET[c] = 0x21 <= c <= 0x7E
        VALUE[c] = c == 9 or 0x20 <= c <= 0x7E or c >= 0x80
        QDTEXT[c] = c == 9 or c == 0x20 or c == 0x21 or 0x23 <= c <= 0x5B or 0x5D <= c <= 0x7E or c >= 0x80
        QPAIR[c] = c == 9 or 0x20 <= c <= 0x7E or c >= 0x80
        if 48 <= c <= 57:
            HEXVAL[c] = c - 48 + 1
        elif 65 <= c <= 70:
            HEXVAL[c] = c - 55 + 1
        elif 97 <= c <= 102:
            HEXVAL[c] = c - 87 + 1
        else:
            HEXVAL[c] = 0


_tables()

DEF NAME_SLOTS = 256  # a power of two

# states
DEF START = 0
DEF LINE = 1
DEF FIELDS = 2
DEF LENGTH = 3
DEF CHUNK_SIZE = 4
DEF CHUNK_DATA = 5
DEF CHUNK_END = 6
DEF TRAILERS = 7
DEF CLOSED = 8
DEF UPGRADED = 9

# field kinds
DEF PLAIN = 0
DEF HOST = 1
DEF CONTENT_LENGTH = 2
DEF TRANSFER_ENCODING = 3
DEF EXPECT = 4
DEF CONNECTION = 5
DEF UPGRADE = 6

# header names as received, one object for every request that sends the name so (its hash,
# once computed, stays with it: the environ's key lookup does not hash it again); slots are
# chosen by an FNV-1a hash of the bytes, which is cheaper than the bytes' own (SipHash), and a
# name whose slot is taken replaces it: a client sending many names cannot grow it
cdef PyObject* _name_slots[NAME_SLOTS]

cdef str V11 = "1.1"
cdef str V10 = "1.0"


cdef int _kind(const unsigned char* p, Py_ssize_t n):
    cdef unsigned char first = _lower(p[0])
    if n == 4 and first == b"h":
        return HOST if _is(p, n, b"host", 4) else PLAIN
    if n == 14 and first == b"c":
        return CONTENT_LENGTH if _is(p, n, b"content-length", 14) else PLAIN
    if n == 17 and first == b"t":
        return TRANSFER_ENCODING if _is(p, n, b"transfer-encoding", 17) else PLAIN
    if n == 6 and first == b"e":
        return EXPECT if _is(p, n, b"expect", 6) else PLAIN
    if n == 10 and first == b"c":
        return CONNECTION if _is(p, n, b"connection", 10) else PLAIN
    if n == 7 and first == b"u":
        return UPGRADE if _is(p, n, b"upgrade", 7) else PLAIN
    return PLAIN


cdef object _name(const unsigned char* p, Py_ssize_t n):
    cdef uint32_t h = 2166136261
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ p[i]) * 16777619
    h &= NAME_SLOTS - 1
    cdef PyObject* slot = _name_slots[h]
    if (
        slot != NULL
        and PyBytes_GET_SIZE(<object>slot) == n
        and memcmp(PyBytes_AS_STRING(<object>slot), p, n) == 0
    ):
        return <object>slot
    name = PyBytes_FromStringAndSize(<const char*>p, n)
    Py_INCREF(name)
    _name_slots[h] = <PyObject*>name
    Py_XDECREF(slot)
    return name


cdef str _method(const unsigned char* p, Py_ssize_t n):
    if n == 3 and memcmp(p, b"GET", 3) == 0:
        return "GET"
    if n == 4 and memcmp(p, b"POST", 4) == 0:
        return "POST"
    if n == 4 and memcmp(p, b"HEAD", 4) == 0:
        return "HEAD"
    if n == 3 and memcmp(p, b"PUT", 3) == 0:
        return "PUT"
    return PyBytes_FromStringAndSize(<const char*>p, n).decode("ascii")


cdef inline bint _equal(bytes known, const unsigned char* p, Py_ssize_t n):
    return PyBytes_GET_SIZE(known) == n and memcmp(PyBytes_AS_STRING(known), p, n) == 0


cdef class RequestParser(Parser):
    """Parses requests from the bytes fed to it and reports them to a sink."""

    cdef RequestSink _sink
    cdef object _begin
    cdef bytes _partial
    cdef list _headers
    # the previous head's fields by position: a keep-alive client sends the same ones in the
    # same order, and an equal field reuses its (name, value) tuple instead of three objects
    cdef list _previous
    cdef str _method
    cdef bytes _target
    cdef str _version
    cdef Py_ssize_t _line_limit
    cdef Py_ssize_t _fields
    cdef Py_ssize_t _field_size
    cdef Py_ssize_t _head_limit
    cdef Py_ssize_t _head_done
    cdef uint64_t _body_limit
    cdef uint64_t _body_seen
    cdef uint64_t _remaining
    cdef uint64_t _content_length
    cdef bint _has_length
    cdef int _state
    cdef int _host_count
    cdef Py_ssize_t _trailers
    cdef bint _te
    cdef bint _coded  # a transfer coding other than chunked (not implemented: 501)
    cdef bint _chunked
    cdef bint _expect
    cdef bint _close
    cdef bint _keep_alive_option
    cdef bint _connection_upgrade
    cdef bint _upgrade
    cdef int _then  # where the request being parsed leaves the connection

    def __init__(self, sink, Limits limits):
        self._sink = sink
        self._line_limit = limits.request_line
        self._fields = limits.fields
        self._field_size = limits.field_size
        self._body_limit = limits.body
        self._head_limit = limits.head
        self._begin = getattr(sink, "on_message_begin", None)
        self.ended = False
        self.upgraded = None
        self._state = START
        self._partial = b""
        self._previous = []
        self._then = START
        self._reset()

    cdef void _reset(self):
        self.head_bytes = 0
        self._head_done = 0
        self._method = ""
        self._target = b""
        self._version = ""
        self._headers = []
        self._host_count = 0
        self._has_length = False
        self._content_length = 0
        self._te = False
        self._coded = False
        self._chunked = False
        self._expect = False
        self._close = False
        self._keep_alive_option = False
        self._connection_upgrade = False
        self._upgrade = False
        self._body_seen = 0
        self._remaining = 0
        self._trailers = 0

    cpdef detach(self):
        """The sink's connection closed: as parser.RequestParser.detach."""
        self.ended = True
        self._sink = None
        self._begin = None

    cpdef feed(self, data):
        """Parse ``data``; raises :class:`HttpError` for anything not to be served."""
        if type(data) is not bytes:
            data = bytes(data)
        if PyBytes_GET_SIZE(self._partial):
            data = self._partial + data
            self._partial = b""
        cdef bytes buffer = data
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(buffer)
        cdef Py_ssize_t pos = 0
        cdef Py_ssize_t end = PyBytes_GET_SIZE(buffer)
        cdef Py_ssize_t take
        cdef int state
        while pos < end and not self.ended:
            state = self._state
            if state == START:
                while pos < end:
                    if p[pos] == 10:
                        pos += 1
                    elif p[pos] != 13:
                        break
                    elif pos + 1 == end:
                        self._partial = b"\r"
                        return
                    elif p[pos + 1] == 10:
                        pos += 2
                    else:
                        raise BadRequest("a bare CR before the request line")
                if pos == end:
                    break
                self._state = LINE
                if self._begin is not None:
                    self._begin()
            elif state == CLOSED:
                while pos < end and (p[pos] == 13 or p[pos] == 10):
                    pos += 1
                if pos < end:
                    self.ended = True  # data after a request that closes: left unread
                break
            elif state == LENGTH or state == CHUNK_DATA:
                take = end - pos
                if <uint64_t>take > self._remaining:
                    take = <Py_ssize_t>self._remaining
                if take == end and pos == 0:
                    chunk = buffer
                else:
                    chunk = PyBytes_FromStringAndSize(<const char*>p + pos, take)
                pos += take
                self._remaining -= take
                self._sink.on_body(chunk)
                if not self._remaining:
                    if state == LENGTH:
                        self._message_end()
                    else:
                        self._state = CHUNK_END
            elif state == CHUNK_END:
                if p[pos] != 13 or (end - pos >= 2 and p[pos + 1] != 10):
                    raise BadRequest("chunk data not followed by CRLF")
                if end - pos < 2:
                    self._partial = PyBytes_FromStringAndSize(<const char*>p + pos, end - pos)
                    break
                pos += 2
                self._state = CHUNK_SIZE
            else:
                pos = self._lines(buffer, p, pos, end)
        if self.upgraded is not None and pos < end:
            self.upgraded += PyBytes_FromStringAndSize(<const char*>p + pos, end - pos)

    cdef Py_ssize_t _lines(
        self, bytes buffer, const unsigned char* p, Py_ssize_t pos, Py_ssize_t end
    ) except -1:
        """Take the complete lines of a head, a chunk-size line or trailers."""
        cdef int state
        cdef Py_ssize_t limit, length, eol
        cdef const unsigned char* found
        cdef bint in_head, cr
        while pos < end and not self.ended:
            state = self._state
            if state == LINE:
                limit = self._line_limit
            elif state == CHUNK_SIZE:
                limit = self._field_size  # its extensions: limited as a field is
            elif state == FIELDS or state == TRAILERS:
                limit = self._field_size + 2
            else:
                return pos
            in_head = state <= FIELDS
            found = <const unsigned char*>memchr(p + pos, 10, end - pos)
            if found == NULL:
                length = end - pos
                if p[end - 1] == 13:
                    length -= 1  # the CR of the CRLF, perhaps
                if length > limit:
                    self._too_long(state)
                if in_head:
                    self.head_bytes = self._head_done + end - pos
                    if self.head_bytes > self._head_limit:
                        raise HeaderFieldsTooLarge("request head too large")
                self._partial = PyBytes_FromStringAndSize(<const char*>p + pos, end - pos)
                return end
            eol = found - p
            cr = eol > pos and p[eol - 1] == 13
            if eol - pos - cr > limit:
                self._too_long(state)
            if in_head:
                self._head_done += eol + 1 - pos
                self.head_bytes = self._head_done
                if self.head_bytes > self._head_limit:
                    raise HeaderFieldsTooLarge("request head too large")
            if not cr:
                raise BadRequest("line ending in a bare LF")
            length = eol - 1 - pos
            if state == LINE:
                self._request_line(buffer, p + pos, length)
                pos = eol + 1
            elif state == CHUNK_SIZE:
                self._chunk_size(p + pos, length)
                return eol + 1
            elif length:
                if state == FIELDS:
                    self._field(p + pos, length)
                else:
                    self._trailer(p + pos, length)
                pos = eol + 1
            elif state == FIELDS:
                self._head_end()
                return eol + 1
            else:
                self._message_end()
                return eol + 1
        return pos

    cdef int _too_long(self, int state) except -1:
        if state == LINE:
            raise UriTooLong("request line too long")
        if state == CHUNK_SIZE:
            raise BadRequest("chunk-size line too long")
        raise HeaderFieldsTooLarge("header field too large")

    cdef int _request_line(
        self, bytes buffer, const unsigned char* p, Py_ssize_t n
    ) except -1:
        cdef Py_ssize_t i = 0, target_start, target_end
        cdef unsigned char major, minor
        while i < n and TCHAR[p[i]]:
            i += 1
        if i == 0 or i == n or p[i] != 32:
            raise BadRequest("invalid request line")
        method_end = i
        i += 1
        target_start = i
        while i < n and TARGET[p[i]]:
            i += 1
        target_end = i
        if target_end == target_start:
            raise BadRequest("invalid request line")
        if i == n:  # HTTP/0.9's simple request is a GET: anything else is no request
            if method_end != 3 or memcmp(p, b"GET", 3) != 0:
                raise BadRequest("invalid request line")
            raise VersionNotSupported("HTTP/0.9 is not supported")
        if (
            n - i != 9
            or memcmp(p + i, b" HTTP/", 6) != 0
            or not (48 <= p[i + 6] <= 57)
            or p[i + 7] != 46
            or not (48 <= p[i + 8] <= 57)
        ):
            raise BadRequest("invalid request line")
        major = p[i + 6]
        minor = p[i + 8]
        if major == 49 and minor == 49:
            self._version = V11
        elif major == 49 and minor == 48:
            self._version = V10
        else:
            raise VersionNotSupported(f"HTTP/{chr(major)}.{chr(minor)} is not supported")
        self._method = _method(p, method_end)
        self._target = PyBytes_FromStringAndSize(<const char*>p + target_start, target_end - target_start)
        self._state = FIELDS
        return 0

    cdef int _split_field(
        self, const unsigned char* p, Py_ssize_t n, Py_ssize_t* name_end,
        Py_ssize_t* value_start, Py_ssize_t* value_end,
    ) except -1:
        cdef const unsigned char* colon = <const unsigned char*>memchr(p, 58, n)
        cdef Py_ssize_t i, start, stop
        if colon == NULL or colon == p:
            raise BadRequest("invalid header field name")
        name_end[0] = colon - p
        for i in range(name_end[0]):
            if not TCHAR[p[i]]:
                raise BadRequest("invalid header field name")
        start = name_end[0] + 1
        stop = n
        while start < stop and (p[start] == 32 or p[start] == 9):
            start += 1
        while stop > start and (p[stop - 1] == 32 or p[stop - 1] == 9):
            stop -= 1
        for i in range(start, stop):
            if not VALUE[p[i]]:
                raise BadRequest("invalid character in a header field value")
        if name_end[0] + stop - start > self._field_size:
            raise HeaderFieldsTooLarge("header field too large")
        value_start[0] = start
        value_end[0] = stop
        return 0

    cdef int _field(self, const unsigned char* p, Py_ssize_t n) except -1:
        cdef Py_ssize_t name_end, start, stop
        self._split_field(p, n, &name_end, &start, &stop)
        cdef Py_ssize_t index = len(self._headers)
        if index >= self._fields:
            raise HeaderFieldsTooLarge("too many header fields")
        cdef list previous = self._previous
        cdef tuple field
        if index < len(previous):
            field = <tuple>previous[index]
            if not (_equal(<bytes>field[0], p, name_end)
                    and _equal(<bytes>field[1], p + start, stop - start)):
                field = self._new_field(p, name_end, start, stop)
                previous[index] = field
        else:
            field = self._new_field(p, name_end, start, stop)
            previous.append(field)
        self._headers.append(field)
        cdef int kind = _kind(p, name_end)
        if kind == HOST:
            self._host_count += 1
            if not _valid_host(p + start, stop - start):
                raise BadRequest("invalid Host")
        elif kind:
            self._framing_field(kind, p + start, stop - start)
        return 0

    cdef tuple _new_field(
        self, const unsigned char* p, Py_ssize_t name_end, Py_ssize_t start, Py_ssize_t stop
    ):
        return (_name(p, name_end), PyBytes_FromStringAndSize(<const char*>p + start, stop - start))

    cdef int _framing_field(self, int kind, const unsigned char* p, Py_ssize_t n) except -1:
        cdef Py_ssize_t i, start, stop
        cdef uint64_t length = 0
        cdef unsigned char c
        if kind == CONTENT_LENGTH:
            if self._has_length:
                raise BadRequest("repeated Content-Length")
            if self._te:
                raise BadRequest("Content-Length with Transfer-Encoding")
            if n == 0:
                raise BadRequest("invalid Content-Length")
            for i in range(n):
                c = p[i]
                if not (48 <= c <= 57):
                    raise BadRequest("invalid Content-Length")
                if length > (<uint64_t>0xFFFFFFFFFFFFFFFF - (c - 48)) // 10:
                    raise BadRequest("Content-Length overflow")
                length = length * 10 + (c - 48)
            self._has_length = True
            self._content_length = length
        elif kind == TRANSFER_ENCODING:
            if self._has_length:
                raise BadRequest("Transfer-Encoding with Content-Length")
            if n == 0:  # no coding at all: no framing a proxy would agree on
                raise BadRequest("empty Transfer-Encoding")
            self._te = True
            start = 0
            while True:
                if self._chunked:
                    raise BadRequest("a transfer coding after chunked")
                stop = start
                while stop < n and p[stop] != 44:
                    stop += 1
                self._chunked = _element_is(p, start, stop, b"chunked", 7)
                if not self._chunked and not _element_is(p, start, stop, b"", 0):
                    self._coded = True
                if stop == n:
                    break
                start = stop + 1
        elif kind == EXPECT:
            if not _is(p, n, b"100-continue", 12):
                raise HttpError("unsupported expectation", 417)
            self._expect = True
        elif kind == CONNECTION:
            start = 0
            while True:
                stop = start
                while stop < n and p[stop] != 44:
                    stop += 1
                if _element_is(p, start, stop, b"close", 5):
                    self._close = True
                elif _element_is(p, start, stop, b"keep-alive", 10):
                    self._keep_alive_option = True
                elif _element_is(p, start, stop, b"upgrade", 7):
                    self._connection_upgrade = True
                if stop == n:
                    break
                start = stop + 1
        else:  # Upgrade
            self._upgrade = True
        return 0

    cdef int _trailer(self, const unsigned char* p, Py_ssize_t n) except -1:
        """A trailer field: checked and counted as a field, never shown to the app."""
        cdef Py_ssize_t name_end, start, stop
        self._split_field(p, n, &name_end, &start, &stop)
        self._trailers += 1
        if self._trailers > self._fields:
            raise HeaderFieldsTooLarge("too many trailer fields")
        cdef int kind = _kind(p, name_end)
        if kind == CONTENT_LENGTH or kind == TRANSFER_ENCODING:
            raise BadRequest("a framing field in the trailers")
        return 0

    cdef int _head_end(self) except -1:
        cdef str version = self._version
        if self._te:
            if not self._chunked:
                raise BadRequest("Transfer-Encoding whose final coding is not chunked")
            if version is V10:
                raise BadRequest("Transfer-Encoding in an HTTP/1.0 request")
            if self._coded:
                raise HttpError("a transfer coding other than chunked", 501)
        if self._host_count != 1 and (self._host_count or version is V11):
            raise BadRequest("missing Host header" if not self._host_count else "repeated Host")
        cdef str method = self._method
        if method == "CONNECT":
            raise HttpError("CONNECT is not supported", 405)
        cdef bytes target = self._target
        absolute = None
        if (<const unsigned char*>PyBytes_AS_STRING(target))[0] != 47:
            if target != b"*":
                absolute = parse_absolute_form(target)
            elif method != "OPTIONS":
                raise BadRequest("asterisk-form target with a method other than OPTIONS")
        if self._has_length and self._body_limit and self._content_length > self._body_limit:
            raise ContentTooLarge("declared body larger than limit_request_body")
        cdef bint keep_alive = not self._close and (version is V11 or self._keep_alive_option)
        cdef bint chunked = self._chunked
        cdef bint upgrading = self._upgrade and self._connection_upgrade
        self._then = UPGRADED if upgrading else START if keep_alive else CLOSED
        self.head_bytes = 0
        self._head_done = 0
        # made in C, not by a constructor call: its fields are those of RequestHead.__init__
        cdef RequestHead head = RequestHead.__new__(RequestHead)
        head.method = method
        head.target = target
        head.version = version
        head.headers = self._headers
        head.keep_alive = keep_alive
        head.content_length = self._content_length if self._has_length else None
        head.chunked = chunked
        # RFC 9110 10.1.1: an HTTP/1.0 expectation is ignored
        head.expect_continue = (
            self._expect and version is V11 and (chunked or self._content_length != 0)
        )
        head.absolute = absolute
        self._sink.on_request(head)
        if upgrading or not (chunked or self._content_length):
            self._message_end()  # an upgrade's bytes are the other protocol's
        elif chunked:
            self._state = CHUNK_SIZE
        else:
            self._remaining = self._content_length
            self._state = LENGTH
        return 0

    cdef int _chunk_size(self, const unsigned char* p, Py_ssize_t n) except -1:
        cdef Py_ssize_t i = 0, digits
        cdef uint64_t size = 0
        while i < n and p[i] == 48:
            i += 1
        digits = i
        while i < n and HEXVAL[p[i]]:
            i += 1
        if i == 0:
            raise BadRequest("invalid chunk-size line")
        _chunk_extensions(p, i, n)
        if i - digits > 16:
            raise BadRequest("chunk size overflow")
        for digits in range(digits, i):
            size = size * 16 + (HEXVAL[p[digits]] - 1)
        if not size:
            self._state = TRAILERS
            return 0
        if self._body_limit:
            if size > self._body_limit - self._body_seen:
                raise ContentTooLarge("chunked body larger than limit_request_body")
            self._body_seen += size
        self._remaining = size
        self._state = CHUNK_DATA
        return 0

    cdef int _message_end(self) except -1:
        cdef int then = self._then
        self._reset()
        if then == UPGRADED:
            self.ended = True
            self.upgraded = b""
        else:
            self._state = then
        self._sink.on_request_end()
        return 0


cdef int _chunk_extensions(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) except -1:
    """``*( ";" token [ "=" ( token / quoted-string ) ] )`` from ``i`` to the line's end."""
    cdef Py_ssize_t start
    while i < n:
        if p[i] != 59:
            raise BadRequest("invalid chunk-size line")
        i += 1
        start = i
        while i < n and TCHAR[p[i]]:
            i += 1
        if i == start:
            raise BadRequest("invalid chunk-size line")
        if i == n or p[i] != 61:
            continue
        i += 1
        if i < n and p[i] == 34:
            i += 1
            while True:
                if i == n:
                    raise BadRequest("invalid chunk-size line")
                if p[i] == 34:
                    i += 1
                    break
                if p[i] == 92:
                    i += 1
                    if i == n or not QPAIR[p[i]]:
                        raise BadRequest("invalid chunk-size line")
                elif not QDTEXT[p[i]]:
                    raise BadRequest("invalid chunk-size line")
                i += 1
        else:
            start = i
            while i < n and TCHAR[p[i]]:
                i += 1
            if i == start:
                raise BadRequest("invalid chunk-size line")
    return 0
