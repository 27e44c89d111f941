"""Real corral processes on ephemeral loopback ports, for the integration tests.

A :class:`Server` starts ``python -m corral`` with the given arguments, reads its
error log on a thread, learns the real port from the ``listening on`` line and
waits, with a deadline, until every worker reported ready. Nothing here sleeps
for a fixed time: every wait polls a condition until a deadline.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

APPS = Path(__file__).parent / "apps"
SRC = Path(__file__).resolve().parents[2] / "src"
LISTENING = re.compile(r"listening on https?://(\[[^\]]+\]|[\d.]+):(\d+)")
READY = re.compile(r"worker (\d+(?: of \S+)?) ready")  # slot, and application when several


def wait_for(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.01):
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


class Server:
    def __init__(
        self,
        app: str,
        *args: str,
        workers: int | None = None,
        env: dict[str, str] | None = None,
        wait_ready: bool = True,
        bind: str | None = "127.0.0.1:0",
        python: str = sys.executable,
        cwd: str | None = None,
        pass_fds: tuple[int, ...] = (),
        log_level: str | None = "debug",  # None: the configuration's own
        log_file: str | Path | None = None,
    ) -> None:
        """``log_file``: where the server's error log goes when its configuration says so (a
        uWSGI ini's ``logto``): read as if it were standard error."""
        argv = [python, "-m", "corral", app]
        if log_level is not None:
            argv += ["--log-level", log_level]
        if bind is not None:
            argv += ["-b", bind]
        if workers is not None:
            argv += ["-w", str(workers)]
        argv += list(args)
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = os.pathsep.join(
            [str(APPS), str(Path(__file__).resolve().parents[2] / "src")]
            + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else [])
        )
        full_env["PYTHONUNBUFFERED"] = "1"
        if env:
            full_env.update(env)
        self.argv = argv
        self.log_file = Path(log_file) if log_file is not None else None
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=cwd or str(APPS),
            start_new_session=True,
            pass_fds=pass_fds,
        )
        self._err: list[str] = []
        self._out: list[str] = []
        self._lock = threading.Lock()
        self._readers = [
            threading.Thread(target=self._pump, args=(self.proc.stderr, self._err), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stdout, self._out), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self.port = 0
        self.host = "127.0.0.1"
        self.expected_workers = workers or 1
        if wait_ready:
            try:
                self.wait_ready()
            except BaseException:
                # no caller holds it yet to stop it: a server that never got ready must not
                # run on (or leave its pipes open) into the tests that follow
                with contextlib.suppress(Exception):
                    self.kill()
                raise

    def _pump(self, stream, sink: list[str]) -> None:
        for raw in iter(stream.readline, b""):
            with self._lock:
                sink.append(raw.decode("utf-8", "replace"))

    @property
    def stderr(self) -> str:
        with self._lock:
            text = "".join(self._err)
        if self.log_file is not None:
            with contextlib.suppress(FileNotFoundError):
                text = self.log_file.read_text(errors="replace") + text
        return text

    @property
    def stdout(self) -> str:
        with self._lock:
            return "".join(self._out)

    def wait_log(self, pattern: str, timeout: float = 10.0, count: int = 1) -> list[str]:
        regex = re.compile(pattern)

        def found():
            matches = regex.findall(self.stderr)
            return matches if len(matches) >= count else None

        return wait_for(found, timeout)

    def wait_ready(self, timeout: float = 20.0) -> None:
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}:\n{self.stderr}")
            text = self.stderr
            match = LISTENING.search(text)
            return match and len(set(READY.findall(text))) >= self.expected_workers and match

        match = wait_for(ready, timeout)
        self.host = match.group(1).strip("[]")
        self.port = int(match.group(2))

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def connect(self, timeout: float = 10.0) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect((self.host, self.port))
        return sock

    def raw(self, data: bytes, timeout: float = 10.0) -> bytes:
        """Send ``data``, half-close, read until the server closes."""
        with self.connect(timeout) as sock:
            sock.sendall(data)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            return read_all(sock)

    def worker_pids(self) -> list[int]:
        return children(self.proc.pid)

    def send(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._close_pipes()
        return self.proc.returncode

    def _close_pipes(self) -> None:
        for reader in self._readers:
            reader.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(5)
        self._close_pipes()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.stop()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # leave no worker behind
        self._close_pipes()


def run_cli(
    *args: str,
    timeout: float = 20.0,
    argv0: list[str] | None = None,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
):
    """``python -m corral ARGS`` (or ``argv0 ARGS``) run to its end from ``cwd`` (the apps
    directory by default), with the apps and this checkout's ``src`` first on PYTHONPATH and
    ``env`` over the environment."""
    env = dict(os.environ) | (env or {})
    env["PYTHONPATH"] = os.pathsep.join(
        [str(APPS), str(SRC)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.run(
        (argv0 or [sys.executable, "-m", "corral"]) + list(args),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(cwd or APPS),
        env=env,
        start_new_session=True,
    )


class Address(Protocol):
    host: str
    port: int


def http_get(at: Address, path: str = "/", timeout: float = 10.0) -> tuple[int, bytes]:
    """One GET on a fresh connection to ``at`` (a Server, or anything with host and port)."""
    connection = http.client.HTTPConnection(at.host, at.port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def http_json(at: Address, path: str = "/") -> Any:
    """The JSON a GET answers with 200."""
    status, body = http_get(at, path)
    assert status == 200, (status, body[:200])
    return json.loads(body)


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _processes() -> Iterator[tuple[int, list[str]]]:
    """Every live process id with the fields of its /proc stat line after the command name."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                yield int(entry), stream.read().rsplit(")", 1)[1].split()
        except OSError:
            continue


def children(pid: int) -> list[int]:
    """Direct children of ``pid``, from /proc."""
    return [child for child, fields in _processes() if int(fields[1]) == pid]


def fetch(server: Server, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh keep-alive connection; the connection is closed after."""
    with server.connect() as sock:
        sock.sendall(data)
        return read_response(sock)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one response (Content-Length or chunked framing) from a keep-alive socket."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed mid-head: {buffer!r}")
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        length = int(headers["content-length"])
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError("connection closed mid-body")
            rest += chunk
        return status, headers, rest[:length]
    if headers.get("transfer-encoding") == "chunked":
        body = b""

        def more() -> bytes:
            chunk = sock.recv(65536)
            if not chunk:  # else a cut response would spin here for ever
                raise AssertionError(f"connection closed mid-body after {len(body)} bytes")
            return chunk

        while True:
            while b"\r\n" not in rest:
                rest += more()
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            while len(rest) < size + 2:
                rest += more()
            body += rest[:size]
            rest = rest[size + 2 :]
            if size == 0:
                return status, headers, body
    return status, headers, rest


def leftover_processes(session: int, title: str) -> dict[int, str]:
    """Live processes in ``session`` (a Server's master leads its own) or whose command line
    contains ``title``, with their command lines; from /proc. Zombies are left out: they are
    dead, only waiting for a parent to reap them."""
    found = {}
    for pid, fields in _processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                cmdline = stream.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        state, process_session = fields[0], int(fields[3])
        if state != "Z" and (process_session == session or title in cmdline):
            found[pid] = cmdline
    return found
