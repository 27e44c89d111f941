"""The kinds of application a document holds, by ``type``: which keys each kind takes.

A Python application (``"python"``, ``"python 3.11"``...) is imported by corral's workers. An
external application is a command corral supervises (``corral/external/``), not a Python
application: its keys are Unit's (``executable``, ``arguments``, ``working_directory``,
``environment``, ``user``, ``group``, ``processes``, ``limits``, ``stdout``, ``stderr``) and
corral's ``listen``, ``health_path`` and ``health_interval``. The document's `Application`
struct holds every kind (its ``type``: `APP_TYPE`; Unit's ``"go"`` and corral's ``"nodejs"``
are external ones, php's keys are ``php_keys.py``'s, perl's, ruby's and java's
``language_keys.py``'s); this module says which keys each kind may be given, in one line
naming the JSON path, as the document's own checks do (`kind_problem`, raised by
``config/document.py``), and what an external application is given that corral does not apply
(`unserved_external`).

Nothing here imports ``config/document.py`` (which calls it): problems are returned as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta

from corral.config.language_keys import is_language
from corral.config.php_keys import is_php

__all__ = [
    "APP_TYPE",
    "EXTERNAL",
    "EXTERNAL_TYPES",
    "is_external",
    "kind_problem",
    "listen_mode",
    "pool_size",
    "runs_in_workers",
    "unserved_external",
]

EXTERNAL = "external"

# Unit's Python 3 ("python", "python 3", "python3.11"...), "external" (and "go", "nodejs":
# below), "php" ("php 8", "php 8.2": config/php_keys.py), "perl", "ruby" or
# "java" ("ruby 3.1"...: config/language_keys.py)
APP_TYPE = Annotated[
    str,
    Meta(
        pattern=r"^(python ?(3(\.[0-9]+)?)?|external|go|nodejs"
        r"|(php|perl|ruby|java) ?([0-9]+(\.[0-9]+)*)?)$",
        description='"python" (or "python 3", "python 3.11", "python3.11"...), "external", '
        '"go", "nodejs", "php", "perl", "ruby" or "java" (or "php 8.2", "ruby 3.1"...)',
    ),
]

# The keys an external application may be given (the others are a Python application's).
_EXTERNAL_KEYS = frozenset(
    {
        "type",
        "executable",
        "arguments",
        "working_directory",
        "environment",
        "user",
        "group",
        "processes",
        "limits",
        "stdout",
        "stderr",
        "listen",
        "health_path",
        "health_interval",
        "startup_timeout",
        "min_worker_lifetime",
    }
)
# ... and those only an external application may be given
_ONLY_EXTERNAL = ("executable", "arguments", "listen", "health_path", "health_interval")
_PLACEHOLDER = re.compile(r"\{(port|socket)\}")


# Unit's "go" is its older name of "external"; "nodejs" is corral's, for Unit's Node.js apps
EXTERNAL_TYPES = frozenset({EXTERNAL, "go", "nodejs"})


def is_external(app: Any) -> bool:
    """Whether ``app`` (a document's application) is a command corral supervises."""
    return app.type in EXTERNAL_TYPES


def pool_size(app: Any) -> int:
    """The processes an application's pool runs: ``processes``, or the object form's ``max``
    (a pool corral supervises but does not scale, and the servers it sizes, run their most)."""
    return int(app.dynamic.max if app.dynamic is not None else app.workers)


def runs_in_workers(app: Any) -> bool:
    """Whether corral's own workers run ``app`` (a Python application): an external one is
    a supervised program's (corral/external/), a "php" one php-fpm's (php/fpm.py), a perl,
    ruby or java one its language's server's (external/languages.py); those have no pool of
    workers and no hand-off socket, their requests are sent to them."""
    return not (is_external(app) or is_php(app) or is_language(app))


def listen_mode(app: Any) -> str:
    """How an external application's processes get their socket: its ``listen``, or what
    its ``arguments`` name (``{port}``: ``port``, ``{socket}``: ``unix``), else ``fd``."""
    if app.listen is not None:
        return str(app.listen)
    named = {m for arg in app.arguments for m in _PLACEHOLDER.findall(arg)}
    return "port" if "port" in named else "unix" if "socket" in named else "fd"


def kind_problem(app: Any, raw: Mapping[str, Any], where: str) -> str | None:
    """What is wrong with the application ``app`` validated from ``raw`` at ``where`` as far
    as its kind goes (the keys it needs, those it may not have), in one line; None when
    nothing is."""
    # a key given its default says nothing (the document's own encoding gives every key)
    defaults = msgspec.to_builtins(type(app)())
    given = [key for key, value in raw.items() if value != defaults.get(key, ...)]
    if not is_external(app):
        for key in _ONLY_EXTERNAL:
            if key in given:
                if key.startswith("health_"):  # (a perl, ruby or java one's too)
                    return f"{where}.{key}: only for applications corral supervises ({_SUPERVISED})"
                return f'{where}.{key}: only for "type": "external" applications'
        if app.targets is UNSET and app.module is None:
            return f'{where}: missing required key "module" (or "targets")'
        return None
    for key in given:
        if key not in _EXTERNAL_KEYS:
            return (
                f"{where}.{key}: not for an external application (a Python application's key; "
                f"an external one takes {', '.join(sorted(_EXTERNAL_KEYS))})"
            )
    if app.executable is None:
        return f'{where}: missing required key "executable" (the program to run)'
    mode = listen_mode(app)
    allowed = {"fd": (), "port": ("port",), "unix": ("socket",)}[mode]
    for index, argument in enumerate(app.arguments):
        for name in _PLACEHOLDER.findall(argument):
            if name not in allowed:
                return (
                    f"{where}.arguments[{index}]: {{{name}}} is not given with "
                    f'"listen": "{mode}" (corral hands the socket over as {_HOW[mode]})'
                )
    return None


_SUPERVISED = '"external", "go", "nodejs", "perl", "ruby", "java"'
_HOW = {"fd": "descriptor 3", "port": "PORT and {port}", "unix": "{socket}"}


def unserved_external(app: Any, where: str) -> list[str]:
    """What an external application is given that corral accepts and does not apply."""
    lines = []
    if app.dynamic is not None:
        lines.append(
            f"{where}.processes: an external application's pool is not scaled on load (corral "
            f"cannot see how busy a program it did not write is): it runs max "
            f"({app.dynamic.max}) processes"
        )
    if app.max_requests:
        lines.append(
            f"{where}.limits.requests: an external application's processes are not recycled "
            "after a number of requests (corral does not count them)"
        )
    return lines
