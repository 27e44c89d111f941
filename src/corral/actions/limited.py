"""A route step's ``rate_limit`` (corral's key; nginx's ``limit_req`` in a ``location``): the
request is counted in that step's table (`corral.filters.ratelimit`, shared by the pool's
workers) before its action; over the rate it is answered with the limit's refusal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.observe.refusals import refused

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange


def limited(conn: HttpConnection, exchange: Exchange, action: Any) -> bool:
    """``Limited``: counted, then the step's own action (or the refusal, in its turn)."""
    route = conn.route
    assert route is not None  # only routed connections have actions
    limiter = conn.plan.routing.limiters.get(action.path)
    if limiter is not None and limiter.refuses(conn, exchange, conn.peer, route):
        refused(conn, exchange)  # (a listener's are counted in its table)
        return True
    return route.act(exchange, action.action)
