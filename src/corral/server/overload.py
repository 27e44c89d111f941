"""A worker over its share of clients sheds the request (Uvicorn's ``--limit-concurrency``,
Granian's ``--backpressure``): 503 with ``Retry-After``, the connection closed after it, rather
than a queue that grows while every client waits longer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.actions.respond import Reply
from corral.observe.refusals import refused

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange

RETRY_AFTER = "Retry-After: 1\r\n"  # a second: the shed load comes back spread out


def shed(conn: HttpConnection, exchange: Exchange) -> bool:
    """Whether ``exchange`` is shed: its worker holds more connections than its limit (this
    one among them). Its answer is then 503, its connection closed after it."""
    if len(conn.server.connections) <= conn.server.max_connections:
        return False
    exchange.head.keep_alive = False
    exchange.action = Reply(503, None, RETRY_AFTER)
    exchange.refusal = "overload"
    refused(conn, exchange)
    return True
