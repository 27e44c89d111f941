"""What a worker's connections are doing, as its heartbeat tells the master: how many are open
with a request or idle, and the oldest request in progress (the master's timeout reads it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from corral.wire import Connections, InProgress


def oldest_request(connections: Iterable[Any], now: float) -> InProgress | None:
    """The oldest request in progress, its age at ``now`` (``time.monotonic()``: the loop's
    own clock may be uvloop's, read once per loop turn) without the time its answer waited
    for the client, or None."""
    oldest = None
    for conn in connections:
        exchange = conn.active
        if exchange is None or conn.waiting_for_client():
            continue  # a slow reader is the client's time, not the application's
        # and so is every wait its answer had: the request's start moves by them
        started = exchange.request_start + exchange.client_time
        if oldest is None or started < oldest[0]:
            oldest = (started, exchange)
    if oldest is None:
        return None
    head = oldest[1].head  # encode() cuts the target and writes its spaces %20
    return InProgress(now - oldest[0], head.method, head.target.decode("latin-1"))


def connection_counts(state: Any) -> Connections:
    """A worker's connections (``state``: its `ServerState`) accepted and closed so far, open
    ones with a request (active) or without (idle), requests in the application."""
    active = busy = 0
    for conn in state.connections:
        if conn.active is not None or conn.pipeline:
            active += 1
            busy += conn.active is not None and not conn.waiting_for_client()
    idle = len(state.connections) - active
    return Connections(state.accepted, state.closed, active, idle, busy)
