"""The master's process title, what ``ps`` shows: ``corral: master [NAME]``.

`corral ctl` finds the running masters by it in /proc, so the master that writes it and ctl
that reads it take it from here. Nothing is imported: ctl loads this without the master.
"""

from __future__ import annotations

MASTER_TITLE_START = "corral: master ["


def master_title(name: str) -> str:
    """The master's title, ``name`` being ``proc_name``, the application's or "corral"."""
    return f"{MASTER_TITLE_START}{name}]"
