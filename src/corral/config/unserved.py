"""What a document may hold that corral accepts and does not serve (yet): said, never silent.

NGINX Unit's documents are taken whole, so some of their parts are validated and kept with
nothing behind them: a ``share`` route (corral serves no static files yet: a request it matches
is answered 501), ``settings.http.static`` (the MIME types of those shares), an application
``type`` naming a Python other than the one corral runs. `unserved` names them in warning
lines, one per kind, each listing every JSON path that has it; its callers say them where the
document comes in: `corral.config.sources` for the command line and its files (standard error
at start, the error log on a reload), `corral.master.reload` for a change through the control
API or the emperor. When a feature lands, its entry here goes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

from msgspec import UNSET

from corral.config.document import Document
from corral.config.settings import show
from corral.jsonpath import member
from corral.routing.compiler import route_tables

__all__ = ["unserved"]

_RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"


def unserved(doc: Document) -> list[str]:
    """One warning line per kind of part of ``doc`` corral accepts and does not serve."""
    lines = []
    static = [*_shares(None if doc.routes is UNSET else doc.routes)]
    if doc.settings.static is not None:
        static.append("$.settings.http.static")
    if static:
        lines.append(
            f"{', '.join(static)}: accepted, but corral does not serve static files yet: a "
            "request a share matches is answered 501 Not Implemented"
        )
    for name, application in doc.applications.items():
        version = re.search(r"\d+\.\d+", application.type)
        if version is not None and version.group() != _RUNNING:
            lines.append(
                f"$.applications{member(name)}.type: {show(application.type)}: corral runs the "
                f"application on its own Python, {_RUNNING}"
            )
    return lines


def _shares(routes: Any) -> Iterator[str]:
    """The JSON path of every route step whose action is a ``share`` (``routes`` compiled when
    the document was read: its tables are arrays of objects)."""
    for _, at, steps in route_tables(routes):
        for index, step in enumerate(steps):
            action = step.get("action")
            if isinstance(action, dict) and "share" in action:
                yield f"{at}[{index}].action.share"
