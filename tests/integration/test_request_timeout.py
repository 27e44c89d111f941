"""``--request-timeout``: 504, the stack in the log, the exception in the app's thread, recycling.

Real servers on loopback (apps in tests/integration/apps/deadline_apps.py), mostly in both
modes: ``--threads 1`` (the application runs inline on the event loop thread, which the
watchdog also wakes with SIGALRM) and ``--threads 4`` (a thread pool).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.server import APPS, Server, read_all, read_response, wait_for
from tests.integration.sockets import server_side

MODES = [1, 4]
SRC = Path(__file__).resolve().parents[2] / "src"
ACCESS_504 = re.compile(r'"GET /busy HTTP/1\.1" 504 ')


def serve(flags: Path, threads: int, *args: str, timeout: str = "1") -> Server:
    if timeout != "0":
        args = ("--request-timeout", timeout, *args)
    return Server(
        "deadline_apps",
        "--threads",
        str(threads),
        *args,
        workers=1,
        env={"DEADLINE_DIR": str(flags)},
    )


def send(server: Server, path: str, timeout: float = 15.0) -> socket.socket:
    sock = server.connect(timeout=timeout)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    return sock


def get(server: Server, path: str) -> tuple[int, dict[str, str], bytes]:
    with send(server, path) as sock:
        return read_response(sock)


def pid_of(server: Server) -> int:
    status, _, body = get(server, "/pid")
    assert status == 200
    return int(body)


def timed_get(server: Server, path: str) -> tuple[int, dict[str, str], float]:
    start = time.monotonic()
    status, headers, _ = get(server, path)
    return status, headers, time.monotonic() - start


def timeout_record(function: str, target: str) -> str:
    """The watchdog's line for ``target`` and a stack ending in ``function``."""
    return (
        rf"\[ERROR\] request timeout: GET {re.escape(target)} has run [\d.]+s in the "
        r"application \(request_timeout 1s\); raising RequestTimeoutExceeded in thread \S+, at:"
        rf"\n(?:  .*\n)*?  File \"[^\"]*deadline_apps\.py\", line \d+, in {function}\n"
    )


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", MODES)
def test_busy_loop_gets_504_the_stack_is_logged_and_the_worker_goes_on(tmp_path, threads):
    with serve(tmp_path, threads, "--access-logfile", "-") as server:
        pid = pid_of(server)
        status, headers, elapsed = timed_get(server, "/busy")
        assert status == 504
        assert headers["connection"] == "close"
        assert 1.0 <= elapsed < 1.5, elapsed
        server.wait_log(timeout_record("busy_loop", "/busy"))
        assert pid_of(server) == pid  # the same worker serves the next request
        wait_for(lambda: ACCESS_504.search(server.stdout), timeout=5)
        assert "Traceback" not in server.stderr  # 504 is the answer; the stack was logged once
        assert server.stop() == 0


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", MODES)
def test_an_app_catching_exception_still_unwinds(tmp_path, threads):
    with serve(tmp_path, threads) as server:
        status, _, elapsed = timed_get(server, "/swallow?name=swallow")
        assert status == 504
        assert elapsed < 1.5, elapsed
        assert (tmp_path / "swallow.started").exists()
        # RequestTimeoutExceeded is no Exception: the app's handler never saw it
        assert not (tmp_path / "swallow.caught").exists()
        server.wait_log(timeout_record("swallowing_loop", "/swallow?name=swallow"))
        assert get(server, "/")[2] == b"fast"


@pytest.mark.parametrize("threads", MODES)
def test_a_response_under_way_is_cut_not_followed_by_a_504(tmp_path, threads):
    with serve(tmp_path, threads) as server:
        pid = pid_of(server)
        with send(server, "/stream?name=stream") as sock:
            data = read_all(sock)  # until the server closes the connection
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"transfer-encoding: chunked" in head.lower()
        assert body == b"c\r\nfirst chunk\n\r\n"  # the partial body, no last chunk
        assert data.count(b"HTTP/1.1") == 1
        server.wait_log(timeout_record("stream_then_loop", "/stream?name=stream"))
        assert pid_of(server) == pid


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", MODES)
def test_the_iterables_close_is_called(tmp_path, threads):
    with serve(tmp_path, threads) as server:
        status, _, elapsed = timed_get(server, "/closing?name=closing")
        assert status == 504  # the first __next__ never returned: no head was sent
        assert elapsed < 1.5, elapsed
        wait_for((tmp_path / "closing.closed").exists, timeout=5)
        server.wait_log(timeout_record("__next__", "/closing?name=closing"))


@pytest.mark.wallclock
def test_threads_1_a_sleeping_app_is_woken_by_the_signal(tmp_path):
    with serve(tmp_path, 1) as server:
        pid = pid_of(server)
        status, _, elapsed = timed_get(server, "/sleep?s=1000")
        assert status == 504
        assert elapsed < 1.5, elapsed
        server.wait_log(timeout_record("application", "/sleep?s=1000"))
        assert pid_of(server) == pid
        assert "recycling" not in server.stderr


def test_threads_4_a_thread_blocked_in_c_gets_its_worker_recycled(tmp_path):
    with serve(tmp_path, 4, "--request-timeout-grace", "2") as server:
        old = pid_of(server)
        with send(server, "/sleep?s=1000&name=stuck", timeout=20) as stuck:
            wait_for((tmp_path / "stuck.started").exists)
            server.wait_log(r"request timeout: GET /sleep\?s=1000&name=stuck has run")
            # the grace runs: other requests are served meanwhile, by the same worker
            status, _, body = get(server, "/")
            assert (status, body) == (200, b"fast")
            assert pid_of(server) == old
            assert "timed out" not in server.stderr
            line = server.wait_log(r".*timed out: .*", timeout=10)[0]
            assert f"worker 0 (pid {old}) timed out: a request did not unwind within " in line
            assert "request_timeout_grace (2s) after its request_timeout (1s)" in line
            assert "serving GET /sleep?s=1000&name=stuck for " in line
            assert read_all(stuck) == b""  # the worker died with the request
        server.wait_log(
            r"\[CRITICAL\] request timeout: GET /sleep\?s=1000&name=stuck did not unwind within "
            r"request_timeout_grace \(2s\).*\n(?:  .*\n)*?  File .*, in application\n"
        )
        server.wait_log(r"worker 0 ready", count=2)
        assert pid_of(server) != old


@pytest.mark.parametrize("threads", MODES)
def test_without_request_timeout_a_slow_request_is_untouched(tmp_path, threads):
    with serve(tmp_path, threads, timeout="0") as server:
        status, _, body = get(server, "/sleep?s=1.5")  # past a 1 s deadline, had there been one
        assert (status, body) == (200, b"slept")
        assert "request timeout" not in server.stderr


@pytest.mark.parametrize(("threads", "path"), [(1, "/big?mb=32"), (4, "/bigwrite?mb=32")])
def test_time_waiting_for_a_slow_reader_is_not_the_applications(tmp_path, threads, path):
    """Inline the pump parks between chunks; on a thread write() blocks: neither is app time."""
    with serve(tmp_path, threads) as server:
        with send(server, path, timeout=30) as sock:
            # the answer backs up to the server's socket: from here the wait is the client's
            wait_for(lambda: server_side(sock).send > 0)
            time.sleep(2.5)  # not reading, for longer than the timeout: nothing may happen
            status, _, body = read_response(sock)
        assert status == 200
        assert len(body) == 32 << 20
        assert "request timeout" not in server.stderr


def test_time_waiting_for_the_request_body_is_not_the_applications(tmp_path):
    with serve(tmp_path, 4) as server, server.connect(timeout=15) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n")
        time.sleep(1.5)  # the application waits in wsgi.input.read() past the timeout
        sock.sendall(b"hello")
        assert read_response(sock)[::2] == (200, b"hello")
        assert "request timeout" not in server.stderr


@pytest.mark.parametrize("flag", ["--request-timeout", "--request-timeout-grace"])
def test_negative_values_are_one_line_exit_2(flag):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(APPS), str(SRC)]))
    result = subprocess.run(
        [sys.executable, "-m", "corral", "deadline_apps", flag, "-1"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f'corral: error: {flag}: expected number from 0 to 86400, got "-1"\n'
