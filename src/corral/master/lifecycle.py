"""What the master does about a worker, decided on plain data.

A worker exited: log it only, roll a reload back, shut down, let the old worker serve on and
try its replacement later, let a successor take the slot, respawn now or after a backoff.
Once a second, for each worker: kill one that drains too long, time out one that is silent or
not ready, or see whether it is due for recycling (`corral.master.recycling`; scaling is
`corral.master.scaling`); and when, if nothing is heard of it, a timeout will be due, so that
the master looks again then rather than at its next tick. The crash backoff is kept per
worker slot.

A timeout is never early: a loop is counted silent from the moment its next pulse was due
(it may have run until then), a request from the moment the worker read it. The master looks
at the moment the timeout is due (``time_out_in``), not a tick later.

Nothing here forks, signals or reads the clock (``now`` is given), so that every decision is
unit tested alone (tests/unit/test_lifecycle.py); the arbiter gathers the facts from its
workers and carries the decision out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from corral.wire import PULSE

# Crash backoff: the first delay, doubled for each early death in a row of one slot, capped.
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 10.0
# A draining worker is killed this long after graceful_timeout (the worker ends itself at
# graceful_timeout; this is for one that cannot).
DRAIN_SLACK = 5.0


class Exit(enum.Enum):
    """What follows a worker's exit."""

    LOG_ONLY = "log only"  # the server stops, or the worker was retired
    ROLLBACK = "roll the reload back"  # it belonged to a generation not yet whole
    SHUT_DOWN = "shut down"  # the application cannot be imported at start-up
    RETRY_LATER = "the worker it replaces serves on; try again later"
    SUCCESSOR = "its successor takes the slot"  # it was being recycled
    GONE = "nothing: the slot is no longer wanted"
    RESPAWN = "respawn now"
    BACK_OFF = "respawn after the backoff"


@dataclass(frozen=True)
class ExitFacts:
    """What the master knows of a worker that exited."""

    stopping: bool  # the server is stopping (past its shutdown delay, which replaces workers)
    retiring: bool  # the master retired it (recycled, scaled down, old generation)
    pending: bool  # its generation is a reload that is not committed yet
    failed_to_load: bool  # it could not import the application, before all were ready once
    may_shut_down: bool  # the configuration can be fixed and the server started again
    replaces: bool  # it was the successor of a worker being recycled
    has_successor: bool  # it was being recycled, and its successor runs
    slot_wanted: bool  # its slot is still one of its pool's in the current generation
    timed_out: bool  # the master killed it for a timeout
    ready: bool
    lived: float  # seconds
    min_lifetime: float  # its application's min_worker_lifetime


def after_exit(facts: ExitFacts) -> Exit:
    """The decision for a worker that exited (the order of the tests is the precedence)."""
    if facts.stopping or facts.retiring:
        return Exit.LOG_ONLY
    if facts.pending:
        return Exit.ROLLBACK
    if facts.failed_to_load and facts.may_shut_down:
        return Exit.SHUT_DOWN
    if facts.replaces:
        return Exit.RETRY_LATER
    if facts.has_successor:
        return Exit.SUCCESSOR
    if not facts.slot_wanted:
        return Exit.GONE
    if facts.timed_out or (facts.ready and facts.lived >= facts.min_lifetime):
        return Exit.RESPAWN  # it served its time: not a crash at start-up
    return Exit.BACK_OFF


def backoff_delay(failures: int) -> float:
    """The delay before the next try after ``failures`` early deaths in a row (>= 1)."""
    return min(BACKOFF_FIRST * 2 ** (failures - 1), BACKOFF_MAX)


class Backoff:
    """Early deaths in a row, per slot (a pool's name and a slot number): eight workers that
    die young together each wait their own first delay, not one that doubled seven times."""

    def __init__(self) -> None:
        self._slots: dict[tuple[str, int], tuple[int, float]] = {}

    def failed(self, slot: tuple[str, int], now: float) -> float:
        """One more early death in ``slot``: the delay before its next try."""
        failures = self._slots.get(slot, (0, 0.0))[0] + 1
        self._slots[slot] = (failures, now)
        return backoff_delay(failures)

    def failures(self, slot: tuple[str, int]) -> int:
        return self._slots.get(slot, (0, 0.0))[0]

    def forget(self, slot: tuple[str, int]) -> None:
        self._slots.pop(slot, None)

    def settle(
        self, slot: tuple[str, int], started: float, ready: bool, now: float, min_lifetime: float
    ) -> None:
        """The deaths in a row of ``slot`` are over once a worker of it started since the last
        one is ready and has outlived ``min_lifetime``; an older worker proves nothing."""
        entry = self._slots.get(slot)
        if entry is not None and ready and now - started >= min_lifetime and started > entry[1]:
            del self._slots[slot]


class Tick(enum.Enum):
    """What the tick does about one worker."""

    NOTHING = "nothing"
    KILL = "kill it now (SIGKILL): it drains past graceful_timeout"
    TIME_OUT = "time it out: stacks, abort, kill"
    CONSIDER_RECYCLING = "see whether it is due for recycling"


@dataclass(frozen=True)
class TickFacts:
    """What the master knows of a running worker at its tick."""

    retiring: bool
    drained_for: float  # seconds since it was retired (when retiring)
    graceful_timeout: float
    killed: bool  # a SIGKILL was sent already
    timed_out: bool  # a timeout is being carried out already
    ready: bool
    age: float  # seconds since it was started
    unheard: float  # seconds since its loop last said it ran (its last alive or hb line)
    timeout: float  # the server's timeout (0: none)
    startup_timeout: float  # its application's (0: none)
    request_age: float | None  # the age now of its oldest request, as its last hb line said


def at_tick(facts: TickFacts) -> tuple[Tick, str]:
    """The decision for one worker at the tick, and the reason of a timeout."""
    if facts.retiring:
        overdue = facts.drained_for > facts.graceful_timeout + DRAIN_SLACK
        return (Tick.KILL if overdue and not facts.killed else Tick.NOTHING), ""
    if facts.timed_out:
        return Tick.NOTHING, ""
    if not facts.ready:
        if facts.startup_timeout and facts.age >= facts.startup_timeout:
            return Tick.TIME_OUT, (
                f"not ready after {facts.age:.0f}s (startup_timeout {facts.startup_timeout:g}s)"
            )
        return Tick.NOTHING, ""
    timeout = facts.timeout
    if timeout:
        silent = facts.unheard - PULSE  # surely: it may have run until its next pulse was due
        if silent >= timeout:
            return (
                Tick.TIME_OUT,
                f"event loop silent for {silent:.1f}-{facts.unheard:.1f}s (timeout {timeout:g}s)",
            )
        if facts.request_age is not None and facts.request_age >= timeout:
            return Tick.TIME_OUT, f"a request ran past the timeout ({timeout:g}s)"
    return Tick.CONSIDER_RECYCLING, ""


def time_out_in(facts: TickFacts) -> float | None:
    """Seconds from now until ``at_tick`` times the worker out if nothing is heard of it
    meanwhile (0: now); None when no timeout applies to it."""
    if facts.retiring or facts.timed_out:
        return None
    if not facts.ready:
        return max(facts.startup_timeout - facts.age, 0.0) if facts.startup_timeout else None
    if not facts.timeout:
        return None
    due = facts.timeout + PULSE - facts.unheard
    if facts.request_age is not None:
        due = min(due, facts.timeout - facts.request_age)
    return max(due, 0.0)
