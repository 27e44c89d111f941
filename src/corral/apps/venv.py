"""An application's virtualenv (the `home` setting): activated in the worker, before the
application is imported.

NGINX Unit's `home` and uWSGI's `--home` run the application in its virtualenv with the
server's own interpreter; so does corral. Workers are forked from the master, which runs corral's
interpreter, so `activate(home)` (called by the worker after fork and after it switched user,
just before `load_app`) makes that process look like one started from the virtualenv:

- the virtualenv's site-packages (``lib/pythonX.Y/site-packages``: sysconfig's ``venv``
  scheme) are added with `site.addsitedir`, so their ``.pth`` files are
  processed (paths appended, ``import`` lines run: editable installs, setuptools' shim), and
  those entries are moved just ahead of the master's own site-packages: a distribution in both
  is the virtualenv's. They go after the standard library and the `pythonpath`/``PYTHONPATH``
  entries, where a virtualenv's interpreter has them, rather than first;
- `sys.prefix`, `sys.exec_prefix` and `site.PREFIXES` name the virtualenv (`sys.base_prefix`
  stays the running interpreter's, as in a virtualenv), `sys.executable` is the virtualenv's
  ``bin/python``, ``VIRTUAL_ENV`` is set and ``bin`` leads ``PATH``, as ``activate`` does.

Checks, each failing with a `HomeError` whose text is one line (the worker reports it like an
import failure: ``failed CAUSE`` to the master, exit code 3): ``pyvenv.cfg`` is readable, the
Python version it records (``version_info`` or ``version``) has the running interpreter's
major.minor (compiled extensions are built for one version: a mismatch would fail later and
obscurely, or not at all until some request), and a site-packages directory exists. What is
cheap is checked earlier, at configuration time: `home` is made absolute against the directory
corral starts in and must hold a ``pyvenv.cfg`` (`corral.config.values`), and is refused with
`preload`, which would import the application in the master (`corral.config.document`).

Limits, said in the setting's documentation too: a module already imported when the virtualenv
is activated is not replaced by the virtualenv's copy: corral itself, msgspec, httptools, uvloop
(imported here first for that reason), the standard library, and whatever the server hooks
imported in the master. The master's own site-packages stay on the path after the
virtualenv's, so a distribution missing from the virtualenv may still be found there. The
standard library is the running interpreter's, not the one the virtualenv was made from.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import site
import sys

from corral.apps.loader import AppLoadError

__all__ = ["HomeError", "activate", "recorded_version"]


class HomeError(AppLoadError):
    """The `home` virtualenv cannot be used; `str()` is one line naming it and why."""


def recorded_version(config: str) -> tuple[int, int] | None:
    """The Python (major, minor) a ``pyvenv.cfg`` text records, or None when it says none.

    ``version_info`` (virtualenv, uv: ``3.11.7.final.0``) is preferred to ``version`` (venv:
    ``3.11.7``).
    """
    values: dict[str, str] = {}
    for line in config.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    for key in ("version_info", "version"):
        parts = values.get(key, "").split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return int(parts[0]), int(parts[1])
    return None


def activate(home: str | None) -> None:
    """Make this process run the application from the virtualenv ``home`` (see the module
    docstring); nothing when ``home`` is None. Raises `HomeError`."""
    if home is None:
        return
    config_file = os.path.join(home, "pyvenv.cfg")
    try:
        with open(config_file, encoding="utf-8", errors="replace") as stream:
            config = stream.read()
    except OSError as exc:
        raise HomeError(f"home {home}: cannot read pyvenv.cfg: {exc.strerror or exc}") from None
    running = sys.version_info[:2]
    recorded = recorded_version(config)
    if recorded is not None and recorded != running:
        raise HomeError(
            f"home {home}: the virtualenv is for Python {recorded[0]}.{recorded[1]}, "
            f"corral runs Python {running[0]}.{running[1]}; recreate it with "
            f"python{running[0]}.{running[1]} -m venv"
        )
    # the layout `python -m venv` makes (sysconfig's "venv" scheme), whatever this
    # interpreter's own: `site` says dist-packages for any prefix under Debian's system Python
    layout = {"base": home, "platbase": home, "installed_base": home, "installed_platbase": home}
    import sysconfig  # (an application with a `home` only)

    candidates = [sysconfig.get_path(kind, "venv", layout) for kind in ("purelib", "platlib")]
    site_dirs = [path for path in dict.fromkeys(candidates) if os.path.isdir(path)]
    if not site_dirs:
        raise HomeError(f"home {home}: no site-packages directory ({candidates[0]})")
    # The worker imports uvloop once the application is loaded: take corral's copy now, not
    # one the virtualenv may hold.
    with contextlib.suppress(ImportError):
        import uvloop  # noqa: F401
    own_site = {*site.getsitepackages(), site.getusersitepackages()}
    own_site.update(
        p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")
    )
    sys.prefix = sys.exec_prefix = home
    site.PREFIXES[:] = [home]
    python = os.path.join(home, "bin", "python")
    if os.access(python, os.X_OK):
        sys.executable = python
    os.environ["VIRTUAL_ENV"] = home
    bin_dir = os.path.join(home, "bin")
    os.environ["PATH"] = os.pathsep.join([bin_dir, *filter(None, [os.environ.get("PATH")])])
    before = set(sys.path)
    for path in site_dirs:
        if path not in before:  # else its .pth files ran already, at start-up
            site.addsitedir(path)
    added = [path for path in sys.path if path not in before]
    kept = [path for path in sys.path if path in before]
    at = next((i for i, path in enumerate(kept) if path in own_site), len(kept))
    sys.path[:] = [*kept[:at], *added, *kept[at:]]
    importlib.invalidate_caches()
