"""Recycling (max requests, lifetime and memory, their jitter, the minimum lifetime) on real
processes: the log line names the reason, and the successor is ready before the old worker
exits (supervision.assert_successor_ready_first), so no request fails under load.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.integration.load import Load
from tests.integration.server import Server, read_response, wait_for
from tests.integration.supervision import (
    NO_BYTECODE,
    RECYCLED,
    answering_pid,
    assert_successor_ready_first,
    events,
    process_age,
    write_app,
)


def recycled(server: Server) -> list[tuple[int, str]]:
    """``(pid, reason)`` of every recycle the master logged, in order."""
    return [(int(pid), reason) for pid, reason in RECYCLED.findall(server.stderr)]


def wait_recycled(server: Server, count: int, timeout: float = 10.0) -> list[tuple[int, str]]:
    return wait_for(lambda: len(found := recycled(server)) >= count and found, timeout)


def wait_exited(server: Server, pids: list[int], timeout: float = 10.0) -> str:
    """The log, once it has the exit line of every one of ``pids``."""
    lines = [re.compile(rf"\(pid {pid}\) exited: ") for pid in pids]

    def logged() -> str | None:
        log = server.stderr
        return log if all(line.search(log) for line in lines) else None

    return wait_for(logged, timeout)


@pytest.mark.parametrize("threads", [1, 4])
def test_max_requests_recycles_with_overlap_under_load(threads):
    with Server(
        "chaos_app",
        "--max-requests",
        "20",
        "--min-worker-lifetime",
        "0",
        "--threads",
        str(threads),
        "--graceful-timeout",
        "5",
        workers=2,
    ) as server:
        first = set(server.worker_pids())
        with Load(server, 4, "/sleep?s=0.005") as load:
            found = wait_recycled(server, 6)
            load.wait_requests(50)
        old = [pid for pid, _ in found]
        log = wait_exited(server, old)
        assert server.stop() == 0
    assert not load.failures, (load.summary(), load.failures[:5])
    assert {reason for _, reason in found} == {"served 20 requests (max_requests 20)"}
    assert first <= set(old)
    assert len(load.pids) >= 6
    for pid in old:
        assert_successor_ready_first(log, pid)


def test_max_requests_jitter_gives_each_worker_its_own_limit():
    with Server(
        "chaos_app",
        "--max-requests",
        "10",
        "--max-requests-jitter",
        "10",
        "--min-worker-lifetime",
        "0",
        workers=2,
    ) as server:
        with Load(server, 4, "/pid") as load:
            found = wait_recycled(server, 8)
        log = wait_exited(server, [pid for pid, _ in found])
    assert not load.failures, load.summary()
    served = []
    for _, reason in found:
        match = re.fullmatch(r"served (\d+) requests \(max_requests 10\)", reason)
        assert match, reason
        served.append(int(match.group(1)))
    assert all(10 <= count <= 20 for count in served), served
    # eight draws of 10..20 that all agree: about one chance in 2 x 10^8
    assert len(set(served)) > 1, served
    # each worker answered at least its limit (it serves on until its successor is ready)
    most: dict[int, int] = {}
    for request in load.ok:
        pid, number = (int(field) for field in request.body.split())
        most[pid] = max(most.get(pid, 0), number)
    for (pid, _), limit in zip(found, served, strict=True):
        assert most[pid] >= limit, (pid, most[pid], limit)
    # and its exit line counts them all: the clients saw every answer (no failure)
    exits = {event.pid: event.served for event in events(log) if event.kind == "exited"}
    assert {pid: exits[pid] for pid, _ in found} == {pid: most[pid] for pid, _ in found}


def test_max_worker_lifetime_recycles_after_that_long():
    with Server(
        "chaos_app",
        "--max-worker-lifetime",
        "2",
        "--min-worker-lifetime",
        "0",
        "--graceful-timeout",
        "5",
    ) as server:
        (pid,) = server.worker_pids()
        with Load(server, 4, "/pid") as load:
            wait_recycled(server, 1, timeout=10)
            age = process_age(pid)  # the old worker serves on until its successor is ready
            (found,) = recycled(server)
            load.wait_requests(50)
            log = wait_exited(server, [pid])
            load.wait_requests(50)
        assert server.stop() == 0
    assert found[0] == pid
    assert re.fullmatch(r"ran [23]s \(max_worker_lifetime 2s\)", found[1]), found
    # checked on the master's one-second tick
    assert 2.0 <= age <= 3.5, age
    assert not load.failures, load.summary()
    successor = assert_successor_ready_first(log, pid)
    assert load.ok[-1].pid == successor


def test_max_worker_lifetime_jitter_lengthens_some_lifetimes():
    """Without jitter, a worker with a 1 s lifetime is recycled on the first tick past 1 s:
    "ran 1s" or "ran 2s". With 2 s of jitter half the recycles come at 2.5 s or later."""
    with Server(
        "chaos_app",
        "--max-worker-lifetime",
        "1",
        "--max-worker-lifetime-jitter",
        "2",
        "--min-worker-lifetime",
        "0",
        workers=2,
    ) as server:

        def lifetimes() -> list[int]:
            return [
                int(n) for n in re.findall(r"ran (\d+)s \(max_worker_lifetime 1s\)", server.stderr)
            ]

        wait_for(lambda: any(n >= 3 for n in lifetimes()), timeout=15)
        assert all(1 <= n <= 4 for n in lifetimes()), lifetimes()
        assert answering_pid(server)
        # once (of ~40 runs) the master did not stop within 30 s: the log says who held it
        assert server.stop() == 0, server.stderr[-4000:]


@pytest.mark.wallclock
def test_max_worker_memory_recycles_a_worker_that_grew():
    with Server(
        "supervision_app",
        "--max-worker-memory",
        "60",
        "--min-worker-lifetime",
        "0",
        "--graceful-timeout",
        "5",
    ) as server:
        (pid,) = server.worker_pids()
        time.sleep(1.5)  # a worker under the limit is left alone: one tick and more
        assert not recycled(server)
        with server.connect() as sock:
            sock.sendall(b"GET /alloc?mb=80 HTTP/1.1\r\nHost: t\r\n\r\n")
            status, headers, _ = read_response(sock)
            grown = time.monotonic()
        assert (status, int(headers["x-worker-pid"])) == (200, pid)
        (found,) = wait_recycled(server, 1, timeout=5)
        assert time.monotonic() - grown < 2.5  # the next tick, or the one after
        assert found[0] == pid
        match = re.fullmatch(r"uses (\d+) MiB \(max_worker_memory 60 MiB\)", found[1])
        assert match and int(match.group(1)) >= 80, found
        successor = assert_successor_ready_first(wait_exited(server, [pid]), pid)
        assert answering_pid(server) == successor
        assert server.stop() == 0


@pytest.mark.wallclock
def test_min_worker_lifetime_holds_back_a_recycle_that_is_due():
    """The worker reaches its max_requests at once and serves on until it is old enough:
    the log counts every request it served, not the limit."""
    with Server(
        "chaos_app",
        "--max-requests",
        "5",
        "--min-worker-lifetime",
        "3",
        "--graceful-timeout",
        "5",
    ) as server:
        (pid,) = server.worker_pids()
        with server.connect() as sock:
            for _ in range(10):
                sock.sendall(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
                body = read_response(sock)[2]
        assert body == f"{pid} 10\n".encode()  # twice its max_requests, from the same worker
        # poll until the recycle shows, keeping the worker's age at the last look without it
        last_without = 0.0
        deadline = time.monotonic() + 10
        while not recycled(server):
            assert time.monotonic() < deadline, server.stderr
            last_without = process_age(pid)
            time.sleep(0.01)
        assert last_without >= 2.95, last_without  # not before 3 s (ages are to 10 ms)
        assert last_without <= 5.0, last_without  # and on one of the next ticks
        ((_, reason),) = recycled(server)
        match = re.fullmatch(
            r"served 10 requests \(max_requests 5\); it reached 5 at ([\d.]+)s, held back by "
            r"min_worker_lifetime \(3s\)",
            reason,
        )
        assert match, reason
        assert float(match[1]) < 3.0
        log = wait_exited(server, [pid])
        assert re.search(rf"\(pid {pid}\) exited: exit code 0, having served 10 requests\n", log)
        successor = assert_successor_ready_first(log, pid)
        assert answering_pid(server) == successor
        assert server.stop() == 0


def test_a_successor_that_cannot_start_is_tried_again(tmp_path):
    write_app(tmp_path, "v1")
    with Server(
        "reload_app",
        "--max-requests",
        "5",
        "--min-worker-lifetime",
        "0",
        "--graceful-timeout",
        "5",
        cwd=str(tmp_path),
        env=NO_BYTECODE,
    ) as server:
        (pid,) = server.worker_pids()
        (tmp_path / "crash.flag").touch()  # from now on the module dies at import
        with server.connect() as sock:
            for _ in range(5):
                sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                assert read_response(sock)[0] == 200
        # while the module cannot be imported, the old worker serves and the tries back off
        failed = server.wait_log(
            rf"replacement for worker 0 \(pid {pid}\) exited \(exit code 1\) before it was "
            r"ready; worker 0 keeps serving, next try in ([\d.]+)s",
            count=3,
        )
        assert [float(delay) for delay in failed] == [0.1, 0.2, 0.4]
        assert answering_pid(server, "/") == pid
        (tmp_path / "crash.flag").unlink()
        # the next try, as the line says: recycled again, and this successor serves
        successor = assert_successor_ready_first(wait_exited(server, [pid]), pid)
        assert answering_pid(server, "/") == successor
        assert server.stop() == 0
