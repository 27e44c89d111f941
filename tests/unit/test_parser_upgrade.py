"""What the parser keeps of a connection that upgraded (``Parser.upgraded``): None until a
request with ``Connection: upgrade`` and ``Upgrade`` ends its head, then the bytes read after
that head, however the input is split into reads, on both builds (the ``parser_class``
fixture)."""

from __future__ import annotations

from corral.http.head import Limits, RequestSink

HANDSHAKE = (
    b"GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
FRAMES = b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58" + b"\r\n\r\nGET / HTTP/1.1\r\n\r\n"


class Events(RequestSink):
    def __init__(self) -> None:
        self.events: list[str] = []

    def on_request(self, head) -> None:
        self.events.append(f"request {head.target.decode()}")

    def on_body(self, chunk: bytes) -> None:
        self.events.append("body")

    def on_request_end(self) -> None:
        self.events.append("end")


def test_a_plain_request_leaves_it_none(parser_class: type) -> None:
    parser = parser_class(Events(), Limits())
    parser.feed(b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n")  # no Connection
    assert parser.upgraded is None and not parser.ended


def test_an_upgrade_without_more_bytes_is_empty(parser_class: type) -> None:
    sink = Events()
    parser = parser_class(sink, Limits())
    parser.feed(HANDSHAKE)
    assert parser.ended and parser.upgraded == b""
    assert sink.events == ["request /chat", "end"]


def test_the_bytes_after_the_head_are_kept_at_every_split(parser_class: type) -> None:
    data = HANDSHAKE + FRAMES
    for split in range(1, len(data)):
        sink = Events()
        parser = parser_class(sink, Limits())
        parser.feed(data[:split])
        parser.feed(data[split:])
        assert parser.upgraded == FRAMES, split
        assert sink.events == ["request /chat", "end"], split  # nothing after it is parsed
