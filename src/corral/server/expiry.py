"""What a connection's deadline passing does (`corral.server.connection`: one deadline per
connection, no timer object): the worker's one-second tick `sweep`s its connections, and each
one past its deadline `expire`s. A request begun and not received in time is answered 408
and closed (its head within `header_timeout`, its body within `body_timeout` of each read and
at `body_min_rate`: server/bodyclock.py), counted and logged as the ``timeout`` refusal
(`corral.observe.refusals`); an idle keep-alive connection is closed; an answer whose client
stopped reading for `send_timeout` is dropped. Once a second, never per request: not compiled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.http.errors import RequestTimeout
from corral.observe.refusals import timed_out
from corral.server.connection import BODY, HEAD

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection

__all__ = ["expire", "sweep"]


def sweep(connections: set[HttpConnection], now: float) -> None:
    """End every connection past its deadline at ``now`` (called once a second)."""
    expired = [conn for conn in connections if conn.deadline < now]
    for conn in expired:
        expire(conn)


def expire(conn: HttpConnection) -> None:
    """``conn``'s deadline passed: 408 if a request was begun, else close (abort when the
    client stopped reading)."""
    if conn.state == HEAD and conn.parser.head_bytes:
        conn._send_error(RequestTimeout.status)
        timed_out(conn, None)
    elif conn.state == BODY:
        conn._give_up(conn.receiving, RequestTimeout.status)  # type: ignore[arg-type]
        timed_out(conn, conn.receiving)
    else:
        # send_timeout: what is buffered for a client that stopped reading would hold the
        # connection open for ever, so it is dropped
        conn.close(abort=conn.waiting_for_client())
