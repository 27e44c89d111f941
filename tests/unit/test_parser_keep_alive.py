"""Heads in a row on one parser (a keep-alive connection): each request gets its own fields,
whether they repeat the previous head's (the compiled parser then reuses its field objects),
change in place, or grow and shrink in number."""

from __future__ import annotations

from corral.http.head import Limits, RequestHead, RequestSink


class Heads(RequestSink):
    def __init__(self) -> None:
        self.heads: list[RequestHead] = []

    def on_request(self, head: RequestHead) -> None:
        self.heads.append(head)

    def on_body(self, chunk: bytes) -> None: ...
    def on_request_end(self) -> None: ...


def request(*fields: bytes) -> bytes:
    return b"GET / HTTP/1.1\r\n" + b"".join(field + b"\r\n" for field in fields) + b"\r\n"


def test_each_head_has_its_own_fields(parser_class: type) -> None:
    sink = Heads()
    parser = parser_class(sink, Limits())
    sequence = [
        (b"Host: a", b"Accept: */*", b"X-Id: 1"),
        (b"Host: a", b"Accept: */*", b"X-Id: 1"),  # the same again
        (b"Host: a", b"Accept: */*", b"X-Id: 2"),  # a value changes (same length)
        (b"Host: a", b"Accept: text/html", b"X-Ie: 2"),  # a longer value; a name changes
        (b"Host: a",),  # fewer fields
        (b"Host: b", b"Accept: */*", b"X-Id: 1", b"X-More: yes"),  # more than ever before
        (b"Host: a", b"accept: */*", b"X-Id: 1"),  # a name's case changes
    ]
    for fields in sequence:
        parser.feed(request(*fields))
    assert [head.headers for head in sink.heads] == [
        [tuple(part.encode() for part in field.decode().split(": ")) for field in fields]
        for fields in sequence
    ]
    # a head's list is its own: changing one changes no other
    sink.heads[0].headers.append((b"X-Late", b"1"))
    assert sink.heads[1].headers == [(b"Host", b"a"), (b"Accept", b"*/*"), (b"X-Id", b"1")]


def test_a_repeated_field_still_counts_for_framing(parser_class: type) -> None:
    sink = Heads()
    parser = parser_class(sink, Limits())
    parser.feed(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nok")
    parser.feed(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nok")
    assert [head.content_length for head in sink.heads] == [2, 2]
