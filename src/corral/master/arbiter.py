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
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from corral import __version__, core
from corral.config import Document
from corral.external.supervisor import Externals
from corral.hooks import Hooks
from corral.master import child, connlimits, exits, lifecycle, scaling, stopping, systemd
from corral.master.events import Events
from corral.master.generation import ApplyFailed, Generation, Origin, Pool, scheme_of
from corral.master.listeners import describe
from corral.master.process import Tally, WorkerProcess
from corral.master.recycling import draw_max_lifetime, draw_max_requests, recycle_reason
from corral.master.reload import Reloads
from corral.master.renewal import orders_pair
from corral.master.timeouts import Timeouts
from corral.master.upgrade import Upgrade
from corral.master.watch import SourceWatcher, TouchedFiles, watch_sources
from corral.observe.errorlog import logging_changed, reopen_error_log, setup_logging
from corral.tls.served import watched_files
from corral.tls.session import rotate_due
from corral.wire import Abort, Beat, Closed, Message, Ready, Retire, Stuck

EXIT_CONFIG = 2
EXIT_LISTEN = 1


class Arbiter:
    def __init__(self, doc: Document, log: logging.Logger, origin: Origin | None = None) -> None:
        self.log = log
        self.origin = origin
        self.reloads = Reloads(self, doc)
        self.title_name = doc.settings.proc_name or self.current.app_name or "corral"
        self.workers: dict[int, WorkerProcess] = {}
        # the workers wanted per application (TTIN and TTOU change it between generations)
        self.counts = {name: pool.workers for name, pool in self.current.pools.items()}
        # where a worker starts from before its application's own chdir, pythonpath and env
        self.start_cwd = os.getcwd()
        # what the master itself took of an application's environment at start-up (with one
        # application, as Gunicorn's master does): a worker of another one takes it back
        self.entered = child.Entered()
        self.signals: asyncio.Queue[int] = asyncio.Queue()
        self.stopping = False
        self.graceful = True
        self.exit_code = 0
        self.backoff = lifecycle.Backoff()  # early deaths in a row, per slot
        self.events = Events()  # the recent ones, for the control API
        self.all_ready = False  # start-up is complete: every pool was ready once
        self.started: Callable[[], None] | None = None  # called once start-up is complete
        self.touched = TouchedFiles([*doc.settings.touch_reload, *watched_files(doc.settings)])
        self.watcher: SourceWatcher | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.hooks = Hooks(self)  # loaded by serve(), once chdir and pythonpath apply
        self.upgrade = Upgrade(log, origin, partial(self.hooks.call, "pre_exec"), self._stopping)
        self.control: Any = None  # the control API's server (corral.control.server), if on
        self.persist: Callable[[Document], None] | None = None  # saves an applied document
        self.emperor: Any = None  # the vassal files' reader (master/emperor.py), if any
        self._vassal_change: asyncio.Task[None] | None = None
        self.gone: dict[str, Tally] = {}  # what exited workers counted, by application
        self.externals = Externals(self)  # the pools of programs that are not workers
        self.timeouts = Timeouts(self.workers, self.events, log, self.consider_recycling)

    @property
    def current(self) -> Generation:
        return self.reloads.current

    @property
    def pending(self) -> Generation | None:
        return self.reloads.pending

    @property
    def sockets(self) -> dict[str, socket.socket]:
        return self.reloads.sockets

    @property
    def handoffs(self) -> dict[str, tuple[str, socket.socket]]:
        return self.reloads.handoffs

    @property
    def settings(self) -> Any:
        return self.current.settings

    def latency_histogram(self, settings: Any = None) -> bool:
        """Whether workers count request durations (by ``settings``, the running ones by
        default): as the setting says, else when the control API (whose /metrics reads them)
        is on."""
        wanted = (settings or self.settings).latency_histogram
        return self.control is not None if wanted is None else bool(wanted)

    @property
    def num_workers(self) -> int:
        """The workers wanted, all applications together (Gunicorn's ``num_workers``)."""
        return sum(self.counts.values())

    def _stopping(self) -> bool:
        return self.stopping

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
        return self.exit_code

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
            self.watcher = watch_sources(self)
        self.hooks.call("when_ready")
        # one worker per application first: one that cannot import its application stops
        # the start-up before the others are forked (see _on_ready)
        for pool in gen.pools.values():
            self.spawn(gen, pool, 0)
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
            await stopping.wait(self)
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
        if not self.counts:
            return "STATUS=no application configured"
        serving = ", ".join(f"{name} with {n} worker(s)" for name, n in self.counts.items())
        return f"STATUS=serving {serving}"

    # -- workers ----------------------------------------------------------------------

    def spawn(
        self, gen: Generation, pool: Pool, slot: int, replaces: WorkerProcess | None = None
    ) -> WorkerProcess | None:
        if self.stopping:
            return None
        read_fd, write_fd = os.pipe()
        stacks, worker_stacks = socket.socketpair()
        orders, worker_orders = orders_pair()  # master/renewal.py
        max_requests = draw_max_requests(pool.application)
        self.hooks.call("pre_fork", self.hooks.new_worker(pool))
        sys.stdout.flush()
        sys.stderr.flush()
        # Until the worker sets its own, the child has the master's signal handlers, which
        # pass a signal on to the master's loop through the wakeup descriptor both hold: the
        # signals stay blocked across the fork, and Worker.run unblocks them.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        # what the master holds (a preloaded application too) is frozen in the worker, whose
        # gc_freeze collection would otherwise write to every object's page the two share
        frozen = pool.application.gc_freeze
        if frozen:
            gc.freeze()
        seat = connlimits.take_seat()  # its counts' place in the shared tables
        try:
            pid = os.fork()
        except OSError:
            connlimits.free_seat(None, seat)
            if frozen:
                gc.unfreeze()
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for end in (stacks, worker_stacks, orders, worker_orders):
                end.close()
            raise
        if pid == 0:  # the worker: child.run never returns
            try:
                child.run(
                    child.Fork(
                        pool=pool,
                        slot=slot,
                        seat=seat,
                        beat_fd=write_fd,
                        stacks=worker_stacks,
                        orders=worker_orders,
                        max_requests=max_requests,
                        hooks=self.hooks,
                        latency_histogram=self.latency_histogram(pool.settings),
                        log=self.log,
                    ),
                    close=[read_fd, *(other.beat_fd for other in self.workers.values())],
                    close_sockets=[
                        stacks,
                        orders,
                        *(s for w in self.workers.values() for s in (w.stacks, w.orders) if s),
                        # a listener its pool does not serve must not stay open; nor another
                        # pool's hand-off socket, else a hand-off to an application whose workers
                        # are all gone would wait for the timeout instead of finding no listener
                        *(
                            sock
                            for address, sock in self.sockets.items()
                            if address not in pool.sockets
                        ),
                        *(h for _, h in self.handoffs.values() if h is not pool.handoff),
                        *self.externals.sockets,
                    ],
                    control=self.control,
                    entered=self.entered,
                    start_cwd=self.start_cwd,
                )
            finally:
                os._exit(1)  # not reached, unless its arguments could not be made
        if frozen:
            gc.unfreeze()  # the master's own collections go on as before
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write_fd)
        for end in (worker_stacks, worker_orders):
            end.close()
        stacks.setblocking(False)
        connlimits.seat_of(pid, seat)
        worker = WorkerProcess(pid, slot, gen, pool, read_fd, stacks, orders)
        worker.max_lifetime = draw_max_lifetime(pool.application)
        worker.replaces = replaces
        self.workers[pid] = worker
        self.hooks.adopt(worker)
        assert self.loop is not None
        self.loop.add_reader(read_fd, self._on_beat, worker)
        self.log.debug("%s spawned (pid %d, generation %d)", self.who(slot, pool), pid, gen.number)
        return worker

    def who(self, slot: int, pool: Pool) -> str:
        """``worker 2``, or ``worker 2 of blog`` when the server runs several applications."""
        several = len(self.counts) > 1 or (self.pending is not None and len(self.pending.pools) > 1)
        return f"worker {slot} of {pool.name}" if several else f"worker {slot}"

    def _on_beat(self, worker: WorkerProcess) -> None:
        try:
            data = os.read(worker.beat_fd, 65536)
        except OSError:
            data = b""
        assert self.loop is not None
        if not data:
            self.loop.remove_reader(worker.beat_fd)
            return
        for message in worker.feed(data):
            self._on_line(worker, message)

    def _on_line(self, worker: WorkerProcess, message: Message) -> None:
        """One heartbeat message (see corral/wire.py)."""
        if worker.record(message):
            if isinstance(message, Beat):  # its oldest request may be due sooner
                self.timeouts.arm(worker, time.monotonic())
            return
        if isinstance(message, Ready):
            self._on_ready(worker)
        elif isinstance(message, Closed):
            worker.stopped_accepting = True
            self.reloads.accepting_changed.set()
        elif isinstance(message, Retire):
            worker.retire_asked = (message.served, worker.age)
            worker.served = max(worker.served, message.served)
            self.consider_recycling(worker)
        elif isinstance(message, Abort):
            worker.report(message.request, time.monotonic())
            self.timeouts.finish_kill(worker)
        elif isinstance(message, Stuck) and not worker.timed_out:
            worker.report(message.request, time.monotonic())
            app = worker.pool.application
            self.timeouts.kill(
                worker,
                "a request did not unwind within request_timeout_grace "
                f"({app.request_timeout_grace:g}s) after its request_timeout "
                f"({app.request_timeout:g}s)",
            )

    def _on_ready(self, worker: WorkerProcess) -> None:
        worker.ready = True
        self.timeouts.ready(worker)
        pool = worker.pool
        self.log.info(
            "%s ready (pid %d, generation %d)",
            self.who(worker.slot, pool),
            worker.pid,
            worker.generation.number,
        )
        if not pool.ever_ready:
            pool.ever_ready = True  # the application imports: start the others now
            if worker.generation is self.current:
                for slot in range(1, self.counts.get(pool.name, 0)):
                    self.respawn(pool, slot)
        old = worker.replaces
        if old is not None:
            worker.replaces = None
            old.successor = None
            if old.pid in self.workers:
                self.retire(old)
        pending = self.pending
        if worker.generation is pending and all(
            w.ready for w in self.workers.values() if w.generation is pending
        ):
            self.reloads.commit()
        elif not self.all_ready and self.all_slots_ready():
            self.all_ready = True
            self.on_all_ready()

    def all_slots_ready(self) -> bool:
        for name, pool in self.current.pools.items():
            if pool.failed_to_load and not pool.ever_ready:
                continue
            ready = {
                w.slot
                for w in self.workers.values()
                if w.pool is pool and w.ready and not w.retiring
            }
            if len(ready) < self.counts.get(name, 0):
                return False
        return self.externals.answered()  # and the programs it supervises (corral/external/)

    def on_all_ready(self) -> None:
        """Start-up is complete: every worker of the first generation is ready."""
        if self.started is not None:
            self.started()
            self.started = None
        if self.upgrade.old_master is None:
            self.notify_ready()
        else:
            self.upgrade.take_over(self._status())

    def tally(self, app_name: str) -> Tally:
        """What ``app_name``'s workers counted, exited ones included."""
        total = Tally()
        if app_name in self.gone:
            total.add(self.gone[app_name])
        for worker in self.workers.values():
            if worker.pool.name == app_name:
                total.add(worker)
        return total

    def _slot_taken(self, pool: Pool, slot: int) -> bool:
        return any(
            w.slot == slot and w.pool is pool and not w.retiring for w in self.workers.values()
        )

    def retire(self, worker: WorkerProcess) -> None:
        """Stop a worker on purpose: drain if it serves, kill if it was still booting."""
        if worker.retiring:
            return
        worker.retiring = True
        worker.retired_at = time.monotonic()
        successor = worker.successor
        if successor is not None:
            worker.successor = None
            self.retire(successor)
        sig = signal.SIGTERM if worker.ready else signal.SIGKILL
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, sig)

    def respawn(self, pool: Pool, slot: int) -> None:
        """Start the worker of ``slot`` unless it runs, or its pool no longer serves."""
        gen = self.current
        wanted = slot < self.counts.get(pool.name, 0)
        if gen.pools.get(pool.name) is pool and wanted and not self._slot_taken(pool, slot):
            self.spawn(gen, pool, slot)

    # -- once a second ------------------------------------------------------------------

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for worker in list(self.workers.values()):
                self.backoff.settle(
                    (worker.pool.name, worker.slot),
                    worker.started,
                    worker.ready,
                    now,
                    worker.pool.application.min_worker_lifetime,
                )
                self.timeouts.check(worker, now)
            for pool in self.current.pools.values():
                if pool.application.dynamic is not None:
                    self._scale(pool, now)
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

    def _scale(self, pool: Pool, now: float) -> None:
        """A dynamic pool's worker more or less (see master/scaling.py)."""
        if self.pending is not None or self.stopping:
            return
        workers = [w for w in self.workers.values() if w.pool is pool]
        change, why = scaling.decide(pool.application.dynamic, workers, now)
        if not change:
            return
        self.counts[pool.name] += change
        count = self.counts[pool.name]
        self.log.info(
            "%s: %s to %d worker(s) (%s)", pool.name, "up" if change > 0 else "down", count, why
        )
        self.hooks.call("nworkers_changed", self.num_workers)
        if change > 0:
            self.respawn(pool, count - 1)
        else:
            self.retire_extra_workers()

    def consider_recycling(self, worker: WorkerProcess) -> None:
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
        reason = recycle_reason(worker, worker.pool.application, worker.age)
        if reason is None:
            return
        self.log.info("worker %d (pid %d) recycled: %s", worker.slot, worker.pid, reason)
        self.events.record("recycle", reason, worker.pool.name, worker.pid, worker.slot)
        # retire_asked stays: the worker says it once, and a successor that fails to start
        # is tried again (recycle_not_before)
        worker.successor = self.spawn(gen, worker.pool, worker.slot, replaces=worker)

    # -- reload -------------------------------------------------------------------------

    def committed(self, old: Generation, gen: Generation) -> None:
        """``gen`` took over from ``old`` (reload.py): its workers, counts, logs and title."""
        # a carried pool keeps the count TTIN/TTOU gave it
        self.counts = {
            name: self.counts[name] if name not in gen.fresh and name in self.counts else p.workers
            for name, p in gen.pools.items()
        }
        self.hooks.call("nworkers_changed", self.num_workers)
        for worker in list(self.workers.values()):
            if gen.pools.get(worker.pool.name) is worker.pool:
                worker.generation = gen  # new, or carried over
            else:
                self.retire(worker)
        if logging_changed(gen.settings, old.settings):
            try:
                setup_logging(gen.settings)
            except ValueError as exc:
                self.log.error("--log-config: %s; the error log is corral's own", exc)
        self.touched = TouchedFiles([*gen.settings.touch_reload, *watched_files(gen.settings)])
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
        exits.reap(self)

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

    def more_workers(self, app_name: str) -> None:
        """One worker more for ``app_name`` until the next change of its configuration."""
        self.counts[app_name] += 1
        self.events.record("scale", f"{self.counts[app_name]} worker(s)", app_name)
        self.hooks.call("nworkers_changed", self.num_workers)
        self.respawn(self.current.pools[app_name], self.counts[app_name] - 1)

    def fewer_workers(self, app_name: str) -> bool:
        """One worker fewer for ``app_name``, never below one; whether there was one to stop."""
        if self.counts[app_name] <= 1:
            return False
        self.counts[app_name] -= 1
        self.events.record("scale", f"{self.counts[app_name]} worker(s)", app_name)
        self.hooks.call("nworkers_changed", self.num_workers)
        self.retire_extra_workers()
        return True

    def _stop_workers(self, name: str) -> None:
        self.log.info(
            "%s: stopping the workers; the listeners stay open (SIGTTIN or SIGHUP "
            "starts workers again)",
            name,
        )
        self.counts = dict.fromkeys(self.counts, 0)
        self.hooks.call("nworkers_changed", self.num_workers)
        if self.pending is not None:
            self.reloads.rollback(name)
        self.retire_extra_workers()

    def _reopen_logs(self, name: str) -> None:
        self.log.info("%s: reopening the log files", name)
        reopen_error_log()
        for worker in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGUSR1)

    def _upgrade(self, _: str) -> None:
        sockets = dict(self.sockets)
        if self.control is not None:  # the new master serves the API on the same socket
            sockets[self.control.inherit_key] = self.control.socket
        self.upgrade.start(sockets)

    def retire_extra_workers(self) -> None:
        """Retire the current workers whose slot is past their pool's count."""
        for worker in list(self.workers.values()):
            wanted = self.counts.get(worker.pool.name, 0)
            if worker.generation is self.current and worker.slot >= wanted:
                self.retire(worker)

    def begin_stop(self, *, graceful: bool) -> None:
        stopping.begin(self, graceful)


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
