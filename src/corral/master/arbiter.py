"""The master process: binds the listeners, forks the workers, keeps them serving.

Invariants:
- The master never runs application code (unless ``preload`` asks for it) and
  never reads a request: workers accept on the sockets they inherit.
- Signal handlers only enqueue the signal; :meth:`Arbiter.main` acts on it.
- Every worker belongs to a :class:`Generation`: the configuration it was started
  from. A reload (HUP: the command line read again) and an apply (the control API's
  document) take the same path: build a whole new generation, and retire the old one
  only when every new worker is ready; if one of them exits before it is ready, the
  new generation is discarded and the old one keeps serving. Nothing retries a failed
  reload by itself. One change is under way at a time: a reload asked for meanwhile
  runs after it, an apply waits for it (``Arbiter.apply`` holds one asyncio.Lock).
- A document may hold no application (a server started empty for the control API):
  its generation has no worker, and is committed at once.
- A slot that is still wanted is never left empty on purpose: recycling starts a
  successor and retires the old worker only once the successor is ready.
- At start-up, a worker that exits with :data:`~corral.worker.EXIT_APP_LOAD`
  before any worker was ever ready stops the master with that code: an
  application that cannot be imported is not retried in a loop. Other early
  deaths (before ready, or younger than ``min_worker_lifetime``) are retried
  with an exponential backoff, one log line per step.
- Liveness comes from each worker's heartbeat pipe, written by its event loop: a
  silent loop, or a request older than ``timeout`` seen in a heartbeat, gets the
  worker's stacks written to the error log, then the worker killed and replaced.
- Under systemd (``master/systemd.py``) the master alone speaks for the service:
  READY once every worker is ready, RELOADING then READY around a reload, STOPPING
  at a stop, WATCHDOG=1 from its own loop. A master started by USR2 says nothing
  until it takes over (then MAINPID= too); one replaced by USR2 never says STOPPING.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from corral.appload import describe_load_failure, load_app
from corral.config import ConfigError, Document
from corral.hooks import HookError, Hooks
from corral.master import systemd, upgrade
from corral.master.identity import Identity
from corral.master.listeners import ListenError, bind_all, close_all, describe
from corral.master.pidfile import PidFile
from corral.master.process import Tally, WorkerProcess, request_of
from corral.master.recycling import draw_max_lifetime, draw_max_requests, recycle_reason
from corral.master.watch import SourceWatcher, TouchedFiles
from corral.observe.errorlog import reopen_error_log, setup_error_log
from corral.worker import EXIT_APP_LOAD, WorkerSpec, run_worker

EXIT_CONFIG = 2
EXIT_LISTEN = 1

# Crash-loop backoff: first delay and cap.
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 10.0
# A worker killed for a timeout gets this long to report its request before SIGKILL.
ABORT_GRACE = 1.0
# A retiring worker still alive this long after its graceful_timeout is killed.
DRAIN_SLACK = 5.0

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


class ApplyFailed(Exception):
    """A document that could not be put in place; the running configuration is unchanged.

    ``status`` is the control API's answer: 400 for a document this server cannot run, 500
    for one that failed while it was being applied (a bind, the user, the application).
    """

    def __init__(self, detail: str, status: int = 500) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


@dataclass(frozen=True)
class Origin:
    """Where the running document came from, so that reload and upgrade can redo it."""

    # the document as the command line and file say now; None: the running document is its
    # own source (the control API's state directory owns it), so a reload restarts it
    reread: Callable[[], Document] | None
    argv: list[str] = field(default_factory=list)  # the command's arguments, for USR2
    cwd: str = field(default_factory=os.getcwd)  # where the command was started
    config_file: str | None = None


class Generation:
    """One configuration the workers were started from, with what it resolved to."""

    def __init__(
        self,
        number: int,
        doc: Document,
        sockets: dict[str, socket.socket],
        loaded_app: Any = None,
    ) -> None:
        self.number = number
        self.doc = doc
        self.settings = doc.settings
        self.app_name: str | None
        self.application: Any
        self.app_name, self.application = next(iter(doc.applications.items()), (None, None))
        app = self.application
        # resolved now: an unknown user or group is a configuration error (ValueError)
        self.identity = Identity(app.user, app.group) if app else Identity(None, None)
        self.sockets = sockets
        self.loaded_app = loaded_app
        # set while it is the pending generation: the reason it was rolled back, or None
        self.settled: asyncio.Future[str | None] | None = None

    @property
    def workers(self) -> int:
        return self.application.workers if self.application is not None else 0


class Arbiter:
    def __init__(self, doc: Document, log: logging.Logger, origin: Origin | None = None) -> None:
        self.log = log
        self.origin = origin
        self.current = Generation(1, doc, {})
        self.pending: Generation | None = None
        # the last number given: a generation that was rolled back keeps its number, so that
        # the log never names two generations alike
        self.generation_number = 1
        self.title_name = doc.settings.proc_name or self.current.app_name or "corral"
        self.sockets: dict[str, socket.socket] = {}  # every open listener, by address
        self.workers: dict[int, WorkerProcess] = {}
        self.num_workers = self.current.workers
        self.signals: asyncio.Queue[int] = asyncio.Queue()
        self.stopping = False
        self._graceful = True
        self.exit_code = 0
        self.failures = 0  # early deaths in a row, for the backoff
        self.last_failure = 0.0  # time.monotonic() of the last one
        self.ever_ready = False
        self.all_ready = False
        self.reload_queued: str | None = None
        self.pidfile: PidFile | None = None
        self.new_master: int | None = None  # pid of the master a USR2 started
        self.old_master: int | None = None  # pid of the master this one replaces
        self.from_systemd = False  # the listeners came from socket activation
        self.touched = TouchedFiles(doc.settings.touch_reload)
        self.watcher: SourceWatcher | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.hooks = Hooks(self)  # loaded by serve(), once chdir and pythonpath apply
        self.control: Any = None  # the control API's server (corral.control.server), if on
        self.persist: Callable[[Document], None] | None = None  # saves an applied document
        self._apply_lock = asyncio.Lock()
        self.gone: dict[str, Tally] = {}  # what exited workers counted, by application

    @property
    def settings(self) -> Any:
        return self.current.settings

    @property
    def unlinks_on_close(self) -> bool:
        """Closing the listeners removes unix socket files, unless a new master or systemd
        owns them."""
        return self.new_master is None and not self.from_systemd

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
            if self.control is not None:
                loop.run_until_complete(self.control.close(unlink=self.unlinks_on_close))
            for sig in _HANDLED_SIGNALS:
                loop.remove_signal_handler(sig)
            if self.watcher is not None:
                self.watcher.stop()
            loop.close()
        return self.exit_code

    async def main(self) -> None:
        gen = self.current
        for address, sock in gen.sockets.items():
            origin = "from systemd" if self.from_systemd else address
            self.log.info("listening on %s (%s)", describe(sock), origin)
        app = gen.application
        loop = self.loop
        assert loop is not None
        if self.control is not None:
            await self.control.start(loop)
        if app is not None:
            self.log.info(
                "serving %s with %d worker(s) x %d thread(s)",
                gen.app_name,
                app.workers,
                app.threads,
            )
        else:
            self.log.info("no application configured: waiting for the control API")
        if self.settings.reload:
            self._start_source_watcher()
        self.hooks.call("when_ready")
        if app is not None:
            self.spawn(0, gen)
        else:  # nothing to wait for
            self.all_ready = True
            self._on_all_ready()
        ticker = loop.create_task(self._tick())
        interval = systemd.watchdog_interval()
        if interval is not None:
            self._watchdog(interval)
        try:
            while not self.stopping:
                sig = await self.signals.get()
                self.handle_signal(sig)
            await self._shutdown_wait()
        finally:
            ticker.cancel()

    def _watchdog(self, interval: float) -> None:
        """Sent from the master's loop: systemd hears of a stuck master, not of its workers."""
        systemd.notify("WATCHDOG=1")
        assert self.loop is not None
        self.loop.call_later(interval, self._watchdog, interval)

    def _notify(self, *lines: str) -> None:
        """Tell systemd, unless this master is a USR2 upgrade that has not taken over yet."""
        if self.old_master is None:
            systemd.notify(*lines)

    def _notify_ready(self) -> None:
        self._notify("READY=1", self._status())

    def _status(self) -> str:
        if self.current.application is None:
            return "STATUS=no application configured"
        return f"STATUS=serving {self.current.app_name} with {self.num_workers} worker(s)"

    def _start_source_watcher(self) -> None:
        gen = self.current
        pythonpath = gen.application.pythonpath if gen.application is not None else []
        directories = [os.getcwd(), *pythonpath]
        files = [self.origin.config_file] if self.origin and self.origin.config_file else []
        loop = self.loop
        assert loop is not None

        def changed(path: str) -> None:
            loop.call_soon_threadsafe(self.reload, f"{path} changed")

        self.watcher = SourceWatcher(directories, files, changed)
        self.watcher.start()
        self.log.info("reload: watching %s for changes", ", ".join(directories + files))

    # -- workers ----------------------------------------------------------------------

    def spawn(
        self, slot: int, gen: Generation, replaces: WorkerProcess | None = None
    ) -> WorkerProcess | None:
        if self.stopping:
            return None
        read_fd, write_fd = os.pipe()
        max_requests = draw_max_requests(gen.application)
        self.hooks.call("pre_fork", self.hooks.new_worker(gen))
        sys.stdout.flush()
        sys.stderr.flush()
        # Until the worker sets its own, the child has the master's signal handlers, which
        # pass a signal on to the master's loop through the wakeup descriptor both hold: the
        # signals stay blocked across the fork, and Worker.run unblocks them.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED_SIGNALS)
        try:
            pid = os.fork()
        except OSError:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        if pid == 0:  # the worker
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                os.close(read_fd)
                for other in self.workers.values():
                    with contextlib.suppress(OSError):
                        os.close(other.beat_fd)
                for address, sock in self.sockets.items():
                    if address not in gen.sockets:
                        sock.close()  # a listener no worker of gen serves must not stay open
                if self.control is not None:
                    self.control.close_in_child()  # else a worker holds API connections open
                self.hooks.call("post_fork")
                code = self._worker_main(gen, write_fd, max_requests)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write_fd)
        worker = WorkerProcess(pid, slot, gen, read_fd)
        worker.max_lifetime = draw_max_lifetime(gen.application)
        worker.replaces = replaces
        self.workers[pid] = worker
        self.hooks.adopt(worker)
        assert self.loop is not None
        self.loop.add_reader(read_fd, self._on_beat, worker)
        self.log.debug("worker %d spawned (pid %d, generation %d)", slot, pid, gen.number)
        return worker

    def _worker_main(self, gen: Generation, beat_fd: int, max_requests: int) -> int:
        _set_title(f"corral: worker [{self.title_name}]")
        app = gen.application
        settings = gen.settings
        if gen.number > 1 and self.origin is not None:
            os.chdir(self.origin.cwd)  # a reloaded configuration's paths are relative to it
            _apply_environment(app)
        access_log = None
        if gen.doc.access_logfile:  # opened before the switch, as Gunicorn does
            from corral.observe.accesslog import AccessLog

            access_log = AccessLog(gen.doc.access_logfile, gen.doc.access_logformat)
        try:
            gen.identity.switch()
        except OSError as exc:
            sys.stderr.write(f"corral: error: cannot switch the worker's user: {exc}\n")
            return EXIT_APP_LOAD  # the master stops: a respawn would fail the same way
        spec = WorkerSpec(
            application=app,
            settings=settings,
            sockets=list(gen.sockets.values()),
            heartbeat_fd=beat_fd,
            loaded_app=gen.loaded_app,
            multiprocess=app.workers > 1,
            access_log=access_log,
            max_requests=max_requests,
            hooks=self.hooks,
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
            self._on_line(worker, line)

    def _on_line(self, worker: WorkerProcess, line: str) -> None:
        """One heartbeat line (see worker.py)."""
        if worker.record(line):
            return
        if line == "ready":
            self._on_ready(worker)
        elif line.startswith("retire "):
            limit = worker.generation.application.max_requests
            worker.retire_asked = f"served {line[7:]} requests (max_requests {limit})"
            self._consider_recycling(worker)
        elif line.startswith("abort "):
            worker.request = request_of(line.split(" ", 3)[1:])
            self._finish_kill(worker)
        elif line.startswith("stuck ") and not worker.timed_out:
            worker.request = request_of(line.split(" ", 3)[1:])
            app = worker.generation.application
            self._kill(
                worker,
                "a request did not unwind within request_timeout_grace "
                f"({app.request_timeout_grace:g}s) after its request_timeout "
                f"({app.request_timeout:g}s)",
            )

    def _on_ready(self, worker: WorkerProcess) -> None:
        worker.ready = True
        self.log.info(
            "worker %d ready (pid %d, generation %d)",
            worker.slot,
            worker.pid,
            worker.generation.number,
        )
        if not self.ever_ready:
            self.ever_ready = True  # the application imports: start the others now
            for slot in range(1, self.num_workers):
                if not self._slot_taken(slot, self.current):
                    self.spawn(slot, self.current)
        old = worker.replaces
        if old is not None:
            worker.replaces = None
            old.successor = None
            if old.pid in self.workers:
                self._retire(old)
        pending = self.pending
        if worker.generation is pending and all(
            w.ready for w in self.workers.values() if w.generation is pending
        ):
            self._commit_reload()
        elif not self.all_ready and self._all_slots_ready():
            self.all_ready = True
            self._on_all_ready()

    def _all_slots_ready(self) -> bool:
        ready = {
            w.slot
            for w in self.workers.values()
            if w.ready and w.generation is self.current and not w.retiring
        }
        return len(ready) >= self.num_workers

    def _on_all_ready(self) -> None:
        """Start-up is complete: every worker of the first generation is ready."""
        if self.old_master is None:
            self._notify_ready()
        else:
            # systemd follows this master from now on
            systemd.notify(f"MAINPID={os.getpid()}", "READY=1", self._status())
            self.log.info(
                "upgrade: this master serves; asking the old master (pid %d) to stop",
                self.old_master,
            )
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.old_master, signal.SIGTERM)
            self.old_master = None

    def tally(self, app_name: str) -> Tally:
        """What ``app_name``'s workers counted, exited ones included."""
        total = Tally()
        if app_name in self.gone:
            total.add(self.gone[app_name])
        for worker in self.workers.values():
            if worker.generation.app_name == app_name:
                total.add(worker)
        return total

    def _slot_taken(self, slot: int, gen: Generation) -> bool:
        return any(
            w.slot == slot and w.generation is gen and not w.retiring for w in self.workers.values()
        )

    def _retire(self, worker: WorkerProcess) -> None:
        """Stop a worker on purpose: drain if it serves, kill if it was still booting."""
        if worker.retiring:
            return
        worker.retiring = True
        worker.retired_at = time.monotonic()
        successor = worker.successor
        if successor is not None:
            worker.successor = None
            self._retire(successor)
        sig = signal.SIGTERM if worker.ready else signal.SIGKILL
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, sig)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.new_master:
                self._on_new_master_exit(status)
                continue
            worker = self.workers.pop(pid, None)
            if worker is None:
                continue
            assert self.loop is not None
            self.loop.remove_reader(worker.beat_fd)
            self._last_words(worker)
            os.close(worker.beat_fd)
            if worker.generation.app_name is not None:
                self.gone.setdefault(worker.generation.app_name, Tally()).add(worker)
            self._on_exit(worker, status)

    def _last_words(self, worker: WorkerProcess) -> None:
        """What the worker wrote just before it exited and the loop has not read yet: its
        ``failed`` line names why a new generation could not start; a drained worker's last
        ``hb`` line, how many requests it served."""
        os.set_blocking(worker.beat_fd, False)
        data = b""
        with contextlib.suppress(OSError):
            while chunk := os.read(worker.beat_fd, 65536):
                data += chunk
        for line in worker.feed(data):
            worker.record(line)

    def _on_exit(self, worker: WorkerProcess, status: int) -> None:
        self.hooks.call("child_exit", worker)
        code = os.waitstatus_to_exitcode(status)
        how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
        slot, pid = worker.slot, worker.pid
        if self.stopping:
            self.log.debug("worker %d (pid %d) exited: %s", slot, pid, how)
            return
        if worker.retiring:
            self.log.info("worker %d (pid %d) exited: %s", slot, pid, how)
            return
        gen = worker.generation
        if gen is self.pending:  # ready or not: the new generation is not whole
            when = "after it was ready" if worker.ready else "before it was ready"
            self._rollback_reload(f"worker {slot} exited ({how}) {when}", worker.failure)
            return
        if code == EXIT_APP_LOAD and not self.ever_ready:
            self.log.critical("application %s failed to load; shutting down", gen.app_name)
            self.exit_code = EXIT_APP_LOAD
            self.begin_stop(graceful=False)
            return
        old = worker.replaces
        if old is not None:  # a successor that did not make it: the old worker serves on
            old.successor = None
            delay = self._backoff_delay()
            old.recycle_not_before = time.monotonic() + delay
            assert self.loop is not None
            self.loop.call_later(delay + 0.01, self._consider_recycling, old)
            self.log.error(
                "replacement for worker %d (pid %d) exited (%s) before it was ready; "
                "worker %d keeps serving, next try in %.1fs",
                slot,
                old.pid,
                how,
                slot,
                delay,
            )
            return
        lived = worker.age
        if worker.timed_out:
            self.log.info("worker %d (pid %d) exited: %s", slot, pid, how)
        else:
            self.log.error("worker %d (pid %d) died: %s after %.1fs", slot, pid, how, lived)
        successor = worker.successor
        if successor is not None:  # it was being recycled: the successor takes the slot
            successor.replaces = None
            return
        if gen is not self.current or slot >= self.num_workers:
            return
        if worker.timed_out or (worker.ready and lived >= gen.application.min_worker_lifetime):
            self.failures = 0
            self.spawn(slot, gen)
            return
        delay = self._backoff_delay()
        self.log.error(
            "workers keep dying young (%d in a row): respawning worker %d in %.1fs",
            self.failures,
            slot,
            delay,
        )
        assert self.loop is not None
        self.loop.call_later(delay, self._respawn, slot, gen)

    def _backoff_delay(self) -> float:
        self.failures += 1
        self.last_failure = time.monotonic()
        return min(BACKOFF_FIRST * 2 ** (self.failures - 1), BACKOFF_MAX)

    def _respawn(self, slot: int, gen: Generation) -> None:
        if gen is self.current and slot < self.num_workers and not self._slot_taken(slot, gen):
            self.spawn(slot, gen)

    # -- once a second ------------------------------------------------------------------

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for worker in list(self.workers.values()):
                self._check(worker, now)
            touched = self.touched.changed()
            if touched is not None:
                self.reload(f"{touched} was touched")

    def _check(self, worker: WorkerProcess, now: float) -> None:
        settings = worker.generation.settings
        if worker.retiring:
            overdue = now - worker.retired_at > settings.graceful_timeout + DRAIN_SLACK
            if overdue and not worker.killed:
                worker.killed = True
                self.log.warning(
                    "worker %d (pid %d) still draining after graceful_timeout (%gs); killing it",
                    worker.slot,
                    worker.pid,
                    settings.graceful_timeout,
                )
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGKILL)
            return
        if worker.timed_out:
            return
        # the deaths in a row are over when a worker started since the last one outlives
        # min_worker_lifetime; an older worker proves nothing (its successors may keep dying)
        stable = now - worker.started >= worker.generation.application.min_worker_lifetime
        if worker.ready and self.failures and stable and worker.started > self.last_failure:
            self.failures = 0
        timeout = settings.timeout
        silent = now - worker.last_beat
        if timeout:
            if not worker.ready and silent > max(timeout, 30.0):
                self._kill(worker, f"not ready after {silent:.0f}s")
                return
            if worker.ready and silent > timeout:
                self._kill(worker, f"event loop silent for {silent:.0f}s (timeout {timeout:g}s)")
                return
            if worker.request is not None and worker.request[0] > timeout:
                self._kill(worker, f"a request ran past the timeout ({timeout:g}s)")
                return
        self._consider_recycling(worker)

    def _consider_recycling(self, worker: WorkerProcess) -> None:
        gen = worker.generation
        if (
            self.stopping
            or worker.pid not in self.workers
            or not worker.ready
            or worker.retiring
            or worker.successor is not None
            or worker.replaces is not None
            or gen is not self.current
            or self.pending is not None
            or time.monotonic() < worker.recycle_not_before
        ):
            return
        reason = recycle_reason(worker, gen.application, worker.age)
        if reason is None:
            return
        self.log.info("worker %d (pid %d) recycled: %s", worker.slot, worker.pid, reason)
        # retire_asked stays: the worker says it once, and a successor that fails to start
        # is tried again (recycle_not_before)
        worker.successor = self.spawn(worker.slot, gen, replaces=worker)

    def _kill(self, worker: WorkerProcess, why: str) -> None:
        """Timeout: stacks to the error log (USR2), the request reported (ABRT), then KILL."""
        worker.timed_out = True
        worker.kill_reason = why
        self.log.error(
            "worker %d (pid %d): %s; its threads' stacks follow", worker.slot, worker.pid, why
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGUSR2)
            os.kill(worker.pid, signal.SIGABRT)
        assert self.loop is not None
        self.loop.call_later(ABORT_GRACE, self._finish_kill, worker)

    def _finish_kill(self, worker: WorkerProcess) -> None:
        why, worker.kill_reason = worker.kill_reason, None
        if why is None:
            return  # already done
        if worker.request is not None:  # from its last heartbeat, or its abort line
            age, what = worker.request
            why += f", serving {what} for {age:.1f}s"
        self.log.critical(
            "worker %d (pid %d) timed out: %s; killing it", worker.slot, worker.pid, why
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)

    # -- reload -------------------------------------------------------------------------

    def reload(self, why: str) -> None:
        """Start a new generation from the configuration as it is now; see the module doc."""
        if self.stopping:
            return
        if self.pending is not None:
            self.reload_queued = why  # after the one under way, so the latest change counts
            return
        with contextlib.suppress(ApplyFailed):  # logged
            self._start_generation(self._reread, "reloading", why)

    def _reread(self) -> Document:
        """The document a reload starts from: the command line and file read again, or the
        running document when it is its own source."""
        if self.origin is None or self.origin.reread is None:
            return self.current.doc
        here = os.getcwd()
        os.chdir(self.origin.cwd)  # the command line's relative paths (-c FILE) start here
        try:
            return self.origin.reread()
        finally:
            os.chdir(here)

    async def apply(
        self,
        change: Document | Callable[[Document], Document],
        why: str,
        *,
        restart: bool = False,
    ) -> None:
        """Run the document ``change`` gives (a document, or a function of the running one);
        return once it serves, or raise `ApplyFailed` once it was rolled back.

        Changes are serialised: ``change`` is called with the running document only when no
        other change is under way, and what it raises goes to the caller unchanged. A
        document equal to the running one is done at once, unless ``restart`` asks for new
        workers all the same. When it serves, ``persist`` (if set) saves it, still in turn.
        """
        async with self._apply_lock:
            while self.pending is not None:
                assert self.pending.settled is not None
                await asyncio.shield(self.pending.settled)
            if self.stopping:
                raise ApplyFailed("the server is stopping", 503)
            doc = change(self.current.doc) if callable(change) else change
            if doc == self.current.doc and not restart:
                return
            if len(doc.applications) > 1:
                raise ApplyFailed(
                    "several applications: not supported yet (this server runs one "
                    f"application; the document names {len(doc.applications)})",
                    400,
                )
            gen = self._start_generation(lambda: doc, "reconfiguring", why)
            assert gen.settled is not None
            failure = await asyncio.shield(gen.settled)
            if failure is not None:
                raise ApplyFailed(failure)
            if self.persist is not None:
                try:
                    self.persist(doc)
                except OSError as exc:
                    self.log.error("the new configuration could not be saved: %s", exc)
                    raise ApplyFailed(
                        f"the new configuration serves, but could not be saved: {exc}"
                    ) from None

    def _start_generation(
        self, make_doc: Callable[[], Document], doing: str, why: str
    ) -> Generation:
        """Bind, resolve and spawn the generation ``make_doc()`` describes; it becomes
        ``pending`` (or current at once, without an application). When that fails before
        anything is spawned (a bad file, an address in use, a preload that raises), the
        failure is logged and raised as `ApplyFailed`; the running workers go on."""
        self._notify("RELOADING=1", systemd.monotonic_usec(), f"STATUS=reloading ({why})")
        self.log.info("%s (%s)", doing, why)
        failed = "reload failed" if doing == "reloading" else "reconfiguration failed"
        try:
            gen = self._next_generation(make_doc())
        except (ValueError, ListenError) as exc:  # ConfigError is a ValueError
            self.log.error("%s: %s; the running workers keep serving", failed, exc)
            self._notify_ready()
            raise ApplyFailed(str(exc)) from None
        except Exception as exc:
            self.log.error(
                "%s: the application could not be loaded; the running workers keep serving\n%s",
                failed,
                traceback.format_exc().rstrip(),
            )
            self._notify_ready()
            raise ApplyFailed(
                f"the application failed to load: {describe_load_failure(exc)}"
            ) from None
        assert self.loop is not None
        gen.settled = self.loop.create_future()
        self.pending = gen
        self.hooks.call("on_reload")
        for slot in range(gen.workers):
            self.spawn(slot, gen)
        if gen.workers == 0:  # nothing to wait for
            self._commit_reload()
        return gen

    def _next_generation(self, doc: Document) -> Generation:
        current = self.current
        sockets: dict[str, socket.socket] = {}
        new = [address for address in doc.listeners if address not in self.sockets]
        bound = bind_all(new, backlog=doc.settings.backlog, unix_mode=doc.settings.unix_socket_mode)
        for address in doc.listeners:
            sockets[address] = bound.get(address) or self.sockets[address]
        self.sockets.update(bound)
        for address, sock in bound.items():
            self.log.info("listening on %s (%s)", describe(sock), address)
        loaded = None
        app = next(iter(doc.applications.values()), None)
        if app is not None and app.preload:
            old = current.application
            same = old is not None and (app.module, app.callable) == (old.module, old.callable)
            if same and current.loaded_app is not None:
                loaded = current.loaded_app
                self.log.info("the preloaded application is kept: restart to load new code")
            else:
                try:
                    loaded = load_app(app.module, app.callable)
                except BaseException:
                    self._close_unused(set(current.sockets))
                    raise
        try:
            gen = Generation(self.generation_number + 1, doc, sockets, loaded)
        except ValueError:
            self._close_unused(set(current.sockets))
            raise
        self.generation_number = gen.number
        return gen

    def _commit_reload(self) -> None:
        gen = self.pending
        assert gen is not None
        old = self.current
        self.pending = None
        self.current = gen
        self.num_workers = gen.workers
        self.hooks.call("nworkers_changed", self.num_workers)
        for worker in list(self.workers.values()):
            if worker.generation is not gen:
                self._retire(worker)
        self._close_unused(set(gen.sockets))
        if (gen.settings.error_logfile, gen.settings.log_level) != (
            old.settings.error_logfile,
            old.settings.log_level,
        ):
            setup_error_log(gen.settings.error_logfile, str(gen.settings.log_level))
        self.touched = TouchedFiles(gen.settings.touch_reload)
        title = gen.settings.proc_name or gen.app_name or "corral"
        if title != self.title_name:
            self.title_name = title
            _set_title(f"corral: master [{title}]")
        self.log.info(
            "reload complete: generation %d serving with %d worker(s)", gen.number, gen.workers
        )
        if gen.settled is not None and not gen.settled.done():
            gen.settled.set_result(None)
        self._after_reload()

    def _rollback_reload(self, why: str, cause: str | None = None) -> None:
        gen = self.pending
        assert gen is not None
        self.pending = None
        for worker in list(self.workers.values()):
            if worker.generation is gen:
                self._retire(worker)
        self._close_unused(set(self.current.sockets))
        self.log.error("reload failed: %s; generation %d keeps serving", why, self.current.number)
        if gen.settled is not None and not gen.settled.done():
            gen.settled.set_result(f"{why}: {cause}" if cause else why)
        self._after_reload()

    def _after_reload(self) -> None:
        queued, self.reload_queued = self.reload_queued, None
        if queued is not None:
            self.reload(queued)
        else:
            self._notify_ready()

    def _close_unused(self, keep: set[str]) -> None:
        """Close the master's listeners outside ``keep`` (and the pending generation's)."""
        if self.pending is not None:
            keep |= set(self.pending.sockets)
        unused = {a: s for a, s in self.sockets.items() if a not in keep}
        for address in unused:
            del self.sockets[address]
        close_all(unused)

    # -- signals and stopping -----------------------------------------------------------

    def handle_signal(self, sig: int) -> None:
        name = signal.Signals(sig).name
        if sig == signal.SIGCHLD:
            self.reap()
        elif sig in (signal.SIGTERM, signal.SIGINT):
            self.log.info("%s: graceful shutdown", name)
            self.begin_stop(graceful=True)
        elif sig == signal.SIGQUIT:
            self.log.info("SIGQUIT: immediate shutdown")
            self.begin_stop(graceful=False)
        elif sig == signal.SIGHUP:
            self.reload("SIGHUP")
        elif sig in (signal.SIGTTIN, signal.SIGTTOU) and self.current.application is None:
            self.log.info("%s: no application configured; ignored", name)
        elif sig == signal.SIGTTIN:
            self.num_workers += 1
            self.hooks.call("nworkers_changed", self.num_workers)
            self.log.info("SIGTTIN: %d worker(s)", self.num_workers)
            self._respawn(self.num_workers - 1, self.current)
        elif sig == signal.SIGTTOU:
            if self.num_workers <= 1:
                self.log.info("SIGTTOU: already at %d worker(s); ignored", self.num_workers)
                return
            self.num_workers -= 1
            self.hooks.call("nworkers_changed", self.num_workers)
            self.log.info("SIGTTOU: %d worker(s)", self.num_workers)
            self._retire_slots_from(self.num_workers)
        elif sig == signal.SIGWINCH:
            self.log.info(
                "SIGWINCH: stopping the workers; the listeners stay open (SIGTTIN or SIGHUP "
                "starts workers again)"
            )
            self.num_workers = 0
            self.hooks.call("nworkers_changed", self.num_workers)
            if self.pending is not None:
                self._rollback_reload("SIGWINCH")
            self._retire_slots_from(0)
        elif sig == signal.SIGUSR1:
            self.log.info("SIGUSR1: reopening the log files")
            reopen_error_log()
            for worker in self.workers.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGUSR1)
        elif sig == signal.SIGUSR2:
            self._upgrade()

    def _retire_slots_from(self, first: int) -> None:
        for worker in list(self.workers.values()):
            if worker.generation is self.current and worker.slot >= first:
                self._retire(worker)

    def begin_stop(self, *, graceful: bool) -> None:
        self.stopping = True
        self._graceful = graceful
        pending = self.pending
        if pending is not None and pending.settled is not None and not pending.settled.done():
            pending.settled.set_result("the server is stopping")
        if self.new_master is None:  # a master replaced by USR2 is not the service stopping
            self._notify("STOPPING=1")
        # the kernel stops queueing connections no worker will take; the socket files
        # of unix listeners stay when a new master (or systemd) holds them
        close_all(self.sockets, unlink=self.unlinks_on_close)
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
                "worker %d (pid %d) did not stop in time; killing", worker.slot, worker.pid
            )
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
        while self.workers:
            pid, _status = os.waitpid(-1, 0)
            worker = self.workers.pop(pid, None)
            if worker is not None:
                os.close(worker.beat_fd)
                self.hooks.call("child_exit", worker)
        self.log.info("shutdown complete")

    # -- upgrade (USR2) -----------------------------------------------------------------

    def _upgrade(self) -> None:
        if self.origin is None or self.new_master is not None:
            self.log.info("SIGUSR2: an upgrade is already under way; ignored")
            return
        if self.pidfile is not None:
            self.pidfile.set_aside()
        sockets = dict(self.sockets)
        if self.control is not None:  # the new master serves the API on the same socket
            sockets[self.control.inherit_key] = self.control.socket
        self.new_master = upgrade.start_new_master(
            self.origin.argv,
            self.origin.cwd,
            sockets,
            partial(self.hooks.call, "pre_exec"),
            activated=self.from_systemd,
        )
        self.log.info(
            "SIGUSR2: started a new master (pid %d); this one stops when it is ready",
            self.new_master,
        )

    def _on_new_master_exit(self, status: int) -> None:
        code = os.waitstatus_to_exitcode(status)
        self.new_master = None
        if self.stopping:
            return
        if self.pidfile is not None:
            self.pidfile.restore()
        self.log.error(
            "upgrade failed: the new master exited (%s) before it took over; this master "
            "keeps serving",
            f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}",
        )


def _apply_environment(app: Any) -> None:
    if app.chdir:
        os.chdir(app.chdir)
    for path in reversed(app.pythonpath or []):
        if path not in sys.path:
            sys.path.insert(0, path)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like gunicorn: the working directory is importable
    os.environ.update(app.env or {})


def serve(doc: Document, origin: Origin | None = None, control: Any = None) -> int:
    """Run the server the document describes until it is stopped; returns the exit code.

    ``control`` (`corral.control.options.ControlOptions`, or None) turns the control API on.
    """
    settings = doc.settings
    log = setup_error_log(settings.error_logfile, str(settings.log_level))
    old_master = upgrade.take_old_master()
    inherited = upgrade.take_inherited_listeners()
    if control is None:
        return _serve(doc, origin, log, old_master, inherited, None)
    from corral.control.server import ControlServer

    control_server = ControlServer(control, log)
    try:
        control_server.bind(inherited.pop(control_server.inherit_key, None))
    except (ConfigError, ListenError) as exc:
        sys.stderr.write(f"corral: error: {exc}\n")
        close_all(inherited, unlink=False)
        return EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_LISTEN
    try:
        return _serve(doc, origin, log, old_master, inherited, control_server)
    finally:  # unless the arbiter ran and closed it: a start that failed
        control_server.close_socket(unlink=control_server.bound_here)


def _serve(
    doc: Document,
    origin: Origin | None,
    log: logging.Logger,
    old_master: int | None,
    inherited: dict[str, socket.socket],
    control_server: Any,
) -> int:
    settings = doc.settings
    activated = systemd.listen_fds()
    if upgrade.take_activated():  # an old master passed on what systemd gave it
        activated = inherited
    if activated:  # Gunicorn's rule: they replace the configured binds, reloads included
        addresses = list(activated)
        if set(doc.listeners) != set(addresses):
            log.info("socket activation: not binding %s", ", ".join(doc.listeners))
        doc = systemd.replace_binds(doc, addresses)
        if origin is not None and origin.reread is not None:
            reread = origin.reread
            origin = replace(origin, reread=lambda: systemd.replace_binds(reread(), addresses))
        inherited = activated
    try:
        arbiter = Arbiter(doc, log, origin)
    except ValueError as exc:
        sys.stderr.write(f"corral: error: {exc}\n")
        return EXIT_CONFIG
    if control_server is not None:
        control_server.arbiter = arbiter
        arbiter.control = control_server
        if control_server.options.owns_config:
            arbiter.persist = control_server.save
    if settings.reload:
        try:
            import watchfiles  # noqa: F401  (the watcher thread imports it again)
        except ImportError:
            sys.stderr.write(
                "corral: error: --reload needs the watchfiles package: "
                "pip install 'corral[reload]'\n"
            )
            return EXIT_CONFIG
    arbiter.old_master = old_master
    arbiter.from_systemd = bool(activated)
    if arbiter.current.application is not None:
        _apply_environment(arbiter.current.application)
    try:
        arbiter.hooks.load(settings.hooks)
    except HookError as exc:
        sys.stderr.write(f"corral: error: {exc}\n")
        close_all(inherited, unlink=False)
        return EXIT_CONFIG
    arbiter.hooks.call("nworkers_changed", arbiter.num_workers)
    pidfile = PidFile(settings.pid) if settings.pid else None
    if pidfile is not None:
        try:
            pidfile.create()
        except (RuntimeError, OSError) as exc:
            sys.stderr.write(f"corral: error: {exc}\n")
            close_all(inherited, unlink=False)
            return EXIT_LISTEN
    arbiter.pidfile = pidfile
    try:
        arbiter.hooks.call("on_starting")
        sockets = {a: s for a, s in inherited.items() if a in doc.listeners}
        close_all({a: s for a, s in inherited.items() if a not in sockets}, unlink=False)
        try:
            sockets.update(
                bind_all(
                    [address for address in doc.listeners if address not in sockets],
                    backlog=settings.backlog,
                    unix_mode=settings.unix_socket_mode,
                )
            )
        except ListenError as exc:
            sys.stderr.write(f"corral: error: {exc}\n")
            close_all(sockets, unlink=False)
            return EXIT_LISTEN
        arbiter.sockets = dict(sockets)
        arbiter.current.sockets = sockets
        try:
            app = arbiter.current.application
            if app is not None and app.preload:
                try:
                    arbiter.current.loaded_app = load_app(app.module, app.callable)
                except Exception:
                    sys.stderr.write(
                        f"corral: error: application {app.module!r} failed to load:\n"
                        + traceback.format_exc()
                    )
                    return EXIT_APP_LOAD
            return arbiter.run()
        finally:
            close_all(arbiter.sockets, unlink=arbiter.unlinks_on_close)
    finally:
        if pidfile is not None:
            pidfile.remove()
        arbiter.hooks.call("on_exit")
