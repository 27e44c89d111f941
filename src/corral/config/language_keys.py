"""NGINX Unit's ``"perl"``, ``"ruby"`` and ``"java"`` applications: their keys and checks.

Each is run by its language's own server as a supervised pool (``corral/external/
languages.py``): a perl application's ``script`` (a PSGI file) by Starman, a ruby one's
``script`` (a ``config.ru``) by Puma, a java one's ``webapp`` (a ``.war`` or a directory) by
Jetty. Their keys are Unit's: every application's (``type``, ``processes``, ``limits``,
``user``, ``group``, ``working_directory``, ``environment``, ``stdout``, ``stderr``), then
per type ``script``, ``threads`` and ``thread_stack_size`` (perl), ``script``, ``threads`` and
``hooks`` (ruby), ``webapp``, ``classpath``, ``options``, ``unit_jars``, ``threads`` and
``thread_stack_size`` (java); and corral's own keys of a supervised pool (``health_path``,
``health_interval``, ``startup_timeout``, ``min_worker_lifetime``). Unit's ``"go"`` is its
older name of ``"external"``, and corral takes ``"nodejs"`` as one more (config/app_types.py).

`check` gives a language application's first problem, `misplaced` a language key given to
another type's application, `unserved_language` what a language application is given that
its server does not apply; each as one line ``<where>: <what>``, the JSON path in Unit's
spelling, which config/document.py raises (or config/unserved.py warns).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta

__all__ = [
    "JVM_OPTION",
    "LANGUAGES",
    "PATH",
    "base_type",
    "check",
    "is_language",
    "misplaced",
    "unserved_language",
]

PATH = Annotated[str, Meta(pattern=r"^[^\x00]+$", description="a path")]
JVM_OPTION = Annotated[str, Meta(pattern=r"^[^\x00]*$", description="a JVM option")]

# Every language application's keys (Unit's common ones and corral's of a supervised pool)
_COMMON = (
    "type",
    "processes",
    "limits",
    "user",
    "group",
    "working_directory",
    "environment",
    "stdout",
    "stderr",
    "health_path",
    "health_interval",
    "startup_timeout",
    "min_worker_lifetime",
)
# ... and each type's own (Unit's nxt_conf_validation.c), the first one required
LANGUAGES: dict[str, tuple[str, ...]] = {
    "perl": ("script", "threads", "thread_stack_size"),
    "ruby": ("script", "threads", "hooks"),
    "java": ("webapp", "classpath", "options", "unit_jars", "threads", "thread_stack_size"),
}
_WHAT = {
    "script": {"perl": "the PSGI file", "ruby": "the rack file, config.ru"},
    "webapp": {"java": "the web application: a .war file or its directory"},
}
# the keys of these types that no other type has (php's script and options are php's too)
_ONLY_LANGUAGE = ("webapp", "classpath", "hooks", "unit_jars")


def base_type(app_type: str) -> str:
    """A document's ``type`` without its version: ``"ruby 3.1"`` is ``"ruby"``."""
    found = re.match(r"[a-z]+", app_type)
    return found.group() if found else app_type


def is_language(app: Any) -> bool:
    """Whether ``app`` (a document's application) is a perl, ruby or java one."""
    return base_type(app.type) in LANGUAGES


def check(app: Any, raw: Mapping[str, Any], where: str) -> str | None:
    """The first problem of the language application ``app`` validated from ``raw`` at
    ``where``: a key its type does not take, its required key missing, a wrong shape; None
    when there is none."""
    language = base_type(app.type)
    own = LANGUAGES[language]
    # a key given its default says nothing (the document's own encoding gives every key)
    defaults = msgspec.to_builtins(type(app)())
    for key, value in raw.items():
        if key in _COMMON or key in own or value == defaults.get(key, ...):
            continue
        owners = [name for name, keys in LANGUAGES.items() if key in keys]
        whose = f'a key of "{owners[0]}" applications' if owners else _python_or_php(key)
        return (
            f'{where}.{key}: not for a "{language}" application ({whose}; it takes '
            f"{', '.join(own)} and every application's keys)"
        )
    required = own[0]
    if getattr(app, required) is UNSET:
        return f'{where}: missing required key "{required}" ({_WHAT[required][language]})'
    if language == "java" and isinstance(app.options, msgspec.Struct):
        return f"{where}.options: expected a list of JVM options (strings), got an object"
    return None


def _python_or_php(key: str) -> str:
    if key in ("root", "index", "targets"):
        return 'a key of "php" applications'
    if key in ("executable", "arguments", "listen"):
        return 'a key of "external" applications'
    return "a key of Python applications"


def misplaced(app: Any, where: str) -> str | None:
    """A perl, ruby or java key given to an application of another type, in one line."""
    for key in _ONLY_LANGUAGE:
        if getattr(app, key) is not UNSET:
            owners = " and ".join(f'"{n}"' for n, keys in LANGUAGES.items() if key in keys)
            return f"{where}.{key}: a key of {owners} applications (this one is {app.type!r})"
    if isinstance(app.options, list):
        return (
            f'{where}.options: a list of JVM options is for "java" applications (this one is '
            f"{app.type!r})"
        )
    return None


def unserved_language(app: Any, where: str) -> list[str]:
    """What a language application is given that its server does not apply, one line each."""
    language = base_type(app.type)
    lines = []
    if app.type != language:
        lines.append(
            f"{where}.type: {app.type!r}: corral runs the {_SERVER[language]} found on PATH, "
            "whatever its version"
        )
    if app.dynamic is not None:
        lines.append(
            f"{where}.processes: a {language} application's pool is not scaled on load: "
            f"it runs max ({app.dynamic.max}) processes"
        )
    if app.max_requests and language != "perl":  # Starman's --max-requests
        lines.append(
            f"{where}.limits.requests: a {language} application's processes are not recycled "
            "after a number of requests (its server does not count them)"
        )
    if app.threads != 1 and language != "ruby":
        lines.append(
            f"{where}.threads: not applied to a {language} application ({_THREADS[language]})"
        )
    if app.thread_stack_size is not None and language == "perl":
        lines.append(f"{where}.thread_stack_size: not applied (Starman runs no threads)")
    if app.unit_jars is not UNSET:
        lines.append(f"{where}.unit_jars: not applied (Jetty brings its own servlet jars)")
    return lines


_SERVER = {"perl": "Starman (and perl)", "ruby": "Puma (and ruby)", "java": "java"}
_THREADS = {
    "perl": "Starman's processes run one request at a time: raise processes",
    "java": "Jetty sizes its own thread pool",
}
