"""The master: graceful and immediate stops, respawns, crash-loop backoff, timeouts."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from tests.integration.server import Server, read_all, read_response, wait_for
from tests.integration.sockets import closed_by_server, server_side


def get(server: Server, path: str = "/", timeout: float = 10.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def start_request(server: Server, target: str) -> socket.socket:
    sock = server.connect(timeout=30)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def refused(server: Server) -> bool:
    try:
        with socket.create_connection((server.host, server.port), timeout=1):
            return False
    except ConnectionRefusedError:
        return True


def wait_exit(server: Server, timeout: float) -> int:
    """Wait for the master to exit; fail (and kill it) if it takes longer than ``timeout``."""
    try:
        return server.proc.wait(timeout)
    except Exception:
        server.kill()
        raise


@pytest.fixture
def flags(tmp_path):
    path = tmp_path / "flags"
    path.mkdir()
    return path


# -- graceful stop ------------------------------------------------------------------------


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", [1, 2])
def test_term_finishes_in_flight_request(flags, threads):
    with Server(
        "proc_apps",
        "--threads",
        str(threads),
        "--graceful-timeout",
        "10",
        env={"PROC_FLAGS": str(flags)},
    ) as server:
        with start_request(server, "/sleep?s=1.5&name=g") as sock:
            wait_for((flags / "g.started").exists)
            server.send(signal.SIGTERM)
            termed = time.monotonic()
            wait_for(lambda: refused(server), timeout=5)
            status, _, body = read_response(sock)
            assert (status, body) == (200, b"slept")
        assert wait_exit(server, 10) == 0
        assert time.monotonic() - termed < 10
        assert "graceful shutdown" in server.stderr


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", [1, 2])
def test_graceful_timeout_bounds_the_stop(flags, threads):
    with (
        Server(
            "proc_apps",
            "--threads",
            str(threads),
            "--graceful-timeout",
            "1",
            env={"PROC_FLAGS": str(flags)},
        ) as server,
        start_request(server, "/sleep?s=10&name=long") as sock,
    ):
        wait_for((flags / "long.started").exists)
        server.send(signal.SIGTERM)
        termed = time.monotonic()
        code = wait_exit(server, 10)
        elapsed = time.monotonic() - termed
        assert elapsed < 3.0, elapsed
        assert elapsed >= 0.9, elapsed  # the request was given its grace period
        assert code == 0
        assert b"slept" not in read_all(sock)


# A hooks file that holds a worker where uvloop starts to run its loop (the self-pipe it makes
# then, called from the worker's own frame: uvloop's code has none) and stops the master from
# there; it waits there for the master's TERM, which ends it when TERM is at its default.
TERM_AS_THE_LOOP_STARTS = """\
import os, signal, sys, time


def post_worker_init(worker):
    def probe(frame, event, arg):
        caller = frame.f_back
        if event != "call" or frame.f_code.co_name != "socketpair" or caller is None:
            return
        if not caller.f_code.co_filename.endswith("worker.py"):
            return
        sys.setprofile(None)
        open(os.environ["PROBED"], "w").close()
        arrived = []
        handler = signal.getsignal(signal.SIGTERM)
        if callable(handler):  # the loop's already: note the signal, then pass it on
            def noted(signum, stack):
                arrived.append(signum)
                handler(signum, stack)

            signal.signal(signal.SIGTERM, noted)
        os.kill(os.getppid(), signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not arrived and time.monotonic() < deadline:
            time.sleep(0.01)

    sys.setprofile(probe)
"""


@pytest.mark.wallclock
def test_term_as_a_worker_starts_its_loop_stops_it(tmp_path):
    """The master stops as a worker's loop starts to run: the TERM it sends must end that
    worker, not wait. uvloop hears a signal only while its loop runs: with the handler set
    before, this TERM waited for a next signal that never came, the worker served on, and the
    master stopped graceful_timeout + 1 s (31 s) later, killing it."""
    hooks, probed = tmp_path / "hooks.py", tmp_path / "probed"
    hooks.write_text(TERM_AS_THE_LOOP_STARTS)
    with Server(
        "proc_apps",
        "--hooks",
        str(hooks),
        "--loop",
        "uvloop",
        env={"PROBED": str(probed)},
        wait_ready=False,
    ) as server:
        try:
            code = wait_exit(server, 10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the stop did not end the starting worker:\n{server.stderr}")
        log = server.stderr
    assert probed.exists(), log  # the worker was held where its loop starts
    assert code == 0, log
    assert "SIGTERM: graceful shutdown" in log, log
    assert "did not stop in time" not in log, log


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", [1, 4])
def test_quit_exits_immediately_with_request_in_flight(flags, threads):
    with Server(
        "proc_apps",
        "--threads",
        str(threads),
        "--graceful-timeout",
        "30",
        env={"PROC_FLAGS": str(flags)},
    ) as server:
        with start_request(server, "/sleep?s=10&name=q") as sock:
            wait_for((flags / "q.started").exists)
            server.send(signal.SIGQUIT)
            quitted = time.monotonic()
            wait_exit(server, 10)
            elapsed = time.monotonic() - quitted
            assert elapsed < 1.0, elapsed
            assert b"slept" not in read_all(sock)
        assert "SIGQUIT" in server.stderr


# -- respawn --------------------------------------------------------------------------------


@pytest.mark.wallclock
def test_killed_worker_replaced_within_a_second():
    with Server("proc_apps") as server:
        old = json.loads(get(server, "/info")[1])["pid"]
        assert server.worker_pids() == [old]
        os.kill(old, signal.SIGKILL)
        killed = time.monotonic()
        status, body = get(server, "/info", timeout=5)
        elapsed = time.monotonic() - killed
        assert status == 200
        new = json.loads(body)["pid"]
        assert new != old
        assert elapsed < 1.0, elapsed
        assert server.worker_pids() == [new]
        server.wait_log(r"worker 0 ready", count=2)
        assert "signal SIGKILL" in server.stderr
        assert server.stop() == 0


def test_killed_workers_of_a_pool_are_all_replaced():
    with Server("proc_apps", workers=2) as server:
        old = server.worker_pids()
        assert len(old) == 2
        for pid in old:
            os.kill(pid, signal.SIGKILL)

        def replaced():
            now = server.worker_pids()
            return len(now) == 2 and not set(now) & set(old) and now

        wait_for(replaced, timeout=5)
        server.wait_log(r"worker \d ready", count=4)
        assert get(server, "/")[0] == 200
        assert server.stop() == 0


RESPAWN = re.compile(r"worker 0 keeps dying young \(\d+ in a row\): respawning it in ([\d.]+)s")
SPAWNED = re.compile(r"worker 0 spawned")


@pytest.mark.wallclock
def test_crash_at_start_backs_off():
    with Server("proc_crash_start", env={"PROC_CRASH": "1"}, wait_ready=False) as server:
        started = time.monotonic()
        server.wait_log(RESPAWN.pattern, timeout=15, count=5)
        elapsed = time.monotonic() - started
        text = server.stderr
        delays = [float(d) for d in RESPAWN.findall(text)]
        # doubling from 0.1 s (its cap is in test_supervision_crashes.py)
        assert delays[:5] == [0.1, 0.2, 0.4, 0.8, 1.6], delays
        spawned = len(SPAWNED.findall(text))
        # five failures need the first four delays to pass; a spinning master spawns far more
        assert elapsed >= sum(delays[:4]) - 0.05, (elapsed, delays)
        assert 5 <= spawned <= 6, spawned  # one respawn per line
        assert "ready" not in text
        assert server.proc.poll() is None  # a crash loop is retried, not fatal
        assert server.stop() == 0


# -- timeouts -------------------------------------------------------------------------------


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", [1, 4])
def test_timeout_kills_stuck_worker_naming_the_request(flags, threads):
    with Server(
        "proc_apps",
        "--timeout",
        "2",
        "--threads",
        str(threads),
        env={"PROC_FLAGS": str(flags)},
    ) as server:
        (old,) = server.worker_pids()
        with start_request(server, "/sleep?s=30&name=stuck") as sock:
            wait_for((flags / "stuck.started").exists)
            stuck_at = time.monotonic()
            line = server.wait_log(r".*timed out.*", timeout=10)[0]
            assert time.monotonic() - stuck_at >= 1.5
            assert f"pid {old}" in line
            assert "GET /sleep" in line, line
            assert "timeout 2s" in line or "(2s)" in line, line
            assert b"slept" not in read_all(sock)
        # before the kill, every thread's stack went to the error log, the stuck one too
        log = server.stderr
        assert log.index("its threads' stacks follow") < log.index(line)
        stacks = log[log.index("its threads' stacks follow") : log.index(line)]
        assert "most recent call first" in stacks, stacks
        assert re.search(r'File ".*proc_apps\.py", line \d+ in application', stacks), stacks
        server.wait_log(r"worker 0 ready", count=2, timeout=10)
        status, body = get(server, "/info")
        assert status == 200
        assert json.loads(body)["pid"] != old
        assert server.stop() == 0


@pytest.mark.parametrize("threads", [1, 4])
def test_slow_reader_is_not_a_stuck_worker(threads):
    """A client that does not read its response holds its connection, not the worker."""
    with Server("proc_apps", "--timeout", "1", "--threads", str(threads)) as server:
        (pid,) = server.worker_pids()
        with server.connect(timeout=30) as sock:
            sock.sendall(b"GET /big?mb=64 HTTP/1.1\r\nHost: t\r\n\r\n")
            # the answer backs up to the server's socket: the worker waits on the client
            wait_for(lambda: server_side(sock).send > 0)
            # Proving that nothing happens takes time: 3.5 s is three heartbeats
            # and more than three times --timeout, while the client reads nothing.
            time.sleep(3.5)
            assert "timed out" not in server.stderr
            received = 0
            while True:
                chunk = sock.recv(1 << 20)
                if not chunk or chunk.endswith(b"0\r\n\r\n"):
                    received += len(chunk)
                    break
                received += len(chunk)
            assert received > 64 * (1 << 20)
        assert server.worker_pids() == [pid]
        assert "timed out" not in server.stderr


def test_master_signals_sent_to_a_worker_do_not_kill_it():
    """The master acts on these (test_supervision_signals.py); a worker that gets one from a
    stray kill, or INT from a terminal, serves on."""
    master_signals = (signal.SIGHUP, signal.SIGUSR1, signal.SIGWINCH, signal.SIGTTIN)
    with Server("proc_apps", workers=1) as server:
        (pid,) = server.worker_pids()
        for sig in (*master_signals, signal.SIGUSR2, signal.SIGTTOU, signal.SIGINT):
            os.kill(pid, sig)
        assert get(server)[0] == 200
        assert server.worker_pids() == [pid]
        assert "died" not in server.stderr
        assert not any(sig.name in server.stderr for sig in master_signals)  # none reached it


@pytest.mark.parametrize("threads", [1, 4])
def test_send_timeout_drops_a_client_that_stopped_reading(threads):
    with Server("proc_apps", "--send-timeout", "1", "--threads", str(threads)) as server:
        (pid,) = server.worker_pids()
        with server.connect(timeout=30) as sock:
            sock.sendall(b"GET /big?mb=64 HTTP/1.1\r\nHost: t\r\n\r\n")
            # reading nothing: past the timeout (and its one-second sweep) the server drops
            # the connection (its kernel may go on offering what it had queued)
            client, server_end = sock.getsockname(), sock.getpeername()
            wait_for(lambda: closed_by_server(client, server_end), timeout=10)
            received = 0
            with contextlib.suppress(ConnectionResetError):
                while chunk := sock.recv(1 << 20):
                    received += len(chunk)
            assert 0 < received < 64 * (1 << 20)  # cut short, not served whole
        assert get(server)[0] == 200
        assert server.worker_pids() == [pid]
