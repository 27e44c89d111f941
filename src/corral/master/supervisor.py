"""The supervisor of the master's pools: its workers, forked, heard, retired and replaced.

It keeps the worker table (by pid), the number of workers wanted per application (TTIN,
TTOU, WINCH, the control API and a dynamic pool change it between generations) and what
exited workers counted. It forks a worker (`spawn`), reads each one's heartbeat pipe
(corral/wire.py), hands a ready worker to whoever waits for it (``on_ready``: a reload's
commit, the start-up's end), retires one on purpose (drain if it serves, kill if it was still
booting), fills an empty slot that is still wanted (`respawn`) and recycles a worker due for
it (a successor first: a slot that is still wanted is never left empty on purpose).

What a worker's exit means is exits.py's; timeouts are timeouts.py's (owned here: they are
about these workers); the generations they belong to are reload.py's to change.
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
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from corral.hooks import Hooks
from corral.master import child, connlimits, scaling
from corral.master.events import Events
from corral.master.fork import Fork
from corral.master.generation import Generation, Generations, Pool
from corral.master.process import Tally, WorkerProcess
from corral.master.recycling import draw_max_lifetime, draw_max_requests, recycle_reason
from corral.master.renewal import orders_pair
from corral.master.timeouts import Timeouts
from corral.server.health import SERVER_STOPS
from corral.server.needs import share
from corral.wire import Abort, Beat, Closed, Message, Ready, Retire, Stuck


class Supervisor:
    """The master's workers and how many of them each application wants."""

    def __init__(
        self,
        generations: Generations,
        hooks: Hooks,
        events: Events,
        log: logging.Logger,
        *,
        control: Any,
        blocked: Iterable[int],
        other_sockets: Callable[[], Iterable[socket.socket]],
        on_ready: Callable[[WorkerProcess], None],
    ) -> None:
        self._generations = generations
        self._hooks = hooks
        self._events = events
        self._log = log
        self._control = control  # the control API's server (corral.control.server), if on
        self._blocked = tuple(blocked)  # the master's signals, blocked across a fork
        self._other_sockets = other_sockets  # what else a worker must not hold (externals')
        self._on_ready = on_ready  # a worker said it is ready (after what it means here)
        self.workers: dict[int, WorkerProcess] = {}
        # the workers wanted per application (TTIN and TTOU change it between generations)
        self.counts = {name: pool.workers for name, pool in generations.current.pools.items()}
        self.gone: dict[str, Tally] = {}  # what exited workers counted, by application
        self.stopping = False  # the server stops: no worker starts any more...
        # ...but through its shutdown delay, which serves on: a worker that dies is replaced
        # (and told the server stops once it is ready)
        self.serving_on = False
        # where a worker starts from before its application's own chdir, pythonpath and env
        self.start_cwd = os.getcwd()
        # what the master itself took of an application's environment at start-up (with one
        # application, as Gunicorn's master does): a worker of another one takes it back
        self.entered = child.Entered()
        # set on a worker's "closed" line or exit: what a change's answer waits for (reload.py)
        self.accepting_changed = asyncio.Event()
        self.timeouts = Timeouts(self.workers, events, log, self.consider_recycling)

    @property
    def num_workers(self) -> int:
        """The workers wanted, all applications together (Gunicorn's ``num_workers``)."""
        return sum(self.counts.values())

    def latency_histogram(self, settings: Any) -> bool:
        """Whether workers count request durations by ``settings``: as the setting says, else
        when the control API (whose /metrics reads them) is on."""
        wanted = settings.latency_histogram
        return self._control is not None if wanted is None else bool(wanted)

    def tally(self, app_name: str) -> Tally:
        """What ``app_name``'s workers counted, exited ones included."""
        total = Tally()
        if app_name in self.gone:
            total.add(self.gone[app_name])
        for worker in self.workers.values():
            if worker.pool.name == app_name:
                total.add(worker)
        return total

    def who(self, slot: int, pool: Pool) -> str:
        """``worker 2``, or ``worker 2 of blog`` when the server runs several applications."""
        pending = self._generations.pending
        several = len(self.counts) > 1 or (pending is not None and len(pending.pools) > 1)
        return f"worker {slot} of {pool.name}" if several else f"worker {slot}"

    def status(self) -> str:
        """systemd's STATUS= line: what is served."""
        if not self.counts:
            return "STATUS=no application configured"
        serving = ", ".join(f"{name} with {n} worker(s)" for name, n in self.counts.items())
        return f"STATUS=serving {serving}"

    # -- a worker's start -------------------------------------------------------------

    def spawn(
        self, gen: Generation, pool: Pool, slot: int, replaces: WorkerProcess | None = None
    ) -> WorkerProcess | None:
        if self.stopping and not self.serving_on:
            return None
        read_fd, write_fd = os.pipe()
        stacks, worker_stacks = socket.socketpair()
        orders, worker_orders = orders_pair()  # master/renewal.py
        max_requests = draw_max_requests(pool.application)
        self._hooks.call("pre_fork", self._hooks.new_worker(pool))
        share(pool)  # what the worker imports, imported here once: its pages are shared
        sys.stdout.flush()
        sys.stderr.flush()
        # Until the worker sets its own, the child has the master's signal handlers, which
        # pass a signal on to the master's loop through the wakeup descriptor both hold: the
        # signals stay blocked across the fork, and Worker.run unblocks them.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, self._blocked)
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
                    Fork(
                        pool=pool,
                        slot=slot,
                        seat=seat,
                        beat_fd=write_fd,
                        stacks=worker_stacks,
                        orders=worker_orders,
                        max_requests=max_requests,
                        hooks=self._hooks,
                        latency_histogram=self.latency_histogram(pool.settings),
                        log=self._log,
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
                            for address, sock in self._generations.sockets.items()
                            if address not in pool.sockets
                        ),
                        *(
                            h
                            for _, h in self._generations.handoffs.values()
                            if h is not pool.handoff
                        ),
                        *self._other_sockets(),
                    ],
                    control=self._control,
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
        self._hooks.adopt(worker)
        asyncio.get_running_loop().add_reader(read_fd, self._on_beat, worker)
        self._log.debug("%s spawned (pid %d, generation %d)", self.who(slot, pool), pid, gen.number)
        return worker

    # -- what a worker says -----------------------------------------------------------

    def _on_beat(self, worker: WorkerProcess) -> None:
        try:
            data = os.read(worker.beat_fd, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(worker.beat_fd)
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
            self._ready(worker)
        elif isinstance(message, Closed):
            worker.stopped_accepting = True
            self.accepting_changed.set()
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

    def _ready(self, worker: WorkerProcess) -> None:
        worker.ready = True
        self.timeouts.ready(worker)
        if self.stopping:  # it replaced one that died in the shutdown delay: 503 as the rest
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, SERVER_STOPS)
        pool = worker.pool
        self._log.info(
            "%s ready (pid %d, generation %d)",
            self.who(worker.slot, pool),
            worker.pid,
            worker.generation.number,
        )
        if not pool.ever_ready:
            pool.ever_ready = True  # the application imports: start the others now
            if worker.generation is self._generations.current:
                for slot in range(1, self.counts.get(pool.name, 0)):
                    self.respawn(pool, slot)
        old = worker.replaces
        if old is not None:
            worker.replaces = None
            old.successor = None
            if old.pid in self.workers:
                self.retire(old)
        self._on_ready(worker)

    def generation_ready(self, gen: Generation) -> bool:
        """Whether every worker of ``gen`` said it is ready."""
        return all(w.ready for w in self.workers.values() if w.generation is gen)

    def all_slots_ready(self) -> bool:
        """Whether every wanted slot of the current generation has a ready worker, but for an
        application that failed to load (it is retried, and the others serve)."""
        for name, pool in self._generations.current.pools.items():
            if pool.failed_to_load and not pool.ever_ready:
                continue
            ready = {
                w.slot
                for w in self.workers.values()
                if w.pool is pool and w.ready and not w.retiring
            }
            if len(ready) < self.counts.get(name, 0):
                return False
        return True

    # -- retire, respawn, recycle -----------------------------------------------------

    def _slot_taken(self, pool: Pool, slot: int) -> bool:
        return any(
            w.slot == slot and w.pool is pool and not w.retiring for w in self.workers.values()
        )

    def slot_wanted(self, worker: WorkerProcess) -> bool:
        """Whether ``worker``'s slot is still one of its pool's in the current generation."""
        wanted = self.counts.get(worker.pool.name, 0)
        return worker.generation is self._generations.current and worker.slot < wanted

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
        gen = self._generations.current
        wanted = slot < self.counts.get(pool.name, 0)
        if gen.pools.get(pool.name) is pool and wanted and not self._slot_taken(pool, slot):
            self.spawn(gen, pool, slot)

    def consider_recycling(self, worker: WorkerProcess) -> None:
        gen = worker.generation
        if (
            self.stopping
            or worker.pid not in self.workers
            or not worker.ready
            or worker.retiring
            or worker.successor is not None
            or worker.replaces is not None
            or gen is not self._generations.current
            or self._generations.pending is not None
            or time.monotonic() < worker.recycle_not_before
        ):
            return
        reason = recycle_reason(worker, worker.pool.application, worker.age)
        if reason is None:
            return
        self._log.info("worker %d (pid %d) recycled: %s", worker.slot, worker.pid, reason)
        self._events.record("recycle", reason, worker.pool.name, worker.pid, worker.slot)
        # retire_asked stays: the worker says it once, and a successor that fails to start
        # is tried again (recycle_not_before)
        worker.successor = self.spawn(gen, worker.pool, worker.slot, replaces=worker)

    def signal_all(self, sig: int) -> None:
        """``sig`` to every worker (one that exited meanwhile is skipped)."""
        for worker in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, sig)

    # -- how many -----------------------------------------------------------------------

    def scale(self, pool: Pool, now: float) -> None:
        """A dynamic pool's worker more or less (see master/scaling.py)."""
        if self._generations.pending is not None or self.stopping:
            return
        workers = [w for w in self.workers.values() if w.pool is pool]
        change, why = scaling.decide(pool.application.dynamic, workers, now)
        if not change:
            return
        self.counts[pool.name] += change
        count = self.counts[pool.name]
        self._log.info(
            "%s: %s to %d worker(s) (%s)", pool.name, "up" if change > 0 else "down", count, why
        )
        self._hooks.call("nworkers_changed", self.num_workers)
        if change > 0:
            self.respawn(pool, count - 1)
        else:
            self.retire_extra_workers()

    def more_workers(self, app_name: str) -> None:
        """One worker more for ``app_name`` until the next change of its configuration."""
        self.counts[app_name] += 1
        self._events.record("scale", f"{self.counts[app_name]} worker(s)", app_name)
        self._hooks.call("nworkers_changed", self.num_workers)
        self.respawn(self._generations.current.pools[app_name], self.counts[app_name] - 1)

    def fewer_workers(self, app_name: str) -> bool:
        """One worker fewer for ``app_name``, never below one; whether there was one to stop."""
        if self.counts[app_name] <= 1:
            return False
        self.counts[app_name] -= 1
        self._events.record("scale", f"{self.counts[app_name]} worker(s)", app_name)
        self._hooks.call("nworkers_changed", self.num_workers)
        self.retire_extra_workers()
        return True

    def none_wanted(self) -> None:
        """WINCH: no worker wanted, for any application, until the next change."""
        self.counts = dict.fromkeys(self.counts, 0)
        self._hooks.call("nworkers_changed", self.num_workers)

    def retire_extra_workers(self) -> None:
        """Retire the current workers whose slot is past their pool's count."""
        current = self._generations.current
        for worker in list(self.workers.values()):
            wanted = self.counts.get(worker.pool.name, 0)
            if worker.generation is current and worker.slot >= wanted:
                self.retire(worker)

    def committed(self, gen: Generation) -> None:
        """``gen`` serves now: the counts it wants, its workers (new or carried over), and
        the others retired."""
        self.counts = counts_after_commit(
            self.counts, {name: p.workers for name, p in gen.pools.items()}, gen.fresh
        )
        self._hooks.call("nworkers_changed", self.num_workers)
        for worker in list(self.workers.values()):
            if gen.pools.get(worker.pool.name) is worker.pool:
                worker.generation = gen  # new, or carried over
            else:
                self.retire(worker)


def counts_after_commit(
    counts: Mapping[str, int], configured: Mapping[str, int], fresh: Collection[str]
) -> dict[str, int]:
    """The workers wanted per application once a generation commits: as ``configured``, but a
    pool carried over (not in ``fresh``) keeps the count TTIN, TTOU or scaling gave it."""
    return {
        name: counts[name] if name not in fresh and name in counts else wanted
        for name, wanted in configured.items()
    }
