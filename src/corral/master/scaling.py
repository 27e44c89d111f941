"""Dynamic pools: when an application given NGINX Unit's ``processes: {max, spare,
idle_timeout}`` gets a worker more, or one less.

The measure is each worker's busy share: the time its requests spent in the application during
the last heartbeat interval (the worker's latency sum, counted as requests finish) per thread,
or the share of its threads in the application right now, whichever is higher. A worker at
`BUSY` or more is busy; under `IDLE` it is idle, and `WorkerProcess.idle_since` says since when.

Unit's rules, on these measures: keep ``spare`` idle workers (at least one worker in all) and
start one more, up to ``max``, when fewer are idle or when every worker is busy; stop a worker
once more than ``spare`` are idle and one has been idle for ``idle_timeout`` seconds. One
change at a time: nothing is decided while a worker of the pool is still starting, so that a
new worker's share is known before the next step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

__all__ = ["BUSY", "IDLE", "Measured", "decide"]

BUSY = 0.5
IDLE = 0.05


class Measured(Protocol):
    """What the decision reads of a worker (`corral.master.process.WorkerProcess`, which
    imports `IDLE` from here)."""

    @property
    def ready(self) -> bool: ...
    @property
    def retiring(self) -> bool: ...
    @property
    def busy_share(self) -> float: ...
    @property
    def idle_since(self) -> float | None: ...


def decide(dynamic: Any, workers: Iterable[Measured], now: float) -> tuple[int, str]:
    """``(+1, why)`` to start a worker, ``(-1, why)`` to stop one, ``(0, "")`` to wait.

    ``dynamic`` is the application's `Processes`; ``workers`` every worker of its pool.
    """
    serving = [w for w in workers if not w.retiring]
    if any(not w.ready for w in serving):
        return 0, ""
    count = len(serving)
    idle = [w for w in serving if w.idle_since is not None]
    if count < dynamic.max:
        if serving and all(w.busy_share >= BUSY for w in serving):
            return 1, "every worker is busy"
        if len(idle) < dynamic.spare:
            return 1, f"{len(idle)} idle, spare {dynamic.spare}"
    if count > max(dynamic.spare, 1) and len(idle) > dynamic.spare:
        longest = max(now - w.idle_since for w in idle if w.idle_since is not None)
        if longest >= dynamic.idle_timeout:
            return -1, f"{len(idle)} idle for up to {longest:.0f}s, spare {dynamic.spare}"
    return 0, ""
