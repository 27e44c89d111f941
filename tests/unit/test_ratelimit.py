"""The shared token buckets of a listener's ``rate_limit`` (filters/ratelimit.py): nginx's
``limit_req`` arithmetic, a table that never grows, and processes that share it, one of them
dying mid-update. Run on both cores (test_python_core.py runs this module on the Python one)."""

from __future__ import annotations

import os
import signal

import pytest

from corral.filters import atomic
from corral.filters.ratelimit import RateTable
from corral.routing import Limited, Respond, RouteError, compile_routes
from corral.routing.request import RouteRequest

SECOND = 1_000_000_000
INTERVAL = SECOND // 10  # 10r/s
ADMITTED = 0  # take(): served at once (a C constant of the compiled core, not importable)


def test_burst_and_delay_as_nginx_counts_them() -> None:
    table = RateTable(1 << 16)
    now = 1000.0
    # burst 2, no delay: the first at once, two more each a turn later, then refused
    taken = [table.take("a", now, INTERVAL, 2 * INTERVAL, 0) for _ in range(4)]
    assert taken == [ADMITTED, INTERVAL, 2 * INTERVAL, -INTERVAL]
    # nodelay (delay = burst): the burst at once; another client has its own bucket
    taken = [table.take("b", now, INTERVAL, 2 * INTERVAL, 2 * INTERVAL) for _ in range(4)]
    assert taken == [ADMITTED, ADMITTED, ADMITTED, -INTERVAL]
    assert table.counts() == (2, 2)  # refused, delayed: every process's
    # a second later the bucket is full again
    assert table.take("a", now + 1.0, INTERVAL, 2 * INTERVAL, 0) == ADMITTED


def test_a_client_at_twice_its_rate_gets_its_rate() -> None:
    table = RateTable(1 << 16)
    admitted = sum(
        table.take("c", 5000.0 + i / 20, INTERVAL, 0, 0) == ADMITTED for i in range(200)
    )  # 10 seconds at 20r/s against 10r/s
    assert admitted == 100


def test_the_table_never_grows_and_forgets_the_most_refilled() -> None:
    table = RateTable(4096)  # 256 slots
    assert table.slots == 256 and os.fstat(table.fd).st_size == 4096 + 16  # and the counts
    now = 100.0
    for i in range(10_000):  # each a new client: a full bucket
        assert table.take(f"10.0.{i >> 8}.{i & 255}", now, INTERVAL, 0, 0) == ADMITTED
    assert os.fstat(table.fd).st_size == 4096 + 16
    # a client still inside its interval is refused: it kept its slot while the others, each
    # as refilled as it, took theirs
    assert table.take("203.0.113.9", now, INTERVAL, 0, 0) == ADMITTED
    assert table.take("203.0.113.9", now, INTERVAL, 0, 0) < 0


def test_forked_processes_share_one_count() -> None:
    table = RateTable(1 << 16)
    now = 200.0
    children = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:  # each child takes 5 of the 10 a second's bucket holds
            admitted = 99
            try:
                taken = [
                    table.take("d", now, INTERVAL, 9 * INTERVAL, 9 * INTERVAL) for _ in range(5)
                ]
                admitted = sum(t == ADMITTED for t in taken)
            finally:
                os._exit(admitted)
        children.append(pid)
    admitted = sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children)
    assert admitted == 10


def test_a_process_killed_mid_update_leaves_the_table_usable() -> None:
    table = RateTable(1 << 16)
    mark = (hash("e") & ((1 << 64) - 1)) or 1
    slot = (mark & table.mask) * 2 + 2
    pid = os.fork()
    if pid == 0:  # (nothing here returns to pytest)
        # what a worker leaves when it dies between the two words of a slot: the key claimed
        # (and, on the Python core, the table's lock held), the bucket not yet written
        try:
            atomic.lock(table.fd)
            atomic.store(table.view, slot, mark)
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    assert table.view[slot] == mark and table.view[slot + 1] == 0  # what it left
    assert table.take("e", 300.0, INTERVAL, 0, 0) == ADMITTED
    assert table.take("e", 300.0, INTERVAL, 0, 0) < 0
    assert table.take("f", 300.0, INTERVAL, 0, 0) == ADMITTED


def test_a_steps_rate_limit_marks_its_action_and_mistakes_name_their_place() -> None:
    limit = {"rate": "10r/s"}
    router = compile_routes([{"action": {"return": 204, "rate_limit": limit}}])
    request = RouteRequest("GET", b"/", [], ("127.0.0.1", 1), ("127.0.0.1", 80))
    assert router.resolve("routes", request) == Limited(
        Respond(204), "$.routes[0].action.rate_limit"
    )
    with pytest.raises(RouteError) as info:
        compile_routes({"a": [{"action": {"pass": "routes/b", "rate_limit": limit}}], "b": []})
    assert str(info.value) == (
        "$.routes.a[0].action.rate_limit: on a pass to routes (or one built from variables): "
        "put it on the steps it reaches"
    )
    with pytest.raises(RouteError, match=r"^\$\.routes\[0\]\.action\.rate_limit: "):
        compile_routes([{"action": {"return": 204, "rate_limit": {"rate": "10/s"}}}])
