"""``--env-file``: environment variables from dotenv files, read with the configuration.

The files are read with python-dotenv (the library Uvicorn and Granian read them with), so
that quoting, ``export``, comments and ``${VAR}`` expansion are what users of those servers
wrote for. Its rule for the environment is kept too: a variable set in the environment corral
was started in wins over the file's. That environment is the one this module saw when it was
first imported, before the master applied any application's own (`corral.master.child`
puts `env` in its environ), so that a reload reads the file again against the same one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["read_env_files"]

# the names corral's process was started with (see above)
STARTED_WITH = frozenset(os.environ)


def read_env_files(paths: Iterable[str]) -> dict[str, str]:
    """The variables of the files, a later file's winning, less those corral was started
    with; `ValueError` with one line naming the file that cannot be read."""
    try:
        from dotenv import dotenv_values
    except ImportError:
        raise ValueError(
            "reading a dotenv file needs the python-dotenv package: pip install python-dotenv "
            "(or corral[dotenv])"
        ) from None
    found: dict[str, str] = {}
    for path in paths:
        if not os.path.isfile(path):
            raise ValueError(f"{path}: no such file")
        try:
            values = dotenv_values(path, encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: cannot read: {exc}") from None
        for key, value in values.items():
            if key in STARTED_WITH:
                continue
            if "\0" in key or "=" in key or (value is not None and "\0" in value):
                raise ValueError(f"{path}: {key!r}: not a variable corral can set")
            found[key] = "" if value is None else value
    return found
