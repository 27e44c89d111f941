"""The tables of the document's rate limits (`corral.filters.ratelimit`): the listeners'
``rate_limit`` and the route steps' (corral's keys). Made by the master before it forks the
workers that share them, and kept across generations while a limit stays the same at its
place, so that a reload or a change elsewhere in the document forgets no client's count."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from corral.config import Document
from corral.config.listener_limits import RateLimit, interval_of, key_of

if TYPE_CHECKING:  # (imported with the first limiter; the routes' walk only for routes)
    from corral.filters.ratelimit import Limiter

# the limiters of the last generation, by their place (a listener's address, a step's JSON
# path) and limit
_kept: dict[tuple[str, RateLimit], Limiter] = {}


def limiters(doc: Document, addresses: Any) -> tuple[dict[str, Limiter], dict[str, Limiter]]:
    """The limiter of each listener among ``addresses`` that has a ``rate_limit``, and of
    each route step that has one (by the JSON path of its ``action.rate_limit``, as the
    route compiler names it)."""
    global _kept
    made: dict[tuple[str, RateLimit], Limiter] = {}

    def limiter(place: str, limit: RateLimit) -> Limiter:
        from corral.filters.ratelimit import Limiter, RateTable

        key = (place, limit)
        found = made[key] = _kept.get(key) or Limiter(
            RateTable(limit.table_size),
            interval_of(limit.rate),
            limit.burst,
            limit.delay_requests,
            limit.status,
            key_of(limit.key),
        )
        return found

    by_address = {
        address: limiter(address, limit)
        for address in addresses
        if not isinstance(limit := doc.listeners[address].rate_limit, msgspec.UnsetType)
    }
    by_step = {}
    routes = None if isinstance(doc.routes, msgspec.UnsetType) else doc.routes
    if routes is not None:  # (the walk of the routes' tables imports the route compiler)
        from corral.routing.compiler import route_tables

        for _, path, steps in route_tables(routes):
            for i, step in enumerate(steps):
                action = step.get("action") if isinstance(step, dict) else None
                if isinstance(action, dict) and "rate_limit" in action:
                    where = f"{path}[{i}].action.rate_limit"
                    limit = msgspec.convert(action["rate_limit"], RateLimit)
                    by_step[where] = limiter(where, limit)
    # the others stay mapped in the workers that have them, and here while a pool holds them
    _kept = made
    return by_address, by_step
