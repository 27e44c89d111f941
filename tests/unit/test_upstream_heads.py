"""corral.http.upstream keeps the heads it parsed by their bytes (`_PARSED`, and the last one
found, compared where it lies): what depends on the request (a HEAD's answer has no body) or on
the parser (its field limit) is decided anew each time, a refusal is never kept, and each
answer's fields are its own."""

from __future__ import annotations

from typing import Any

import pytest

from corral.http import upstream
from corral.http.upstream import ResponseParser, UpstreamError

HEAD = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\nX-B: 2\r\n\r\n"


class Heads:
    def __init__(self) -> None:
        self.heads: list[Any] = []
        self.ends = 0

    def on_response(self, head: Any) -> None:
        self.heads.append(head)

    def on_body(self, chunk: bytes) -> None:
        pass

    def on_response_end(self) -> None:
        self.ends += 1


def answer(data: bytes, *, head_method: bool = False, fields: int = 100) -> Heads:
    sink = Heads()
    parser = ResponseParser(sink, fields=fields)
    parser.expect(head_method)
    parser.feed(data)
    return sink


def test_a_kept_head_still_answers_a_head_request_without_a_body() -> None:
    upstream._forget()
    got = answer(HEAD + b"hello")
    assert HEAD[:-2] in upstream._PARSED  # kept (its lines, each with its CRLF)
    assert got.heads[0].content_length == 5 and got.ends == 1
    bodiless = answer(HEAD, head_method=True)  # the same bytes, from what was kept
    assert bodiless.heads[0].content_length is None and bodiless.ends == 1


def test_the_field_limit_applies_to_a_kept_head() -> None:
    upstream._forget()
    answer(HEAD + b"hello", fields=100)
    with pytest.raises(UpstreamError, match="too many header fields"):
        answer(HEAD + b"hello", fields=2)


def test_a_refused_head_is_refused_again_and_not_kept() -> None:
    upstream._forget()
    bad = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx"
    for _ in range(2):
        with pytest.raises(UpstreamError, match="repeated Content-Length"):
            answer(bad)
    assert not upstream._PARSED


def test_each_answer_has_fields_of_its_own() -> None:
    upstream._forget()
    first = answer(HEAD + b"hello").heads[0]
    first.headers.append((b"X-Changed", b"by its user"))
    again = answer(HEAD + b"hello").heads[0]
    assert again.headers == [(b"Content-Length", b"5"), (b"X-A", b"1"), (b"X-B", b"2")]
    # ... and the fields as parsed, shared while the head is kept (a key for what is derived
    # from them alone), unchanged
    assert again.fields is first.fields and again.fields == tuple(again.headers)
    upstream._forget()
    assert answer(HEAD + b"hello").heads[0].fields is not first.fields


def test_heads_kept_are_bounded() -> None:
    upstream._forget()
    for n in range(upstream._PARSED_KEPT * 3):
        answer(b"HTTP/1.1 204 No Content\r\nX-N: %d\r\n\r\n" % n)
    assert 0 < len(upstream._PARSED) <= upstream._PARSED_KEPT
    long = b"HTTP/1.1 204 No Content\r\nX-Long: " + b"a" * upstream._PARSED_SIZE + b"\r\n\r\n"
    upstream._forget()
    assert answer(long).heads[0].status == 204
    assert not upstream._PARSED  # too long to keep


def test_heads_taken_in_turn_each_read_as_its_own() -> None:
    upstream._forget()
    other = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n"
    for data, status, body in [(HEAD, 200, 5), (other, 404, 2), (HEAD, 200, 5), (HEAD, 200, 5)]:
        head = answer(data + b"x" * body).heads[0]
        assert (head.status, head.content_length) == (status, body)
    # the last head's bytes where it lies, behind another answer in the same data: matched
    # whole there, and a head that only begins as it does is not taken for it
    sink = Heads()
    parser = ResponseParser(sink)
    parser.expect(False)
    parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    parser.expect(False)
    parser.feed(HEAD + b"hello")
    parser.expect(False)
    parser.feed(HEAD[:-2] + b"X-C: 3\r\n\r\n" + b"hello")
    assert [len(head.headers) for head in sink.heads] == [1, 3, 4] and sink.ends == 3
