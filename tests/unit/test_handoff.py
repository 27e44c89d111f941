"""The hand-off frame and the request boundaries found in a connection's raw bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.server.handoff import decode_frame, encode_frame, message_end


def test_frame_round_trip_and_short_reads():
    header = {"pass": "routes/main", "sockname": ["127.0.0.1", 8000], "hops": 1}
    payload = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(range(256))
    frame = encode_frame(header, payload)
    assert decode_frame(frame) == (header, payload)
    for cut in range(len(frame)):
        assert decode_frame(frame[:cut]) is None


@pytest.mark.parametrize(
    "data",
    [
        b"XXXX" + bytes(8),  # not the magic
        encode_frame({}, b"x") + b"y",  # bytes after the frame
        b"CHO1" + (1 << 30).to_bytes(4, "big") + bytes(4),  # a header too large
    ],
)
def test_frames_that_are_not_frames(data):
    with pytest.raises(ValueError):
        decode_frame(data)


def test_a_header_that_is_not_an_object():
    frame = b"CHO1" + (2).to_bytes(4, "big") + (0).to_bytes(4, "big") + b"[]"
    with pytest.raises(ValueError):
        decode_frame(frame)


REQUESTS = [
    b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"POST /d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"2;ext=1\r\nGE\r\n0\r\nTrailer: T\r\n\r\n",  # a body that looks like a request start
    b"HEAD /e HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"\r\nGET /f HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",  # a CRLF before it
]


@given(st.lists(st.sampled_from(REQUESTS), min_size=1, max_size=6), st.data())
def test_message_end_finds_every_boundary(requests, data):
    raw = b"".join(requests) + data.draw(st.sampled_from([b"", b"GET /partial HT", b"\r\n"]))
    offset = 0
    for count, request in enumerate(requests):
        assert message_end(raw, count) == offset
        offset += len(request)
    assert message_end(raw, len(requests)) == offset


def test_message_end_of_a_body_holding_a_request():
    body = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    first = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    second = b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
    assert message_end(first + second, 1) == len(first)
