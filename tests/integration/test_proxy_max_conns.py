"""``proxy_max_conns``: a worker's connections to one upstream server capped (nginx's
``max_conns``), the requests beyond it waiting in corral, in turn, for a kept connection given
back or a place freed; a wait past ``proxy_connect_timeout`` is a 504, a client that leaves
its place in line is not answered and frees nothing. And the cap a ruby application gets from
its Puma's threads, seen from the kernel's side (``ss``) under 20 requests at once.

The upstream is the test's own (`HoldingUpstream`): it answers each request only when told,
and counts the connections it has open at once."""

from __future__ import annotations

import http.client
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.integration.control import listening_port
from tests.integration.proxy_front import ThreadedUpstream, front, read_until_closed
from tests.integration.server import Server, wait_for
from tests.integration.test_external import ready, serving, status_of
from tests.integration.test_languages import WEB, needs

pytestmark = pytest.mark.usefixtures("each_core")

LANGUAGES = Path(__file__).parent / "languages"


class HoldingUpstream(ThreadedUpstream):
    """An HTTP/1.1 upstream on a loopback port that keeps connections alive and answers each
    request (its path as the body) only once `release` lets one more go. ``arrived``: the
    paths in the order they came; ``most``: the most connections it had open at once."""

    def __init__(self) -> None:
        self.arrived: list[str] = []
        self.open = 0
        self.most = 0
        self.go = threading.Semaphore(0)
        self.lock = threading.Lock()
        super().__init__()

    def release(self, count: int = 1) -> None:
        for _ in range(count):
            self.go.release()

    def _took(self) -> None:
        with self.lock:
            self.open += 1
            self.most = max(self.most, self.open)

    def _answer(self, sock: socket.socket) -> None:
        data = b""
        try:
            while True:
                while b"\r\n\r\n" not in data:
                    more = sock.recv(65536)
                    if not more:
                        return
                    data += more
                head, _, data = data.partition(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                with self.lock:
                    self.arrived.append(path)
                self.go.acquire()
                body = path.encode()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        except OSError:
            pass
        finally:
            sock.close()
            with self.lock:
                self.open -= 1

    def close(self) -> None:
        self.listener.close()
        self.release(100)  # whatever still waits answers and goes


def send(server: Server, path: str) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=15)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    return sock


def answer(sock: socket.socket) -> tuple[int, bytes]:
    with sock:
        data = read_until_closed(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def arrived(upstream: HoldingUpstream, count: int) -> list[str]:
    return wait_for(lambda: len(upstream.arrived) >= count and list(upstream.arrived))


def capped(upstream: HoldingUpstream, **settings: object):  # type: ignore[no-untyped-def]
    return front(
        {"proxy": f"http://127.0.0.1:{upstream.port}"},
        settings=dict(settings),  # (one worker: the default)
    )


def test_requests_beyond_the_cap_wait_their_turn() -> None:
    upstream = HoldingUpstream()
    try:
        with capped(upstream, proxy_max_conns=2) as server:
            socks = [send(server, "/1")]
            arrived(upstream, 1)
            socks.append(send(server, "/2"))
            arrived(upstream, 2)
            for path in ("/3", "/4", "/5"):
                socks.append(send(server, path))
                time.sleep(0.2)  # in line at the front, in this order (nothing to wait on)
            assert upstream.arrived == ["/1", "/2"]  # the other three wait in corral
            for count in (3, 4, 5):
                upstream.release()
                arrived(upstream, count)
            upstream.release(2)
            answers = [answer(sock) for sock in socks]
    finally:
        upstream.close()
    assert answers == [(200, f"/{n}".encode()) for n in range(1, 6)]
    assert upstream.arrived == ["/1", "/2", "/3", "/4", "/5"]
    assert upstream.most == 2 and upstream.accepted == 2  # the kept ones, handed on


def test_a_wait_past_the_connect_timeout_is_a_504() -> None:
    upstream = HoldingUpstream()
    try:
        with capped(upstream, proxy_max_conns=1, proxy_connect_timeout=0.5) as server:
            held = send(server, "/held")
            arrived(upstream, 1)
            started = time.monotonic()
            status, _ = answer(send(server, "/late"))
            waited = time.monotonic() - started
            upstream.release()
            assert answer(held) == (200, b"/held")
            server.wait_log(r"proxy: 127\.0\.0\.1:\d+: no connection free in time")
    finally:
        upstream.close()
    assert status == 504
    assert 0.5 <= waited < 3, waited
    assert upstream.arrived == ["/held"]


def test_a_client_that_leaves_its_place_in_line_is_not_answered() -> None:
    upstream = HoldingUpstream()
    try:
        with capped(upstream, proxy_max_conns=1) as server:
            held = send(server, "/held")
            arrived(upstream, 1)
            gone = send(server, "/gone")
            time.sleep(0.2)  # in line (nothing to wait on)
            # a reset: a client's FIN alone is a half-close, whose answer still goes to it
            gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            gone.close()
            time.sleep(0.2)  # the front saw it go
            after = send(server, "/after")
            time.sleep(0.2)
            assert upstream.arrived == ["/held"]  # its going freed no place
            upstream.release()
            assert answer(held) == (200, b"/held")
            arrived(upstream, 2)
            upstream.release()
            assert answer(after) == (200, b"/after")
    finally:
        upstream.close()
    assert upstream.arrived == ["/held", "/after"]
    assert upstream.most == 1


def _connections_to(port: int) -> set[tuple[str, ...]]:
    """The connections established to ``port`` (each as its two addresses), as ``ss`` sees."""
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {tuple(line.split()[-2:]) for line in out.splitlines() if line.strip()}


@needs("puma")
def test_a_ruby_applications_cap_is_twice_its_pumas_threads() -> None:
    """2 threads, 1 Puma: a worker has at most 4 connections to it under 20 requests at
    once (without the cap, it would open one per request waiting)."""
    app = {"type": "ruby", "script": str(LANGUAGES / "slow.ru"), "processes": 1, "threads": 2}
    with serving({"ruby": app}, listeners={WEB: {"pass": "applications/ruby"}}) as (
        server,
        control,
        _,
    ):
        ready(server, "ruby", timeout=30)
        rows = status_of(control, "ruby")["workers"]
        (address,) = {row["address"] for row in rows}  # one socket, whatever the processes
        puma_port = int(address.rpartition(":")[2])
        port = wait_for(lambda: listening_port(server, WEB))
        most = 0
        seen: set[tuple[str, ...]] = set()
        results: list[object] = []

        def one() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                conn.request("GET", "/")
                response = conn.getresponse()
                results.append(response.status if response.status == 200 else response.read())
            except OSError as exc:
                results.append(exc)
            finally:
                conn.close()

        threads = [threading.Thread(target=one) for _ in range(20)]
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads):
            # those in two dumps running: a dump is no snapshot, and one connection closed as
            # another opened during it could both be in it
            now = _connections_to(puma_port)
            most = max(most, len(now & seen))
            seen = now
            time.sleep(0.02)
        for thread in threads:
            thread.join()
    assert results == [200] * 20, results
    assert 1 <= most <= 4, most
