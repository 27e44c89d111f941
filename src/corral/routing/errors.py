"""The one error a routes value can have, and the checks every part of the compiler makes.

Each compiling module (patterns, variables, conditions, the compiler) raises
:class:`RouteError` naming the JSON path of the first invalid place, so the configuration can
pass the message on unchanged (``$.routes[0].match.uri: ...``): the path is spelled as the
document spells it (`corral.jsonpath`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from corral.jsonpath import PathError, describe_value, member

__all__ = ["RouteError", "check_options", "expect_object"]


class RouteError(PathError):
    """An invalid routes value: ``str()`` is one line, ``PATH: what was expected``."""


def expect_object(value: Any, path: str, what: str) -> dict[str, Any]:
    """``value`` if it is an object, else the error that ``what`` was expected at ``path``."""
    if not isinstance(value, dict):
        raise RouteError(path, f"expected {what} (an object), got {describe_value(value)}")
    return value


def check_options(value: dict[str, Any], allowed: Iterable[str], path: str, what: str) -> None:
    """Refuse the first key of ``value`` that is not one of the ``allowed`` options."""
    allowed = tuple(allowed)
    for key in value:
        if key not in allowed:
            raise RouteError(
                f"{path}{member(key)}",
                f"unknown {what} option (expected one of {', '.join(allowed)})",
            )
