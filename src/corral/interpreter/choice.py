"""Which Python interpreter runs an application's workers: the master's own (None, the workers
are forked), or its `home` virtualenv's ``bin/python`` when that virtualenv records another
Python version (the workers are spawned: `corral.interpreter.handover`)."""

from __future__ import annotations

import os
import sys

__all__ = ["OLDEST", "foreign_python", "python_version"]

OLDEST = (3, 11)  # pyproject.toml's requires-python: corral cannot run on an older one


def python_version(home: str) -> tuple[int, int] | None:
    """The Python (major, minor) ``home``'s ``pyvenv.cfg`` records (None: unreadable, or it
    records none)."""
    from corral.apps.venv import recorded_version  # (the document checks with this module)

    try:
        with open(os.path.join(home, "pyvenv.cfg"), encoding="utf-8", errors="replace") as f:
            return recorded_version(f.read())
    except OSError:
        return None


def foreign_python(home: str | None) -> str | None:
    """The interpreter that must run the workers of an application whose `home` is ``home``,
    when it is not the master's: the virtualenv's ``bin/python``. None: fork as usual (no
    `home`, or one made with this Python's major.minor, or one that records no version: the
    worker's activation then says what is wrong, `corral.apps.venv`). Nor for a Python older
    than corral supports, or a virtualenv without ``bin/python``: the forked worker's
    activation says in one line to make it again with the master's Python."""
    if home is None:
        return None
    version = python_version(home)
    if version is None or version == sys.version_info[:2] or version < OLDEST:
        return None
    python = os.path.join(home, "bin", "python")
    return python if os.access(python, os.X_OK) else None
