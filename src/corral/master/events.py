"""What happened to the workers lately, for ``GET /status/events`` and ``corral ctl top``.

The master's log says it all, but a log is a file the API cannot page through: this keeps
the last `CAPACITY` events (reloads, rollbacks, crashes, timeouts, recycles, scaling) in
memory, and per worker slot the last reason its worker was replaced. An event is recorded
where the master decides, beside the log line that says the same.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Literal

CAPACITY = 100

Kind = Literal["reload", "rollback", "crash", "timeout", "recycle", "scale"]
# the kinds that end a slot's worker: its successor's "last restart"
_REPLACING = ("crash", "timeout", "recycle")


@dataclass(frozen=True, slots=True)
class Event:
    time: float  # Unix time
    kind: Kind
    application: str | None
    pid: int | None
    detail: str  # one line, as the log has it


class Events:
    """The last events, oldest first, and the last replacement of each slot."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._ring: deque[Event] = deque(maxlen=capacity)
        self._replaced: dict[tuple[str, int], str] = {}

    def record(
        self,
        kind: Kind,
        detail: str,
        application: str | None = None,
        pid: int | None = None,
        slot: int | None = None,
    ) -> None:
        self._ring.append(Event(time.time(), kind, application, pid, detail))
        if kind in _REPLACING and application is not None and slot is not None:
            self._replaced[(application, slot)] = f"{kind}: {detail}"

    def last_restart(self, application: str, slot: int) -> str | None:
        """Why the worker before this slot's present one was replaced (None: never was)."""
        return self._replaced.get((application, slot))

    def recent(self) -> list[dict[str, Any]]:
        return [asdict(event) for event in self._ring]
