"""Open connections per client and in all, one count for the whole server: nginx's
``limit_conn`` (a listener's ``limit_conn``) and the server-wide `limit_concurrency_total`, in
memory the master maps before it forks (as `corral.filters.ratelimit`'s tables).

A table is a fixed array of slots, one per client (its key's hash, then a count per *seat*):
every worker process has a seat of its own, given by the master at the fork
(`corral.master.connlimits`), and changes only its own seat's count. A client's connections
are the sum of its slot's counts. A worker that dies leaves its seat's counts behind; the
master zeroes that seat in every table when it reaps it, before the seat is given again: no
count is lost or stuck, whatever the worker was doing when it died.

A connection is counted at its first request, once its client is known (after a trusted
proxy's ``forwarded`` headers and the PROXY protocol), and until it closes; a keep-alive
connection of a proxy whose requests name another client is counted for the new one. Taking
a place is an increment of the worker's own count, then the sum: over the limit, the
increment is taken back and the request refused. Two workers racing for the last place may
both refuse (never both admit): the count is never over the limit. The compiled core does it
with atomic instructions (``atomic.pxd``), the Python core under a lock of the table's file.

A table full of clients that all hold connections refuses a new one, as nginx does when its
zone is exhausted; a client with no connection left gives its slot up to the next new one.
"""

from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING, Any, Protocol

from corral.actions.respond import AnsweringConnection, refuse
from corral.filters import atomic
from corral.filters.forwarded import client_address

if TYPE_CHECKING:
    from corral.server.exchange import Exchange

__all__ = ["REFUSED", "WORD_BYTES", "ConnGate", "ConnTable"]

WORD_BYTES = 8
PROBES = 16  # slots looked at from a key's hash
REFUSED = -1  # hold(): no place left
RETRY_AFTER = "Retry-After: 1\r\n"  # a second: a connection closes, a place frees
WHOLE = "*"  # the key of the server-wide count (its table has one slot)


class HeldConnection(AnsweringConnection, Protocol):
    """A connection counted for its client, as read here: `corral.server.connection`'s
    `HttpConnection`, which imports this module (through its listener's plan)."""

    conns_held: Any  # (client, slot, total slot) it was counted at; None: not counted


class ConnTable:
    """The counts of one limit, shared by the processes forked after it was made."""

    def __init__(self, size: int, seats: int) -> None:
        """``size``: bytes for the counts, at least one slot's; ``seats``: the worker processes
        that may count at once (a seat at or beyond it counts nowhere)."""
        self.seats = seats
        self.stride = seats + 1  # the key's hash, then a count per seat
        self.slots = max(1, size // (self.stride * WORD_BYTES))
        self.fd = os.memfd_create("corral-conn-limit")
        length = self.slots * self.stride * WORD_BYTES
        os.posix_fallocate(self.fd, 0, length)  # all of it now: never a fault in a worker
        self.memory = mmap.mmap(self.fd, length)
        self.view = memoryview(self.memory).cast("Q")
        self.words: Any = atomic.words_of(self.view)  # compiled: a pointer to the first word

    def hold(self, key: str, limit: int, seat: int) -> int:
        """One more connection of ``key``, counted at ``seat``: the index of its slot (what
        `release` takes), or `REFUSED` when ``key`` holds ``limit`` already (or the table is
        full of clients that all hold connections)."""
        mark = atomic.mark_of(key)
        atomic.lock(self.fd)
        try:
            while True:
                slot = self._slot(mark)
                if slot < 0:
                    return REFUSED
                atomic.added(self.words, slot + 1 + seat, 1)
                if atomic.load(self.words, slot) != mark:  # given to another key meanwhile
                    atomic.added(self.words, slot + 1 + seat, -1)
                    continue
                if self._sum(slot) > limit:
                    atomic.added(self.words, slot + 1 + seat, -1)
                    return REFUSED
                return slot
        finally:
            atomic.unlock(self.fd)

    def release(self, slot: int, seat: int) -> None:
        """A connection counted by `hold` at ``slot`` closed."""
        atomic.lock(self.fd)
        try:
            atomic.added(self.words, slot + 1 + seat, -1)
        finally:
            atomic.unlock(self.fd)

    def _sum(self, slot: int) -> int:
        total = 0
        for seat in range(self.seats):
            total += atomic.load(self.words, slot + 1 + seat)
        return total

    def _slot(self, mark: int) -> int:
        """The index of ``mark``'s slot, claiming a free one (or one whose client holds no
        connection) when it has none; -1: every slot in reach is held."""
        words = self.words
        first = mark % self.slots
        for probe in range(PROBES):
            slot = ((first + probe) % self.slots) * self.stride
            held = atomic.load(words, slot)
            if held == mark:
                return slot
            if held == 0 and atomic.swap(words, slot, 0, mark):
                return slot
            if atomic.load(words, slot) == mark:  # another worker claimed it for this key
                return slot
        for probe in range(PROBES):  # none free: the first whose client holds nothing
            slot = ((first + probe) % self.slots) * self.stride
            held = atomic.load(words, slot)
            if held == mark:
                return slot
            if self._sum(slot) == 0 and atomic.swap(words, slot, held, mark):
                return slot
        return -1

    def clear(self, seat: int) -> None:
        """The worker of ``seat`` is gone: its counts go (the master's, before the seat is
        given again)."""
        if seat >= self.seats:
            return
        atomic.lock(self.fd)
        try:
            for slot in range(0, self.slots * self.stride, self.stride):
                atomic.store(self.words, slot + 1 + seat, 0)
        finally:
            atomic.unlock(self.fd)

    def count(self, key: str) -> int:
        """The connections ``key`` holds now (every worker's; for tests and the API)."""
        mark = atomic.mark_of(key)
        first = mark % self.slots
        for probe in range(PROBES):
            slot = ((first + probe) % self.slots) * self.stride
            if atomic.load(self.words, slot) == mark:
                return self._sum(slot)
        return 0

    def close(self) -> None:
        self.view.release()
        self.memory.close()
        os.close(self.fd)


class ConnGate:
    """A worker's counts of one listener's connections: per client (``table``, nginx's
    ``limit_conn``, refused ``status``) and in all (``total``, `limit_concurrency_total`,
    refused 503 as overload), either None when not limited. ``seat``: the worker's (the
    master's, at the fork)."""

    def __init__(
        self,
        table: ConnTable | None,
        limit: int,
        status: int,
        total: ConnTable | None,
        total_limit: int,
        seat: int,
    ) -> None:
        self.table = table if table is not None and seat < table.seats else None
        self.limit = limit
        self.status = status
        self.total = total if total is not None and seat < total.seats else None
        self.total_limit = total_limit
        self.seat = seat

    def refuses(self, conn: HeldConnection, exchange: Exchange, peer: Any, held: Any) -> bool:
        """Count ``conn`` for the client of ``exchange``'s request (once: a connection keeps
        its place until it closes): True when there is no place, its answer then set (the
        status with ``Retry-After``, the connection closed after it). ``peer`` and ``held``
        are ``conn``'s ``peer`` and ``conns_held``, passed by the connection from its own
        fields: read here, from a ``conn`` this module cannot type, each would be a Python
        lookup, and a trusted proxy's connection asks for every request."""
        key = client_address(peer, exchange) if self.table is not None else ""
        if held is not None:
            if held[0] == key:
                return False  # counted at an earlier request
            self.release(conn)  # a proxy's connection now carries another client's requests
        total_slot = REFUSED
        if self.total is not None:
            total_slot = self.total.hold(WHOLE, self.total_limit, self.seat)
            if total_slot == REFUSED:
                return self._refuse(conn, exchange, 503, "overload")
        slot = REFUSED
        if self.table is not None and key:  # (a unix socket's peer has no address: not counted)
            slot = self.table.hold(key, self.limit, self.seat)
            if slot == REFUSED:
                if total_slot != REFUSED:
                    self.total.release(total_slot, self.seat)  # type: ignore[union-attr]
                return self._refuse(conn, exchange, self.status, "limit_conn")
        conn.conns_held = (key, slot, total_slot)
        return False

    def release(self, conn: HeldConnection) -> None:
        """``conn`` closed (or changed client): its places are free."""
        held = conn.conns_held
        if held is None:
            return
        conn.conns_held = None
        if held[1] != REFUSED:
            self.table.release(held[1], self.seat)  # type: ignore[union-attr]
        if held[2] != REFUSED:
            self.total.release(held[2], self.seat)  # type: ignore[union-attr]

    def _refuse(self, conn: HeldConnection, exchange: Exchange, status: int, reason: str) -> bool:
        return refuse(conn, exchange, status, reason, RETRY_AFTER, close=True)
