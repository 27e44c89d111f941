"""The counts a spawned worker cannot share yet, refused in the document with one line each.

The tables of ``rate_limit`` (a listener's or a route step's), ``limit_conn`` and
`limit_concurrency_total` find a client's slot by a hash of its key that is Python's own
(`corral.filters.atomic.mark_of`): keyed by a secret each interpreter draws at its start, the
same in every process forked from the master, another in a worker spawned on another
interpreter, which would count its clients apart (or, for the server-wide count's one slot,
find it always taken). So a document where such a worker would count is refused rather than
served with limits that do not hold; the tables themselves are memfds a spawned worker could
map (`corral.interpreter.brief` passes the refusal tallies that way).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import msgspec

from corral.config.app_types import runs_in_workers
from corral.interpreter.choice import foreign_python
from corral.jsonpath import member

__all__ = ["unshared_limit"]


def unshared_limit(
    listeners: Mapping[str, Any], routes: Any, applications: Mapping[str, Any], settings: Any
) -> str | None:
    """One line for the first limit a worker of another Python would count (None: none)."""
    spawned = sorted(
        name
        for name, app in applications.items()
        if runs_in_workers(app) and foreign_python(app.home) is not None
    )
    if not spawned:
        return None
    named = ", ".join(f'"{name}"' for name in spawned)
    runs = f"application {named} runs" if len(spawned) == 1 else f"applications {named} run"
    python = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    because = (
        f"{runs} on its home's Python, whose workers cannot share this limit's counts yet: "
        f"drop the limit, or make the virtualenv with {python} (docs/deploy.md)"
    )
    if settings.limit_concurrency_total:
        return f"$.settings.limit_concurrency_total: {because}"
    for address, listener in listeners.items():
        target = listener.pass_
        direct = target.startswith("applications/") and "$" not in target
        if direct and target.removeprefix("applications/").partition("/")[0] not in spawned:
            continue  # (a routed listener may be taken by any pool: counted as spawned)
        for key in ("rate_limit", "limit_conn"):
            if not isinstance(getattr(listener, key), msgspec.UnsetType):
                return f"$.listeners{member(address)}.{key}: {because}"
    from corral.routing.compiler import route_tables  # (as the document's: only with routes)

    for _, path, steps in route_tables(None if routes is msgspec.UNSET else routes):
        for index, step in enumerate(steps):
            action = step.get("action") if isinstance(step, dict) else None
            if isinstance(action, dict) and "rate_limit" in action:
                return f"{path}[{index}].action.rate_limit: {because}"
    return None
