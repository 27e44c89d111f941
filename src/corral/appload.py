"""Finding the application callable from ``module:callable``."""

from __future__ import annotations

import importlib
from typing import Any


class AppLoadError(Exception):
    """The application could not be imported or is not callable."""


def load_app(module: str, attribute: str | None) -> Any:
    """Import ``module`` and return its ``attribute`` (default ``application``, then ``app``).

    An exception raised by the application's own import propagates unchanged (its
    traceback is what the user needs); a missing attribute raises :class:`AppLoadError`.
    """
    mod = importlib.import_module(module)
    names = [attribute] if attribute else ["application", "app"]
    for name in names:
        target: Any = mod
        try:
            for part in name.split("."):
                target = getattr(target, part)
        except AttributeError:
            continue
        if not callable(target):
            raise AppLoadError(f"{module}:{name} is not callable")
        return target
    raise AppLoadError(f"module {module!r} has no attribute {' or '.join(map(repr, names))}")
