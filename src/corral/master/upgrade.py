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
import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.master import systemd

if TYPE_CHECKING:
    from corral.master.generation import Origin
    from corral.master.pidfile import PidFile

ENV_LISTENERS = "CORRAL_LISTENERS"
ENV_UPGRADE_FROM = "CORRAL_UPGRADE_FROM"
ENV_ACTIVATED = "CORRAL_LISTENERS_ACTIVATED"


class Upgrade:
    """USR2 as one master lives it: the new master it started (until that one takes over, or
    exits first) and the old master it replaces (until it serves itself)."""

    def __init__(
        self,
        log: logging.Logger,
        origin: Origin | None,
        before_exec: Callable[[], None],
        stopping: Callable[[], bool],
    ) -> None:
        self._log = log
        self._origin = origin  # the command to run again (None: not started from one)
        self._before_exec = before_exec  # Gunicorn's pre_exec hook
        self._stopping = stopping  # whether the server is stopping
        self.new_master: int | None = None  # pid of the master a USR2 started
        self.old_master: int | None = None  # pid of the master this one replaces
        self.pidfile: PidFile | None = None  # set aside while a new master starts
        # who gave the listeners ("systemd", "--fd 3"), when socket activation or --fd did:
        # they replace the configured binds, in a new master too
        self.activated: str | None = None

    @property
    def replaced(self) -> bool:
        """A new master runs: this one's stop is not the service's."""
        return self.new_master is not None

    @property
    def unlinks_on_close(self) -> bool:
        """Closing the listeners removes unix socket files, unless a new master or systemd
        owns them."""
        return self.new_master is None and self.activated is None

    def start(self, sockets: dict[str, socket.socket]) -> None:
        """USR2: fork and exec a new master on ``sockets`` (the listeners, the control
        API's), unless one is starting already."""
        if self._origin is None or self.new_master is not None:
            self._log.info("SIGUSR2: an upgrade is already under way; ignored")
            return
        if self.pidfile is not None:
            self.pidfile.set_aside()
        self.new_master = start_new_master(
            self._origin.argv,
            self._origin.cwd,
            sockets,
            self._before_exec,
            activated=self.activated,
        )
        self._log.info(
            "SIGUSR2: started a new master (pid %d); this one stops when it is ready",
            self.new_master,
        )

    def exited(self, pid: int, status: int) -> bool:
        """Whether ``pid`` was the new master: one that exits before it took over leaves
        this master serving (and its pid file back in place)."""
        if pid != self.new_master:
            return False
        code = os.waitstatus_to_exitcode(status)
        self.new_master = None
        if self._stopping():
            return True
        if self.pidfile is not None:
            self.pidfile.restore()
        self._log.error(
            "upgrade failed: the new master exited (%s) before it took over; "
            "this master keeps serving",
            f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}",
        )
        return True

    def take_over(self, status: str) -> None:
        """This master, started by an upgrade, serves: systemd follows it from now on, and
        the old master is asked to stop."""
        assert self.old_master is not None
        systemd.notify(f"MAINPID={os.getpid()}", "READY=1", status)
        self._log.info(
            "upgrade: this master serves; asking the old master (pid %d) to stop",
            self.old_master,
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.old_master, signal.SIGTERM)
        self.old_master = None


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
    import json  # (here: most masters are never upgraded)

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
    import json

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
