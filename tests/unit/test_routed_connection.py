"""Routing as a step of a listener's plan, without sockets: one connection class, a route
state on routed listeners only (the integration tests, test_routed.py, hand off for real)."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from corral.routing import compile_routes
from corral.server.connection import HttpConnection
from corral.server.plan import ListenerPlan
from corral.server.routed import RouteState, Routing
from tests.unit.test_connection import RecordingTransport, connect, statuses

ROUTES = [
    {"match": {"uri": "/r"}, "action": {"return": 301, "location": "/x"}},
    {"match": {"uri": "/b"}, "action": {"pass": "applications/b"}},
    {"action": {"pass": "applications/a"}},
]
NOBODY = "\0corral-test-nobody-listens-here"  # a hand-off there is refused: 502


class SocketTransport(RecordingTransport):
    """A recording transport with a socket to hand off."""

    def __init__(self, protocol: HttpConnection, sock: socket.socket) -> None:
        super().__init__(protocol)
        self.sock = sock
        self.buffered = 0

    def get_extra_info(self, name: str, default=None):
        return self.sock if name == "socket" else super().get_extra_info(name, default)

    def get_write_buffer_size(self) -> int:
        return self.buffered


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def pair():
    ends = socket.socketpair()
    yield ends
    for end in ends:
        end.close()


def routed(loop, pair) -> tuple[HttpConnection, SocketTransport]:
    plain, _ = connect(loop)
    log = logging.getLogger("corral_test_routed")
    routing = Routing(compile_routes(ROUTES), "a", {"b": NOBODY}, timeout=1.0, log=log)
    plan = ListenerPlan(("127.0.0.1", 8000), routing=routing, pass_target="routes")
    conn = HttpConnection(plain.server, plan)
    transport = SocketTransport(conn, pair[0])
    conn.connection_made(transport)
    return conn, transport


def test_a_plain_listener_has_no_route_and_no_begin_callback(loop):
    conn, _ = connect(loop)
    assert conn.route is None
    # the parser looks for on_message_begin once: a plain connection pays no call per request
    assert not hasattr(conn, "on_message_begin")


def test_a_routed_listener_is_the_same_class_with_a_route(loop, pair):
    conn, transport = routed(loop, pair)
    assert type(conn) is HttpConnection
    assert isinstance(conn.route, RouteState) and conn.route.conn is conn
    conn.data_received(b"GET /r HTTP/1.1\r\nHost: x\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n")
    assert statuses(transport.data) == [b"301", b"200"]
    assert b"Location: /x\r\n" in transport.data and b"/a|" in transport.data
    assert conn.route.begun == conn.route.routed == 2 and not transport.closed


def test_a_failed_hand_off_answers_502_after_the_earlier_answers(loop, pair, caplog):
    conn, transport = routed(loop, pair)
    route = conn.route
    with caplog.at_level(logging.WARNING, "corral_test_routed"):
        # after the handed-off head: a parse error is the receiver's to judge, not answered
        conn.data_received(
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\nBAD\r\n\r\n"
        )
    assert statuses(transport.data) == [b"200", b"502"]
    # closed: the route is done and let go (no reference cycle with the connection)
    assert transport.closed and route.sender is None and conn.route is None
    assert "hand-off of GET /b to b failed: 502" in caplog.text


@pytest.mark.parametrize(
    "after",
    [
        b"BAD\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    ],
    ids=["no version", "bad version", "two lengths"],
)
def test_a_parse_error_after_a_handed_off_head_leaves_the_hand_off_under_way(loop, pair, after):
    """Not a connection held for ever: the hand-off starts (here it fails: 502)."""
    conn, transport = routed(loop, pair)
    conn.data_received(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n" + after)
    assert statuses(transport.data) == [b"502"] and transport.closed


def test_bytes_read_once_a_hand_off_began_go_with_it(loop, pair):
    conn, transport = routed(loop, pair)
    route = conn.route
    transport.buffered = 1  # the earlier answer still in the write buffer: the hand-off waits
    first = (
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab"
    )
    conn.data_received(first)
    assert statuses(transport.data) == [b"200"] and route.handoff is not None
    assert conn.reading_paused
    conn._resume_reading()  # once handing off, the socket's bytes are the receiver's
    assert conn.reading_paused
    conn.data_received(b"cd")  # read before the pause took effect: kept, not parsed
    assert bytes(route.raw) == first + b"cd" and route.raw_first == 0
    transport.buffered = 0
    route.hand_off()
    assert statuses(transport.data) == [b"200", b"502"] and transport.closed
