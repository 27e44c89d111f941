"""Slow readers of a large answer hold no application thread (issue 34, point 3: nginx's
``proxy_buffering``): a threaded WSGI application hands a streamed answer over and goes on;
the worker holds up to ``response_buffer_size`` in memory, spools the rest
(``response_spool_size``) and sends it as the client reads. Real corral processes, real
loopback sockets, both cores.

The answers are larger than the kernel's largest send buffer (tcp_wmem's maximum, autotuned
up to it on loopback): a smaller one would all go into the kernel at once, and no thread
would wait for its reader with or without the buffering.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import time
from pathlib import Path

import pytest

from tests.integration.server import (
    APPS,
    Server,
    http_get,
    read_all,
    read_response,
    run_cli,
    wait_for,
)

sys.path.insert(0, str(APPS))
from slow_reader_apps import answer_bytes

pytestmark = pytest.mark.usefixtures("each_core")

APP = "slow_reader_apps:application"
CHUNK_KIB = 64
READERS = 40


def _answer_kib() -> int:
    """Two MiB more than the kernel's largest send buffer, in whole chunks."""
    most = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    return (most // 1024 + 2048) // CHUNK_KIB * CHUNK_KIB


ANSWER_KIB = _answer_kib()
EXPECTED = b"".join(answer_bytes(ANSWER_KIB, CHUNK_KIB))


def slow_reader(server: Server, query: str = "") -> socket.socket:
    """A client with a 4 KiB receive buffer that asks for the large answer and reads nothing
    (yet)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(60)
    sock.connect((server.host, server.port))
    target = f"/answer?kib={ANSWER_KIB}&chunk={CHUNK_KIB}{query}"
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    return sock


def answers_given(server: Server) -> int:
    """How many answers the application has given whole (its threads are done with them)."""
    return int(http_get(server, "/done")[1])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def spool_fds(pid: int) -> int:
    """The worker's open unlinked files: the spools (nothing else it holds is deleted but the
    shared memory of its counts, a memfd: `/memfd:NAME (deleted)`)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.endswith("(deleted)") and not target.startswith("/memfd:"):
                count += 1
        except FileNotFoundError:
            continue
    return count


def read_slowly_then_whole(readers: list[socket.socket]) -> None:
    """A few KiB a second from each for a second, then the rest: every answer byte-exact."""
    heads = [b""] * len(readers)
    for _ in range(10):
        for index, sock in enumerate(readers):
            heads[index] += sock.recv(512)
        time.sleep(0.1)
    for index, sock in enumerate(readers):
        status, _, body = read_response(_Replay(heads[index], sock))  # type: ignore[arg-type]
        assert status == 200
        assert body == EXPECTED, f"reader {index}: {len(body)} bytes, not the answer"


class _Replay:
    """A socket whose first reads return bytes already read from it."""

    def __init__(self, first: bytes, sock: socket.socket) -> None:
        self.first = first
        self.sock = sock

    def recv(self, size: int) -> bytes:
        if self.first:
            data, self.first = self.first, b""
            return data
        return self.sock.recv(size)


def _close_all(readers: list[socket.socket], reset: bool = False) -> None:
    for sock in readers:
        if reset:  # unread bytes and SO_LINGER 0: the client resets the connection
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


@pytest.mark.wallclock
def test_slow_readers_hold_no_thread_and_next_to_no_memory() -> None:
    with Server(APP, "--threads", "4", workers=1) as server:
        (pid,) = server.worker_pids()
        # a first wave read whole: the allocator's arenas reach what a burst of answers
        # made at once needs, so that the second wave's growth is what stalled readers hold
        first = [slow_reader(server) for _ in range(READERS)]
        wait_for(lambda: answers_given(server) == READERS, timeout=60)
        for sock in first:
            assert read_response(sock)[2] == EXPECTED
        _close_all(first)
        wait_for(lambda: spool_fds(pid) == 0)
        before = rss_kib(pid)

        readers = [slow_reader(server) for _ in range(READERS)]
        # four threads gave forty answers none of whose clients read: no thread waits for one
        wait_for(lambda: answers_given(server) == 2 * READERS, timeout=60)
        started = time.monotonic()
        assert http_get(server, "/hello", timeout=5) == (200, b"hello")
        took = time.monotonic() - started
        assert took < 1.0, f"a request took {took:.2f}s beside {READERS} slow readers"
        assert spool_fds(pid) == READERS  # each answer's rest waits in its spool
        time.sleep(0.5)  # past SPILL_AFTER (0.1 s): memory moved to the spools
        grown = rss_kib(pid) - before
        per_reader = grown / READERS
        assert per_reader <= 8, (
            f"the worker grew {grown} KiB for {READERS} stalled readers of "
            f"{ANSWER_KIB} KiB: {per_reader:.1f} KiB each"
        )
        print(f"{per_reader:.1f} KiB per stalled reader")

        read_slowly_then_whole(readers)
        _close_all(readers)
        wait_for(lambda: spool_fds(pid) == 0)
        assert server.worker_pids() == [pid]
    assert "Traceback" not in server.stderr


def test_a_length_framed_answer_and_its_head() -> None:
    """A Content-Length answer spooled comes whole; HEAD gets the head alone."""
    with Server(APP, "--threads", "4", workers=1) as server:
        (pid,) = server.worker_pids()
        readers = [slow_reader(server, "&length=1") for _ in range(2)]
        wait_for(lambda: spool_fds(pid) == 2)
        for sock in readers:
            _, fields, body = read_response(sock)
            assert int(fields["content-length"]) == len(EXPECTED)
            assert body == EXPECTED
        _close_all(readers)
        with server.connect() as sock:
            sock.sendall(
                f"HEAD /answer?kib={ANSWER_KIB}&length=1 HTTP/1.1\r\nHost: t\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            head, _, rest = read_all(sock).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and rest == b""
        assert f"Content-Length: {len(EXPECTED)}".encode() in head
        wait_for(lambda: spool_fds(pid) == 0)


@pytest.mark.wallclock
def test_without_a_spool_threads_wait_for_their_readers() -> None:
    """``--response-spool-size 0``: past ``response_buffer_size`` a thread waits for its
    client, as before; once they read, all is answered."""
    with Server(APP, "--threads", "4", "--response-spool-size", "0", workers=1) as server:
        (pid,) = server.worker_pids()
        readers = [slow_reader(server) for _ in range(4)]
        with pytest.raises(TimeoutError):  # every thread waits for a reader
            http_get(server, "/hello", timeout=2)
        assert spool_fds(pid) == 0
        read_slowly_then_whole(readers)
        _close_all(readers)
        assert http_get(server, "/hello") == (200, b"hello")
        assert answers_given(server) == 4


def test_a_reader_that_goes_away_leaves_no_spool_open() -> None:
    with Server(APP, "--threads", "4", workers=1) as server:
        (pid,) = server.worker_pids()
        baseline = len(os.listdir(f"/proc/{pid}/fd"))
        readers = [slow_reader(server) for _ in range(8)]
        wait_for(lambda: spool_fds(pid) == 8, timeout=30)
        for sock in readers[:4]:
            sock.recv(512)  # the head is out
        _close_all(readers, reset=True)
        wait_for(lambda: spool_fds(pid) == 0, timeout=10)
        wait_for(lambda: len(os.listdir(f"/proc/{pid}/fd")) == baseline, timeout=10)
        assert http_get(server, "/hello") == (200, b"hello")
        assert server.worker_pids() == [pid]
    assert "Traceback" not in server.stderr


def test_send_timeout_drops_a_reader_that_stopped_and_its_spool() -> None:
    with Server(APP, "--threads", "4", "--send-timeout", "1", workers=1) as server:
        (pid,) = server.worker_pids()
        readers = [slow_reader(server) for _ in range(2)]
        wait_for(lambda: spool_fds(pid) == 2, timeout=30)
        # reading nothing: past the timeout (and its one-second sweep) the worker drops both
        wait_for(lambda: spool_fds(pid) == 0, timeout=10)
        for sock in readers:
            received = len(read_all(sock))
            assert 0 < received < len(EXPECTED)  # cut short, not served whole
        _close_all(readers)
        assert http_get(server, "/hello") == (200, b"hello")


def test_request_timeout_does_not_count_the_readers_time() -> None:
    """With no spool the thread waits for its client; that wait is not the application's."""
    argv = ("--threads", "4", "--response-spool-size", "0", "--request-timeout", "1")
    with Server(APP, *argv, workers=1) as server:
        sock = slow_reader(server)
        time.sleep(2.5)  # the client's time: longer than the request timeout
        status, _, body = read_response(sock)
        assert status == 200 and body == EXPECTED
        sock.close()
    assert "request timeout" not in server.stderr


@pytest.mark.parametrize("flag", ["--response-buffer-size", "--response-spool-size"])
def test_a_bad_size_is_one_line(flag: str) -> None:
    result = run_cli(APP, flag, "-1")
    assert result.returncode == 2
    assert result.stderr.strip() == f'corral: error: {flag}: expected int >= 0, got "-1"'
