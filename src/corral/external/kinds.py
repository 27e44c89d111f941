"""What a supervised pool runs, by application ``type``: the seam every kind fills.

A kind supplies four things and nothing else: how its processes get their socket
(`Kind.listen`), the `Command` one process runs at its `Place` (`Kind.command`), how the
master asks whether a process is ready (`Kind.probe`: ``"http"``, a ``GET`` of the
application's ``health_path`` that any HTTP answer satisfies; ``"connect"``, a connection
accepted, for a program that does not speak HTTP such as php-fpm), and the protocol the
workers speak to it (`Kind.speaks`: ``"http"``, the proxy; another protocol's client is added
to ``actions/external.py``'s ``SPEAKERS``). The master adds what every
kind gets: the socket on descriptor 3 with ``LISTEN_FDS``, ``LISTEN_PID`` and
``LISTEN_FDNAMES`` (``fd``), ``PORT`` (``port``), the user and group, the output files.

Another kind is one more entry in `KINDS`: Starman for ``"perl"``, Puma for ``"ruby"``, Jetty
for ``"java"`` (their commands are ``languages.py``'s), php-fpm for ``"php"``: at a unix socket
(``corral/php/command.py`` writes its pool's configuration with ``listen = place.path``), asked
by a connection, spoken to in FastCGI, one process (php-fpm's own children are the
application's ``processes``, as Starman's are). A type with a version (``"php 8.2"``,
``"ruby 3.1"``) is its kind's (`kind_of`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from corral.config.app_types import EXTERNAL, listen_mode
from corral.config.language_keys import base_type
from corral.external.command import Command, Mode, Place

__all__ = ["KINDS", "Command", "Kind", "Mode", "Place", "kind_of"]


class Kind(NamedTuple):
    """One application type's part of a supervised pool (see the module's text)."""

    listen: Callable[[Any], Mode]
    command: Callable[[str, Any, Place], Command]
    probe: Literal["http", "connect"]
    # the protocol a worker speaks to its processes: its key in actions/external.SPEAKERS
    speaks: str = "http"
    # how many processes its pool runs; None: the application's ``processes`` (``max`` of
    # the object form). php-fpm is one process whose own children are the ``processes``.
    processes: Callable[[Any], int] | None = None
    # a worker's connections to its processes at most when ``proxy_max_conns`` is 0 (what
    # its server can serve at once, known from the application's keys); None: no cap
    connections: Callable[[Any], int] | None = None


def substitute(argument: str, place: Place) -> str:
    """``{port}`` and ``{socket}`` in an argument replaced by ``place``'s."""
    if place.port is not None:
        argument = argument.replace("{port}", str(place.port))
    if place.path is not None:
        argument = argument.replace("{socket}", place.path)
    return argument


def external_command(name: str, app: Any, place: Place) -> Command:
    """NGINX Unit's external application: its ``executable`` with its ``arguments``."""
    del name  # the same command whichever application runs it
    return Command(
        argv=(app.executable, *(substitute(arg, place) for arg in app.arguments)),
        env=dict(app.env),
        cwd=app.chdir,
        user=app.user,
        group=app.group,
        stdout=app.stdout,
        stderr=app.stderr,
    )


def _at_call(module: str, name: str) -> Callable[..., Any]:
    """``module``'s function ``name``, imported at its first call: a language's command and
    counts (`corral.external.languages`, `corral.php.command`, with hashlib, json and glob)
    are every master's import otherwise, and most run none of those kinds; a master's modules
    are every forked worker's memory too."""

    def call(*args: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args)

    return call


_LANGUAGES = "corral.external.languages"


def _external_listen(app: Any) -> Mode:
    mode: Mode = listen_mode(app)  # type: ignore[assignment]
    return mode


_EXTERNAL_KIND = Kind(_external_listen, external_command, "http")
KINDS: dict[str, Kind] = {
    EXTERNAL: _EXTERNAL_KIND,
    "go": _EXTERNAL_KIND,  # Unit's older name of "external"
    "nodejs": _EXTERNAL_KIND,
    "perl": Kind(
        lambda app: "fd",
        _at_call(_LANGUAGES, "starman_command"),
        "http",
        processes=_at_call(_LANGUAGES, "starman_processes"),
        connections=_at_call(_LANGUAGES, "starman_connections"),
    ),
    "ruby": Kind(
        lambda app: "fd",
        _at_call(_LANGUAGES, "puma_command"),
        "http",
        connections=_at_call(_LANGUAGES, "puma_connections"),
    ),
    "java": Kind(lambda app: "port", _at_call(_LANGUAGES, "jetty_command"), "http"),
    "php": Kind(
        lambda app: "unix",
        _at_call("corral.php.command", "php_fpm_command"),
        "connect",
        "fastcgi",
        lambda app: 1,
    ),
}


def kind_of(app: Any) -> Kind | None:
    """The kind of a document's application when a supervised pool runs it, else None
    (its ``type`` without a version: "ruby 3.1" is "ruby")."""
    return KINDS.get(base_type(app.type))
