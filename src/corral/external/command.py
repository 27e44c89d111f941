"""What one process of a supervised pool runs (`Command`) and where it listens (`Place`).

The values the seam (``kinds.py``) and the command builders (``kinds.py`` for ``external``,
``languages.py`` for Starman, Puma and Jetty, ``php/command.py`` for php-fpm) pass to the
master's ``spawn.py``; kept apart from `KINDS` so that a builder in another module needs no
import of the table that lists it.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Command", "Mode", "Place"]

Mode = Literal["fd", "port", "unix"]


@dataclass(frozen=True)
class Place:
    """Where one process of a pool listens, and how the proxy reaches it."""

    mode: Mode
    address: str  # "127.0.0.1:PORT" or "unix:PATH": what the proxy connects to
    port: int | None = None  # the loopback port (fd and port modes)
    path: str | None = None  # the unix socket's path (unix mode)


@dataclass(frozen=True)
class Command:
    """What one process runs: its argv, the environment added to corral's, its directory,
    its user and group (names or ids, None: corral's), the files its output goes to, and the
    signal it gets if corral's master dies (``PR_SET_PDEATHSIG``)."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    user: str | None = None
    group: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    # SIGKILL: nothing outlives the master; a program whose children would outlive its own
    # death (php-fpm's) is given the signal it ends them on instead
    death_signal: int = signal.SIGKILL
