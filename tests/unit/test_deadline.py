"""corral.apps.deadline without sockets: the watchdog against real threads.

The segments run on helper threads (the pytest thread is the "main" one the watchdog would
signal); the SIGALRM handler the watchdog installs is restored after each test.
"""

from __future__ import annotations

import gc
import logging
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from corral.apps.deadline import RequestClock, RequestTimeoutExceeded, Watchdog
from corral.wire import Stuck, encode


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def records() -> Iterator[Records]:
    logger = logging.getLogger("corral.test-deadline")
    logger.propagate = False
    handler = Records()
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


@pytest.fixture
def watchdog(records: Records) -> Iterator[Callable[..., tuple[Watchdog, list[Stuck]]]]:
    previous = signal.getsignal(signal.SIGALRM)
    started: list[Watchdog] = []
    # Hypothesis leaves a gc callback installed once its tests have run. An exception the
    # watchdog raises while a gc callback runs is swallowed by CPython (printed as
    # unraisable) and the segment runs on to the grace, which the grace tests cover; here it
    # would only make the interleaving tests fail at random.
    callbacks = gc.callbacks[:]
    gc.callbacks.clear()

    def start(timeout: float, grace: float = 60.0, interval: float | None = None):
        reports: list[Stuck] = []
        dog = Watchdog(
            timeout,
            grace,
            logging.getLogger("corral.test-deadline"),
            reports.append,
            interval=interval,
        )
        dog.start()
        started.append(dog)
        return dog, reports

    yield start
    for dog in started:
        dog.stop()
    signal.signal(signal.SIGALRM, previous)
    gc.callbacks[:] = callbacks


def on_thread(target: Callable[[], Any]) -> Any:
    """Run ``target`` on a new thread; return what it returned or raise what it raised."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("value", target()))
        except BaseException as exc:
            outcome.append(("raised", exc))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    kind, value = outcome[0]
    if kind == "raised":
        raise value
    return value


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.wallclock
def test_the_exception_lands_only_inside_the_segment_it_was_meant_for(watchdog, records):
    """Segments ending right at their deadline, the server's own loop between them: a
    timeout must surface from ``run`` or not at all, never in the code that follows."""
    timeout = 0.002
    dog, _ = watchdog(timeout, interval=0.0005)
    counts = {"fired": 0, "finished": 0, "escaped": 0}

    def serve() -> None:
        stop = time.monotonic() + 1.5
        while time.monotonic() < stop:
            try:
                clock = RequestClock(dog, "GET", "/")
                try:
                    clock.run(spin, random.uniform(0.0, 2 * timeout))
                    counts["finished"] += 1
                except RequestTimeoutExceeded:
                    counts["fired"] += 1
                total = 0
                for step in range(300):  # server code: backward jumps, delivery points
                    total += step
            except RequestTimeoutExceeded:
                counts["escaped"] += 1

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # many more interleavings of the two threads
    try:
        on_thread(serve)
    finally:
        sys.setswitchinterval(switch)
    assert counts["escaped"] == 0, counts
    assert counts["fired"] > 20 and counts["finished"] > 20, counts
    assert dog.inside == {}
    # one record per request fired at: the watchdog logs just after it raises, so the last
    # record may still be on its way when the serving thread has finished
    deadline = time.monotonic() + 2.0
    while len(records.messages) < counts["fired"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(records.messages) == counts["fired"]


@pytest.mark.wallclock
def test_the_clock_stops_while_the_server_waits_for_the_client(watchdog):
    dog, _ = watchdog(0.2, interval=0.01)
    clock = RequestClock(dog, "GET", "/")

    def waits_for_client() -> str:
        paused = dog.suspend()
        assert paused is clock
        time.sleep(0.5)  # e.g. ThreadOutput.write blocked on a slow reader
        dog.resume(paused)
        return "done"

    assert on_thread(lambda: clock.run(waits_for_client)) == "done"
    assert clock.spent < 0.2 and not clock.fired_at
    assert on_thread(dog.suspend) is None  # outside any segment: nothing to suspend


@pytest.mark.wallclock
def test_a_thread_that_does_not_unwind_is_reported_once(watchdog, records):
    dog, reports = watchdog(0.05, grace=0.1, interval=0.01)
    clock = RequestClock(dog, "GET", "/a b")
    started = time.monotonic()
    # a non-main thread in time.sleep cannot be reached until the sleep returns
    with pytest.raises(RequestTimeoutExceeded):
        on_thread(lambda: clock.run(time.sleep, 0.6))
    assert time.monotonic() - started >= 0.6
    assert len(reports) == 1, reports
    assert re.fullmatch(rb"stuck 0\.[1-3] GET /a%20b\n", encode(reports[0])), reports
    assert records.messages[0].startswith("request timeout: GET /a b has run 0.")
    assert records.messages[1].startswith(
        "request timeout: GET /a b did not unwind within request_timeout_grace (0.1s)"
    )
    # the stack starts above the segment: a C function called directly has no frame there
    assert records.messages[1].endswith(" is at:\n  (in a C function the server called)")
