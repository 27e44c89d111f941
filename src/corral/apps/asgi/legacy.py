"""ASGI 2 applications (a class: instantiated with the scope, then called with ``receive``
and ``send``), as ASGI 3's single callable."""

from __future__ import annotations

import inspect
from typing import Any


def as_asgi3(app: Any) -> Any:
    """An ASGI 2 application (a class: ``app(scope)`` then ``await instance(receive, send)``)
    as an ASGI 3 callable; others as they are."""
    if not inspect.isclass(app):
        return app
    instance_of: Any = app  # the class, called with the scope for each connection

    async def asgi3(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await instance_of(scope)(receive, send)

    return asgi3
