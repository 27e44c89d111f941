"""The master's connection count tables (master/connlimits.py): kept across a reload while a
listener's ``limit_conn`` and the workers it may run stay the same, made anew otherwise; a
reaped worker's seat zeroed in every table, the old generation's too, and given again."""

from __future__ import annotations

from typing import Any

from corral.config import validate_document
from corral.filters.connlimit import REFUSED
from corral.master import connlimits

ADDRESS = "127.0.0.1:8000"


def document(connections: int, workers: int = 2, total: int = 0) -> Any:
    return validate_document(
        {
            "listeners": {
                ADDRESS: {
                    "pass": "applications/a",
                    "limit_conn": {"connections": connections, "table_size": 4096},
                }
            },
            "applications": {"a": {"module": "basic", "processes": workers}},
            "settings": {"limit_concurrency_total": total},
        }
    )


def test_a_reload_keeps_the_table_while_the_limit_is_the_same() -> None:
    first = connlimits.conn_limits(document(8), [ADDRESS])[ADDRESS]
    assert first[1:] == (8, 503)
    assert connlimits.conn_limits(document(8), [ADDRESS])[ADDRESS][0] is first[0]
    changed = connlimits.conn_limits(document(4), [ADDRESS])[ADDRESS]
    assert changed[0] is not first[0] and changed[1] == 4
    more_workers = connlimits.conn_limits(document(4, workers=20), [ADDRESS])[ADDRESS]
    assert more_workers[0] is not changed[0] and more_workers[0].seats == 42


def test_a_reaped_workers_seat_is_zeroed_everywhere_and_given_again() -> None:
    old = connlimits.conn_limits(document(2), [ADDRESS])[ADDRESS][0]
    new = connlimits.conn_limits(document(3), [ADDRESS])[ADDRESS][0]  # a reload changed it
    total = connlimits.total_table(document(3, total=10))
    assert total is not None
    seat = connlimits.take_seat()
    connlimits.seat_of(4242, seat)
    assert old.hold("c", 2, seat) != REFUSED and new.hold("c", 3, seat) != REFUSED
    assert total.hold("*", 10, seat) != REFUSED
    assert connlimits.take_seat() != seat  # a live worker's seat is nobody else's
    connlimits.free_seat(4242)  # the master reaped it
    assert old.count("c") == new.count("c") == total.count("*") == 0
    assert connlimits.take_seat() == seat
