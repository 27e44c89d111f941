"""Request rates per client, one count for a whole pool: a token bucket per key (nginx's
``limit_req``: a rate, a ``burst``, and ``delay``/``nodelay``) in memory the master maps before
it forks, so that every worker of the pool reads and updates the same state.

The bucket is kept as one number per key, its theoretical arrival time (the GCRA form of a
token bucket): the moment the bucket would be empty again. A request at ``now`` finds it at
``max(tat, now)``; it is refused when that is more than ``burst`` intervals ahead, else the
bucket moves one interval on, and the request waits ``excess - delay`` intervals (nginx's
``delay``; ``nodelay`` is a delay as large as the burst).

The table is a fixed array of slots (a key's hash, its arrival time), a power of two of them,
found by probing a few slots from the hash: it never grows. A key that finds no slot takes the
one of the probe window whose bucket is the most refilled (an empty bucket is no information:
that is nginx's eviction of the least recently used, without a list to keep). A slot is two
64-bit words, each changed whole by an atomic compare-and-swap in the compiled core (the
``.pxd`` gives the atomics) and under a lock of the table's file in the Python core, which the
kernel releases when its holder dies: a worker killed mid-update leaves every slot usable.
"""

from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING, Any

from corral.actions.respond import Reply
from corral.filters import atomic
from corral.filters.forwarded import client_address
from corral.server import clock

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange

__all__ = ["SLOT_BYTES", "Limiter", "RateTable"]

SLOT_BYTES = 16  # the key's hash, the bucket's arrival time (ns): two 64-bit words
PROBES = 8  # slots looked at from a key's hash: two cache lines
ADMITTED = 0  # take(): served at once (the compiled core's constants are C's: .pxd)
REFUSED, DELAYED = 0, 1  # the words of the counts, before the first slot


class RateTable:
    """The buckets of one limit, shared by the processes forked after it was made."""

    def __init__(self, size: int) -> None:
        """``size``: bytes of memory, at least one slot's (rounded down to a power of two)."""
        slots = 1 << max(0, (max(size, SLOT_BYTES) // SLOT_BYTES).bit_length() - 1)
        self.slots = slots
        self.fd = os.memfd_create("corral-rate-limit")
        # the memory is taken now, all of it: never a fault (or SIGBUS) in a worker later; a
        # first slot more holds the counts of requests refused and delayed (`counts`)
        os.posix_fallocate(self.fd, 0, (slots + 1) * SLOT_BYTES)
        self.memory = mmap.mmap(self.fd, (slots + 1) * SLOT_BYTES)
        self.view = memoryview(self.memory).cast("Q")
        self.words: Any = atomic.words_of(self.view)  # compiled: a pointer to the first word
        self.mask = slots - 1

    def take(self, key: str, now: float, interval: int, tolerance: int, delay: int) -> int:
        """A request of ``key`` at ``now`` (seconds, CLOCK_MONOTONIC), against a rate of one
        request per ``interval`` ns with ``tolerance`` ns of burst, served at once while less
        than ``delay`` ns ahead: nanoseconds it waits (0, ``ADMITTED``: none), or, refused, minus
        the nanoseconds until it would be admitted."""
        mark = atomic.mark_of(key)
        at = atomic.nanoseconds(now)
        atomic.lock(self.fd)
        try:
            slot = self._slot(mark)
            while True:
                old = atomic.load(self.words, slot + 1)
                tat = old if old > at else at
                excess = tat - at
                if excess > tolerance:
                    atomic.add(self.words, REFUSED, 1)
                    return tolerance - excess  # refused: no update
                if atomic.swap(self.words, slot + 1, old, tat + interval):
                    if excess > delay:
                        atomic.add(self.words, DELAYED, 1)
                        return excess - delay
                    return ADMITTED
        finally:
            atomic.unlock(self.fd)

    def _slot(self, mark: int) -> int:
        """The index of the word of ``mark``'s slot, claiming one when it has none."""
        words = self.words
        first = mark & self.mask
        while True:
            refilled = -1
            refilled_tat = 0
            for probe in range(PROBES):
                slot = ((first + probe) & self.mask) * 2 + 2  # (after the counts)
                held = atomic.load(words, slot)
                if held == mark:
                    return slot
                if held == 0:
                    if atomic.swap(words, slot, 0, mark):
                        return slot
                    if atomic.load(words, slot) == mark:  # another worker claimed it for this key
                        return slot
                    continue
                tat = atomic.load(words, slot + 1)
                if refilled < 0 or tat < refilled_tat:
                    refilled, refilled_tat = slot, tat
            if refilled < 0:
                continue  # every slot was claimed under us: look again
            held = atomic.load(words, refilled)
            if atomic.swap(words, refilled, held, mark):
                atomic.store(words, refilled + 1, 0)  # a full bucket for its new key
                return refilled

    def counts(self) -> tuple[int, int]:
        """Requests refused and requests delayed since the table was made (every worker's)."""
        return atomic.load(self.words, REFUSED), atomic.load(self.words, DELAYED)

    def close(self) -> None:
        self.view.release()
        self.memory.close()
        os.close(self.fd)


class Limiter:
    """One listener's ``rate_limit`` in a worker: its table (shared with the pool) and terms.

    ``key`` is None for the client's address (``$remote_addr``: the trusted proxy's client
    or the PROXY header's, else the peer's; none for a unix socket's peer, which is then not
    counted, as nginx does not count an empty key), else a compiled Unit template of the
    request (`corral.routing.variables.compile_template`)."""

    def __init__(
        self, table: RateTable, interval: int, burst: int, delay: int, status: int, key: Any
    ) -> None:
        self.table = table
        self.interval = interval
        self.tolerance = interval * burst
        self.delay = interval * delay
        self.status = status
        self.key = key

    def refuses(self, conn: HttpConnection, exchange: Exchange, peer: Any, route: Any) -> bool:
        """Count ``exchange``'s request: True when it is refused (its answer set: ``status``
        with ``Retry-After``); one let in over the rate waits (``exchange.not_before``).
        ``peer`` and ``route`` are ``conn``'s, passed by the connection from its own fields:
        read here, from a ``conn`` this module cannot type, each would be a Python lookup."""
        if route is not None and route.counted_ahead and route.begun == 1:
            return False  # the worker that handed the connection here counted its first request
        if self.key is None:
            key = client_address(peer, exchange)
        else:
            key = self._templated(conn, exchange)
        if not key:
            return False
        now = clock.now()
        wait = self.table.take(key, now, self.interval, self.tolerance, self.delay)
        if wait == ADMITTED:
            return False
        if wait > 0:
            exchange.not_before = now + wait * 1e-9
            return False
        retry = -(wait // 1_000_000_000)  # whole seconds, rounded up (RFC 9110 10.2.3)
        exchange.action = Reply(self.status, None, f"Retry-After: {max(1, retry)}\r\n")
        exchange.refusal = "rate_limit"
        return True

    def _templated(self, conn: HttpConnection, exchange: Exchange) -> str:
        from corral.server.routed import route_request  # (routed imports the connection)

        return self.key(route_request(conn, exchange, conn.plan.sockname))
