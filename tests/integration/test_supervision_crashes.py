"""Workers that die: a segfault in the application takes only its own worker, and workers
that keep dying young are respawned with a backoff that doubles up to its cap. A crash at
import (test_master.py) and a kill -9 under load (test_load.py) are tested beside them.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from tests.integration.load import Kill, Load, unexplained
from tests.integration.server import Server, read_all, wait_for
from tests.integration.supervision import (
    NO_BYTECODE,
    answering_pid,
    events,
    get,
    process_age,
    write_app,
)

# (slot, deaths in a row, delay)
RESPAWN = re.compile(
    r"worker (\d+) keeps dying young \((\d+) in a row\): respawning it in ([\d.]+)s"
)


@pytest.mark.parametrize("threads", [1, 4])
def test_segfault_takes_only_its_own_worker(threads):
    # a new connection per request: the kernel spreads them over both workers (six
    # keep-alive connections could all land on one, leaving the other nothing to show)
    with Server(
        "supervision_app", "--threads", str(threads), "--keep-alive", "0", workers=2
    ) as server:
        workers = set(server.worker_pids())
        with Load(server, 6, "/pid") as load:
            load.wait_requests(200)
            crashed = time.monotonic()
            with server.connect() as sock:
                sock.sendall(b"GET /segv HTTP/1.1\r\nHost: x\r\n\r\n")
                assert read_all(sock) == b""  # no answer: the worker is gone
            line = server.wait_log(r"worker \d \(pid \d+\) died: signal SIGSEGV.*")[0]
            victim = int(re.search(r"pid (\d+)", line).group(1))
            replacement = wait_for(
                lambda: (pid := answering_pid(server)) not in workers and pid, timeout=5
            )
            load.wait_requests(200)
        log = server.stderr
        assert server.stop() == 0
    assert victim in workers
    (survivor,) = workers - {victim}
    # the other worker served throughout; what failed was on the victim's connections
    assert any(r.pid == survivor and r.end < crashed for r in load.ok)
    assert any(r.pid == survivor and r.start > crashed for r in load.ok)
    assert not unexplained(load.failures, [Kill(victim, crashed)]), load.failures
    assert {r.pid for r in load.failures} <= {victim, None}, load.failures
    assert replacement in server_pids_after(log)
    # faulthandler's report, with the application's frame, before the master's line
    fatal = log.index("Fatal Python error: Segmentation fault")
    assert fatal < log.index(line)
    stacks = log[fatal : log.index(line)]
    assert re.search(r'File ".*supervision_app\.py", line \d+ in application', stacks), stacks


def server_pids_after(log: str) -> set[int]:
    return {e.pid for e in events(log) if e.kind == "ready"}


@pytest.mark.wallclock
def test_workers_dying_young_are_respawned_with_a_doubling_delay():
    with Server("proc_apps", "--min-worker-lifetime", "2") as server:
        for step in range(1, 5):
            server.wait_log(r"worker 0 ready", count=step)
            (pid,) = server.worker_pids()
            spawned = server.stderr.count("worker 0 spawned")
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            server.wait_log(RESPAWN.pattern, count=step)
            slot, in_a_row, delay = RESPAWN.findall(server.stderr)[-1]
            assert (int(in_a_row), slot, float(delay)) == (step, "0", 0.1 * 2 ** (step - 1))
            wait_for(lambda n=spawned: server.stderr.count("worker 0 spawned") > n, timeout=5)
            assert time.monotonic() - killed >= float(delay)  # the delay is kept
        # a worker that outlived --min-worker-lifetime is replaced at once, and the count of
        # deaths in a row starts again
        server.wait_log(r"worker 0 ready", count=5)
        (pid,) = server.worker_pids()
        wait_for(lambda: process_age(pid) > 2.2, timeout=5)
        os.kill(pid, signal.SIGKILL)
        server.wait_log(r"worker 0 ready", count=6)
        assert len(RESPAWN.findall(server.stderr)) == 4
        (pid,) = server.worker_pids()
        os.kill(pid, signal.SIGKILL)
        server.wait_log(RESPAWN.pattern, count=5)
        assert RESPAWN.findall(server.stderr)[-1] == ("0", "1", "0.1")
        server.wait_log(r"worker 0 ready", count=7)
        assert server.stop() == 0


@pytest.mark.wallclock
def test_the_backoff_is_kept_per_slot():
    """Eight young workers killed at once: each slot's first death in a row, each back after
    the first delay (one backoff for all slots made the eighth wait 10 s); the doubling and its
    cap are tests/unit/test_lifecycle.py's."""
    with Server("proc_apps", "--min-worker-lifetime", "60", workers=8) as server:
        pids = server.worker_pids()
        assert len(pids) == 8
        killed = time.monotonic()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        server.wait_log(RESPAWN.pattern, count=8)
        respawns = RESPAWN.findall(server.stderr)
        assert sorted(slot for slot, _, _ in respawns) == [str(n) for n in range(8)]
        assert {(n, delay) for _, n, delay in respawns} == {("1", "0.1")}
        server.wait_log(r"worker \d ready", count=8 + 8, timeout=20)
        assert time.monotonic() - killed < 8  # the 8th waited 10 s before
        assert len(server.worker_pids()) == 8 and not set(server.worker_pids()) & set(pids)
        assert get(server)[0] == 200
        assert server.stop() == 0


def test_a_respawned_worker_that_cannot_load_says_why_in_the_master_s_line(tmp_path):
    """The module went away after the start: the worker that replaces a killed one cannot
    import it, and only sent why (a worker logs no more than an application's frames); the
    master's line says it."""
    write_app(tmp_path, "v1")
    with Server("reload_app", cwd=str(tmp_path), env=NO_BYTECODE) as server:
        (pid,) = server.worker_pids()
        (tmp_path / "reload_app.py").unlink()
        os.kill(pid, signal.SIGKILL)
        missing = f"No module named 'reload_app' (not in the working directory {tmp_path} nor"
        line = server.wait_log(r"worker 0 \(pid \d+\) died: exit code 3 after .*")[0]
        assert line.endswith(f"s: {missing} on sys.path)"), line
        assert server.stderr.count(missing) == 1, server.stderr
        assert "Traceback" not in server.stderr
        write_app(tmp_path, "v2")  # back: the next try serves it
        server.wait_log(r"worker 0 ready", count=2, timeout=15)
        assert server.stop() == 0
