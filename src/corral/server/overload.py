"""A worker over its share of clients sheds the request (Uvicorn's ``--limit-concurrency``,
Granian's ``--backpressure``): 503 with ``Retry-After``, the connection closed after it, rather
than a queue that grows while every client waits longer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.actions.respond import AnsweringConnection, refuse

if TYPE_CHECKING:
    from corral.server.exchange import Exchange

RETRY_AFTER = "Retry-After: 1\r\n"  # a second: the shed load comes back spread out


def shed(conn: AnsweringConnection, exchange: Exchange) -> bool:
    """Shed ``exchange``, whose worker holds more connections than its limit (this one among
    them: the connection tests that, in compiled code, before it calls this): its answer is
    503, its connection closed after it."""
    return refuse(conn, exchange, 503, "overload", RETRY_AFTER, close=True)
