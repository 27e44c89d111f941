"""The master's lifecycle decisions (corral/master/lifecycle.py), on plain data: no fork, no
signal, no sleep."""

from __future__ import annotations

from dataclasses import replace

import pytest

from corral.master import lifecycle
from corral.master.lifecycle import Exit, ExitFacts, Tick, TickFacts

# a worker of the current generation that served a while and exited on its own
SERVED = ExitFacts(
    stopping=False,
    retiring=False,
    pending=False,
    failed_to_load=False,
    may_shut_down=True,
    replaces=False,
    has_successor=False,
    slot_wanted=True,
    timed_out=False,
    ready=True,
    lived=60.0,
    min_lifetime=5.0,
)


@pytest.mark.parametrize(
    ("change", "decision"),
    [
        ({}, Exit.RESPAWN),
        ({"stopping": True}, Exit.LOG_ONLY),
        ({"retiring": True}, Exit.LOG_ONLY),
        ({"pending": True}, Exit.ROLLBACK),
        ({"pending": True, "ready": False, "lived": 0.1}, Exit.ROLLBACK),
        ({"failed_to_load": True, "ready": False, "lived": 0.2}, Exit.SHUT_DOWN),
        # the state directory's configuration: nothing to fix it through if the server stopped
        ({"failed_to_load": True, "may_shut_down": False, "ready": False}, Exit.BACK_OFF),
        ({"replaces": True, "ready": False}, Exit.RETRY_LATER),
        ({"has_successor": True}, Exit.SUCCESSOR),
        ({"slot_wanted": False}, Exit.GONE),
        ({"lived": 1.0}, Exit.BACK_OFF),  # died young: a crash at start-up
        ({"ready": False, "lived": 60.0}, Exit.BACK_OFF),  # never ready: the same
        ({"timed_out": True, "lived": 1.0}, Exit.RESPAWN),  # the master killed it
    ],
)
def test_after_exit(change, decision) -> None:
    assert lifecycle.after_exit(replace(SERVED, **change)) is decision


def test_after_exit_precedence_stopping_wins_over_everything() -> None:
    everything = replace(
        SERVED, stopping=True, pending=True, failed_to_load=True, replaces=True, lived=0.0
    )
    assert lifecycle.after_exit(everything) is Exit.LOG_ONLY
    assert lifecycle.after_exit(replace(everything, stopping=False)) is Exit.ROLLBACK


def test_the_backoff_doubles_per_death_in_a_row_and_is_capped() -> None:
    delays = [lifecycle.backoff_delay(n) for n in range(1, 12)]
    assert delays[:4] == [0.1, 0.2, 0.4, 0.8]
    assert delays[-1] == lifecycle.BACKOFF_MAX
    assert delays == sorted(delays)


def test_the_backoff_is_kept_per_slot() -> None:
    """Eight workers dying young together each wait the first delay, not 0.1 * 2**7."""
    backoff = lifecycle.Backoff()
    delays = [backoff.failed(("app", slot), now=100.0) for slot in range(8)]
    assert delays == [lifecycle.BACKOFF_FIRST] * 8
    assert backoff.failed(("app", 3), now=101.0) == 2 * lifecycle.BACKOFF_FIRST
    assert backoff.failures(("app", 3)) == 2 and backoff.failures(("app", 4)) == 1
    assert backoff.failed(("other", 3), now=101.0) == lifecycle.BACKOFF_FIRST  # another pool


def test_the_backoff_settles_when_a_newer_worker_of_the_slot_outlives_min_lifetime() -> None:
    backoff = lifecycle.Backoff()
    slot = ("app", 0)
    backoff.failed(slot, now=100.0)
    backoff.failed(slot, now=101.0)
    backoff.settle(slot, started=90.0, ready=True, now=200.0, min_lifetime=5.0)  # older
    assert backoff.failures(slot) == 2
    backoff.settle(slot, started=102.0, ready=False, now=200.0, min_lifetime=5.0)  # not ready
    assert backoff.failures(slot) == 2
    backoff.settle(slot, started=102.0, ready=True, now=104.0, min_lifetime=5.0)  # too young
    assert backoff.failures(slot) == 2
    backoff.settle(slot, started=102.0, ready=True, now=107.0, min_lifetime=5.0)
    assert backoff.failures(slot) == 0
    assert backoff.failed(slot, now=108.0) == lifecycle.BACKOFF_FIRST
    backoff.forget(slot)
    assert backoff.failures(slot) == 0


# a ready worker, beating, with no request
RUNNING = TickFacts(
    retiring=False,
    drained_for=0.0,
    graceful_timeout=30.0,
    killed=False,
    timed_out=False,
    ready=True,
    age=100.0,
    unheard=0.2,
    timeout=30.0,
    startup_timeout=60.0,
    request_age=None,
)


@pytest.mark.parametrize(
    ("change", "decision", "why"),
    [
        ({}, Tick.CONSIDER_RECYCLING, ""),
        ({"retiring": True, "drained_for": 10.0}, Tick.NOTHING, ""),
        ({"retiring": True, "drained_for": 36.0}, Tick.KILL, ""),  # 30 + DRAIN_SLACK
        ({"retiring": True, "drained_for": 36.0, "killed": True}, Tick.NOTHING, ""),
        ({"timed_out": True, "unheard": 99.0}, Tick.NOTHING, ""),  # being timed out already
        # its loop may have run until its next pulse was due: silent for 29.95s at most
        ({"unheard": 30.2}, Tick.CONSIDER_RECYCLING, ""),
        ({"unheard": 31.0}, Tick.TIME_OUT, "event loop silent for 30.8-31.0s (timeout 30s)"),
        ({"request_age": 29.99}, Tick.CONSIDER_RECYCLING, ""),
        ({"request_age": 30.0}, Tick.TIME_OUT, "a request ran past the timeout (30s)"),
        ({"unheard": 99.0, "request_age": 99.0, "timeout": 0.0}, Tick.CONSIDER_RECYCLING, ""),
        ({"ready": False, "age": 59.0, "unheard": 59.0}, Tick.NOTHING, ""),
        (
            {"ready": False, "age": 61.0, "unheard": 61.0},
            Tick.TIME_OUT,
            "not ready after 61s (startup_timeout 60s)",
        ),
        # start-up has its own bound, with the server's timeout off too
        (
            {"ready": False, "age": 61.0, "timeout": 0.0},
            Tick.TIME_OUT,
            "not ready after 61s (startup_timeout 60s)",
        ),
        ({"ready": False, "age": 9999.0, "startup_timeout": 0.0}, Tick.NOTHING, ""),
    ],
)
def test_at_tick(change, decision, why) -> None:
    assert lifecycle.at_tick(replace(RUNNING, **change)) == (decision, why)


@pytest.mark.parametrize(
    ("change", "due"),
    [
        ({}, 30.05),  # 30 s after the pulse it may have run until (0.25 s after its last)
        ({"request_age": 10.0}, 20.0),
        ({"request_age": 40.0}, 0.0),  # overdue: now
        ({"unheard": 45.0}, 0.0),
        ({"timeout": 0.0, "request_age": 10.0}, None),
        ({"retiring": True}, None),
        ({"timed_out": True}, None),
        ({"ready": False, "age": 10.0}, 50.0),
        ({"ready": False, "age": 10.0, "timeout": 0.0}, 50.0),
        ({"ready": False, "age": 10.0, "startup_timeout": 0.0}, None),
    ],
)
def test_time_out_in(change, due) -> None:
    assert lifecycle.time_out_in(replace(RUNNING, **change)) == pytest.approx(due)


def _later(facts: TickFacts, seconds: float) -> TickFacts:
    """``facts`` ``seconds`` later, nothing heard of the worker meanwhile."""
    age = None if facts.request_age is None else facts.request_age + seconds
    return replace(facts, age=facts.age + seconds, unheard=facts.unheard + seconds, request_age=age)


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"timeout": 1.0},
        {"timeout": 2.0, "unheard": 1.3},
        {"timeout": 2.0, "request_age": 0.4},
        {"timeout": 3.0, "request_age": 2.9, "unheard": 0.0},
        {"ready": False, "age": 1.5},
    ],
)
def test_a_timeout_is_due_when_time_out_in_says_not_before(change) -> None:
    """The master's timer, set for time_out_in, finds the timeout due; a millisecond
    earlier it would not have: the worker is timed out neither early nor late."""
    facts = replace(RUNNING, **change)
    due = lifecycle.time_out_in(facts)
    assert due is not None and due > 0.001
    assert lifecycle.at_tick(_later(facts, due))[0] is Tick.TIME_OUT
    assert lifecycle.at_tick(_later(facts, due - 0.001))[0] is not Tick.TIME_OUT
