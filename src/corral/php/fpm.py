"""The php-fpm that runs a ``"php"`` application: its configuration file and its command, as
a pure function of the document (`fpm_pool`). Who starts it and restarts it is the master's
supervision of processes that are not corral's (`corral.php.command`, the ``"php"`` kind);
this module writes nothing and starts nothing.

The pool is named after the application and listens on the unix socket the supervision chose
(which the workers read on its board to reach it: `corral.actions.fastcgi`), its
configuration file beside it. From Unit's keys:

- ``processes``: a number is ``pm = static`` with that many children; ``{max, spare,
  idle_timeout}`` is ``pm = ondemand`` (children made as requests come, each ended after
  ``idle_timeout`` idle seconds) when ``spare`` is 0, else ``pm = dynamic`` keeping ``spare``
  idle children, never more than ``max`` in all;
- ``limits``: ``requests`` is ``pm.max_requests`` (a child replaced after that many), ``timeout``
  is ``request_terminate_timeout`` (a request running longer is ended, its answer then cut);
- ``user`` and ``group``: the children's (php-fpm's own ``user``/``group``); the socket is
  theirs (mode 0660, ``listen.owner`` and ``listen.group``; without them, php-fpm's master's,
  which is corral's): corral's workers reach it as root, as that user or in that group;
  a master run as root with no ``user`` runs php-fpm as root too (``-R``), as corral's own
  workers would;
- ``working_directory`` is the children's ``chdir`` (else the root), ``environment`` their
  ``env[...]`` (``clear_env``: nothing else of corral's environment reaches php);
- ``options``: ``file`` is php's ini file (``-c``), ``admin`` each ``php_admin_value``
  (the script cannot change it), ``user`` each ``php_value`` (``ini_set`` may);
- php's errors and what the children write on stderr go to php-fpm's standard error
  (``catch_workers_output``), which the supervision gives corral's error log.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from typing import Any, NamedTuple

from msgspec import UNSET

from corral.jsonpath import member

__all__ = ["FpmPool", "fpm_binary", "fpm_pool"]


class FpmPool(NamedTuple):
    """What runs a php application: ``command`` (its argv, ``config_path`` in it), the text
    to write at ``config_path`` first, and the unix socket php-fpm listens on."""

    command: tuple[str, ...]
    config: str
    config_path: str
    listen: str


def fpm_binary() -> str:
    """Debian's php-fpm: ``php-fpm`` on the PATH, else the newest ``/usr/sbin/php-fpmX.Y``;
    "php-fpm" when there is none (the command then fails to start, said by its supervisor)."""
    import shutil  # here: its import (bz2, lzma...) would cost every worker (fork) memory

    found = shutil.which("php-fpm")
    if found is not None:
        return found
    versions = sorted(glob.glob("/usr/sbin/php-fpm[0-9]*"), key=_version)
    return versions[-1] if versions else "php-fpm"


def _version(path: str) -> tuple[int, ...]:
    digits = path.rpartition("php-fpm")[2]
    return tuple(int(part) for part in digits.split(".") if part.isdigit())


_SECTION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")


def _section(name: str) -> str:
    """The pool's section name, which php-fpm puts in its children's process titles: the
    application's own name when php-fpm's ini syntax takes it as it is (and it is not the
    ``[global]`` section's), else a digest of it."""
    if _SECTION_NAME.fullmatch(name) and name.lower() != "global":
        return name
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def _quoted(value: str, where: str) -> str:
    if '"' in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{where}: php-fpm cannot be given a quote or a control character")
    return f'"{value}"'


def fpm_pool(
    name: str,
    app: Any,
    *,
    listen: str,
    binary: str | None = None,
    as_root: bool | None = None,
) -> FpmPool:
    """The php-fpm of the php application ``name`` (``app``, the document's) listening on
    the unix socket ``listen``, its configuration file beside it. ``as_root``: whether
    corral's master runs as root (None: this process's). Raises ValueError naming the JSON
    path of a value php-fpm cannot take."""
    where = f"$.applications{member(name)}"
    config_path = listen.removesuffix(".sock") + ".conf"
    if as_root is None:
        as_root = os.geteuid() == 0
    lines = [
        "; written by corral for its php application " + repr(name) + ": not to be edited",
        "[global]",
        "error_log = /proc/self/fd/2",
        "log_level = notice",
        "daemonize = no",
        "",
        f"[{_section(name)}]",
        f"listen = {listen}",
        "listen.mode = 0660",
        "listen.backlog = 511",
    ]
    if app.user is not None:  # (php-fpm's master, as corral's, stays root)
        lines += [f"user = {app.user}", f"listen.owner = {app.user}"]
        if app.group is not None:
            lines.append(f"group = {app.group}")
    if app.group is not None:
        lines.append(f"listen.group = {app.group}")
    dynamic = app.dynamic
    if dynamic is None:
        lines += ["pm = static", f"pm.max_children = {app.workers}"]
    elif dynamic.spare == 0:
        lines += [
            "pm = ondemand",
            f"pm.max_children = {dynamic.max}",
            f"pm.process_idle_timeout = {max(1, int(dynamic.idle_timeout))}s",
        ]
    else:
        lines += [
            "pm = dynamic",
            f"pm.max_children = {dynamic.max}",
            f"pm.start_servers = {dynamic.spare}",
            f"pm.min_spare_servers = {dynamic.spare}",
            f"pm.max_spare_servers = {dynamic.spare}",
        ]
    if app.max_requests:  # Unit's limits.requests: a child is replaced after that many
        lines.append(f"pm.max_requests = {app.max_requests}")
    if app.request_timeout:  # Unit's limits.timeout: a request running longer is ended
        lines.append(f"request_terminate_timeout = {max(1, round(app.request_timeout))}s")
    root = app.root if app.targets is UNSET else next(iter(app.targets.values())).root
    chdir = app.chdir if app.chdir is not None else root
    lines += [
        f"chdir = {os.path.abspath(chdir)}",
        "catch_workers_output = yes",
        "decorate_workers_output = no",
        "clear_env = yes",
        # php runs only files named .php (corral chooses the script: corral.php.site)
        "security.limit_extensions = .php",
    ]
    for key, value in app.env.items():
        lines.append(f"env[{key}] = {_quoted(value, f'{where}.environment{member(key)}')}")
    options = app.options
    command = [
        binary or fpm_binary(),
        "--nodaemonize",
        "--force-stderr",
        "--fpm-config",
        config_path,
    ]
    if options is not UNSET:
        for kind, values in (("php_admin_value", options.admin), ("php_value", options.user)):
            if values is UNSET:
                continue
            for key, value in values.items():
                lines.append(f"{kind}[{key}] = {_quoted(value, f'{where}.options')}")
        if options.file is not UNSET:
            command += ["-c", os.path.abspath(options.file)]
    if as_root and app.user is None:
        command.append("--allow-to-run-as-root")
    return FpmPool(tuple(command), "\n".join(lines) + "\n", config_path, listen)
