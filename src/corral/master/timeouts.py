"""Once a second, per worker: a drain past its graceful timeout, a silent loop, a request past
``timeout``, a start-up past ``startup_timeout`` (the decision: ``lifecycle.at_tick``); and the
timeout kill, in two steps: stacks and the request's report first, SIGKILL after
:data:`ABORT_GRACE`."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import TYPE_CHECKING

from corral.master import lifecycle
from corral.master.lifecycle import Tick
from corral.master.process import WorkerProcess

if TYPE_CHECKING:
    from corral.master.arbiter import Arbiter

# A worker killed for a timeout gets this long to report its request before SIGKILL.
ABORT_GRACE = 1.0


def check(arbiter: Arbiter, worker: WorkerProcess, now: float) -> None:
    settings = worker.generation.settings
    application = worker.pool.application
    arbiter.backoff.settle(
        (worker.pool.name, worker.slot),
        worker.started,
        worker.ready,
        now,
        application.min_worker_lifetime,
    )
    decision, why = lifecycle.at_tick(
        lifecycle.TickFacts(
            retiring=worker.retiring,
            drained_for=now - worker.retired_at if worker.retiring else 0.0,
            graceful_timeout=settings.graceful_timeout,
            killed=worker.killed,
            timed_out=worker.timed_out,
            ready=worker.ready,
            age=now - worker.started,
            silent=now - worker.last_beat,
            timeout=settings.timeout,
            startup_timeout=application.startup_timeout,
            request_age=worker.request[0] if worker.request is not None else None,
        )
    )
    if decision is Tick.KILL:
        worker.killed = True
        arbiter.log.warning(
            "worker %d (pid %d) still draining after graceful_timeout (%gs); killing it",
            worker.slot,
            worker.pid,
            settings.graceful_timeout,
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)
    elif decision is Tick.TIME_OUT:
        kill(arbiter, worker, why)
    elif decision is Tick.CONSIDER_RECYCLING:
        arbiter.consider_recycling(worker)


def kill(arbiter: Arbiter, worker: WorkerProcess, why: str) -> None:
    """Timeout: stacks to the error log (USR2), the request reported (ABRT), then KILL."""
    worker.timed_out = True
    worker.kill_reason = why
    arbiter.events.record("timeout", why, worker.pool.name, worker.pid, worker.slot)
    arbiter.log.error(
        "worker %d (pid %d): %s; its threads' stacks follow", worker.slot, worker.pid, why
    )
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker.pid, signal.SIGUSR2)
        os.kill(worker.pid, signal.SIGABRT)
    assert arbiter.loop is not None
    arbiter.loop.call_later(ABORT_GRACE, finish_kill, arbiter, worker)


def finish_kill(arbiter: Arbiter, worker: WorkerProcess) -> None:
    why, worker.kill_reason = worker.kill_reason, None
    if why is None:
        return  # already done
    if worker.request is not None:  # from its last heartbeat, or its abort line
        age, what = worker.request
        why += f", serving {what} for {age:.1f}s"
    arbiter.log.critical(
        "worker %d (pid %d) timed out: %s; killing it", worker.slot, worker.pid, why
    )
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker.pid, signal.SIGKILL)
