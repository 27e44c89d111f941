"""The tables of the connection counts (`corral.filters.connlimit`): each listener's
``limit_conn`` and the server's `limit_concurrency_total`, and the workers' seats in them.

Made by the master before it forks the workers that share them, and kept across generations
while a limit stays the same at its place (and its table has a seat for every worker the new
document may run), so that a reload forgets no client's connections; a table made anew
starts from no connection (the old one's workers drain on it). Each worker process holds one
seat from its fork until the master reaps it: then the seat's counts are zeroed in every
table, whatever the worker was doing when it died, and the seat is free again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from corral.config import Document
from corral.config.listener_limits import ConnLimit

if TYPE_CHECKING:  # (the tables' module is imported with the first table: a limit configured)
    from corral.filters.connlimit import ConnTable

__all__ = ["conn_limits", "seat_of", "take_seat", "total_table"]

MIN_SEATS = 16

# the tables of the last generation, by place and limit (and the tables still mapped by
# workers of older generations, which a seat's clearing must reach too)
_kept: dict[tuple[str, ConnLimit, int], ConnTable] = {}
_total: ConnTable | None = None
_tables: list[ConnTable] = []  # every table made, for `free_seat`
_seats: dict[int, int] = {}  # seat by worker pid
_free: set[int] = set()
_next = 0


def seats_for(doc: Document) -> int:
    """Seats a table of ``doc`` has: twice every worker it may run (the old generation's
    drain beside the new one's start), and at least `MIN_SEATS`."""
    most = sum(
        max(app.workers, app.dynamic.max if app.dynamic else 1) for app in doc.applications.values()
    )
    return max(MIN_SEATS, 2 * max(most, 1) + 2)


def conn_limits(doc: Document, addresses: Any) -> dict[str, tuple[ConnTable, int, int]]:
    """Each listener's ``limit_conn`` among ``addresses``: (its table, limit, status)."""
    global _kept
    seats = seats_for(doc)
    made: dict[tuple[str, ConnLimit, int], ConnTable] = {}
    found = {}
    for address in addresses:
        limit = doc.listeners[address].limit_conn
        if isinstance(limit, msgspec.UnsetType):
            continue
        key = (address, limit, seats)
        table = made[key] = _kept.get(key) or _made(limit.table_size, seats)
        found[address] = (table, limit.connections, limit.status)
    _kept = made
    return found


def total_table(doc: Document) -> ConnTable | None:
    """The server's one count of `limit_concurrency_total` (kept while its seats suffice)."""
    global _total
    if not doc.settings.limit_concurrency_total:
        return None
    seats = seats_for(doc)
    if _total is None or _total.seats < seats:
        from corral.filters.connlimit import WORD_BYTES

        _total = _made((seats + 1) * WORD_BYTES, seats)
    return _total


def _made(size: int, seats: int) -> ConnTable:
    from corral.filters.connlimit import ConnTable

    table = ConnTable(size, seats)
    _tables.append(table)
    return table


def take_seat() -> int:
    """A seat for a worker about to be forked (the lowest free)."""
    global _next
    if _free:
        seat = min(_free)
        _free.discard(seat)
        return seat
    _next += 1
    return _next - 1


def seat_of(pid: int, seat: int) -> None:
    """The worker ``pid`` was forked with ``seat``."""
    _seats[pid] = seat


def free_seat(pid: int | None, seat: int | None = None) -> None:
    """The worker ``pid`` is gone (or, ``pid`` None, was never forked with ``seat``): its
    counts are zeroed in every table, its seat given again."""
    if pid is not None:
        seat = _seats.pop(pid, None)
    if seat is None:
        return
    for table in _tables:
        table.clear(seat)
    _free.add(seat)


def whole_count() -> int:
    """The connections counted by `limit_concurrency_total` now (for tests and the API)."""
    if _total is None:
        return 0
    from corral.filters.connlimit import WHOLE

    return _total.count(WHOLE)
