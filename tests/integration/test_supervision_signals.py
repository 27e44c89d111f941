"""The master's signals on real processes: TTIN and TTOU (one worker more, one less, drained),
USR1 (logs reopened after a logrotate-style rename), WINCH (no workers, listeners kept) and
USR2 (a new master on the same sockets, the old one stepping down). TERM, QUIT and the pid
file's refusal of a second master are in test_master.py and test_logs.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.load import Load
from tests.integration.server import (
    Server,
    children,
    leftover_processes,
    read_response,
    wait_for,
)
from tests.integration.supervision import alive, answering_pid, get, wait_ready_in


@pytest.fixture
def flags(tmp_path):
    path = tmp_path / "flags"
    path.mkdir()
    return path


def start_request(server: Server, target: str) -> socket.socket:
    sock = server.connect(timeout=30)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


# -- TTIN / TTOU ----------------------------------------------------------------------------


def test_ttin_adds_a_worker_and_ttou_removes_one():
    with Server("proc_apps", workers=2) as server:
        before = server.worker_pids()
        server.send(signal.SIGTTIN)
        server.wait_log(r"SIGTTIN: 3 worker\(s\)")
        server.wait_log(r"worker 2 ready")
        added = wait_for(lambda: len(pids := server.worker_pids()) == 3 and pids, timeout=5)
        (new,) = set(added) - set(before)
        server.send(signal.SIGTTOU)
        server.wait_log(r"SIGTTOU: 2 worker\(s\)")
        server.wait_log(rf"worker 2 \(pid {new}\) exited: exit code 0")
        assert server.worker_pids() == before  # the highest slot goes, the others stay
        assert get(server)[0] == 200
        assert server.stop() == 0


def test_ttou_drains_the_worker_it_removes(flags):
    with Server(
        "proc_apps", "--graceful-timeout", "5", workers=2, env={"PROC_FLAGS": str(flags)}
    ) as server:
        # one request blocked on each worker: the first holds its (single-threaded) worker's
        # loop, so the second can only be accepted by the other worker
        first = start_request(server, "/block?name=a")
        wait_for((flags / "a.started").exists)
        second = start_request(server, "/block?name=b")
        wait_for((flags / "b.started").exists)
        workers = server.worker_pids()
        assert len(workers) == 2
        server.send(signal.SIGTTOU)
        server.wait_log(r"SIGTTOU: 1 worker\(s\)")
        time.sleep(0.5)  # showing the retired worker waits for its request takes a moment
        assert server.worker_pids() == workers
        assert "exited" not in server.stderr
        (flags / "a.release").touch()
        (flags / "b.release").touch()
        with first, second:
            assert read_response(first)[2] == b"released a"
            assert read_response(second)[2] == b"released b"
        server.wait_log(r"worker 1 \(pid \d+\) exited: exit code 0")
        assert len(server.worker_pids()) == 1
        assert get(server)[0] == 200
        assert server.stop() == 0


def test_ttou_at_one_worker_is_ignored():
    with Server("proc_apps") as server:
        pids = server.worker_pids()
        server.send(signal.SIGTTOU)
        server.wait_log(r"SIGTTOU: already at 1 worker\(s\); ignored")
        assert get(server)[0] == 200
        assert server.worker_pids() == pids
        assert "exited" not in server.stderr
        assert server.stop() == 0


def test_a_signal_to_a_starting_worker_is_not_the_masters(tmp_path):
    """Between the fork and its own handlers, a worker must not run the master's: they would
    pass the signal on to the master's loop (the wakeup descriptor is shared). The worker is
    held there by its access log, a FIFO that no one reads yet."""
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)
    with Server("proc_apps", "--access-logfile", str(fifo), wait_ready=False) as server:
        (starting,) = wait_for(server.worker_pids, timeout=10)
        wait_for(lambda: "worker 0 spawned" in server.stderr, timeout=5)
        os.kill(starting, signal.SIGHUP)
        os.kill(starting, signal.SIGTTIN)
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the worker go on
        try:
            server.wait_ready()
            assert get(server)[0] == 200
            assert server.worker_pids() == [starting]
            log = server.stderr
            assert "SIGHUP" not in log and "reloading" not in log, log
            assert "SIGTTIN" not in log, log
            assert server.stop() == 0
        finally:
            os.close(reader)


# -- USR1 -----------------------------------------------------------------------------------


def test_usr1_reopens_the_logs_after_a_rename(tmp_path):
    access, errors = tmp_path / "access.log", tmp_path / "error.log"
    rotated_access, rotated_errors = tmp_path / "access.log.1", tmp_path / "error.log.1"
    with Server(
        "supervision_app",
        "--access-logfile",
        str(access),
        "--access-logformat",
        "%(p)s %(r)s %(s)s",
        "--error-logfile",
        str(errors),
        workers=2,
        wait_ready=False,
    ) as server:
        wait_ready_in(server, errors, workers=2)
        workers = set(server.worker_pids())

        def pids_in(path: Path, pattern: str) -> set[int]:
            text = path.read_text() if path.exists() else ""
            return {int(pid) for pid in re.findall(pattern, text)}

        def served_by_every_worker(pattern: str, path: Path, target: str) -> None:
            """Requests on new connections until each worker wrote a line to ``path``."""

            def done():
                get(server, target)
                return pids_in(path, pattern) >= workers

            wait_for(done, timeout=10)

        access_line = r"(?m)^<(\d+)> GET /pid HTTP/1.1 200$"  # %(p)s is <PID>
        raise_line = r"\[(\d+)\] \[ERROR\] error handling .*\n(?:.*\n)*?RuntimeError: supervision"
        served_by_every_worker(access_line, access, "/pid")
        access.rename(rotated_access)
        errors.rename(rotated_errors)
        server.send(signal.SIGUSR1)
        # each worker reopens when the master passes USR1 on: its next lines are in new files
        served_by_every_worker(access_line, access, "/pid")
        served_by_every_worker(raise_line, errors, "/raise")
        sizes = rotated_access.stat().st_size, rotated_errors.stat().st_size
        for _ in range(10):
            assert get(server, "/pid")[0] == 200
        server.send(signal.SIGTTIN)  # the master writes to the new file too
        wait_for(lambda: "SIGTTIN: 3 worker(s)" in errors.read_text(), timeout=5)
        # faulthandler too: a crash's stacks go to the new file
        with server.connect() as sock:
            sock.sendall(b"GET /segv HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(100) == b""
        wait_for(lambda: "Fatal Python error: Segmentation fault" in errors.read_text(), 5)
        assert (rotated_access.stat().st_size, rotated_errors.stat().st_size) == sizes
        assert "SIGUSR1: reopening the log files" in rotated_errors.read_text()
        assert len(access.read_text().splitlines()) >= 10
        assert server.stop() == 0


HELD_APP = """\
import os
import time

HOLD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold")
while os.path.exists(HOLD):  # a worker starting now waits here, importing the application
    time.sleep(0.01)


def application(environ, start_response):
    if environ["PATH_INFO"] == "/raise":
        raise RuntimeError("held_app: /raise")
    pid = str(os.getpid())
    start_response("200 OK", [("Content-Length", str(len(pid))), ("X-Worker-Pid", pid)])
    return [pid.encode()]
"""


def holds_open(pid: int, path: Path) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    links = []
    for fd in fds:
        with contextlib.suppress(OSError):
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return str(path) in links


def test_usr1_reaches_a_worker_that_is_still_starting(tmp_path):
    """A worker forked before the rename holds the old files; if USR1 comes while it imports
    the application, it must still reopen them once it serves."""
    (tmp_path / "held_app.py").write_text(HELD_APP)
    hold = tmp_path / "hold"
    access, errors = tmp_path / "access.log", tmp_path / "error.log"
    with Server(
        "held_app",
        "--access-logfile",
        str(access),
        "--access-logformat",
        "%(p)s %(r)s %(s)s",
        "--error-logfile",
        str(errors),
        cwd=str(tmp_path),
        wait_ready=False,
    ) as server:
        wait_ready_in(server, errors)
        (first,) = server.worker_pids()
        hold.touch()
        server.send(signal.SIGTTIN)
        wait_for(lambda: len(server.worker_pids()) == 2, timeout=5)
        (starting,) = set(server.worker_pids()) - {first}
        wait_for(lambda: holds_open(starting, access), timeout=5)  # opened before the rename
        access.rename(tmp_path / "access.log.1")
        errors.rename(tmp_path / "error.log.1")
        server.send(signal.SIGUSR1)
        rotated = tmp_path / "error.log.1"
        wait_for(lambda: "SIGUSR1: reopening" in rotated.read_text(), timeout=5)
        # one signal at a time: once the master logs the next one, USR1 was passed on
        server.send(signal.SIGTTIN)
        wait_for(lambda: errors.exists() and "SIGTTIN: 3" in errors.read_text(), timeout=5)
        hold.unlink()
        wait_for(lambda: len(re.findall(r"worker \d ready", errors.read_text())) == 2, 10)

        def logged_by_starting(target: str, line: str) -> list[str]:
            """Request ``target`` until ``line`` (by the starting worker) is in a log file."""

            def found():
                get(server, target)
                return [p.name for p in tmp_path.glob("*.log*") if line in p.read_text()]

            return wait_for(found, timeout=10)

        assert logged_by_starting("/pid", f"<{starting}> GET /pid") == ["access.log"]
        raised = f"[{starting}] [ERROR] error handling GET /raise"
        assert logged_by_starting("/raise", raised) == ["error.log"]
        assert server.stop() == 0


# -- WINCH ----------------------------------------------------------------------------------


@pytest.mark.parametrize("restart", ["TTIN", "HUP"])
def test_winch_stops_the_workers_and_keeps_the_listeners(flags, restart):
    with Server(
        "proc_apps", "--graceful-timeout", "5", workers=2, env={"PROC_FLAGS": str(flags)}
    ) as server:
        master = server.proc.pid
        with start_request(server, "/block?name=w") as in_flight:
            wait_for((flags / "w.started").exists)
            server.send(signal.SIGWINCH)
            server.wait_log(r"SIGWINCH: stopping the workers")
            server.wait_log(r"exited: exit code 0")  # the idle one
            assert len(server.worker_pids()) == 1  # the busy one finishes its request first
            (flags / "w.release").touch()
            assert read_response(in_flight)[2] == b"released w"
        wait_for(lambda: not server.worker_pids(), timeout=5)
        assert alive(master)
        # the kernel still takes connections on the master's listeners; no one serves them
        with start_request(server, "/") as queued:
            queued.settimeout(1.0)
            with pytest.raises(TimeoutError):
                queued.recv(1)  # showing that no one answers takes this long
            spawned = len(re.findall(r"spawned", server.stderr))
            assert spawned == 2, server.stderr
            server.send(getattr(signal, f"SIG{restart}"))
            queued.settimeout(10)
            status, _, body = read_response(queued)
            assert (status, body) == (200, b"Hello, world!")
        expected = 1 if restart == "TTIN" else 2
        wait_for(lambda: len(server.worker_pids()) == expected, timeout=5)
        assert get(server)[0] == 200
        assert server.stop() == 0


# -- USR2 -----------------------------------------------------------------------------------


def read_pid(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


@pytest.mark.parametrize("threads", [1, 4])
def test_usr2_upgrade_hands_over_without_a_failed_request(tmp_path, threads):
    pidfile = tmp_path / "corral.pid"
    oldbin = tmp_path / "corral.pid.oldbin"
    name = f"upgrade-{os.getpid()}-{threads}"
    with Server(
        "chaos_app",
        "--pid",
        str(pidfile),
        "--name",
        name,
        "--threads",
        str(threads),
        "--graceful-timeout",
        "5",
        workers=2,
    ) as server:
        old = server.proc.pid
        old_workers = set(server.worker_pids())
        assert read_pid(pidfile) == old
        with Load(server, 8, "/sleep?s=0.01") as load:
            load.wait_requests(100)
            server.send(signal.SIGUSR2)
            new = wait_for(lambda: (pid := read_pid(pidfile)) not in (0, old) and pid, timeout=10)
            # both masters run: the old one's pid is set aside, the new one's in the file
            assert read_pid(oldbin) == old
            assert alive(old) and alive(new)
            try:
                assert server.proc.wait(15) == 0
            except subprocess.TimeoutExpired:
                raise AssertionError(f"the old master did not stop:\n{server.stderr}") from None
            load.wait_requests(100)
        log = server.stderr
        assert not load.failures, (load.summary(), load.failures[:5])
        assert f"upgrade: this master serves; asking the old master (pid {old}) to stop" in log
        assert f"SIGUSR2: started a new master (pid {new})" in log
        answered_after = {r.pid for r in load.ok[-50:]}
        assert not answered_after & old_workers
        assert answered_after <= set(children(new))
        assert not oldbin.exists()
        assert read_pid(pidfile) == new
        os.kill(new, signal.SIGTERM)
        wait_for(lambda: not alive(new), timeout=10)
        assert not pidfile.exists()
        wait_for(lambda: not leftover_processes(old, f"[{name}]"), timeout=5)


def test_usr2_that_fails_leaves_the_old_master_serving(tmp_path):
    """The new master cannot start (here: its app was removed); the old one serves on and
    takes its pid file back."""
    pidfile = tmp_path / "corral.pid"
    app = tmp_path / "upgrade_app.py"
    app.write_text((Path(__file__).parent / "apps" / "chaos_app.py").read_text())
    with Server("upgrade_app", "--pid", str(pidfile), cwd=str(tmp_path)) as server:
        pid = answering_pid(server)
        app.unlink()
        server.send(signal.SIGUSR2)
        server.wait_log(r"upgrade failed: the new master exited \(exit code 3\)")
        assert read_pid(pidfile) == server.proc.pid
        assert not (tmp_path / "corral.pid.oldbin").exists()
        assert answering_pid(server) == pid
        assert server.stop() == 0
