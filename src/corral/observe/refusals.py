"""The requests the server refused itself, by reason: counted for ``/metrics`` and ``corral ctl
top``, named in the access log (``$refusal``).

A reason is one of `REASONS`: ``rate_limit`` (a listener's ``rate_limit``, counted in its own
table: `corral.filters.ratelimit`), ``limit_conn`` (its ``limit_conn``), ``overload``
(`limit_concurrency`, `limit_concurrency_total`), ``timeout`` (a 408: a request head or body
that did not come in time) and ``denied`` (``allow``/``deny``: a ``return`` step matched by
the client's address). Each listener has a `Tally`, a few words of memory the master maps
before it forks, so that every worker's refusals add up in one place the master reads; it
is kept for the server's life (a counter never goes back). Refusals are rare next to
requests: a word is changed under a lock of the tally's file, never on the way of a request
that is served.
"""

from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING, Any, Protocol

from corral.filters import atomic

if TYPE_CHECKING:
    from corral.server.exchange import Exchange

__all__ = [
    "REASONS",
    "CountedConnection",
    "Refusals",
    "Tally",
    "refused",
    "tallies",
    "tally_for",
    "timed_out",
]

REASONS = ("rate_limit", "limit_conn", "overload", "timeout", "denied")
_INDEX = {reason: index for index, reason in enumerate(REASONS)}


class Tally:
    """One listener's refusals by reason, every worker's (made by the master)."""

    def __init__(self, fd: int = -1) -> None:
        """``fd``: the master's tally, inherited by a worker spawned on another interpreter
        (`corral.interpreter`); -1, a new one."""
        if fd < 0:
            fd = os.memfd_create("corral-refusals")
            os.posix_fallocate(fd, 0, len(REASONS) * 8)
        self.fd = fd
        self.memory = mmap.mmap(self.fd, len(REASONS) * 8)
        self.view = memoryview(self.memory).cast("Q")

    def count(self, reason: str) -> None:
        atomic.lock(self.fd)  # (the Python word operations: this module is not compiled)
        try:
            self.view[_INDEX[reason]] += 1
        finally:
            atomic.unlock(self.fd)

    def counts(self) -> dict[str, int]:
        return {reason: self.view[index] for index, reason in enumerate(REASONS)}


_tallies: dict[str, Tally] = {}  # the master's, by listener address, for the server's life


def tally_for(address: str) -> Tally:
    """The master's tally of the listener at ``address`` (made once)."""
    found = _tallies.get(address)
    if found is None:
        found = _tallies[address] = Tally()
    return found


def tallies() -> dict[str, Tally]:
    return _tallies


class Refusals:
    """One listener's refusals in a worker: counted in its `Tally`; a 408 (whose request never
    reaches the pipeline's end) is also written to the access log here."""

    def __init__(self, tally: Tally | None, access_log: Any) -> None:
        self.tally = tally
        self.access_log = access_log

    def count(self, reason: str) -> None:
        if self.tally is not None:
            self.tally.count(reason)


class CountedConnection(Protocol):
    """The connection a refusal is counted on, as read here: `corral.server.connection`'s
    `HttpConnection`, which imports this module (through its listener's plan)."""

    server: Any  # its ServerState: the empty body of a request never read
    plan: Any  # its ListenerPlan: the listener's `Refusals`


def refused(conn: CountedConnection, exchange: Exchange) -> None:
    """``exchange`` was refused (its ``refusal`` set): count it on its listener."""
    refusals = conn.plan.refusals
    if refusals is not None and exchange.refusal is not None:
        refusals.count(exchange.refusal)


def timed_out(conn: CountedConnection, exchange: Exchange | None) -> None:
    """The client of ``conn`` was too slow: the request whose head (``exchange`` None) or body
    did not come in time (`body_timeout`, `body_min_rate`) was answered 408 (unless its answer
    had begun). Counted as ``timeout`` and written to the access log (the request line of a
    head not complete is ``-``)."""
    if exchange is None:
        from corral.http.head import RequestHead
        from corral.server.exchange import Exchange

        head = RequestHead("-", b"-", "1.1", [], False, None, False, False)
        exchange = Exchange(head, conn.server.empty_body)
    exchange.refusal = "timeout"
    refusals = conn.plan.refusals
    if refusals is None:
        return
    refusals.count("timeout")
    if exchange.started:
        return  # its application's end writes its line (the 408 went unless it had answered)
    exchange.status = 408
    if refusals.access_log is not None:
        refusals.access_log(conn, exchange)
