"""A worker exited: reap it, read its last words, and carry out what the lifecycle decides.

The decision itself (respawn, back off, roll back, shut down, or nothing) is
``lifecycle.after_exit``, a pure function over the facts gathered here; this module does what
it says: the logs, the spawns, the timers. It runs on the master's loop, at SIGCHLD. It keeps
what only exits need: the crash backoff of each slot. A child that is not a worker (a new master
of a USR2, an external program) is its own owner's: each is asked in turn (``children``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence

from corral.apps.loader import load_failure
from corral.hooks import Hooks
from corral.master import connlimits, lifecycle
from corral.master.events import Events
from corral.master.generation import Generations, Pool
from corral.master.lifecycle import Exit
from corral.master.process import Tally, WorkerProcess
from corral.master.supervisor import Supervisor
from corral.server.worker import EXIT_APP_LOAD
from corral.wire import Abort


class Exits:
    """The master's children that exit: reaped, and what each worker's exit means done."""

    def __init__(
        self,
        supervisor: Supervisor,
        generations: Generations,
        hooks: Hooks,
        events: Events,
        log: logging.Logger,
        *,
        children: Sequence[Callable[[int, int], bool]],
        may_shut_down: bool,
        rollback: Callable[[str, str | None], None],
        shut_down: Callable[[int], None],
        started: Callable[[], bool],
        check_started: Callable[[], None],
    ) -> None:
        self._supervisor = supervisor
        self._generations = generations
        self._hooks = hooks
        self._events = events
        self._log = log
        self._children = children  # whether a pid was theirs (and what its exit means done)
        # whether an application that cannot load at start-up stops the server (not when the
        # state directory owns the configuration: nothing would be left to fix it through)
        self._may_shut_down = may_shut_down
        self._rollback = rollback  # the pending generation is not whole: why, and the cause
        self._shut_down = shut_down  # an immediate stop, with this exit code
        self._started = started  # whether start-up is complete
        self._check_started = check_started  # start-up may be complete without this pool
        self.backoff = lifecycle.Backoff()  # early deaths in a row, per slot

    def settle(self, worker: WorkerProcess, now: float) -> None:
        """The tick's look at a worker: one that lived long enough ends its slot's backoff."""
        self.backoff.settle(
            (worker.pool.name, worker.slot),
            worker.started,
            worker.ready,
            now,
            worker.pool.application.min_worker_lifetime,
        )

    def reap(self) -> None:
        supervisor = self._supervisor
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if any(exited(pid, status) for exited in self._children):  # not a worker
                continue
            worker = supervisor.workers.pop(pid, None)
            if worker is None:
                continue
            asyncio.get_running_loop().remove_reader(worker.beat_fd)
            self._last_words(worker)
            worker.close()
            supervisor.gone.setdefault(worker.pool.name, Tally()).add(worker)
            supervisor.accepting_changed.set()
            self._off_the_board(worker)
            connlimits.free_seat(pid)  # its connections no longer count (filters/connlimit.py)
            self.on_exit(worker, status)

    def _off_the_board(self, worker: WorkerProcess) -> None:
        """A dead worker's last count must not hold its siblings back (a killed one never
        said it left); a successor already in its slot keeps its own."""
        pool = worker.pool
        if pool.board is not None and not any(
            w.pool is pool and w.slot == worker.slot for w in self._supervisor.workers.values()
        ):
            pool.board.leave(worker.slot)

    def _last_words(self, worker: WorkerProcess) -> None:
        """What the worker wrote just before it exited and the loop has not read yet: its
        ``failed`` line names why a new generation could not start; a drained worker's last
        ``hb`` line, how many requests it served; a timed-out worker's ``abort`` line, the
        request it was serving, for the log line that ends its timeout (now, not ABORT_GRACE
        later)."""
        os.set_blocking(worker.beat_fd, False)
        data = b""
        with contextlib.suppress(OSError):
            while chunk := os.read(worker.beat_fd, 65536):
                data += chunk
        for message in worker.feed(data):
            if isinstance(message, Abort):
                worker.report(message.request, time.monotonic())
            else:
                worker.record(message)
        if worker.kill_reason is not None:
            self._supervisor.timeouts.finish_kill(worker)

    def on_exit(self, worker: WorkerProcess, status: int) -> None:
        supervisor, log = self._supervisor, self._log
        self._hooks.call("child_exit", worker)
        code = os.waitstatus_to_exitcode(status)
        how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
        slot, pid, pool, gen = worker.slot, worker.pid, worker.pool, worker.generation
        failed_to_load = code == EXIT_APP_LOAD and not self._started()
        # why it did not load, which the worker only sent (it logs no more than its traceback)
        because = f": {worker.failure}" if worker.failure else ""
        # through the shutdown delay a worker of the current generation that dies is replaced
        serving_on = supervisor.serving_on and gen is self._generations.current
        decision = lifecycle.after_exit(
            lifecycle.ExitFacts(
                stopping=supervisor.stopping and not serving_on,
                retiring=worker.retiring,
                pending=gen is self._generations.pending,
                failed_to_load=failed_to_load,
                may_shut_down=self._may_shut_down,
                replaces=worker.replaces is not None,
                has_successor=worker.successor is not None,
                slot_wanted=supervisor.slot_wanted(worker),
                timed_out=worker.timed_out,
                ready=worker.ready,
                lived=worker.age,
                min_lifetime=pool.application.min_worker_lifetime,
            )
        )
        if decision is Exit.LOG_ONLY:
            if supervisor.stopping and not serving_on:
                log.debug("%s (pid %d) exited: %s", supervisor.who(slot, pool), pid, how)
                return
            # it drained (TERM), so its last hb line, read by _last_words, has its final count
            served = f", having served {worker.served} requests" if code == 0 else ""
            log.info("%s (pid %d) exited: %s%s", supervisor.who(slot, pool), pid, how, served)
            return
        if decision is Exit.ROLLBACK:  # ready or not: the new generation is not whole
            when = "after it was ready" if worker.ready else "before it was ready"
            self._rollback(f"worker {slot} exited ({how}) {when}", worker.failure)
            return
        if decision is Exit.SHUT_DOWN:  # the one line a start that cannot load writes
            why = load_failure(pool.name, pool.application.entry_points, worker.failure or how)
            log.critical("%s; shutting down", why)
            self._shut_down(EXIT_APP_LOAD)
            return
        if failed_to_load:
            self._failed_at_start(pool, worker.failure or how)
        loop = asyncio.get_running_loop()
        if decision is Exit.RETRY_LATER:  # a successor that did not make it: the old serves on
            old = worker.replaces
            assert old is not None
            old.successor = None
            delay = self.backoff.failed((pool.name, slot), time.monotonic())
            old.recycle_not_before = time.monotonic() + delay
            loop.call_later(delay + 0.01, supervisor.consider_recycling, old)
            log.error(
                "replacement for worker %d (pid %d) exited (%s) before it was ready%s; "
                "worker %d keeps serving, next try in %.1fs",
                slot,
                old.pid,
                how,
                because,
                slot,
                delay,
            )
            return
        if worker.timed_out:
            log.info("%s (pid %d) exited: %s", supervisor.who(slot, pool), pid, how)
        else:
            log.error(
                "worker %d (pid %d) died: %s after %.1fs%s", slot, pid, how, worker.age, because
            )
            self._events.record(
                "crash", f"died: {how} after {worker.age:.1f}s", pool.name, pid, slot
            )
        if decision is Exit.SUCCESSOR:
            worker.successor.replaces = None  # type: ignore[union-attr]
        elif decision is Exit.RESPAWN:
            self.backoff.forget((pool.name, slot))
            supervisor.spawn(gen, pool, slot)
        elif decision is Exit.BACK_OFF:
            delay = self.backoff.failed((pool.name, slot), time.monotonic())
            log.error(
                "worker %d keeps dying young (%d in a row): respawning it in %.1fs",
                slot,
                self.backoff.failures((pool.name, slot)),
                delay,
            )
            loop.call_later(delay, supervisor.respawn, pool, slot)

    def _failed_at_start(self, pool: Pool, cause: str) -> None:
        if not pool.failed_to_load:
            pool.failed_to_load = True
            self._log.critical(
                "%s; the other applications serve, and it is retried: change it through the "
                "control API",
                load_failure(pool.name, pool.application.entry_points, cause),
            )
        self._check_started()  # start-up is complete for the ones that load
