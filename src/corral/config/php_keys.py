"""NGINX Unit's keys of a ``"php"`` application, their shape and their checks.

A php application (``"type": "php"``, or ``"php 8.2"``...) has ``root`` (the directory its
scripts are under), ``script`` (one script that answers every request), ``index`` (the script
a directory's request runs, ``index.php`` by default), or ``targets`` each with those three,
and ``options``: ``file`` (a php.ini), ``admin`` and ``user`` (ini values php-fpm sets with
``php_admin_value`` and ``php_value``). The process keys are every application's
(``processes``, ``user``, ``group``, ``environment``, ``working_directory``). Python's keys
(``module``, ``callable``, ``prefix``) are refused on it, and php's on a Python application.

`check` returns the first problem as ``<where>: <what>``, the JSON path in Unit's spelling;
document.py raises it as its ConfigError.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from corral.jsonpath import member

__all__ = ["PHP_KEYS", "PhpOptions", "check", "is_php"]

_INI_NAME = Annotated[
    str, Meta(pattern=r"^[A-Za-z0-9_.\-]+$", description="a php.ini directive's name")
]
_INI_VALUE = Annotated[
    str,
    Meta(
        pattern=r"^[^\x00-\x1f\x7f\"]*$",
        description="a string without quotes or control characters",
    ),
]
# a script or an index: a file name or a path under root, no ".." and no NUL
_UNDER_ROOT = r"^(?!.*(^|/)\.\.(/|$))[^\x00]+$"
SCRIPT = Annotated[str, Meta(pattern=_UNDER_ROOT, description="a path under root")]
ROOT = Annotated[str, Meta(pattern=r"^[^\x00]+$", min_length=1, description="a directory")]
PHP_KEYS = ("root", "script", "index", "options")
_PYTHON_KEYS = ("module", "callable", "prefix")


class PhpOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Unit's ``options`` of a php application."""

    file: ROOT | UnsetType = UNSET  # a php.ini read instead of the default one
    admin: dict[_INI_NAME, _INI_VALUE] | UnsetType = UNSET  # php_admin_value: the script cannot
    user: dict[_INI_NAME, _INI_VALUE] | UnsetType = UNSET  # php_value: ini_set may change it


def is_php(application: Any) -> bool:
    """Whether an application (a document's) is a php one."""
    return bool(re.match(r"php\b", application.type))


def check(app: Any, where: str) -> str | None:
    """The first problem of ``app`` as a php application, or as a Python one with php's keys;
    None when there is none."""
    if not is_php(app):
        for key in ("root", "script", "index", "options"):
            if getattr(app, key) is not UNSET:
                return f'{where}.{key}: a key of "php" applications (this one is {app.type!r})'
        if app.targets is not UNSET:
            for name, target in app.targets.items():
                at = f"{where}.targets{member(name)}"
                if target.module is None:
                    return f'{at}: missing required key "module"'
                for key in ("root", "script", "index"):
                    if getattr(target, key) is not UNSET:
                        return f'{at}.{key}: a key of "php" applications\' targets'
        return None
    for key in _PYTHON_KEYS:
        if getattr(app, key) not in (None, UNSET):
            return f"{where}.{key}: a key of Python applications (this one is {app.type!r})"
    if app.targets is UNSET:
        if app.root is UNSET:
            return f'{where}: missing required key "root" (or "targets")'
        # (the document's script is any path: a perl or ruby application's is not under a root)
        if app.script is not UNSET and not re.match(_UNDER_ROOT, app.script):
            got = msgspec.json.encode(app.script).decode()
            return f"{where}.script: expected a path under root, got {got}"
        return None
    for key in ("root", "script", "index"):
        if getattr(app, key) is not UNSET:
            return f'{where}.{key}: not allowed with "targets" (give it per target)'
    if not app.targets:
        return f"{where}.targets: expected at least one target, got {{}}"
    for name, target in app.targets.items():
        at = f"{where}.targets{member(name)}"
        if target.module is not None or target.callable is not None:
            return f'{at}: "module" and "callable" are keys of Python targets'
        if target.root is UNSET:
            return f'{at}: missing required key "root"'
    return None
