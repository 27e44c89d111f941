"""HttpConnection without sockets: a recording transport, the real parser and WSGI adapter.

The integration tests prove the same behaviour over real sockets; these pin the
connection's state machine (pipeline order, deadlines, errors after pipelined
requests, flow control) where each step can be observed.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time

import pytest

from corral.apps.wsgi.input import EMPTY, BufferedInput
from corral.apps.wsgi.runner import WsgiAdapter
from corral.http.head import Limits
from corral.server.connection import (
    BODY,
    BUSY,
    HEAD,
    IDLE,
    NEVER,
    Adapter,
    HttpConnection,
    ServerState,
)
from corral.server.exchange import Exchange
from corral.server.expiry import sweep


class RecordingTransport:
    """Records writes; like a real transport, closing it reports connection_lost."""

    def __init__(self, protocol: HttpConnection) -> None:
        self.protocol = protocol
        self.data = b""
        self.closed = False
        self.reading = True

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.data += data

    def get_extra_info(self, name: str, default=None):
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(name)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.protocol.connection_lost(None)

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0


def echo_path(environ, start_response):
    body = environ["PATH_INFO"].encode() + b"|" + environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def connect(loop, *, keep_alive=5.0, limits=None) -> tuple[HttpConnection, RecordingTransport]:
    adapter = WsgiAdapter(
        echo_path,
        threads=1,
        body_buffer_size=1024,
        response_buffer_size=1 << 16,
        response_spool_size=1 << 30,
        multiprocess=False,
        log=logging.getLogger("corral.test"),
    )
    return connect_to(loop, adapter, keep_alive=keep_alive, limits=limits)


def connect_to(
    loop, adapter, *, keep_alive=5.0, limits=None
) -> tuple[HttpConnection, RecordingTransport]:
    """A connection of a worker answering with ``adapter``, on a recording transport."""
    state = ServerState(
        adapter,
        limits or Limits(),
        keep_alive=keep_alive,
        header_timeout=2,
        body_timeout=3,
        send_timeout=60,
    )
    state.loop = loop
    state.prefix = "Date: Mon, 30 Nov 2026 00:00:00 GMT\r\n"
    conn = HttpConnection(state)
    transport = RecordingTransport(conn)
    conn.connection_made(transport)
    return conn, transport


def statuses(data: bytes) -> list[bytes]:
    return re.findall(rb"HTTP/1\.1 (\d{3}) ", data)


def test_pipelined_requests_answered_in_order(loop):
    conn, transport = connect(loop)
    conn.data_received(
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz"
        b"GET /c HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    bodies = [part for part in transport.data.split(b"\r\n\r\n")[1:] if part]
    assert [body[:6] for body in bodies] == [b"/a|HTT", b"/b|xyz", b"/c|"]
    assert conn.state == IDLE and lately(conn.deadline - 5.0) and not transport.closed


def test_a_request_starts_by_the_clock_every_process_shares(loop):
    """``Exchange.request_start`` is read as the head is parsed, from CLOCK_MONOTONIC (the
    master compares it with its own clock: --timeout)."""
    conn, transport = connect(loop)
    before = time.clock_gettime(time.CLOCK_MONOTONIC)
    conn.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
    after = time.clock_gettime(time.CLOCK_MONOTONIC)
    exchange = conn.receiving  # its body is still on its way
    assert exchange is not None
    assert before <= exchange.request_start <= after
    transport.close()  # its body's storage goes with it


def test_error_after_good_pipelined_request_comes_last_then_close(loop):
    conn, transport = connect(loop)
    conn.data_received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/9.9\r\nHost: x\r\n\r\n")
    assert statuses(transport.data) == [b"200", b"505"]
    assert transport.closed


def lately(moment: float) -> bool:
    """Whether ``moment`` (CLOCK_MONOTONIC) was within the last 0.5 s: a deadline is set from
    the clock read when it is set, never from an older one (a coarse clock, read once a
    second, made a deadline of 1 s expire after a few milliseconds of silence)."""
    now = time.clock_gettime(time.CLOCK_MONOTONIC)
    return now - 0.5 <= moment <= now


def test_deadlines_follow_the_state(loop):
    conn, transport = connect(loop)
    assert conn.state == HEAD and lately(conn.deadline - 2)
    conn.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
    assert conn.state == BODY and lately(conn.deadline - 3)
    before = conn.deadline
    time.sleep(0.01)
    conn.data_received(b"c")
    assert conn.deadline > before and lately(conn.deadline - 3)  # each read of the body moves it
    conn.data_received(b"d")
    assert conn.state == IDLE and lately(conn.deadline - 5)
    assert statuses(transport.data) == [b"200"]


def test_sweep_answers_408_to_a_started_head_and_closes_an_idle_connection(loop):
    conn, transport = connect(loop)
    conn.data_received(b"GET / HTTP/1.1\r\nHo")
    idle, idle_transport = connect(loop)
    sweep({conn, idle}, time.monotonic() + 2.5)
    assert statuses(transport.data) == [b"408"] and transport.closed
    assert idle_transport.data == b"" and idle_transport.closed


def test_stalled_body_gets_408(loop):
    conn, transport = connect(loop)
    conn.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
    sweep({conn}, time.monotonic() + 3.5)
    assert statuses(transport.data) == [b"408"] and transport.closed


def test_keep_alive_zero_announces_close(loop):
    conn, transport = connect(loop, keep_alive=0)
    conn.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b"\r\nConnection: close\r\n" in transport.data and transport.closed


class HeldAdapter(Adapter):
    """Runs nothing by itself: each request it is given waits until the test answers it."""

    empty_body = EMPTY

    def __init__(self) -> None:
        self.running: list[Exchange] = []

    def make_body(self, conn: HttpConnection, exchange: Exchange) -> BufferedInput:
        return BufferedInput(1024)

    def run(self, conn: HttpConnection, exchange: Exchange) -> None:
        self.running.append(exchange)

    def answer(self, conn: HttpConnection) -> None:
        exchange = self.running.pop(0)
        conn.finish(exchange, True, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")


def test_pipelined_request_pauses_reading_until_answered(loop):
    adapter = HeldAdapter()
    conn, transport = connect_to(loop, adapter)
    conn.data_received(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
    assert transport.reading  # the body is still to come
    conn.data_received(b"12345GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
    # /a runs, /b was parsed behind it: nothing more is read while /a's answer is due
    assert [exchange.head.target for exchange in adapter.running] == [b"/a"]
    assert len(conn.pipeline) == 2 and not transport.reading and transport.data == b""
    adapter.answer(conn)
    # /a answered: /b is first in line and runs, and the socket is read again behind it
    assert [exchange.head.target for exchange in adapter.running] == [b"/b"]
    assert statuses(transport.data) == [b"200"] and transport.reading
    adapter.answer(conn)
    assert statuses(transport.data) == [b"200", b"200"] and transport.reading
    assert conn.state == IDLE and conn.active is None and conn.deadline != NEVER


def test_connection_close_request_is_answered_then_closed(loop):
    conn, transport = connect(loop)
    conn.data_received(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET / HT")
    assert statuses(transport.data) == [b"200"] and transport.closed
    assert conn.state in (BUSY, IDLE)


def test_send_deadline_runs_only_while_the_client_does_not_read(loop):
    conn, transport = connect(loop)
    transport.abort = lambda: (setattr(transport, "aborted", True), transport.close())
    conn.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n")
    conn.state = BUSY  # as while the application writes a long answer
    conn.pause_writing()
    assert lately(conn.deadline - conn.server.send_timeout)
    conn.resume_writing()
    assert conn.deadline == NEVER
    conn.pause_writing()
    sweep({conn}, time.monotonic() + conn.server.send_timeout + 1)
    assert getattr(transport, "aborted", False) and conn.closed
