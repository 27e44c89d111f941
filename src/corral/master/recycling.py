"""When a worker is due for recycling: requests served, age, memory; never when young.

The limits come from the worker's application. Jitter is drawn once per worker at
spawn (``max_requests`` travels to the worker, which counts exactly and says
``retire``; the lifetime stays with the master), so that workers started together
do not all recycle together (`random` is imported then, not by every master: a master's
modules are its forked workers' memory too).
"""

from __future__ import annotations

from typing import Any

from corral.master.process import WorkerProcess


def draw_max_requests(application: Any) -> int:
    """This worker's request limit (0: none)."""
    limit = application.max_requests
    if not limit or not application.max_requests_jitter:
        return limit or 0
    import random

    return limit + random.randint(0, application.max_requests_jitter)


def draw_max_lifetime(application: Any) -> float:
    """This worker's lifetime limit in seconds (0: none)."""
    limit = application.max_worker_lifetime
    if not limit or not application.max_worker_lifetime_jitter:
        return float(limit or 0)
    import random

    return limit + random.uniform(0, application.max_worker_lifetime_jitter)


def recycle_reason(worker: WorkerProcess, application: Any, age: float) -> str | None:
    """Why ``worker`` should be replaced now, or None."""
    if age < application.min_worker_lifetime:
        return None
    if worker.retire_asked is not None:
        return _served(worker, application)
    if worker.max_lifetime and age >= worker.max_lifetime:
        return f"ran {age:.0f}s (max_worker_lifetime {application.max_worker_lifetime:g}s)"
    limit = application.max_worker_memory
    if limit:
        rss = worker.rss_mib()
        if rss > limit:
            return f"uses {rss:.0f} MiB (max_worker_memory {limit} MiB)"
    return None


def _served(worker: WorkerProcess, application: Any) -> str:
    """The reason of a worker that reached ``max_requests``: the requests it has served by its
    last heartbeat, not when it reached its limit, since ``min_worker_lifetime`` may have held
    it back (it served on meanwhile, at full capacity)."""
    assert worker.retire_asked is not None
    reached, at_age = worker.retire_asked
    served = max(worker.served, reached)
    reason = f"served {served} requests (max_requests {application.max_requests})"
    if served > reached and at_age < application.min_worker_lifetime:
        reason += (
            f"; it reached {reached} at {at_age:.1f}s, held back by min_worker_lifetime "
            f"({application.min_worker_lifetime:g}s)"
        )
    return reason
