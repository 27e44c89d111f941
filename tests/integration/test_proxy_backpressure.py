"""The proxy's buffers are bounded both ways: a client that stops reading an answer stops the
front reading the upstream, and an upstream that stops reading a request's body stops the
front reading the client. Shown by the front worker's memory while gigabytes wait on either
side (without backpressure it would hold what loopback moves in a second: hundreds of MiB)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.integration.proxy_front import RawUpstream, front
from tests.integration.server import Server
from tests.integration.test_slow_readers import rss_kib

pytestmark = pytest.mark.usefixtures("each_core")

GROWTH_KIB = 32 * 1024  # what the front worker may grow by while a side waits


def test_a_client_that_does_not_read_stops_the_upstream_being_read(each_core: str) -> None:
    with (
        Server("proxy_apps:app") as upstream,
        front({"proxy": f"http://127.0.0.1:{upstream.port}"}) as server,
        socket.create_connection((server.host, server.port), timeout=10) as sock,
    ):
        (worker,) = server.worker_pids()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.sendall(b"GET /big?4294967296 HTTP/1.1\r\nHost: t\r\n\r\n")  # 4 GiB
        got = 0
        while got < 1 << 20:
            got += len(sock.recv(65536))
        before = rss_kib(worker)
        time.sleep(2)  # the client reads nothing meanwhile
        grown = rss_kib(worker) - before
        assert grown < GROWTH_KIB, grown
        for _ in range(64):  # and the answer goes on when it reads again
            got += len(sock.recv(65536))
        assert got > 1 << 20


def test_an_upstream_that_does_not_read_stops_the_client_being_read(each_core: str) -> None:
    with (
        RawUpstream(b"", read=False) as upstream,
        front({"proxy": f"http://127.0.0.1:{upstream.port}"}) as server,
        socket.create_connection((server.host, server.port), timeout=10) as sock,
    ):
        (worker,) = server.worker_pids()
        size = 4 << 30
        sock.sendall(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % size)
        sent = [0]

        def send() -> None:
            piece = b"p" * (1 << 20)
            try:
                while sent[0] < size:
                    sock.sendall(piece)
                    sent[0] += len(piece)
            except OSError:
                pass

        threading.Thread(target=send, daemon=True).start()
        time.sleep(0.5)
        before = rss_kib(worker)
        time.sleep(2)
        grown = rss_kib(worker) - before
        assert grown < GROWTH_KIB, grown
        assert sent[0] < 256 << 20, sent[0]  # the client's writes wait in TCP, not in corral


def test_a_client_that_leaves_ends_the_upstream_answer(each_core: str) -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    with (
        RawUpstream(head, ending="endless") as upstream,
        front({"proxy": f"http://127.0.0.1:{upstream.port}"}) as server,
    ):
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(b"GET /endless HTTP/1.1\r\nHost: t\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK\r\n")
        # the front drops its upstream connection, whose endless answer nobody reads now
        assert upstream.ended.wait(5)
