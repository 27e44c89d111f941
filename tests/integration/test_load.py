"""The load generator (load.py): exact counts against a real server, its reading of every
kind of response and failure against a scripted peer, and what a kill -9 and a TERM under
load look like through it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import threading
import time
from collections import defaultdict

import pytest

from tests.integration.load import BAD, EOF, RESET, TIMEOUT, Kill, Load, Request, unexplained
from tests.integration.server import Server, read_response, wait_for


def answered_numbers(requests: list[Request]) -> dict[int, list[int]]:
    """Worker pid → the counters (``PID N`` bodies) of the responses it gave, sorted."""
    numbers: dict[int, list[int]] = defaultdict(list)
    for request in requests:
        pid, number = request.body.split()
        assert int(pid) == request.pid
        numbers[request.pid].append(int(number))
    return {pid: sorted(found) for pid, found in numbers.items()}


def pid_by_connection(requests: list[Request]) -> dict[int, int | None]:
    """Connection → the one pid that answered on it; fails if a connection saw two."""
    seen: dict[int, set[int | None]] = defaultdict(set)
    for request in requests:
        seen[request.connection].add(request.pid)
    assert all(len(pids) == 1 for pids in seen.values()), seen
    return {connection: next(iter(pids)) for connection, pids in seen.items()}


def wait_every_connection_answered(load: Load) -> None:
    wait_for(lambda: len({r.connection for r in load.ok}) >= load.connections, timeout=10)


# -- counting -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ((), "/pid"),  # Content-Length
        ((), "/chunked"),
        (("--threads", "4"), "/sleep?s=0.005"),
        (("--keep-alive", "0"), "/pid"),  # Connection: close after every response
    ],
)
def test_counts_exactly_the_responses_the_workers_gave(args, path):
    with Server("chaos_app", *args, workers=2) as server, Load(server, 8, path) as load:
        load.wait_requests(600)
    requests = load.requests
    assert not load.failures, load.summary()
    assert load.statuses == {200: len(requests)}
    # each worker numbers its answers 1, 2, ...: the client saw every one, once, and no other
    for pid, numbers in answered_numbers(requests).items():
        assert numbers == list(range(1, len(numbers) + 1)), pid
    assert load.pids <= set(answered_numbers(requests))
    if "--keep-alive" in args:
        assert all(request.closed for request in requests)
        assert len({request.connection for request in requests}) == len(requests)
    else:
        assert not any(request.closed for request in requests)
        assert len({request.connection for request in requests}) == 8
        pid_by_connection(requests)
    for request in requests:
        assert request.start <= request.end


# -- reading responses and failures ---------------------------------------------------------


class ScriptedPeer:
    """A one-thread TCP server that answers each request it reads with the next scripted
    bytes, then keeps the connection, closes it, resets it, or leaves the request unanswered
    until the client gives up. When the script runs out it closes its listening socket."""

    def __init__(self, script: list[tuple[bytes, str]]) -> None:
        self.script = list(script)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self.listener.getsockname()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with self.listener:
            while self.script:
                sock, _ = self.listener.accept()
                with sock:
                    self._answer(sock)

    def _answer(self, sock: socket.socket) -> None:
        buffer = b""
        while self.script:
            while b"\r\n\r\n" not in buffer:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                buffer += chunk
            buffer = buffer.split(b"\r\n\r\n", 1)[1]
            data, then = self.script.pop(0)
            sock.sendall(data)
            if then == "close":
                return
            if then == "reset":  # SO_LINGER 0: close sends RST
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if then == "hang":
                with contextlib.suppress(OSError):
                    while sock.recv(65536):  # until the client gives up and closes
                        pass
                return


def test_reads_every_framing_and_names_every_failure():
    script = [
        (b"HTTP/1.1 200 OK\r\nX-Worker-Pid: 7\r\nContent-Length: 2\r\n\r\nok", "keep"),
        (
            b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            b"HTTP/1.1 201 Created\r\nx-worker-pid: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2;ext=1\r\nab\r\n1\r\nc\r\n0\r\nTrailer: x\r\n\r\n",
            "keep",
        ),
        (b"HTTP/1.1 204 No Content\r\nX-Worker-Pid: 7\r\nConnection: close\r\n\r\n", "close"),
        (b"HTTP/1.0 200 OK\r\nX-Worker-Pid: 8\r\n\r\nuntil the close", "close"),
        (b"HTTP/1.1 200 OK\r\nX-Worker-Pid: 9\r\nContent-Length: 10\r\n\r\nshort", "close"),
        (b"HTTP/1.1 200 OK\r\nX-Worker-Pid: 10\r\nContent-Length: 1\r\n\r\nx", "keep"),
        (b"", "reset"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "keep"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxy", "keep"),
        (b"", "hang"),
    ]
    peer = ScriptedPeer(script)
    with Load(peer, 1, "/", timeout=0.5) as load:
        wait_for(lambda: len(load.requests) >= len(script))
    got = [(r.connection, r.status, r.error, r.pid, r.closed, r.body) for r in load.requests]
    assert got[: len(script)] == [
        (1, 200, None, 7, False, b"ok"),
        (1, 201, None, 7, False, b"abc"),
        (1, 204, None, 7, True, b""),
        (2, 200, None, 8, True, b"until the close"),  # HTTP/1.0: not kept alive
        (3, None, EOF, None, True, b""),  # the connection had not answered yet
        (4, 200, None, 10, False, b"x"),
        (4, None, RESET, 10, True, b""),  # the pid that held the connection
        (5, None, BAD, None, True, b""),
        (6, None, BAD, None, True, b""),  # a byte after the Content-Length
        (7, None, TIMEOUT, None, True, b""),
    ]
    failed = load.requests[len(script) :]  # the peer is gone: refused (or reset in a race)
    assert all(not request.ok for request in failed)


def test_unexplained_needs_a_kill_of_the_connections_worker_during_the_request():
    kill = Kill(pid=10, time=100.0)

    def failed(start: float, end: float, pid: int | None) -> Request:
        return Request(1, start, end, None, EOF, pid, True)

    explained = [
        failed(99.0, 101.0, 10),
        failed(100.4, 100.5, 10),  # sent on the dead connection, within the slack
        failed(99.0, 100.0, None),  # a new connection: any kill in its window
    ]
    not_explained = [
        failed(99.0, 101.0, 11),  # another worker's connection
        failed(100.6, 101.0, 10),  # started past the slack
        failed(98.0, 99.9, 10),  # ended before the kill
        failed(101.0, 102.0, None),
    ]
    assert unexplained(explained + not_explained, [kill], slack=0.5) == not_explained
    assert unexplained(not_explained, [], slack=0.5) == not_explained


# -- kill -9 and TERM under load ------------------------------------------------------------


def new_worker_answers(server: Server, old: set[int]) -> int | None:
    """One GET /pid on a new connection: the pid that answered, if it is not one of ``old``."""
    try:
        with server.connect(timeout=1) as sock:
            sock.sendall(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
            _, headers, _ = read_response(sock)
    except (OSError, AssertionError):
        return None
    pid = int(headers["x-worker-pid"])
    return pid if pid not in old else None


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", [1, 4])
def test_kill_9_fails_only_the_killed_workers_connections(threads):
    with Server("chaos_app", "--threads", str(threads), workers=2) as server:
        workers = set(server.worker_pids())
        with Load(server, 8, "/pid") as load:
            wait_every_connection_answered(load)
            load.wait_requests(300)
            holders = load.last_pids()
            victim = max(workers, key=lambda pid: list(holders.values()).count(pid))
            killed = Kill(victim, time.monotonic())
            os.kill(victim, signal.SIGKILL)
            # the replacement: new connections until one is answered by a new worker
            replacement = wait_for(lambda: new_worker_answers(server, workers), timeout=5)
            replaced_after = time.monotonic() - killed.time
            load.wait_requests(300)
        summary = load.summary()
        assert server.stop() == 0
    assert replacement not in workers
    assert replaced_after < 1.0, replaced_after
    failures = load.failures
    # every connection the victim held fails once, with the request in progress; no other
    victim_connections = sorted(c for c, pid in pid_by_connection(load.ok).items() if pid == victim)
    assert victim_connections, holders
    assert sorted(r.connection for r in failures) == victim_connections, summary
    assert all(r.pid == victim for r in failures), failures
    assert not unexplained(failures, [killed]), failures
    assert all(r.error in (EOF, RESET) for r in failures), failures
    assert all(r.start - 0.5 <= killed.time <= r.end for r in failures), (killed, failures)
    assert load.ok[-1].end > killed.time  # the load went on after the kill


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", [1, 4])
def test_term_under_load_answers_every_request_sent_before_it(threads):
    with (
        Server(
            "chaos_app", "--threads", str(threads), "--graceful-timeout", "10", workers=2
        ) as server,
        Load(server, 8, "/sleep?s=0.2") as load,
    ):
        wait_every_connection_answered(load)
        load.wait_requests(16)
        termed = time.monotonic()
        server.send(signal.SIGTERM)
        code = server.proc.wait(15)
        stopped = time.monotonic()
    assert code == 0
    before = [r for r in load.requests if r.start < termed]
    assert all(r.ok for r in before), (load.summary(), [r for r in before if not r.ok])
    in_flight = [r for r in before if r.end > termed]
    assert in_flight  # and answered: the workers drained them
    if threads > 1:
        # the loop is free while the application runs, so it sees TERM at once and answers
        # what is in progress with Connection: close. Inline, the application holds the loop
        # and the worker sees TERM only after the requests it had already read.
        assert any(r.closed for r in in_flight), in_flight
    assert stopped - termed < 5
