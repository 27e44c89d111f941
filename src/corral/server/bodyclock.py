"""How long the client of a request body may take: one clock per connection, made at its first
body, which the connection asks for its deadline (its one deadline, which the worker's sweep
checks once a second) at the body's start and after each read.

Two bounds: `body_timeout` from each read (nginx's ``client_body_timeout``), and a minimum
average rate, measured from the body's start once a grace period has passed (Kestrel's
MinRequestBodyDataRate, mod_reqtimeout's MinRate). Without the rate a client sending a byte
just inside each `body_timeout` holds its connection for ever: the slow POST.

The rate's clock does not run while the client is not the one holding the body back: while it
waits for a ``100 Continue`` that has not gone, or while the loop does not read (the
application is slower, or the request waits for the answers before it). The connection starts
the clock again, from zero, when that ends. Rules: no I/O, no clock of its own (the
connection gives the time, `clock.now`); a rate of 0 is off.
"""

from __future__ import annotations

from corral.server.exchange import Exchange

STOPPED = float("inf")  # `since` while the rate's clock does not run


class BodyClock:
    """The body clock of one connection (its worker's ``body_timeout``, rate and grace)."""

    __slots__ = ("grace", "rate", "received", "since", "timeout")

    def __init__(self, timeout: float, rate: float, grace: float) -> None:
        self.timeout = timeout
        self.rate = rate  # bytes a second on average; 0: no minimum
        self.grace = grace  # seconds from the start before the rate applies
        self.since = STOPPED  # when the rate's clock started
        self.received = 0  # bytes since then

    def start(self, now: float, exchange: Exchange, paused: bool) -> float:
        """The deadline of ``exchange``'s body from ``now``, its clock started again (stopped
        while the loop does not read, ``paused``, or the client waits for 100 Continue)."""
        waits = exchange.head.expect_continue and not exchange.continue_sent
        self.since = STOPPED if paused or waits else now
        self.received = 0
        return self.deadline(now)

    def read(self, now: float, count: int, paused: bool) -> float:
        """The deadline once ``count`` more bytes arrived at ``now``."""
        if self.since == STOPPED and not paused:
            self.since = now  # sent without waiting for its 100 Continue
        self.received += count
        return self.deadline(now)

    def deadline(self, now: float) -> float:
        """`timeout` from ``now``, or sooner, when the average since `since` falls under the
        rate (never before the grace has passed)."""
        deadline = now + self.timeout
        if self.rate:
            due = self.since + max(self.grace, self.received / self.rate)
            if due < deadline:
                return due
        return deadline
