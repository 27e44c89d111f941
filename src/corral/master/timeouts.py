"""Once a second, per worker: a drain past its graceful timeout, a silent loop, a request past
``timeout``, a start-up past ``startup_timeout`` (the decision: ``lifecycle.at_tick``); and the
timeout kill, in two steps: stacks and the request's report first, SIGKILL after
:data:`ABORT_GRACE`.

The bounds: a worker is timed out no sooner than ``timeout`` after its loop went silent (or
its oldest request started), and killed no later than ``timeout`` + 1 s after. Each worker has
a timer set for the moment its timeout would be due (``lifecycle.time_out_in``), checked
again when it fires and set later when the worker was heard of meanwhile, so the master acts
within milliseconds rather than at its next tick. The loop's silence is known to within
``wire.PULSE`` (0.25 s: it is counted from when the pulse after its last one was due), so
the stacks and ABRT go out at most 0.25 s past ``timeout``; :data:`ABORT_GRACE` (0.5 s)
later comes the SIGKILL, 0.25 s inside the bound. The ABRT itself ends a worker that runs
Python (its handler reports the request and exits at once: that is when the client's
connection closes); SIGKILL is for one stuck in C, holding the interpreter."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping

from corral.master import lifecycle
from corral.master.events import Events
from corral.master.lifecycle import Tick
from corral.master.process import WorkerProcess

# A worker killed for a timeout gets this long to report its request before SIGKILL: with
# the loop's silence known to within wire.PULSE, the kill lands inside timeout + 1 s.
ABORT_GRACE = 0.5


def facts(worker: WorkerProcess, now: float) -> lifecycle.TickFacts:
    """What the master knows of ``worker`` at ``now``, for the lifecycle's decisions."""
    settings = worker.generation.settings
    request = worker.in_progress
    return lifecycle.TickFacts(
        retiring=worker.retiring,
        drained_for=now - worker.retired_at if worker.retiring else 0.0,
        graceful_timeout=settings.graceful_timeout,
        killed=worker.killed,
        timed_out=worker.timed_out,
        ready=worker.ready,
        age=now - worker.started,
        unheard=now - worker.alive_at,
        timeout=settings.timeout,
        startup_timeout=worker.pool.application.startup_timeout,
        request_age=None if request is None else now - worker.request_started,
    )


class Timeouts:
    """The timeouts of the master's workers, on the master's loop. Each worker's timer and
    its kill in progress are the worker's own (``timeout_timer``, ``kill_reason``); this
    reads which workers run (``workers``: a pid no longer there exited), records and logs,
    and asks ``recycle`` to look at a worker the tick finds due for it."""

    def __init__(
        self,
        workers: Mapping[int, WorkerProcess],
        events: Events,
        log: logging.Logger,
        recycle: Callable[[WorkerProcess], None],
    ) -> None:
        self._workers = workers
        self._events = events
        self._log = log
        self._recycle = recycle

    def check(self, worker: WorkerProcess, now: float) -> None:
        """The tick's look at one worker."""
        known = facts(worker, now)
        decision, why = lifecycle.at_tick(known)
        if decision is Tick.KILL:
            settings = worker.generation.settings
            worker.killed = True
            self._log.warning(
                "worker %d (pid %d) still draining after graceful_timeout (%gs); killing it",
                worker.slot,
                worker.pid,
                settings.graceful_timeout,
            )
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
        elif decision is Tick.TIME_OUT:
            self.kill(worker, why)
            return
        elif decision is Tick.CONSIDER_RECYCLING:
            self._recycle(worker)
        self.arm(worker, now, known)

    def ready(self, worker: WorkerProcess) -> None:
        """``worker`` said it is ready: its loop ran now, and its timeout is due from here."""
        worker.alive_at = time.monotonic()
        self.arm(worker, worker.alive_at)

    def arm(
        self, worker: WorkerProcess, now: float, known: lifecycle.TickFacts | None = None
    ) -> None:
        """Set the worker's timer for when its timeout would be due, unless it is set sooner
        (a timer that fires early only looks again: the worker was heard of meanwhile)."""
        delay = lifecycle.time_out_in(known if known is not None else facts(worker, now))
        if delay is None:
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        timer = worker.timeout_timer
        if timer is not None:
            if timer.when() <= due:
                return
            timer.cancel()
        worker.timeout_timer = loop.call_at(due, self._due, worker)

    def _due(self, worker: WorkerProcess) -> None:
        worker.timeout_timer = None
        if self._workers.get(worker.pid) is not worker:
            return  # it exited meanwhile
        now = time.monotonic()
        known = facts(worker, now)
        decision, why = lifecycle.at_tick(known)
        if decision is Tick.TIME_OUT:
            self.kill(worker, why)
        else:
            self.arm(worker, now, known)

    def kill(self, worker: WorkerProcess, why: str) -> None:
        """Timeout: stacks to the error log (USR2), the request reported (ABRT), then KILL."""
        worker.timed_out = True
        worker.kill_reason = why
        self._events.record("timeout", why, worker.pool.name, worker.pid, worker.slot)
        self._log.error(
            "worker %d (pid %d): %s; its threads' stacks follow", worker.slot, worker.pid, why
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGUSR2)
            os.kill(worker.pid, signal.SIGABRT)
        asyncio.get_running_loop().call_later(ABORT_GRACE, self.finish_kill, worker)

    def finish_kill(self, worker: WorkerProcess) -> None:
        why, worker.kill_reason = worker.kill_reason, None
        if why is None:
            return  # already done
        if worker.request is not None:  # from its last heartbeat, or its abort line
            age, what = worker.request
            why += f", serving {what} for {age:.1f}s"
        self._log.critical(
            "worker %d (pid %d) timed out: %s; killing it", worker.slot, worker.pid, why
        )
        if self._workers.get(worker.pid) is not worker:
            return  # reaped already (exits.py): its pid may be another process's by now
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)
