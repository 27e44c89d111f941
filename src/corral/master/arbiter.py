"""The master process: binds the listeners, forks the workers, keeps them serving.

The arbiter composes the master's parts and runs its loop (signals, the one-second tick, the
start-up's end, systemd's notices). Each part has its own state and is given what it uses,
never the arbiter: the supervisor of the workers (supervisor.py, which owns timeouts.py),
reload.py (the generations' changes), exits.py, stopping.py, upgrade.py, and the external
programs (corral/external/supervisor.py). The decisions are pure functions (lifecycle.py,
scaling.py, recycling.py), unit tested alone.

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
  runs after it, an apply waits for it (``Reloads.apply`` in reload.py holds one asyncio.Lock).
- A document may hold no application (a server started empty for the control API):
  its generation has no worker, and is committed at once; unless it has listeners, whose
  routes (files, ``return`` answers) one pool of workers without an application serves
  (`generation.ROUTES_POOL`).
- A slot that is still wanted is never left empty on purpose: recycling starts a
  successor and retires the old worker only once the successor is ready.
- At start-up, a worker that exits with :data:`~corral.server.worker.EXIT_APP_LOAD`
  before start-up completed stops the master with that code: an application that
  cannot be imported is not retried in a loop. Except when the state directory owns
  the configuration: stopping would leave no control API to fix it through, so the
  other applications serve and that one is retried like an early death. Other early
  deaths (before ready, or younger than ``min_worker_lifetime``) are retried
  with an exponential backoff, one log line per step.
- Liveness comes from each worker's heartbeat pipe, written by its event loop: a silent
  loop, or a request older than ``timeout`` seen in a heartbeat, gets the worker's stacks
  logged, then it is killed and replaced (``timeouts.py``: never early, within 1 s).
- Under systemd (``master/systemd.py``) the master alone speaks for the service:
  READY once every worker is ready, RELOADING then READY around a reload, STOPPING
  at a stop, WATCHDOG=1 from its own loop. A master started by USR2 says nothing
  until it takes over (then MAINPID= too); one replaced by USR2 never says STOPPING.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from corral import __version__, core
from corral.config import Document
from corral.config.listener_tls import settings_files
from corral.external.supervisor import Externals
from corral.hooks import Hooks
from corral.master import child, systemd
from corral.master.events import Events
from corral.master.exits import Exits
from corral.master.generation import ApplyFailed, Generation, Generations, Origin, scheme_of
from corral.master.listeners import describe
from corral.master.process import Tally, WorkerProcess
from corral.master.reload import Reloads
from corral.master.stopping import Stop
from corral.master.supervisor import Supervisor
from corral.master.upgrade import Upgrade
from corral.master.watch import SourceWatcher, TouchedFiles, watch_sources
from corral.observe.errorlog import logging_changed, reopen_error_log, setup_logging

EXIT_CONFIG = 2
EXIT_LISTEN = 1


class Arbiter:
    def __init__(
        self, doc: Document, log: logging.Logger, origin: Origin | None = None, control: Any = None
    ) -> None:
        self.log = log
        self.origin = origin
        self.generations = Generations(Generation(1, doc, {}))
        self.title_name = doc.settings.proc_name or self.current.app_name or "corral"
        self.signals: asyncio.Queue[int] = asyncio.Queue()
        self.events = Events()  # the recent ones, for the control API
        self.all_ready = False  # start-up is complete: every pool was ready once
        self.started: Callable[[], None] | None = None  # called once start-up is complete
        self.touched = TouchedFiles([*doc.settings.touch_reload, *settings_files(doc.settings)])
        self.watcher: SourceWatcher | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.hooks = Hooks(self)  # loaded by serve(), once chdir and pythonpath apply
        pre_exec = partial(self.hooks.call, "pre_exec")
        self.upgrade = Upgrade(log, origin, pre_exec, lambda: self.supervisor.stopping)
        self.control = control  # the control API's server (corral.control.server), if on
        self.emperor: Any = None  # the vassal files' reader (master/emperor.py), if any
        self._vassal_change: asyncio.Task[None] | None = None
        # the pools of programs that are not workers
        self.externals = Externals(self.generations, self.events, log, self._externals_settled)
        self.supervisor = Supervisor(
            self.generations,
            self.hooks,
            self.events,
            log,
            control=control,
            blocked=SIGNALS,
            other_sockets=lambda: self.externals.sockets,
            on_ready=self._on_ready,
        )
        self.workers = self.supervisor.workers
        self.reloads = Reloads(
            self.generations,
            self.supervisor,
            self.hooks,
            self.events,
            log,
            origin=origin,
            certificates=None if control is None else control.certificates,
            committed=self.committed,
            notify=self.notify,
        )
        self.stop = Stop(
            self.supervisor,
            self.generations,
            self.externals,
            self.upgrade,
            self.hooks,
            log,
            self.notify,
        )
        self.exits = Exits(
            self.supervisor,
            self.generations,
            self.hooks,
            self.events,
            log,
            children=[self.upgrade.exited, self.externals.exited],
            may_shut_down=origin is None or origin.reread is not None,
            rollback=self.reloads.rollback,
            shut_down=self.stop.shut_down,
            started=lambda: self.all_ready,
            check_started=self.check_started,
        )

    @property
    def current(self) -> Generation:
        return self.generations.current

    @property
    def pending(self) -> Generation | None:
        return self.generations.pending

    @property
    def sockets(self) -> dict[str, socket.socket]:
        return self.generations.sockets

    @property
    def handoffs(self) -> dict[str, tuple[str, socket.socket]]:
        return self.generations.handoffs

    @property
    def settings(self) -> Any:
        return self.current.settings

    @property
    def stopping(self) -> bool:
        return self.supervisor.stopping

    @property
    def counts(self) -> dict[str, int]:
        return self.supervisor.counts

    @property
    def gone(self) -> dict[str, Tally]:
        return self.supervisor.gone

    def latency_histogram(self, settings: Any = None) -> bool:
        """Whether workers count request durations (by ``settings``, the running ones by
        default)."""
        return self.supervisor.latency_histogram(settings or self.settings)

    @property
    def num_workers(self) -> int:
        """The workers wanted, all applications together (Gunicorn's ``num_workers``)."""
        return self.supervisor.num_workers

    def tally(self, app_name: str) -> Tally:
        """What ``app_name``'s workers counted, exited ones included."""
        return self.supervisor.tally(app_name)

    # -- start ----------------------------------------------------------------------

    def run(self) -> int:
        child.set_master_title(self.title_name)
        loop = asyncio.new_event_loop()
        self.loop = loop
        self.signals = asyncio.Queue()
        for sig in SIGNALS:
            loop.add_signal_handler(sig, self.signals.put_nowait, sig)
        try:
            loop.run_until_complete(self.main())
        finally:
            if self.control is not None:
                loop.run_until_complete(self.control.close(unlink=self.upgrade.unlinks_on_close))
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)
            if self.watcher is not None:
                self.watcher.stop()
            loop.close()
        return self.stop.exit_code

    async def main(self) -> None:
        gen = self.current
        self.log.info("corral %s, %s", __version__, core.NAME)
        if self.origin is not None and self.origin.config_note is not None:
            self.log.info("%s", self.origin.config_note)
        for address, sock in gen.sockets.items():
            activated = self.upgrade.activated
            origin = f"from {activated}" if activated is not None else address
            scheme = scheme_of(gen.doc, address)
            self.log.info("listening on %s (%s)", describe(sock, scheme), origin)
        loop = self.loop
        assert loop is not None
        if self.control is not None:
            await self.control.start(loop)
        for pool in gen.pools.values():
            self.log.info("serving %s", pool.serving)
        if not gen.pools and self.emperor is not None:
            self.log.info("no application configured: waiting for files in the emperor's directory")
        elif not gen.pools and not gen.doc.applications:
            self.log.info("no application configured: waiting for the control API")
        if self.settings.reload:
            config_file = self.origin.config_file if self.origin else None
            self.watcher = watch_sources(gen, config_file, loop, self.reloads.reload, self.log)
        self.hooks.call("when_ready")
        # one worker per application first: one that cannot import its application stops
        # the start-up before the others are forked (see _on_ready)
        for pool in gen.pools.values():
            self.supervisor.spawn(gen, pool, 0)
        self.externals.update(gen.doc)
        # nothing to wait for (the programs' answers are Externals._settled's)
        if not gen.pools and not self.all_ready and self.externals.answered():
            self.all_ready = True
            self.on_all_ready()
        ticker = loop.create_task(self._tick())
        interval = systemd.watchdog_interval()
        if interval is not None:
            self._watchdog(interval)
        try:
            while not self.stopping:
                sig = await self.signals.get()
                self.handle_signal(sig)
            await self.stop.wait(self.signals, self.exits.reap)
        finally:
            ticker.cancel()

    def _watchdog(self, interval: float) -> None:
        """Sent from the master's loop: systemd hears of a stuck master, not of its workers."""
        systemd.notify("WATCHDOG=1")
        assert self.loop is not None
        self.loop.call_later(interval, self._watchdog, interval)

    def notify(self, *lines: str) -> None:
        """Tell systemd, unless this master is a USR2 upgrade that has not taken over yet."""
        if self.upgrade.old_master is None:
            systemd.notify(*lines)

    def notify_ready(self) -> None:
        self.notify("READY=1", self._status())

    def _status(self) -> str:
        return self.supervisor.status()

    # -- workers ----------------------------------------------------------------------

    def _on_ready(self, worker: WorkerProcess) -> None:
        """A worker is ready: a pending generation whole is committed; else start-up may be
        complete."""
        pending = self.pending
        if (
            pending is not None
            and worker.generation is pending
            and self.supervisor.generation_ready(pending)
        ):
            self.reloads.commit()
        else:
            self.check_started()

    def check_started(self) -> None:
        """Start-up is complete once every pool was ready (and every external program)."""
        if not self.all_ready and self.all_slots_ready():
            self.all_ready = True
            self.on_all_ready()

    def _externals_settled(self) -> None:
        if not self.stopping:
            self.check_started()

    def all_slots_ready(self) -> bool:
        # and the programs it supervises (corral/external/)
        return self.supervisor.all_slots_ready() and self.externals.answered()

    def on_all_ready(self) -> None:
        """Start-up is complete: every worker of the first generation is ready."""
        if self.started is not None:
            self.started()
            self.started = None
        if self.upgrade.old_master is None:
            self.notify_ready()
        else:
            self.upgrade.take_over(self._status())

    # the control API's (control/api.py)
    def more_workers(self, app_name: str) -> None:
        self.supervisor.more_workers(app_name)

    def fewer_workers(self, app_name: str) -> bool:
        return self.supervisor.fewer_workers(app_name)

    # -- once a second ------------------------------------------------------------------

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for worker in list(self.workers.values()):
                self.exits.settle(worker, now)
                self.supervisor.timeouts.check(worker, now)
            for pool in self.current.pools.values():
                if pool.application.dynamic is not None:
                    self.supervisor.scale(pool, now)
            if "corral.tls.session" in sys.modules:  # (no key ring was made without it)
                from corral.tls.session import rotate_due

                rotate_due(now)  # session ticket keys (tls/session.py)
            touched = self.touched.changed()
            if touched is not None:
                self.reloads.touched(touched)
            self.reloads.look_at_config()
            if self.emperor is not None:
                self._look_at_vassals()

    def _look_at_vassals(self) -> None:
        """Apply what changed among the emperor's vassal files, one change at a time."""
        if self._vassal_change is not None and not self._vassal_change.done():
            return
        change = self.emperor.look()
        if change is not None:
            assert self.loop is not None
            self._vassal_change = self.loop.create_task(self._apply_vassals(change))

    async def _apply_vassals(self, change: Any) -> None:
        try:
            await self.reloads.apply(change.document, change.why, restart=change.restart)
        except ApplyFailed:  # logged where it failed; the running applications serve on
            self.emperor.forget(change)

    # -- reload -------------------------------------------------------------------------

    def committed(self, old: Generation, gen: Generation) -> None:
        """``gen`` took over from ``old`` (reload.py): its workers, counts, logs and title."""
        self.supervisor.committed(gen)
        if logging_changed(gen.settings, old.settings):
            try:
                setup_logging(gen.settings)
            except ValueError as exc:
                self.log.error("--log-config: %s; the error log is corral's own", exc)
        self.touched = TouchedFiles([*gen.settings.touch_reload, *settings_files(gen.settings)])
        self.externals.update(gen.doc, gen.restart)  # an unchanged one serves on
        title = gen.settings.proc_name or gen.app_name or "corral"
        if title != self.title_name:
            self.title_name = title
            child.set_master_title(title)

    # -- signals and stopping -----------------------------------------------------------

    def handle_signal(self, sig: int) -> None:
        """Do what ``sig`` asks (the table: ``SIGNALS``), on the loop: its handler only
        queued it."""
        SIGNALS[sig](self, signal.Signals(sig).name)

    def _reap(self, _: str) -> None:
        self.exits.reap()

    def _stop(self, name: str) -> None:
        self.log.info("%s: graceful shutdown", name)
        self.begin_stop(graceful=True)

    def _quit(self, name: str) -> None:
        self.log.info("%s: immediate shutdown", name)
        self.begin_stop(graceful=False)

    def _reload(self, name: str) -> None:
        self.reloads.reload(name, "allowed")

    def _only_application(self, name: str) -> str | None:
        """The application TTIN and TTOU change the workers of: the only one there is."""
        if len(self.counts) == 1:
            return next(iter(self.counts))
        self.log.info(
            "%s: %s; ignored",
            name,
            "several applications: set their processes through the control API"
            if self.counts
            else "no application configured",
        )
        return None

    def _one_more(self, name: str) -> None:
        app_name = self._only_application(name)
        if app_name is not None:
            self.more_workers(app_name)
            self.log.info("%s: %d worker(s)", name, self.num_workers)

    def _one_fewer(self, name: str) -> None:
        app_name = self._only_application(name)
        if app_name is None:
            return
        if self.fewer_workers(app_name):
            self.log.info("%s: %d worker(s)", name, self.num_workers)
        else:
            self.log.info("%s: already at %d worker(s); ignored", name, self.num_workers)

    def _stop_workers(self, name: str) -> None:
        self.log.info(
            "%s: stopping the workers; the listeners stay open (SIGTTIN or SIGHUP "
            "starts workers again)",
            name,
        )
        self.supervisor.none_wanted()
        if self.pending is not None:
            self.reloads.rollback(name)
        self.supervisor.retire_extra_workers()

    def _reopen_logs(self, name: str) -> None:
        self.log.info("%s: reopening the log files", name)
        reopen_error_log()
        self.supervisor.signal_all(signal.SIGUSR1)

    def _upgrade(self, _: str) -> None:
        sockets = dict(self.sockets)
        if self.control is not None:  # the new master serves the API on the same socket
            sockets[self.control.inherit_key] = self.control.socket
        self.upgrade.start(sockets)

    def begin_stop(self, *, graceful: bool) -> None:
        self.stop.begin(graceful)


# What each signal asks of the master: Gunicorn's meanings, and uWSGI's for WINCH.
SIGNALS: dict[int, Callable[[Arbiter, str], None]] = {
    signal.SIGCHLD: Arbiter._reap,
    signal.SIGTERM: Arbiter._stop,
    signal.SIGINT: Arbiter._stop,
    signal.SIGQUIT: Arbiter._quit,
    signal.SIGHUP: Arbiter._reload,
    signal.SIGTTIN: Arbiter._one_more,
    signal.SIGTTOU: Arbiter._one_fewer,
    signal.SIGWINCH: Arbiter._stop_workers,
    signal.SIGUSR1: Arbiter._reopen_logs,
    signal.SIGUSR2: Arbiter._upgrade,
}
