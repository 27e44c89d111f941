"""A listener's ``rate_limit`` and ``limit_conn``: nginx's ``limit_req`` and ``limit_conn`` in
the document's shape (corral's keys; NGINX Unit has none). The shapes and the rate's spelling
are checked here; the tables are the master's (`corral.filters.ratelimit`,
`corral.filters.connlimit`)."""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = ["ConnLimit", "RateLimit", "interval_of", "key_of"]

_RATE = re.compile(r"(\d+(?:\.\d+)?)r/([sm])")
_NS = {"s": 1_000_000_000, "m": 60_000_000_000}
DEFAULT_TABLE = 1 << 20  # bytes: 65,536 clients (nginx keeps ~16,000 in a MiB)


def interval_of(rate: str) -> int:
    """Nanoseconds between two requests at ``rate`` (nginx's ``10r/s``, ``600r/m``);
    ValueError for another spelling."""
    match = _RATE.fullmatch(rate.strip())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(
            f'rate: expected requests per second or minute ("10r/s", "600r/m"), got {rate!r}'
        )
    return max(1, round(_NS[match.group(2)] / float(match.group(1))))


def key_of(template: str) -> Any:
    """What a limit counts by: None for the client's address (``$remote_addr``), else the
    template compiled (a function of the request, or a constant 1-tuple); ValueError for a
    template routing would refuse."""
    if template == "$remote_addr":
        return None
    from corral.routing.errors import RouteError
    from corral.routing.variables import compile_template

    try:
        return compile_template(template, "key")
    except RouteError as exc:
        raise ValueError(str(exc)) from None


class RateLimit(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Requests per client, counted by a pool's workers together: ``rate``; up to ``burst``
    more are let in ahead of it, waiting their turn unless within the first ``delay`` of them
    (``nodelay``: all of them); past that, ``status`` with ``Retry-After``. ``key`` is what
    a client is (a Unit variable template; empty: not counted); ``table_size`` the memory of
    the counts (bytes), the oldest forgotten when it is full."""

    rate: str
    burst: Annotated[int, Meta(ge=0)] = 0
    delay: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    nodelay: bool = False
    key: str = "$remote_addr"
    status: Annotated[int, Meta(ge=400, le=599)] = 429
    table_size: Annotated[int, Meta(ge=4096)] = DEFAULT_TABLE

    def __post_init__(self) -> None:
        interval_of(self.rate)
        key_of(self.key)
        if self.nodelay and self.delay is not UNSET:
            raise ValueError("delay: not beside nodelay (which lets the whole burst in at once)")

    @property
    def delay_requests(self) -> int:
        """How many requests over the rate are served without waiting (nginx's ``delay``)."""
        if self.nodelay:
            return self.burst
        return 0 if self.delay is UNSET else self.delay


class ConnLimit(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Open connections per client, counted by every worker together (nginx's ``limit_conn``):
    a client holding ``connections`` already gets ``status`` with ``Retry-After`` and the
    connection is closed after it. The client is its address after ``forwarded`` and the
    PROXY protocol; ``table_size`` the memory of the counts (bytes: 8 for the client and 8
    for each worker's count)."""

    connections: Annotated[int, Meta(ge=1)]
    status: Annotated[int, Meta(ge=400, le=599)] = 503
    table_size: Annotated[int, Meta(ge=4096)] = DEFAULT_TABLE
