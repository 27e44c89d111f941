"""nginx's ``client_header_timeout`` and ``client_body_timeout`` against clients that trickle
(issue 34, point 3): ``header_timeout`` bounds the whole head however often bytes arrive (a
slowloris client that sends a header field every fraction of a second still gets 408), and
``body_timeout`` bounds the silence between two reads of a body (408 when the client stops
sending, never while it sends)."""

from __future__ import annotations

import socket
import time

import pytest

from tests.integration.server import Server, read_all, read_response

pytestmark = [pytest.mark.usefixtures("each_core"), pytest.mark.wallclock]


def status_line_then_closed(sock: socket.socket) -> bytes:
    data = read_all(sock)
    return data.split(b"\r\n", 1)[0]


def test_a_head_sent_a_field_at_a_time_is_cut_at_the_header_timeout() -> None:
    with Server("basic:application", "--header-timeout", "1") as server:
        with server.connect(timeout=5) as sock:
            start = time.monotonic()
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            try:
                # a field every 0.2 s: each read is fresh, the head never complete
                for _ in range(25):
                    time.sleep(0.2)
                    sock.sendall(b"X-Slow: a\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            line = status_line_then_closed(sock)
            elapsed = time.monotonic() - start
        assert line.startswith(b"HTTP/1.1 408"), line
        # the sweep runs once a second: cut between the timeout and the sweep after it
        assert 1.0 <= elapsed < 3.0, elapsed


def test_a_body_that_stops_is_cut_at_the_body_timeout_and_one_that_trickles_is_not() -> None:
    with Server("basic:application", "--body-timeout", "1") as server:
        with server.connect(timeout=5) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
            start = time.monotonic()
            line = status_line_then_closed(sock)
            elapsed = time.monotonic() - start
        assert line.startswith(b"HTTP/1.1 408"), line
        assert 1.0 <= elapsed < 3.0, elapsed
        with server.connect(timeout=10) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n")
            for byte in b"abcdef":  # 3 s in all, never a second of silence
                time.sleep(0.5)
                sock.sendall(bytes([byte]))
            status, _, _ = read_response(sock)
        assert status == 200
