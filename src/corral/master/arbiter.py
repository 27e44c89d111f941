"""The master process: binds the listeners, forks the workers, keeps them alive.

Invariants:
- The master never runs application code (unless ``preload`` asks for it) and
  never reads a request: workers accept on the sockets they inherit.
- Signal handlers only enqueue the signal; :meth:`Arbiter.main` acts on it.
- A worker that exits with :data:`~corral.worker.EXIT_APP_LOAD` before it was
  ever ready stops the master with that code: an application that cannot be
  imported is not retried in a loop. Other early deaths are retried with an
  exponential backoff, one log line per step.
- Liveness comes from each worker's heartbeat pipe, written by its event loop: a
  silent loop, or a request older than ``timeout`` seen in a heartbeat, gets the
  worker killed and replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
import traceback
from typing import Any

from corral.appload import load_app
from corral.config import Document
from corral.master.listeners import ListenError, bind_all, close_all, describe
from corral.observe.errorlog import setup_error_log
from corral.worker import EXIT_APP_LOAD, WorkerSpec, run_worker

EXIT_CONFIG = 2
EXIT_LISTEN = 1

# Crash-loop backoff: first delay, cap, and how long a worker must live to reset it.
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 10.0
STABLE_AFTER = 5.0

_HANDLED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGCHLD,
    signal.SIGHUP,
    signal.SIGTTIN,
    signal.SIGTTOU,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)


def _set_title(title: str) -> None:
    try:
        import setproctitle
    except ImportError:  # pragma: no cover - a declared dependency
        return
    setproctitle.setproctitle(title)


class WorkerProcess:
    """The master's view of one worker."""

    def __init__(self, pid: int, index: int, beat_fd: int) -> None:
        self.pid = pid
        self.index = index
        self.beat_fd = beat_fd
        self.started = time.monotonic()
        self.last_beat = self.started
        self.ready = False
        self.stopping = False
        self.request: tuple[float, str] | None = None  # (age seconds, "METHOD /path")
        self.kill_reason: str | None = None  # set when a timeout kill is under way
        self.served = 0
        self._partial = b""

    def feed(self, data: bytes) -> list[str]:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        return [line.decode("utf-8", "replace") for line in lines]


class Arbiter:
    def __init__(self, doc: Document, log: logging.Logger) -> None:
        self.doc = doc
        self.log = log
        settings = doc.settings
        self.settings = settings
        self.app_name, self.application = next(iter(doc.applications.items()))
        self.title_name = settings.proc_name or self.app_name
        self.sockets: dict[str, Any] = {}
        self.workers: dict[int, WorkerProcess] = {}
        self.loaded_app: Any = None
        # resolved now: an unknown user or group is a configuration error (ValueError)
        self.identity = Identity(self.application.user, self.application.group)
        self.signals: asyncio.Queue[int] = asyncio.Queue()
        self.stopping = False
        self.exit_code = 0
        self.failures = 0
        self._respawn_handle: asyncio.TimerHandle | None = None
        self._first_ready: asyncio.Future[bool] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    # -- start ----------------------------------------------------------------------

    def run(self) -> int:
        _set_title(f"corral: master [{self.title_name}]")
        loop = asyncio.new_event_loop()
        self.loop = loop
        self.signals = asyncio.Queue()
        for sig in _HANDLED_SIGNALS:
            loop.add_signal_handler(sig, self.signals.put_nowait, sig)
        try:
            loop.run_until_complete(self.main())
        finally:
            for sig in _HANDLED_SIGNALS:
                loop.remove_signal_handler(sig)
            loop.close()
        return self.exit_code

    async def main(self) -> None:
        app = self.application
        for address, sock in self.sockets.items():
            self.log.info("listening on %s (%s)", describe(sock), address)
        self.log.info(
            "serving %s with %d worker(s) x %d thread(s)", self.app_name, app.workers, app.threads
        )
        loop = self.loop
        assert loop is not None
        self._first_ready = loop.create_future()
        self.spawn(0)
        ticker = loop.create_task(self._tick())
        try:
            while not self.stopping:
                sig = await self.signals.get()
                self.handle_signal(sig)
            await self._shutdown_wait()
        finally:
            ticker.cancel()

    # -- workers ----------------------------------------------------------------------

    def spawn(self, index: int) -> None:
        if self.stopping:
            return
        read_fd, write_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.close(read_fd)
                for other in self.workers.values():
                    with contextlib.suppress(OSError):
                        os.close(other.beat_fd)
                code = self._worker_main(write_fd)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        os.close(write_fd)
        worker = WorkerProcess(pid, index, read_fd)
        self.workers[pid] = worker
        assert self.loop is not None
        self.loop.add_reader(read_fd, self._on_beat, worker)
        self.log.debug("worker %d spawned (pid %d)", index, pid)

    def _worker_main(self, beat_fd: int) -> int:
        _set_title(f"corral: worker [{self.title_name}]")
        app = self.application
        access_log = None
        settings = self.settings
        if settings.access_logfile:  # opened before the switch, as Gunicorn does
            from corral.observe.accesslog import AccessLog

            access_log = AccessLog(settings.access_logfile, settings.access_logformat)
        try:
            self.identity.switch()
        except OSError as exc:
            sys.stderr.write(f"corral: error: cannot switch the worker's user: {exc}\n")
            return EXIT_APP_LOAD  # the master stops: a respawn would fail the same way
        spec = WorkerSpec(
            application=app,
            settings=settings,
            sockets=list(self.sockets.values()),
            heartbeat_fd=beat_fd,
            loaded_app=self.loaded_app,
            multiprocess=app.workers > 1,
            access_log=access_log,
        )
        return run_worker(spec)

    def _on_beat(self, worker: WorkerProcess) -> None:
        try:
            data = os.read(worker.beat_fd, 65536)
        except OSError:
            data = b""
        assert self.loop is not None
        if not data:
            self.loop.remove_reader(worker.beat_fd)
            return
        worker.last_beat = time.monotonic()
        for line in worker.feed(data):
            if line == "ready":
                self._on_ready(worker)
            elif line.startswith("hb "):
                parts = line.split(" ", 4)
                worker.served = int(parts[1])
                worker.request = _request_of(parts[2:])
            elif line.startswith("abort "):
                worker.request = _request_of(line.split(" ", 3)[1:])
                self._finish_kill(worker)
            elif line.startswith("stuck ") and not worker.stopping:
                worker.request = _request_of(line.split(" ", 3)[1:])
                app = self.application
                self._kill(
                    worker,
                    "a request did not unwind within request_timeout_grace "
                    f"({app.request_timeout_grace:g}s) after its request_timeout "
                    f"({app.request_timeout:g}s)",
                )

    def _on_ready(self, worker: WorkerProcess) -> None:
        worker.ready = True
        self.log.info("worker %d ready (pid %d)", worker.index, worker.pid)
        first = self._first_ready
        if first is not None and not first.done():
            first.set_result(True)
            # the application imports: start the others now
            for index in range(1, self.application.workers):
                self.spawn(index)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            worker = self.workers.pop(pid, None)
            if worker is None:
                continue
            assert self.loop is not None
            self.loop.remove_reader(worker.beat_fd)
            os.close(worker.beat_fd)
            self._on_exit(worker, status)

    def _on_exit(self, worker: WorkerProcess, status: int) -> None:
        code = os.waitstatus_to_exitcode(status)
        how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
        if self.stopping:
            self.log.debug("worker %d (pid %d) exited: %s", worker.index, worker.pid, how)
            return
        if code == EXIT_APP_LOAD and not worker.ready:
            self.log.critical("application %s failed to load; shutting down", self.app_name)
            self.exit_code = EXIT_APP_LOAD
            self.begin_stop(graceful=False)
            return
        lived = time.monotonic() - worker.started
        if worker.stopping:
            self.log.info("worker %d (pid %d) exited: %s", worker.index, worker.pid, how)
            self.spawn(worker.index)
            return
        self.log.error(
            "worker %d (pid %d) died: %s after %.1fs", worker.index, worker.pid, how, lived
        )
        if worker.ready and lived >= STABLE_AFTER:
            self.failures = 0
            self.spawn(worker.index)
            return
        self.failures += 1
        delay = min(BACKOFF_FIRST * 2 ** (self.failures - 1), BACKOFF_MAX)
        self.log.error(
            "workers keep dying at start-up (%d in a row): respawning worker %d in %.1fs",
            self.failures,
            worker.index,
            delay,
        )
        assert self.loop is not None
        self.loop.call_later(delay, self.spawn, worker.index)

    async def _tick(self) -> None:
        timeout = self.settings.timeout
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for worker in list(self.workers.values()):
                if worker.stopping:
                    continue
                if worker.ready and now - worker.started >= STABLE_AFTER and self.failures:
                    self.failures = 0
                silent = now - worker.last_beat
                if not timeout:
                    continue
                if not worker.ready and silent > max(timeout, 30.0):
                    self._kill(worker, f"not ready after {silent:.0f}s")
                elif worker.ready and silent > timeout:
                    self._kill(
                        worker, f"event loop silent for {silent:.0f}s (timeout {timeout:g}s)"
                    )
                elif worker.request is not None and worker.request[0] > timeout:
                    self._kill(worker, f"a request ran past the timeout ({timeout:g}s)")

    def _kill(self, worker: WorkerProcess, why: str) -> None:
        """Timeout: ABRT first, so that the worker reports what it was serving; then KILL."""
        worker.stopping = True
        worker.kill_reason = why
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGABRT)
        assert self.loop is not None
        self.loop.call_later(1.0, self._finish_kill, worker)

    def _finish_kill(self, worker: WorkerProcess) -> None:
        why, worker.kill_reason = worker.kill_reason, None
        if why is None:
            return  # already done
        if worker.request is not None:  # from its last heartbeat, or its abort line
            age, what = worker.request
            why += f", serving {what} for {age:.1f}s"
        self.log.critical(
            "worker %d (pid %d) timed out: %s; killing it", worker.index, worker.pid, why
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)

    # -- signals and stopping -----------------------------------------------------------

    def handle_signal(self, sig: int) -> None:
        if sig == signal.SIGCHLD:
            self.reap()
        elif sig in (signal.SIGTERM, signal.SIGINT):
            self.log.info("%s: graceful shutdown", signal.Signals(sig).name)
            self.begin_stop(graceful=True)
        elif sig == signal.SIGQUIT:
            self.log.info("SIGQUIT: immediate shutdown")
            self.begin_stop(graceful=False)
        else:
            self.log.info("%s: not handled yet; ignored", signal.Signals(sig).name)

    def begin_stop(self, *, graceful: bool) -> None:
        self.stopping = True
        self._graceful = graceful
        close_all(self.sockets)  # the kernel stops queueing connections no worker will take
        sig = signal.SIGTERM if graceful else signal.SIGQUIT
        for worker in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, sig)

    async def _shutdown_wait(self) -> None:
        grace = self.settings.graceful_timeout + 1.0 if self._graceful else 0.5
        deadline = time.monotonic() + grace
        while self.workers and time.monotonic() < deadline:
            try:
                sig = await asyncio.wait_for(self.signals.get(), 0.05)
            except TimeoutError:
                self.reap()
                continue
            if sig == signal.SIGCHLD:
                self.reap()
            elif sig in (signal.SIGINT, signal.SIGQUIT) or (
                sig == signal.SIGTERM and not self._graceful
            ):
                deadline = min(deadline, time.monotonic())  # asked twice: stop now
        for worker in self.workers.values():
            self.log.warning(
                "worker %d (pid %d) did not stop in time; killing", worker.index, worker.pid
            )
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
        while self.workers:
            pid, _status = os.waitpid(-1, 0)
            worker = self.workers.pop(pid, None)
            if worker is not None:
                os.close(worker.beat_fd)
        self.log.info("shutdown complete")


def _request_of(fields: list[str]) -> tuple[float, str] | None:
    """``["AGE", "METHOD", "TARGET"]`` from a heartbeat, or None for ``["0"]``."""
    if len(fields) < 3:
        return None
    return float(fields[0]), f"{fields[1]} {fields[2]}"


class Identity:
    """The user and group workers switch to, resolved once by the master."""

    def __init__(self, user: str | None, group: str | None) -> None:
        """Look the names up now; raises ValueError with a one-line message."""
        import grp
        import pwd

        self.uid: int | None = None
        self.gid: int | None = None
        self.name: str | None = None
        if group:
            try:
                self.gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
            except KeyError:
                raise ValueError(f"--group {group}: no such group") from None
        if user:
            try:
                entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
            except KeyError:
                raise ValueError(f"--user {user}: no such user") from None
            self.uid, self.name = entry.pw_uid, entry.pw_name
            if self.gid is None:
                self.gid = entry.pw_gid

    def switch(self) -> None:
        """In a worker, before it imports the application. Raises OSError."""
        if self.gid is not None:
            os.setgid(self.gid)
        if self.uid is not None:
            os.initgroups(self.name, self.gid)  # type: ignore[arg-type]
            os.setuid(self.uid)


class PidFile:
    def __init__(self, path: str) -> None:
        self.path = path

    def create(self) -> None:
        try:
            with open(self.path) as stream:
                other = int(stream.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            other = 0
        if other and other != os.getpid():
            try:
                os.kill(other, 0)
            except ProcessLookupError:
                pass
            except PermissionError:
                raise RuntimeError(f"pid file {self.path}: process {other} is running") from None
            else:
                raise RuntimeError(f"pid file {self.path}: process {other} is running")
        with open(self.path, "w") as stream:
            stream.write(f"{os.getpid()}\n")

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            with open(self.path) as stream:
                if int(stream.read().strip() or 0) != os.getpid():
                    return
            os.unlink(self.path)


def _apply_environment(app: Any) -> None:
    if app.chdir:
        os.chdir(app.chdir)
    for path in reversed(app.pythonpath or []):
        if path not in sys.path:
            sys.path.insert(0, path)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like gunicorn: the working directory is importable
    os.environ.update(app.env or {})


def serve(doc: Document) -> int:
    """Run the server the document describes until it is stopped; returns the exit code."""
    settings = doc.settings
    log = setup_error_log(settings.error_logfile, str(settings.log_level))
    try:
        arbiter = Arbiter(doc, log)
    except ValueError as exc:
        sys.stderr.write(f"corral: error: {exc}\n")
        return EXIT_CONFIG
    _apply_environment(arbiter.application)
    pidfile = PidFile(settings.pid) if settings.pid else None
    if pidfile is not None:
        try:
            pidfile.create()
        except (RuntimeError, OSError) as exc:
            sys.stderr.write(f"corral: error: {exc}\n")
            return EXIT_LISTEN
    try:
        try:
            arbiter.sockets = bind_all(
                list(doc.listeners),
                backlog=settings.backlog,
                unix_mode=settings.unix_socket_mode,
            )
        except ListenError as exc:
            sys.stderr.write(f"corral: error: {exc}\n")
            return EXIT_LISTEN
        try:
            if arbiter.application.preload:
                try:
                    arbiter.loaded_app = load_app(
                        arbiter.application.module, arbiter.application.callable
                    )
                except Exception:
                    sys.stderr.write(
                        f"corral: error: application {arbiter.application.module!r} "
                        "failed to load:\n" + traceback.format_exc()
                    )
                    return EXIT_APP_LOAD
            return arbiter.run()
        finally:
            close_all(arbiter.sockets)
    finally:
        if pidfile is not None:
            pidfile.remove()
