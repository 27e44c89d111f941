"""USR2: a new master from a fresh exec of the corral command, on the same sockets.

The old master forks; the child marks the listening descriptors inheritable, names
them in ``CORRAL_LISTENERS`` (JSON: address → descriptor) with the old master's pid
in ``CORRAL_UPGRADE_FROM``, goes back to the directory the command was started in
and execs ``python -m corral`` with the original arguments. The new master takes
those sockets for the same addresses instead of binding again; once every one of
its workers is ready it sends TERM to the old master, which drains and exits. If
the new master exits before that, the old master (its parent) sees it and keeps
serving.

Under systemd the new master takes over the service's watchdog (``WATCHDOG_PID``), and
listeners that came from socket activation or --fd are marked (``CORRAL_LISTENERS_ACTIVATED``,
naming which) so that they replace the configured binds in the new master as they did in the
old one, and its log says where they came from.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import traceback
from collections.abc import Callable

from corral.master import systemd

ENV_LISTENERS = "CORRAL_LISTENERS"
ENV_UPGRADE_FROM = "CORRAL_UPGRADE_FROM"
ENV_ACTIVATED = "CORRAL_LISTENERS_ACTIVATED"


def start_new_master(
    argv: list[str],
    cwd: str,
    sockets: dict[str, socket.socket],
    before_exec: Callable[[], None] | None = None,
    *,
    activated: str | None = None,
) -> int:
    """Fork and exec the new master; returns its pid (in the old master).

    ``before_exec`` runs in the child just before the exec (Gunicorn's ``pre_exec``);
    ``activated``: who gave the sockets, when they came from systemd socket activation
    ("systemd") or Uvicorn's --fd ("--fd 3"), as the log says it.
    """
    parent = os.getpid()
    env = dict(os.environ)
    env[ENV_LISTENERS] = json.dumps({address: s.fileno() for address, s in sockets.items()})
    env[ENV_UPGRADE_FROM] = str(parent)
    if activated:
        env[ENV_ACTIVATED] = activated
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: nothing of the old master's loop may run here
        for sock in sockets.values():
            os.set_inheritable(sock.fileno(), True)
        systemd.hand_over_watchdog(env, parent)
        if before_exec is not None:
            before_exec()
            sys.stdout.flush()
            sys.stderr.flush()
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "corral", *argv], env)
    except BaseException:
        traceback.print_exc()
    os._exit(127)


def take_inherited_listeners() -> dict[str, socket.socket]:
    """The sockets an old master passed on (empty when not started by an upgrade)."""
    text = os.environ.pop(ENV_LISTENERS, None)
    if not text:
        return {}
    sockets: dict[str, socket.socket] = {}
    with contextlib.suppress(ValueError, TypeError):
        for address, fd in json.loads(text).items():
            try:
                sock = socket.socket(fileno=int(fd))
            except OSError:
                continue
            sock.set_inheritable(False)
            sock.setblocking(False)
            sockets[address] = sock
    return sockets


def take_activated() -> str | None:
    """Who gave the listeners an old master passed on ("systemd", "--fd 3"), if anyone: they
    replace the configured binds as they did in the old master."""
    handed = os.environ.pop(ENV_ACTIVATED, "")
    return None if not handed else "systemd" if handed == "1" else handed  # "1": older masters


def started_by_upgrade() -> bool:
    """Whether this process is a new master an upgrade started (before `take_old_master`)."""
    return ENV_UPGRADE_FROM in os.environ


def take_old_master() -> int | None:
    """The pid of the master this one replaces, if it was started by an upgrade."""
    text = os.environ.pop(ENV_UPGRADE_FROM, "")
    return int(text) if text.isdigit() else None
