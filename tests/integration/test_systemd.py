"""systemd integration on real processes: sd_notify messages, the watchdog, socket activation.

The tests play systemd's part. The notification socket is a ``SOCK_DGRAM`` unix socket with
``SO_PASSCRED``, as systemd's is, so every message arrives with its sender's pid. Socket
activation passes listening sockets the test bound itself as descriptors 3, 4, ... through a
tiny launcher that does what systemd does between fork and exec: it moves the sockets into
place, sets ``LISTEN_PID`` to its own pid (known only after the fork; exec keeps it) and execs
``python -m corral``.

Where a test says a message came *after* something, it compares with the error log as it
was when the message arrived: the log goes to a file, which is complete the moment the master
has written a line (a pipe read by a thread may lag).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import re
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.server import Server, read_response, wait_for

LAUNCHER = """\
import fcntl, os, sys

# systemd's part between fork and exec: the sockets to descriptors 3, 4, ... in order
fds = [int(fd) for fd in os.environ.pop("ACTIVATE_FDS", "").split(",") if fd]
high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]
for fd in fds:
    os.close(fd)
for index, fd in enumerate(high):
    os.dup2(fd, 3 + index)
    os.close(fd)
for name in filter(None, os.environ.pop("OWN_PID_VARS", "").split(",")):
    os.environ[name] = str(os.getpid())
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


@dataclass
class Message:
    pid: int  # the sender, from SCM_CREDENTIALS
    fields: dict[str, str]
    log: str  # the error log file as it was when the message arrived
    at: float  # time.monotonic() on arrival


class NotifySocket:
    """A notification socket as systemd's: every datagram is kept with its sender's pid."""

    def __init__(self, bind_to: str, env_value: str, log_file: Path | None = None) -> None:
        self.env = {"NOTIFY_SOCKET": env_value}
        self.log_file = log_file
        self.messages: list[Message] = []
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(bind_to)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._sock.settimeout(0.05)
        self._running = True
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        creds = struct.calcsize("3i")
        while self._running:
            try:
                data, ancdata, _, _ = self._sock.recvmsg(65536, socket.CMSG_SPACE(creds))
            except TimeoutError:
                continue
            log = self.log_file.read_text() if self.log_file and self.log_file.exists() else ""
            pid = 0
            for level, kind, payload in ancdata:
                if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS):
                    pid = struct.unpack("3i", payload[:creds])[0]
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
            with self._lock:
                self.messages.append(Message(pid, fields, log, time.monotonic()))

    def received(self) -> list[Message]:
        with self._lock:
            return list(self.messages)

    def having(self, key: str, value: str | None = None) -> list[Message]:
        return [
            m
            for m in self.received()
            if key in m.fields and (value is None or m.fields[key] == value)
        ]

    def wait(
        self, key: str, value: str | None = None, count: int = 1, timeout: float = 15.0
    ) -> list[Message]:
        return wait_for(
            lambda: (found := self.having(key, value)) and len(found) >= count and found, timeout
        )

    def close(self) -> None:
        self._running = False
        self._thread.join(5)
        self._sock.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: a unix socket path must fit in 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="corral-sd-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def notify(short_dir: Path) -> Iterator[NotifySocket]:
    sock = NotifySocket(
        str(short_dir / "notify"), str(short_dir / "notify"), short_dir / "error.log"
    )
    yield sock
    sock.close()


@pytest.fixture
def launcher(short_dir: Path) -> str:
    path = short_dir / "launch"
    path.write_text(f"#!{sys.executable}\n{LAUNCHER}")
    path.chmod(0o755)
    return str(path)


def wait_logged(path: Path, pattern: str, count: int = 1, timeout: float = 20.0) -> list[str]:
    regex = re.compile(pattern)

    def found() -> list[str] | None:
        matches = regex.findall(path.read_text()) if path.exists() else []
        return matches if len(matches) >= count else None

    return wait_for(found, timeout)


def get_info(host: str, port: int) -> dict:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", "/info")
        response = conn.getresponse()
        assert response.status == 200
        return json.loads(response.read())
    finally:
        conn.close()


def get_info_unix(path: str) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall(b"GET /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, _, body = read_response(sock)
    assert status == 200
    return json.loads(body)


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stream:
        return int(stream.read().rsplit(")", 1)[1].split()[1])


def gone(pid: int) -> bool:
    """The process has exited (a zombie counts: it only waits for someone to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return stream.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def listening_tcp() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def listening_unix(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(64)
    return sock


LISTEN_VARIABLES = ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES")


# -- notifications ---------------------------------------------------------------------------


def test_ready_only_once_every_worker_is_ready_and_stopping_on_term(notify, short_dir):
    log = short_dir / "error.log"
    with Server(
        "proc_apps", "--error-logfile", str(log), workers=2, env=notify.env, wait_ready=False
    ) as server:
        (ready,) = notify.wait("READY", "1")
        assert ready.pid == server.proc.pid
        assert ready.fields["STATUS"] == "serving proc_apps with 2 worker(s)"
        assert "MAINPID" not in ready.fields  # only a master started by USR2 names itself
        assert re.findall(r"worker (\d) ready", ready.log) == ["0", "1"]
        assert notify.received()[0] is ready  # nothing before it

        server.send(signal.SIGTERM)
        (stopping,) = notify.wait("STOPPING", "1")
        assert stopping.pid == server.proc.pid
        assert "SIGTERM: graceful shutdown" in stopping.log
        assert "shutdown complete" not in stopping.log  # said as the stop begins
        assert server.proc.wait(15) == 0
    assert [sorted(m.fields) for m in notify.received()] == [["READY", "STATUS"], ["STOPPING"]]


def test_abstract_namespace_notify_socket():
    name = f"corral-test-{uuid.uuid4().hex}"
    notify = NotifySocket("\0" + name, "@" + name)
    try:
        with Server("proc_apps", env=notify.env) as server:
            (ready,) = notify.wait("READY", "1")
            assert ready.pid == server.proc.pid
            server.send(signal.SIGTERM)
            notify.wait("STOPPING", "1")
            assert server.proc.wait(15) == 0
    finally:
        notify.close()


def test_no_notify_socket_listening_is_not_an_error(short_dir):
    # the variable names a socket nobody listens on: the server runs as without it
    env = {"NOTIFY_SOCKET": str(short_dir / "nobody"), "WATCHDOG_USEC": "200000"}
    with Server("proc_apps", env=env) as server:
        assert get_info(server.host, server.port)["pid"] in server.worker_pids()
        assert server.stop() == 0
    assert "Traceback" not in server.stderr
    assert "cannot notify" in server.stderr  # at debug level, which the harness asks for


@pytest.mark.wallclock
@pytest.mark.parametrize("watchdog_pid", ["unset", "own pid"])
def test_watchdog_pings_come_from_the_master(notify, launcher, watchdog_pid):
    env = {**notify.env, "WATCHDOG_USEC": "200000"}
    if watchdog_pid == "own pid":
        env["OWN_PID_VARS"] = "WATCHDOG_PID"
    with Server("proc_apps", workers=2, env=env, python=launcher) as server:
        pings = notify.wait("WATCHDOG", "1", count=8)
        assert {m.pid for m in pings} == {server.proc.pid}  # the master, never a worker
        gaps = sorted(b.at - a.at for a, b in itertools.pairwise(pings))
        median = gaps[len(gaps) // 2]
        assert 0.05 < median < 0.3, gaps  # every half of WATCHDOG_USEC (0.1 s)


def test_no_watchdog_pings_when_watchdog_pid_is_another_process(notify):
    env = {**notify.env, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": str(os.getpid())}
    with Server("proc_apps", env=env):
        notify.wait("READY", "1")
        time.sleep(1.0)  # ten watchdog intervals in which nothing must arrive
        assert notify.having("WATCHDOG") == []


def test_reloading_then_ready_on_hup(notify, short_dir):
    log = short_dir / "error.log"
    with Server(
        "proc_apps", "--error-logfile", str(log), workers=2, env=notify.env, wait_ready=False
    ) as server:
        notify.wait("READY", "1")
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        server.send(signal.SIGHUP)
        (reloading,) = notify.wait("RELOADING", "1")
        assert reloading.pid == server.proc.pid
        assert before <= int(reloading.fields["MONOTONIC_USEC"]) <= before + 10_000_000
        assert reloading.fields["STATUS"] == "reloading (SIGHUP)"
        ready = notify.wait("READY", "1", count=2)[1]
        assert ready.at >= reloading.at
        assert "reload complete: generation 2" in ready.log
        assert "reload complete" not in reloading.log
        assert ready.fields["STATUS"] == "serving proc_apps with 2 worker(s)"
        assert server.stop() == 0


def test_failed_reload_still_ends_with_ready(notify, short_dir):
    log = short_dir / "error.log"
    config = short_dir / "corral.toml"
    config.write_text("workers = 1\n")
    with Server(
        "proc_apps",
        "-c",
        str(config),
        "--error-logfile",
        str(log),
        env=notify.env,
        wait_ready=False,
    ) as server:
        notify.wait("READY", "1")
        config.write_text('workers = "two"\n')
        server.send(signal.SIGHUP)
        notify.wait("RELOADING", "1")
        ready = notify.wait("READY", "1", count=2)[1]
        assert "reload failed" in ready.log  # systemd is not left waiting for the reload
        assert server.stop() == 0


# -- socket activation -----------------------------------------------------------------------


def test_socket_activation_tcp_replaces_the_binds_reloads_included(launcher, short_dir):
    configured = short_dir / "configured.sock"
    with contextlib.closing(listening_tcp()) as activated:
        port = activated.getsockname()[1]
        env = {
            "ACTIVATE_FDS": str(activated.fileno()),
            "OWN_PID_VARS": "LISTEN_PID",
            "LISTEN_FDS": "1",
            "LISTEN_FDNAMES": "web",
        }
        with Server(
            "proc_apps",
            workers=2,
            env=env,
            python=launcher,
            bind=f"unix:{configured}",
            pass_fds=(activated.fileno(),),
        ) as server:
            assert server.port == port
            assert f"listening on http://127.0.0.1:{port} (from systemd)" in server.stderr
            assert "fd 3 (web) is 127.0.0.1:" in server.stderr
            assert not configured.exists()  # the -b address was not bound
            info = get_info("127.0.0.1", port)
            assert parent_of(info["pid"]) == server.proc.pid
            assert not set(LISTEN_VARIABLES) & set(info["environ"])

            first_generation = set(server.worker_pids())
            server.send(signal.SIGHUP)  # the reread configuration still names -b
            server.wait_log("reload complete: generation 2")
            assert not configured.exists()
            wait_for(lambda: get_info("127.0.0.1", port)["pid"] not in first_generation)
            assert server.stop() == 0
        # systemd's copy stays open and listening: the server did not shut it down
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_socket_activation_unix_and_tcp(launcher, short_dir):
    path = short_dir / "app.sock"
    with (
        contextlib.closing(listening_tcp()) as tcp,
        contextlib.closing(listening_unix(path)) as unix,
    ):
        port = tcp.getsockname()[1]
        env = {
            "ACTIVATE_FDS": f"{tcp.fileno()},{unix.fileno()}",
            "OWN_PID_VARS": "LISTEN_PID",
            "LISTEN_FDS": "2",
            "LISTEN_FDNAMES": "web:local",
        }
        with Server(
            "proc_apps",
            env=env,
            python=launcher,
            pass_fds=(tcp.fileno(), unix.fileno()),
        ) as server:
            assert server.port == port
            assert f"listening on unix:{path} (from systemd)" in server.stderr
            assert "fd 4 (local) is unix:" in server.stderr
            info = get_info_unix(str(path))
            assert parent_of(info["pid"]) == server.proc.pid
            assert not set(LISTEN_VARIABLES) & set(info["environ"])
            assert get_info("127.0.0.1", port)["pid"] == info["pid"]
            assert server.stop() == 0
        assert path.exists()  # systemd's socket file: not the server's to remove


@pytest.mark.skipif(
    shutil.which("systemd-socket-activate") is None,
    reason="systemd-socket-activate (systemd's own socket activation tool) is not installed",
)
def test_sockets_from_systemd_socket_activate(short_dir):
    # systemd's own side of the protocol instead of the test's launcher: the tool binds,
    # waits for the first connection, then execs corral with LISTEN_FDS/PID/FDNAMES set
    path = short_dir / "app.sock"
    configured = short_dir / "configured.sock"
    wrapper = short_dir / "activate"
    wrapper.write_text(
        "#!/bin/sh\nexec systemd-socket-activate -E PYTHONPATH -E PYTHONUNBUFFERED "
        f'-l {path} --fdname=local "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(0o755)
    with Server(
        "proc_apps", python=str(wrapper), bind=f"unix:{configured}", wait_ready=False
    ) as server:
        wait_for(path.exists)
        info = get_info_unix(str(path))  # this first connection starts corral
        assert parent_of(info["pid"]) == server.proc.pid
        assert not set(LISTEN_VARIABLES) & set(info["environ"])
        server.wait_log(re.escape(f"listening on unix:{path} (from systemd)"))
        assert "fd 3 (local) is unix:" in server.stderr
        assert not configured.exists()
        assert server.stop() == 0
    assert path.exists()


def test_listen_pid_of_another_process_is_ignored(launcher):
    with contextlib.closing(listening_tcp()) as activated:
        port = activated.getsockname()[1]
        env = {
            "ACTIVATE_FDS": str(activated.fileno()),
            "LISTEN_FDS": "1",
            "LISTEN_PID": str(os.getpid()),  # the test's pid: these sockets are not for corral
        }
        with Server(
            "proc_apps", env=env, python=launcher, pass_fds=(activated.fileno(),)
        ) as server:
            assert server.port != port  # it bound 127.0.0.1:0 as told
            assert f"LISTEN_PID is {os.getpid()}, not this process" in server.stderr
            assert "from systemd" not in server.stderr
            info = get_info(server.host, server.port)
            assert not set(LISTEN_VARIABLES) & set(info["environ"])
            assert server.stop() == 0


# -- USR2 under systemd ----------------------------------------------------------------------


def test_usr2_upgrade_hands_the_service_to_the_new_master(notify, launcher, short_dir):
    configured = short_dir / "configured.sock"
    with contextlib.closing(listening_tcp()) as activated:
        port = activated.getsockname()[1]
        env = {
            **notify.env,
            "WATCHDOG_USEC": "200000",
            "ACTIVATE_FDS": str(activated.fileno()),
            "OWN_PID_VARS": "LISTEN_PID,WATCHDOG_PID",
            "LISTEN_FDS": "1",
        }
        with Server(
            "proc_apps",
            env=env,
            python=launcher,
            bind=f"unix:{configured}",
            pass_fds=(activated.fileno(),),
        ) as server:
            old = server.proc.pid
            notify.wait("READY", "1")
            server.send(signal.SIGUSR2)
            (takeover,) = notify.wait("MAINPID")
            new = int(takeover.fields["MAINPID"])
            assert new != old and takeover.pid == new
            assert takeover.fields["READY"] == "1"
            assert server.proc.wait(15) == 0  # the old master drained and left
            left = time.monotonic()
            assert notify.having("STOPPING") == []  # a replaced master is not the service stopping

            # the new master serves systemd's socket, still not binding -b, and pings
            assert not configured.exists()
            assert parent_of(get_info("127.0.0.1", port)["pid"]) == new

            def pings_after_old_master() -> list[Message]:
                return [m for m in notify.having("WATCHDOG", "1") if m.at > left]

            wait_for(lambda: len(pings_after_old_master()) >= 3)
            assert {m.pid for m in pings_after_old_master()} == {new}

            os.kill(new, signal.SIGTERM)
            (stopping,) = notify.wait("STOPPING", "1")
            assert stopping.pid == new
            wait_for(lambda: gone(new), 15)
