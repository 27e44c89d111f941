"""The head of a CGI answer (RFC 3875 section 6), sans I/O: what a FastCGI responder's
``STDOUT`` begins with, turned into a status and the fields corral writes.

The head is lines ``Name: value`` ended by an empty line (CRLF or a bare LF, as CGI scripts
write both), at most ``limit`` bytes. ``Status: 404 Not Found`` gives the status (the
reason phrase is corral's own, `corral.http.response.reason`); a ``Location`` without a
``Status`` is a 302, as nginx and Unit answer it (a CGI local redirect is not followed);
anything else is 200. Everything not CGI-shaped is an `AnswerError` (502): a line without a
colon, a name that is not a token, a folded line, a value with a control character (a CR
or a NUL: a value never reaches the wire with one), a status outside 100-599, a head longer
than ``limit``, or a stream that ends inside the head. The fields are given to the one head
writer (`corral.http.response.build_head`), which drops the hop-by-hop ones and frames the
body.
"""

from __future__ import annotations

import re

__all__ = ["AnswerError", "CgiHead", "HeadReader"]

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_STATUS = re.compile(rb"([1-5][0-9][0-9])(?:[ \t].*)?")


class AnswerError(Exception):
    """The application's answer is not a CGI answer: the client gets 502."""


class CgiHead:
    """A parsed head: the status and the fields (names as the application wrote them)."""

    __slots__ = ("fields", "status")

    def __init__(self, status: int, fields: list[tuple[str, str]]) -> None:
        self.status = status
        self.fields = fields


class HeadReader:
    """Collects ``STDOUT`` until the head is whole: `feed` returns None while it is not,
    then the `CgiHead` and the body bytes that came after it, once."""

    __slots__ = ("buffer", "limit")

    def __init__(self, limit: int) -> None:
        self.buffer = b""
        self.limit = limit

    def feed(self, data: bytes) -> tuple[CgiHead, bytes] | None:
        buffer = self.buffer + data
        end, skip = _head_end(buffer)
        if end < 0:
            if len(buffer) > self.limit:
                raise AnswerError(f"a head longer than {self.limit} bytes")
            self.buffer = buffer
            return None
        if end > self.limit:
            raise AnswerError(f"a head longer than {self.limit} bytes")
        self.buffer = b""
        return parsed_head(buffer[:end]), buffer[end + skip :]

    def finish(self) -> None:
        """The stream ended: a head never ended is an error."""
        raise AnswerError("the answer ended inside its head" if self.buffer else "no answer")


def _head_end(buffer: bytes) -> tuple[int, int]:
    """Where the empty line that ends the head begins, and the length of the line break
    before it and of itself; (-1, 0): not yet. (``\\r?\\n\\r?\\n``'s first match, found
    with ``find`` and a look at the bytes after each line feed: a regular expression's search
    cost more than the rest of the head.)"""
    size = len(buffer)
    if size and buffer[0] == _LF:  # an empty head
        return 0, 1
    if size > 1 and buffer[0] == _CR and buffer[1] == _LF:
        return 0, 2
    at = buffer.find(b"\n")
    while at >= 0:
        after = at + 1
        if after < size and buffer[after] == _LF:
            end = after + 1
        elif after + 1 < size and buffer[after] == _CR and buffer[after + 1] == _LF:
            end = after + 2
        else:
            at = buffer.find(b"\n", after)
            continue
        start = at - 1 if at > 0 and buffer[at - 1] == _CR else at
        return start, end - start
    return -1, 0


_CR = 13
_LF = 10


# heads already parsed, by their bytes: an application answers most requests with the same
# few heads, and parsing one costs more than the rest of the answer's path (a pure function
# of the bytes: the same bytes, the same head). Bounded: emptied when full.
_PARSED: dict[bytes, tuple[int, tuple[tuple[str, str], ...]]] = {}
_PARSED_KEPT = 64
_PARSED_SIZE = 1024  # the longest head kept


def parsed_head(data: bytes) -> CgiHead:
    """`parse_head`'s answer, from the heads parsed before when it is one of them."""
    known = _PARSED.get(data)
    if known is not None:
        return CgiHead(known[0], list(known[1]))  # (a list of its own: the caller's to change)
    head = parse_head(data)
    if len(data) <= _PARSED_SIZE:
        if len(_PARSED) >= _PARSED_KEPT:
            _PARSED.clear()
        _PARSED[data] = (head.status, tuple(head.fields))
    return head


def parse_head(data: bytes) -> CgiHead:
    status = 0
    location = False
    fields: list[tuple[str, str]] = []
    for line in data.split(b"\n") if data else ():
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            continue
        if line[0] in b" \t":
            raise AnswerError("a folded header line")
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise AnswerError(f"not a header line: {line[:80]!r}")
        value = value.strip(b" \t")
        if _CONTROL.search(value):
            raise AnswerError(f"a control character in the value of {name.decode()}")
        lower = name.lower()
        if lower == b"status":
            match = _STATUS.fullmatch(value)
            if match is None or status:
                raise AnswerError(f"a Status of {value[:40]!r}")
            status = int(match.group(1))
            continue
        if lower == b"location":
            location = True
        fields.append((name.decode("latin-1"), value.decode("latin-1")))
    if not status:
        status = 302 if location else 200
    return CgiHead(status, fields)
