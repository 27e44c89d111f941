"""corral.http.upstream: an upstream's answers, parsed as strictly as a client's requests.

Each answer is fed whole and split at every byte: the same events, or the same refusal."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from corral.http.parser import _CHUNK_SIZE_LINE
from corral.http.upstream import ResponseParser, UpstreamError


class Sink:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_response(self, head: Any) -> None:
        fields = [(n.decode(), v.decode()) for n, v in head.headers]
        self.events.append(("head", head.status, head.keep_alive, head.content_length, fields))

    def on_body(self, chunk: bytes) -> None:
        if self.events and self.events[-1][0] == "body":
            self.events[-1] = ("body", self.events[-1][1] + chunk)
        else:
            self.events.append(("body", chunk))

    def on_response_end(self) -> None:
        self.events.append(("end",))


def parse(pieces: list[bytes], head_method: bool = False, eof: bool = False) -> list[Any]:
    sink = Sink()
    parser = ResponseParser(sink, head_limit=1024, fields=8)
    parser.expect(head_method)
    for piece in pieces:
        parser.feed(piece)
    if eof:
        parser.feed_eof()
    return sink.events


def every_split(data: bytes, head_method: bool = False, eof: bool = False) -> list[Any]:
    """The events of ``data`` fed whole, checked equal when split at every byte."""
    whole = parse([data], head_method, eof)
    for cut in range(1, len(data)):
        assert parse([data[:cut], data[cut:]], head_method, eof) == whole, cut
    return whole


def refused(data: bytes, eof: bool = False) -> str:
    with pytest.raises(UpstreamError) as info:
        parse([data], eof=eof)
    for cut in range(1, len(data)):
        with pytest.raises(UpstreamError):
            parse([data[:cut], data[cut:]], eof=eof)
    return str(info.value)


def test_a_length_delimited_answer() -> None:
    events = every_split(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello")
    assert events == [
        ("head", 200, True, 5, [("Content-Length", "5"), ("X-A", "b")]),
        ("body", b"hello"),
        ("end",),
    ]


def test_a_chunked_answer_with_extensions_and_trailers() -> None:
    data = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    events = every_split(data)
    assert events[1:] == [("body", b"hello!"), ("end",)]
    assert events[0][:4] == ("head", 200, True, None)


def test_an_answer_delimited_by_close_ends_at_eof_and_is_not_kept() -> None:
    events = every_split(b"HTTP/1.1 200 OK\r\n\r\nuntil the end", eof=True)
    assert events == [("head", 200, False, None, []), ("body", b"until the end"), ("end",)]


def test_interim_answers_are_dropped_and_head_and_304_have_no_body() -> None:
    events = every_split(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
    assert events == [("head", 204, True, None, []), ("end",)]
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
    assert every_split(head, head_method=True)[-1] == ("end",)
    assert parse([b"HTTP/1.0 304 Not Modified\r\n\r\n"])[0][2] is False  # 1.0: closes


def test_a_101_keeps_what_follows_for_the_tunnel() -> None:
    sink = Sink()
    parser = ResponseParser(sink)
    parser.expect(False)
    parser.feed(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x02hi")
    parser.feed(b"more")
    assert sink.events[0][1] == 101 and parser.upgraded == b"\x81\x02himore"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"HTTP/1.1 20 OK\r\n\r\n", "invalid status line"),
        (b"HTTP/2.0 200 OK\r\n\r\n", "invalid status line"),
        (b"ICY 200 OK\r\n\r\n", "invalid status line"),
        (b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "invalid header field line"),
        (b"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n", "invalid header field line"),
        (b"HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n", "invalid character"),
        (b"HTTP/1.1 200 OK\r\nX: a\nY: b\r\n\r\n", "invalid character"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", "repeated"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx", "repeated"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\nx", "invalid Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "invalid Content-Length"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            "Transfer-Encoding with Content-Length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            "Content-Length with Transfer-Encoding",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "final coding is not chunked"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk-size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", "chunk-size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", "not followed"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 1\r\n\r\n",
            "framing field in the trailers",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabc", "after the answer's end"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 9 + b"\r\n", "too many header fields"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 1100 + b"\r\n\r\n", "answer head too large"),
    ],
)
def test_malformed_answers_are_refused(data: bytes, why: str) -> None:
    assert why in refused(data)


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Len",
    ],
)
def test_an_answer_cut_short_is_refused_at_eof(data: bytes) -> None:
    assert "closed before the answer's end" in refused(data, eof=True)


def chunked_answer(size_line: bytes, data: bytes) -> bytes:
    """An answer whose first chunk-size line is ``size_line``, with ``data`` (none after a
    last chunk's line)."""
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    if not data:
        return head + size_line + b"\r\n\r\n"
    return head + size_line + b"\r\n" + data + b"\r\n0\r\n\r\n"


def test_chunk_size_lines_read_as_the_grammar_says() -> None:
    """The common line (hex digits, CRLF) is read apart from the grammar's match: every short
    line over digits, letters and the bytes around them, and long ones, are taken or refused
    as `_CHUNK_SIZE_LINE` (with no bare CR or LF) says, whole or cut."""
    alphabet = b"09afAF/:@G`g;= \t\r\n-+_x"  # (with the bytes on each side of each range)
    lines = [bytes(line) for n in (1, 2, 3) for line in itertools.product(alphabet, repeat=n)]
    lines = [line for line in lines if b"\r\n" not in line]  # (a CRLF would end the line)
    lines += [b"0" * 15 + b"5", b"0" * 16 + b"5", b"0" * 40 + b"a", b"00000000000000A;x=y"]
    for line in lines:
        if _CHUNK_SIZE_LINE.fullmatch(line) and b"\r" not in line and b"\n" not in line:
            size = int(line.split(b";")[0], 16)
            data = b"z" * size
            body = [("body", data)] if data else []
            assert parse([chunked_answer(line, data)])[1:] == [*body, ("end",)], line
        else:
            with pytest.raises(UpstreamError, match=r"chunk-size|bare CR"):
                parse([chunked_answer(line, b"")])
    for line in (b"a", b"0a", b"0" * 15 + b"1", b"0" * 16 + b"1", b"A;e"):
        assert every_split(chunked_answer(line, b"z" * int(line.split(b";")[0], 16)))


def test_lengths_and_chunk_sizes_up_to_2_to_the_64_less_one() -> None:
    """(The compiled parser counts what remains of a body in 64 bits, unsigned.)"""
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert parse([head + b"f" * 16 + b"\r\nabc"])[1:] == [("body", b"abc")]  # the rest to come
    assert "overflow" in refused(head + b"1" + b"0" * 16 + b"\r\n")
    length = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\nabc"
    assert parse([length % (2**64 - 1)])[1:] == [("body", b"abc")]
    assert "invalid Content-Length" in refused(length % 2**64)
