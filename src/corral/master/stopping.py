"""The master's ends: a graceful or an immediate stop (TERM, INT, QUIT), and its replacement
by a new master (USR2, whose mechanism is ``upgrade.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from functools import partial
from typing import TYPE_CHECKING

from corral.master import exits, upgrade

if TYPE_CHECKING:
    from corral.master.arbiter import Arbiter


async def wait(arbiter: Arbiter) -> None:
    grace = arbiter.settings.graceful_timeout + 1.0 if arbiter.graceful else 0.5
    deadline = time.monotonic() + grace
    externals = arbiter.externals  # its own SIGKILL comes at graceful_timeout
    while (arbiter.workers or externals.processes) and time.monotonic() < deadline:
        try:
            sig = await asyncio.wait_for(arbiter.signals.get(), 0.05)
        except TimeoutError:
            exits.reap(arbiter)
            continue
        if sig == signal.SIGCHLD:
            exits.reap(arbiter)
        elif sig in (signal.SIGINT, signal.SIGQUIT) or (
            sig == signal.SIGTERM and not arbiter.graceful
        ):
            deadline = min(deadline, time.monotonic())  # asked twice: stop now
    for worker in arbiter.workers.values():
        arbiter.log.warning(
            "worker %d (pid %d) did not stop in time; killing", worker.slot, worker.pid
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)
    externals.kill_left()
    while arbiter.workers or externals.processes:
        pid, status = os.waitpid(-1, 0)
        if externals.exited(pid, status):
            continue
        gone = arbiter.workers.pop(pid, None)
        if gone is not None:
            gone.close()
            arbiter.hooks.call("child_exit", gone)
    externals.closed()
    arbiter.log.info("shutdown complete")


def upgrade_master(arbiter: Arbiter) -> None:
    if arbiter.origin is None or arbiter.new_master is not None:
        arbiter.log.info("SIGUSR2: an upgrade is already under way; ignored")
        return
    if arbiter.pidfile is not None:
        arbiter.pidfile.set_aside()
    sockets = dict(arbiter.sockets)
    if arbiter.control is not None:  # the new master serves the API on the same socket
        sockets[arbiter.control.inherit_key] = arbiter.control.socket
    arbiter.new_master = upgrade.start_new_master(
        arbiter.origin.argv,
        arbiter.origin.cwd,
        sockets,
        partial(arbiter.hooks.call, "pre_exec"),
        activated=arbiter.handed if arbiter.from_systemd else None,
    )
    arbiter.log.info(
        "SIGUSR2: started a new master (pid %d); this one stops when it is ready",
        arbiter.new_master,
    )
