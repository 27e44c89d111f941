"""The shared connection counts of ``limit_conn`` and ``limit_concurrency_total``
(filters/connlimit.py): a count per worker seat, never over the limit whatever processes race
for the last place, a dead seat cleared, a table that never grows. Run on both cores
(test_python_core.py runs this module on the Python one)."""

from __future__ import annotations

import os
import signal

from corral.filters.connlimit import REFUSED, WORD_BYTES, ConnTable


def test_a_client_holds_its_limit_whatever_seats_count_it() -> None:
    table = ConnTable(1 << 16, 4)
    held = [table.hold("10.0.0.1", 3, seat) for seat in (0, 1, 2)]
    assert REFUSED not in held and len(set(held)) == 1  # one slot, three seats
    assert table.hold("10.0.0.1", 3, 3) == REFUSED
    assert table.count("10.0.0.1") == 3
    assert table.hold("10.0.0.2", 3, 3) != REFUSED  # another client, its own count
    table.release(held[1], 1)
    assert table.hold("10.0.0.1", 3, 3) == held[0]
    assert table.count("10.0.0.1") == 3


def test_forked_processes_racing_never_pass_the_limit() -> None:
    table = ConnTable(1 << 16, 8)
    children = []
    for seat in range(8):
        pid = os.fork()
        if pid == 0:  # each tries for 5 places of the 10 the client has
            admitted = 99
            try:
                admitted = sum(table.hold("c", 10, seat) != REFUSED for _ in range(5))
            finally:
                os._exit(admitted)
        children.append(pid)
    admitted = sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children)
    assert admitted == table.count("c") <= 10
    assert admitted >= 8  # (processes racing for the last places may all refuse them)


def test_a_dead_workers_seat_is_cleared_and_nothing_else() -> None:
    table = ConnTable(1 << 16, 4)
    pid = os.fork()
    if pid == 0:  # a worker that dies holding two of the client's places
        try:
            table.hold("d", 4, 1)
            table.hold("d", 4, 1)
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    table.hold("d", 4, 0)
    assert table.count("d") == 3
    table.clear(1)  # what the master does when it reaps that worker
    assert table.count("d") == 1
    assert [table.hold("d", 4, 2) != REFUSED for _ in range(4)] == [True, True, True, False]


def test_the_table_never_grows_and_a_client_with_no_connection_gives_its_slot_up() -> None:
    table = ConnTable(16 * 5 * WORD_BYTES, 4)  # 16 slots of a hash and four counts
    assert table.slots == 16 and os.fstat(table.fd).st_size == 16 * 5 * WORD_BYTES
    slots = [table.hold(f"10.1.0.{i}", 1, 0) for i in range(16)]
    assert REFUSED not in slots
    assert table.hold("10.2.0.1", 1, 0) == REFUSED  # every slot held: refused, as nginx
    table.release(slots[5], 0)
    assert table.hold("10.2.0.1", 1, 0) == slots[5]  # the slot of a client with none left
    assert table.count("10.1.0.5") == 0
    assert os.fstat(table.fd).st_size == 16 * 5 * WORD_BYTES
