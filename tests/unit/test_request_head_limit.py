"""`limit_request_head` (uWSGI's buffer-size) on the HTTP parser: the whole head, exactly.

The corpus replays heads whole, split and byte by byte against the other limits; these are the
cases the head limit adds: a head over it that arrives in one read (and completes there), and
a small head followed in the same read by a body or by further requests, which must not count
against it.
"""

from __future__ import annotations

import pytest

from corral.http.errors import HttpError
from corral.http.head import Limits
from tests.unit.test_corpus import Recorder

HEAD = b"POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2000\r\n\r\n"


def feed(data: bytes, limits: Limits, parser_class: type, cut: int = 0) -> Recorder:
    recorder = Recorder()
    parser = parser_class(recorder, limits)
    for piece in [data[:cut], data[cut:]] if cut else [data]:
        parser.feed(piece)
    return recorder


def test_the_limit_is_the_lower_of_head_and_what_the_other_limits_allow():
    assert Limits(head=4096).head == 4096
    assert Limits().head == Limits(head=0).head == 8190 + 100 * (8190 + 4) + 4
    assert Limits(request_line=100, fields=2, field_size=100, head=10**6).head == 312


@pytest.mark.parametrize("cut", [0, 10, len(HEAD) - 1, len(HEAD)])
def test_a_body_in_the_same_read_is_not_head(cut, parser_class):
    recorder = feed(HEAD + b"x" * 2000, Limits(head=len(HEAD) + 10), parser_class, cut)
    assert recorder.events[0][0] == "request"
    assert recorder.events[-1] == ("end",)


def test_pipelined_requests_in_one_read_each_count_alone(parser_class):
    one = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
    recorder = feed(one * 50, Limits(head=len(one) + 5), parser_class)
    assert sum(1 for event in recorder.events if event[0] == "request") == 50


@pytest.mark.parametrize("cut", [0, 5, 40])
def test_a_head_over_the_limit_is_431_even_when_it_ends_in_one_read(cut, parser_class):
    head = b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"y" * 300 + b"\r\n\r\n"
    with pytest.raises(HttpError) as error:
        feed(head, Limits(head=200), parser_class, cut)
    assert error.value.status == 431
    feed(head, Limits(head=len(head)), parser_class, cut)  # at the limit: served
