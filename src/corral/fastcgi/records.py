"""FastCGI records, sans I/O: what a web server writes to a FastCGI application and reads
back (the FastCGI 1.0 specification, the responder role only).

A record is an 8-byte header (version 1, type, request id, content length, padding length,
a reserved byte), its content (at most 65535 bytes) and its padding. The client writes one
request at a time on a connection (``FCGI_KEEP_CONN``: the application keeps it open for the
next), so one request id, :data:`REQUEST_ID`, is enough: an answer that names another is a
protocol error, as is any version but 1, a type the responder role does not send, or an
``END_REQUEST`` that is not 8 bytes.

Owned here: the bytes of ``BEGIN_REQUEST``, ``PARAMS`` (name-value pairs, split into records
of at most 65535 bytes), ``STDIN`` and ``ABORT_REQUEST``, and :class:`RecordReader`, which
turns the bytes read into events (``STDOUT``, ``STDERR``, ``END_REQUEST``) with bounded
memory: it keeps at most one record's bytes. Nothing here touches a socket or a clock.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

__all__ = [
    "END_REQUEST",
    "REQUEST_ID",
    "STDERR",
    "STDOUT",
    "FastCgiError",
    "RecordReader",
    "abort_request",
    "append_pair",
    "begin_request",
    "encode_pairs",
    "params",
    "params_of",
    "stdin",
]

VERSION = 1
REQUEST_ID = 1  # one request at a time per connection

BEGIN_REQUEST = 1
ABORT_REQUEST = 2
END_REQUEST = 3
PARAMS = 4
STDIN = 5
STDOUT = 6
STDERR = 7

RESPONDER = 1
KEEP_CONN = 1

# END_REQUEST's protocol status
REQUEST_COMPLETE = 0
PROTOCOL_STATUS = {
    1: "it cannot multiplex connections",
    2: "it is overloaded",
    3: "it does not know the responder role",
}

MAX_CONTENT = 0xFFFF  # a record's content length is 16 bits
HEADER = struct.Struct("!BBHHBx")


class FastCgiError(Exception):
    """The application's bytes are not FastCGI as a responder answers it: the request gets
    502 and the connection is closed."""


def _record(kind: int, content: bytes, end: bytes = b"") -> bytes:
    """A record of ``content``, followed by ``end`` (another record's bytes), in one piece."""
    length = len(content)
    padding = -length % 8  # padded to a multiple of 8, as the specification recommends
    # (HEADER's layout, its bytes made at once: every request's PARAMS pass here)
    header = bytes((VERSION, kind, 0, REQUEST_ID, length >> 8, length & 0xFF, padding, 0))
    return b"".join((header, content, _PADDINGS[padding], end))


_PADDINGS = [bytes(n) for n in range(8)]


def begin_request(keep_conn: bool = True) -> bytes:
    """``BEGIN_REQUEST`` for the responder role; ``keep_conn``: the application keeps the
    connection open after ``END_REQUEST`` (``FCGI_KEEP_CONN``)."""
    return _BEGIN_KEEP if keep_conn else _BEGIN_CLOSE


_BEGIN_KEEP = _record(BEGIN_REQUEST, struct.pack("!HB5x", RESPONDER, KEEP_CONN))
_BEGIN_CLOSE = _record(BEGIN_REQUEST, struct.pack("!HB5x", RESPONDER, 0))


def _length(n: int) -> bytes:
    return bytes((n,)) if n < 128 else struct.pack("!I", n | 0x80000000)


def params(pairs: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The ``PARAMS`` stream of ``pairs``, its empty record (the stream's end) included."""
    return params_of(encode_pairs(pairs))


def encode_pairs(pairs: Iterable[tuple[bytes, bytes]]) -> bytes:
    """Name-value pairs as ``PARAMS`` carries them (a part that does not change can be
    encoded once and joined to the others: `params_of`)."""
    out: list[bytes] = []
    for name, value in pairs:
        append_pair(out, name, value)
    return b"".join(out)


# a length below 128 as its byte (no bytes made per pair: every request's variables)
_SHORT_LENGTHS = [bytes((n,)) for n in range(128)]


def append_pair(out: list[bytes], name: bytes, value: bytes) -> None:
    """One name-value pair added to ``out`` as ``PARAMS`` carries it, in pieces that one
    ``b"".join`` makes whole (every request's variables pass here: a list's appends cost
    less than a bytearray grown a few bytes at a time)."""
    name_length = len(name)
    value_length = len(value)
    out.append(_SHORT_LENGTHS[name_length] if name_length < 128 else _length(name_length))
    out.append(_SHORT_LENGTHS[value_length] if value_length < 128 else _length(value_length))
    out.append(name)
    out.append(value)


def params_of(encoded: bytes) -> bytes:
    """The ``PARAMS`` stream of pairs already encoded (`encode_pairs`), its end included."""
    if len(encoded) <= MAX_CONTENT:
        return _record(PARAMS, encoded, _PARAMS_END)
    out = [
        _record(PARAMS, encoded[at : at + MAX_CONTENT])
        for at in range(0, len(encoded), MAX_CONTENT)
    ]
    out.append(_PARAMS_END)
    return b"".join(out)


_PARAMS_END = _record(PARAMS, b"")
STDIN_END = _record(STDIN, b"")


def stdin(data: bytes) -> bytes:
    """``data`` as ``STDIN`` records (b"": the empty record that ends the stream)."""
    if not data:
        return STDIN_END
    return b"".join(
        _record(STDIN, data[at : at + MAX_CONTENT]) for at in range(0, len(data), MAX_CONTENT)
    )


def abort_request() -> bytes:
    """``ABORT_REQUEST``: the client went; the application ends the request (an
    ``END_REQUEST`` still follows)."""
    return _record(ABORT_REQUEST, b"")


def parse_pairs(data: bytes) -> list[tuple[bytes, bytes]]:
    """Name-value pairs back from their encoding (the tests' view of `params`)."""
    pairs = []
    at = 0

    def length() -> int:
        nonlocal at
        if data[at] < 128:
            at += 1
            return data[at - 1]
        (n,) = struct.unpack_from("!I", data, at)
        at += 4
        return int(n) & 0x7FFFFFFF

    while at < len(data):
        name_length = length()
        value_length = length()
        name = data[at : at + name_length]
        at += name_length
        pairs.append((name, data[at : at + value_length]))
        at += value_length
    return pairs


class RecordReader:
    """The application's records, read from the bytes as they come: `feed` returns the
    events they complete, ``(STDOUT, bytes)``, ``(STDERR, bytes)``, ``(END_REQUEST,
    app_status)``; an empty ``STDOUT`` or ``STDERR`` (a stream's end) is no event. Raises
    `FastCgiError` at the first thing a responder does not send. After ``END_REQUEST``,
    bytes are an error too (the application may not write before the next request)."""

    __slots__ = ("buffer", "ended")

    def __init__(self) -> None:
        self.buffer = b""
        self.ended = False

    def feed(self, data: bytes) -> list[tuple[int, object]]:
        buffer = self.buffer + data if self.buffer else data
        events: list[tuple[int, object]] = []
        at = 0
        size = len(buffer)
        while size - at >= 8:
            if self.ended:
                raise FastCgiError("bytes after END_REQUEST")
            # (HEADER's fields read one by one: every record of every answer passes here)
            version = buffer[at]
            kind = buffer[at + 1]
            request_id = buffer[at + 2] << 8 | buffer[at + 3]
            length = buffer[at + 4] << 8 | buffer[at + 5]
            padding = buffer[at + 6]
            if version != VERSION:
                raise FastCgiError(f"FastCGI version {version}, not 1")
            if request_id != REQUEST_ID:
                raise FastCgiError(f"a record for request {request_id}, not {REQUEST_ID}")
            end = at + 8 + length + padding
            if end > size:
                break
            content = buffer[at + 8 : at + 8 + length]
            at = end
            if kind in (STDOUT, STDERR):
                if content:
                    events.append((kind, content))
            elif kind == END_REQUEST:
                if length != 8:
                    raise FastCgiError(f"END_REQUEST of {length} bytes, not 8")
                app_status = int.from_bytes(content[:4], "big")
                protocol_status = content[4]
                if protocol_status != REQUEST_COMPLETE:
                    why = PROTOCOL_STATUS.get(protocol_status, f"status {protocol_status}")
                    raise FastCgiError(f"the request was refused: {why}")
                events.append((END_REQUEST, app_status))
                self.ended = True
            else:
                raise FastCgiError(f"a record of type {kind}, which a responder does not send")
        self.buffer = buffer[at:] if at < size else b""
        return events

    def reset(self) -> None:
        """Ready for the next request's answer on the same connection."""
        self.buffer = b""
        self.ended = False
