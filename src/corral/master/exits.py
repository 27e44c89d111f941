"""A worker exited: reap it, read its last words, and carry out what the lifecycle decides.

The decision itself (respawn, back off, roll back, shut down, or nothing) is
``lifecycle.after_exit``, a pure function over the facts gathered here; this module does what
it says: the logs, the spawns, the timers. It runs on the master's loop, at SIGCHLD.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING

from corral.apps.loader import load_failure
from corral.master import connlimits, lifecycle
from corral.master.generation import Pool
from corral.master.lifecycle import Exit
from corral.master.process import Tally, WorkerProcess
from corral.server.worker import EXIT_APP_LOAD
from corral.wire import Abort

if TYPE_CHECKING:
    from corral.master.arbiter import Arbiter


def reap(arbiter: Arbiter) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if arbiter.upgrade.exited(pid, status):  # the new master of a USR2
            continue
        if arbiter.externals.exited(pid, status):  # not a worker: a supervised program
            continue
        worker = arbiter.workers.pop(pid, None)
        if worker is None:
            continue
        assert arbiter.loop is not None
        arbiter.loop.remove_reader(worker.beat_fd)
        _last_words(arbiter, worker)
        worker.close()
        arbiter.supervisor.gone.setdefault(worker.pool.name, Tally()).add(worker)
        arbiter.supervisor.accepting_changed.set()
        _off_the_board(arbiter, worker)
        connlimits.free_seat(pid)  # its connections no longer count (filters/connlimit.py)
        on_exit(arbiter, worker, status)


def _off_the_board(arbiter: Arbiter, worker: WorkerProcess) -> None:
    """A dead worker's last count must not hold its siblings back (a killed one never
    said it left); a successor already in its slot keeps its own."""
    pool = worker.pool
    if pool.board is not None and not any(
        w.pool is pool and w.slot == worker.slot for w in arbiter.workers.values()
    ):
        pool.board.leave(worker.slot)


def _last_words(arbiter: Arbiter, worker: WorkerProcess) -> None:
    """What the worker wrote just before it exited and the loop has not read yet: its
    ``failed`` line names why a new generation could not start; a drained worker's last
    ``hb`` line, how many requests it served; a timed-out worker's ``abort`` line, the request
    it was serving, for the log line that ends its timeout (now, not ABORT_GRACE later)."""
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
        arbiter.timeouts.finish_kill(worker)


def on_exit(arbiter: Arbiter, worker: WorkerProcess, status: int) -> None:
    arbiter.hooks.call("child_exit", worker)
    code = os.waitstatus_to_exitcode(status)
    how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
    slot, pid, pool, gen = worker.slot, worker.pid, worker.pool, worker.generation
    failed_to_load = code == EXIT_APP_LOAD and not arbiter.all_ready
    # why it did not load, which the worker only sent (it logs no more than its traceback)
    because = f": {worker.failure}" if worker.failure else ""
    decision = lifecycle.after_exit(
        lifecycle.ExitFacts(
            stopping=arbiter.stopping,
            retiring=worker.retiring,
            pending=gen is arbiter.pending,
            failed_to_load=failed_to_load,
            # not with the state directory's saved configuration: stopping would leave
            # nothing to fix it through, so the others serve and this one is retried
            may_shut_down=arbiter.origin is None or arbiter.origin.reread is not None,
            replaces=worker.replaces is not None,
            has_successor=worker.successor is not None,
            slot_wanted=gen is arbiter.current and slot < arbiter.counts.get(pool.name, 0),
            timed_out=worker.timed_out,
            ready=worker.ready,
            lived=worker.age,
            min_lifetime=pool.application.min_worker_lifetime,
        )
    )
    if decision is Exit.LOG_ONLY:
        if arbiter.stopping:
            arbiter.log.debug("%s (pid %d) exited: %s", arbiter.who(slot, pool), pid, how)
            return
        # it drained (TERM), so its last hb line, read by _last_words, has its final count
        served = f", having served {worker.served} requests" if code == 0 else ""
        arbiter.log.info("%s (pid %d) exited: %s%s", arbiter.who(slot, pool), pid, how, served)
        return
    if decision is Exit.ROLLBACK:  # ready or not: the new generation is not whole
        when = "after it was ready" if worker.ready else "before it was ready"
        arbiter.reloads.rollback(f"worker {slot} exited ({how}) {when}", worker.failure)
        return
    if decision is Exit.SHUT_DOWN:  # the one line a start that cannot load writes
        why = load_failure(pool.name, pool.application.entry_points, worker.failure or how)
        arbiter.log.critical("%s; shutting down", why)
        arbiter.exit_code = EXIT_APP_LOAD
        arbiter.begin_stop(graceful=False)
        return
    if failed_to_load:
        _failed_at_start(arbiter, pool, worker.failure or how)
    assert arbiter.loop is not None
    if decision is Exit.RETRY_LATER:  # a successor that did not make it: the old serves on
        old = worker.replaces
        assert old is not None
        old.successor = None
        delay = arbiter.backoff.failed((pool.name, slot), time.monotonic())
        old.recycle_not_before = time.monotonic() + delay
        arbiter.loop.call_later(delay + 0.01, arbiter.consider_recycling, old)
        arbiter.log.error(
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
        arbiter.log.info("%s (pid %d) exited: %s", arbiter.who(slot, pool), pid, how)
    else:
        arbiter.log.error(
            "worker %d (pid %d) died: %s after %.1fs%s", slot, pid, how, worker.age, because
        )
        arbiter.events.record("crash", f"died: {how} after {worker.age:.1f}s", pool.name, pid, slot)
    if decision is Exit.SUCCESSOR:
        worker.successor.replaces = None  # type: ignore[union-attr]
    elif decision is Exit.RESPAWN:
        arbiter.backoff.forget((pool.name, slot))
        arbiter.spawn(gen, pool, slot)
    elif decision is Exit.BACK_OFF:
        delay = arbiter.backoff.failed((pool.name, slot), time.monotonic())
        arbiter.log.error(
            "worker %d keeps dying young (%d in a row): respawning it in %.1fs",
            slot,
            arbiter.backoff.failures((pool.name, slot)),
            delay,
        )
        arbiter.loop.call_later(delay, arbiter.respawn, pool, slot)


def _failed_at_start(arbiter: Arbiter, pool: Pool, cause: str) -> None:
    if not pool.failed_to_load:
        pool.failed_to_load = True
        arbiter.log.critical(
            "%s; the other applications serve, and it is retried: change it through the "
            "control API",
            load_failure(pool.name, pool.application.entry_points, cause),
        )
    if arbiter.all_slots_ready():  # start-up is complete for the ones that load
        arbiter.all_ready = True
        arbiter.on_all_ready()
