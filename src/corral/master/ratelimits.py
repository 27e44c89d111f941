"""The tables of the listeners' ``rate_limit``s (`corral.filters.ratelimit`): made by the
master before it forks the workers that share them, and kept across generations while a
listener's limit stays the same, so that a reload or a change elsewhere in the document
forgets no client's count."""

from __future__ import annotations

from typing import Any

import msgspec

from corral.config import Document
from corral.config.listener_limits import interval_of, key_of
from corral.filters.ratelimit import Limiter, RateTable

# the limiters of the last generation, by listener address and limit
_kept: dict[tuple[str, Any], Limiter] = {}


def limiters(doc: Document, addresses: Any) -> dict[str, Limiter]:
    """The limiter of each listener among ``addresses`` that has a ``rate_limit``."""
    global _kept
    made: dict[tuple[str, Any], Limiter] = {}
    for address in addresses:
        limit = doc.listeners[address].rate_limit
        if isinstance(limit, msgspec.UnsetType):
            continue
        key = (address, limit)
        limiter = _kept.get(key)
        if limiter is None:
            limiter = Limiter(
                RateTable(limit.table_size),
                interval_of(limit.rate),
                limit.burst,
                limit.delay_requests,
                limit.status,
                key_of(limit.key),
            )
        made[key] = limiter
    # the others stay mapped in the workers that have them, and here while a pool holds them
    _kept = made
    return {address: limiter for (address, _), limiter in made.items()}
