"""Real workers of several applications behind one routed listener, without the master.

The master cannot run two applications yet, so this launcher plays its part for the routing
tests: it binds a loopback TCP listener and one hand-off socket per application (unix
sockets in a short temporary directory), compiles the routes, forks the workers of every
application with :func:`corral.worker.run_worker` and a :class:`WorkerSpec` filled as the
master will fill it, drains their heartbeat pipes, and prints one JSON line (the port, each
application's worker pids) once every worker said ``ready``. It stops its workers on TERM or
when its stdin closes.

:class:`WorkerPair` runs the launcher as a subprocess for a test (``python worker_pair.py
CONFIG``), reads that line and collects the error log from stderr.

Like the master, the launcher closes its own copies of the applications' hand-off sockets
once the workers are up (``keep_handoff`` names those it keeps), and each worker inherits
only its own application's hand-off socket: when an application's workers are all gone,
connecting to its address is refused. ``unserved`` names hand-off sockets that are bound and
kept but have no worker, as while an application is being restarted.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

APPS = Path(__file__).parent / "apps"
SRC = Path(__file__).resolve().parents[2] / "src"


# -- the launcher (a subprocess) ---------------------------------------------------------------


def launch(config: dict[str, Any]) -> None:
    from corral.config.document import Application, Settings
    from corral.observe.errorlog import setup_error_log
    from corral.routing import compile_routes
    from corral.worker import WorkerSpec

    setup_error_log("-", "info")
    directory = config["dir"]
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    apps: dict[str, dict[str, Any]] = config["apps"]
    handoff: dict[str, socket.socket] = {}
    addresses: dict[str, str] = {}
    for name in [*apps, *config.get("unserved", [])]:
        path = os.path.join(directory, f"{name}.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        sock.listen(64)
        handoff[name] = sock
        addresses[name] = path
    router = compile_routes(config["routes"], applications=[*apps, *config.get("unserved", [])])
    settings = msgspec.convert(config.get("settings", {}), Settings)
    pipes: dict[int, tuple[str, int]] = {}
    pids: dict[str, list[int]] = {name: [] for name in apps}
    for name, options in apps.items():
        workers = options.get("workers", 1)
        application = Application(
            module=options["module"],
            callable=options["callable"],
            processes=workers,
            threads=options.get("threads", 1),
        )
        for _ in range(workers):
            read_end, write_end = os.pipe()
            spec = WorkerSpec(
                application=application,
                settings=settings,
                sockets=[listener],
                heartbeat_fd=write_end,
                listener_passes=[config.get("pass", "routes")],
                router=router,
                app_name=name,
                handoff_socket=handoff[name],
                handoff_addresses={n: a for n, a in addresses.items() if n != name},
                handoff_timeout=config.get("handoff_timeout", 3.0),
            )
            pid = os.fork()
            if pid == 0:
                os.close(read_end)
                for other, sock in handoff.items():
                    if other != name:
                        sock.close()  # a worker holds its own application's socket only
                from corral.worker import run_worker

                code = 1
                try:
                    code = run_worker(spec)
                finally:
                    os._exit(code)
            os.close(write_end)
            pipes[read_end] = (name, pid)
            pids[name].append(pid)
    for name in apps:
        if name not in config.get("keep_handoff", []):
            handoff[name].close()
    ready: set[int] = set()
    buffers: dict[int, bytes] = dict.fromkeys(pipes, b"")
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    announced = False
    while not stop:
        if not announced and len(ready) == len(pipes):
            print(json.dumps({"port": listener.getsockname()[1], "pids": pids}), flush=True)
            announced = True
        try:
            readable, _, _ = select.select([*buffers, sys.stdin], [], [], 0.5)
        except InterruptedError:
            continue
        for fd in readable:
            if fd is sys.stdin:
                if not os.read(sys.stdin.fileno(), 1024):
                    stop = True
                continue
            data = os.read(fd, 65536)
            if not data:
                del buffers[fd]
                os.close(fd)
                continue
            buffers[fd] += data
            if b"ready\n" in buffers[fd]:
                ready.add(fd)
            buffers[fd] = buffers[fd][-100:]
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
    for _name, pid in pipes.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.02)
    for _name, pid in pipes.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# -- the test side -----------------------------------------------------------------------------


class WorkerPair:
    """The launcher as a subprocess: ``port``, ``pids``, ``log()``, ``stop()``."""

    def __init__(self, config: dict[str, Any], timeout: float = 20.0) -> None:
        self.dir = tempfile.mkdtemp(prefix="crl", dir="/tmp")  # unix paths must stay short
        config = {**config, "dir": self.dir}
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(APPS), env.get("PYTHONPATH", "")])
        env["PYTHONUNBUFFERED"] = "1"
        self.process = subprocess.Popen(
            [sys.executable, __file__, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._log: list[str] = []
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        line = self._first_line(timeout)
        announced = json.loads(line)
        self.port: int = announced["port"]
        self.pids: dict[str, list[int]] = announced["pids"]

    def _first_line(self, timeout: float) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            self.stop()
            raise AssertionError(f"workers not ready within {timeout}s: {self.log()}")
        line = self.process.stdout.readline().decode()
        if not line:
            self.stop()
            raise AssertionError(f"launcher exited: {self.log()}")
        return line

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._log.append(line.decode("utf-8", "replace"))

    def log(self) -> str:
        return "".join(self._log)

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return sock

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self._reader.join(5)
        if self.process.stderr is not None:
            self.process.stderr.close()
        for entry in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, entry))
        os.rmdir(self.dir)

    def __enter__(self) -> WorkerPair:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


if __name__ == "__main__":
    launch(json.loads(sys.argv[1]))
