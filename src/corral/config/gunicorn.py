"""Gunicorn's configuration as corral reads it: ``gunicorn.conf.py``, its flags, its environment.

The readers built on `corral.config.gunicorn_names.NAMES` (Gunicorn's names as data), each
giving `Mapped` values (type-checked by the caller, `corral.config.sources`, like a TOML
file's) and warning lines:

- `read_file`: a Python config file (``gunicorn.conf.py``, ``python:MODULE``) is run as
  Gunicorn runs it, once, in the process that reads it; its module globals named as Gunicorn's
  settings are taken, other names (imports, helpers, ``_private``) are ignored as Gunicorn
  ignores them; the file is also the hooks file: corral's hooks machinery
  (`corral.hooks`) keeps the module it ran and takes its hook functions from it;
- Gunicorn's flags corral does not declare are read by `corral.config.peers` with
  Uvicorn's and Granian's;
- `environment_args`: ``GUNICORN_CMD_ARGS``, split as a shell does; `environment_defaults`:
  the settings Gunicorn takes its default from a variable for (``WEB_CONCURRENCY``,
  ``FORWARDED_ALLOW_IPS``).

A name corral cannot honour is one warning line in a file, and one ``ConfigError`` on the
command line (a flag asks for it now; a file is often copied whole).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from corral.config.errors import ConfigError, Invalid
from corral.config.gunicorn_names import NAMES
from corral.config.peers import Mapped, Name, Reading, Unsupported, same
from corral.config.settings import BY_NAME, Scope

__all__ = [
    "Mapped",
    "Name",
    "Reading",
    "environment_args",
    "environment_defaults",
    "forwarded",
    "is_python_config",
    "read_file",
]

ENV_ARGS = "GUNICORN_CMD_ARGS"
DEFAULT_FILE = "gunicorn.conf.py"  # read from the working directory when no -c names a file


# -- trusted proxies ---------------------------------------------------------------------------

FORWARDED_FOR = "X-Forwarded-For"
FORWARDED_PROTO = "X-Forwarded-Proto"


def forwarded(unix: bool, trusted: list[str]) -> dict[str, Any] | None:
    """Gunicorn's trust in a proxy's headers (`forwarded_allow_ips`, already NGINX Unit's
    address patterns) as a listener's Unit `forwarded`: the client from ``X-Forwarded-For``,
    the scheme from ``X-Forwarded-Proto``, from those peers on TCP and from any peer on a unix
    socket, which Gunicorn trusts unconditionally. None: no peer is trusted."""
    source: str | list[str] = "unix" if unix else trusted
    if not source:
        return None
    return {"client_ip": FORWARDED_FOR, "protocol": FORWARDED_PROTO, "source": source}


# -- Python config files -------------------------------------------------------------------------


def is_python_config(path: str) -> bool:
    """Whether ``-c`` names a Gunicorn config: a ``.py`` file or ``python:MODULE``."""
    return path.startswith("python:") or path.lower().endswith(".py")


def read_file(path: str) -> Reading:
    """Run a Gunicorn config file (``FILE.py``, ``file:FILE``, ``python:MODULE``) and map its
    settings; its hook functions make it the `hooks` setting. `ConfigError` when it cannot
    run, or when a hook does not take Gunicorn's arguments."""
    from corral import hooks

    target = path.removeprefix("python:") if path.startswith("python:") else None
    if target is None:
        target = os.path.abspath(path.removeprefix("file:"))
    cwd = os.getcwd()
    added = cwd not in sys.path  # importable from, as Gunicorn's chdir makes it
    if added:
        sys.path.insert(0, cwd)
    try:
        module = hooks.load_module(target, "config")
        functions = hooks.hook_functions(module, target, "config")
    except hooks.HookError as exc:
        raise ConfigError(str(exc)) from None
    finally:
        if added:
            sys.path.remove(cwd)
    reading = Reading([], [])
    for name, value in vars(module).items():
        entry = NAMES.get(name)
        if entry is None:  # not Gunicorn's: an import, a helper
            continue
        where = f"{path}: {name}"
        if entry.hook:  # corral's hooks were taken above
            if entry.instead:
                reading.warnings.append(f"{where}: Gunicorn's hook is not run: {entry.instead}")
            continue
        _take(entry, _python_value(value), where, reading)
    if functions:
        reading.values.append(Mapped("hooks", target, path))
    return reading


def _python_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _take(entry: Name, value: Any, where: str, reading: Reading) -> None:
    if same(value, entry.same):
        return
    if not entry.setting:
        _unsupported(entry, where, reading)
        return
    if value is None:  # Gunicorn's unset
        return
    if entry.convert is not None:
        try:
            value = entry.convert(value)
        except Unsupported as exc:
            reading.warnings.append(f"{where}: Gunicorn's setting is ignored: {exc}")
            return
        except Invalid as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if BY_NAME[entry.setting].scope is Scope.COMMAND:
        reading.warnings.append(
            f"{where}: ignored in a file: {BY_NAME[entry.setting].flags[-1]} is a "
            "command-line option"
        )
        return
    reading.values.append(Mapped(entry.setting, value, where))


def _unsupported(entry: Name, where: str, reading: Reading) -> None:
    if entry.refuse:
        raise ConfigError(f"{where}: {entry.instead}")
    reading.warnings.append(f"{where}: Gunicorn's setting is ignored: {entry.instead}")


# Environment variables Gunicorn takes a setting's default from (a file or a flag overrides).
ENV_DEFAULTS = {"FORWARDED_ALLOW_IPS": "forwarded_allow_ips", "WEB_CONCURRENCY": "workers"}


def environment_defaults(environ: Mapping[str, str]) -> list[Mapped]:
    """The defaults Gunicorn takes from the environment (`ENV_DEFAULTS`)."""
    return [
        Mapped(setting, environ[variable], variable)
        for variable, setting in ENV_DEFAULTS.items()
        if variable in environ
    ]


def environment_args(environ: Mapping[str, str]) -> list[str]:
    """``GUNICORN_CMD_ARGS`` split as a shell would (Gunicorn's `shlex.split`)."""
    text = environ.get(ENV_ARGS, "")
    if not text:
        return []
    import shlex  # here: only that variable needs it

    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"{ENV_ARGS}: {exc}") from None
