"""HTTP/1.1 chunked framing of a response body (RFC 9112 7.1): the one place it is written.

Every body piece an answer sends without a known length goes out as one chunk; the end is the
last chunk, with the trailer section when the answer has one (its field lines already checked
by `corral.http.response.trailer_lines`). An empty piece is no chunk: a chunk of size zero
would end the body."""

from __future__ import annotations

LAST = b"0\r\n\r\n"  # the last chunk of a body without trailers


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk (b"" for no data: an empty chunk would end the body)."""
    if not data:
        return b""
    return b"%x\r\n%b\r\n" % (len(data), data)


def size_line(count: int) -> bytes:
    """The line before a chunk of ``count`` bytes sent apart from it (a file range, by
    sendfile); `END_OF_DATA` follows the bytes."""
    return b"%x\r\n" % count


END_OF_DATA = b"\r\n"  # after a chunk's bytes sent apart from its size line


def last(trailer_lines: str, first: bool, more: bool) -> bytes:
    """The end of a body with trailers: the last chunk (``first``: this is the first part of
    the trailer section), ``trailer_lines`` (CRLF-terminated field lines), and the empty line
    that ends it all, unless ``more`` trailer fields follow."""
    out = trailer_lines.encode("latin-1")
    if first:
        out = b"0\r\n" + out
    return out if more else out + b"\r\n"
