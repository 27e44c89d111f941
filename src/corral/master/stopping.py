"""The master's ends: a graceful or an immediate stop (TERM, INT, QUIT), and its replacement
by a new master (USR2, whose mechanism is ``upgrade.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING

from corral.master.listeners import close_all
from corral.server.health import SERVER_STOPS

if TYPE_CHECKING:
    from corral.master.arbiter import Arbiter


def begin(arbiter: Arbiter, graceful: bool) -> None:
    """A stop begins: graceful (TERM, INT), its workers are told the server stops (their
    probes' readiness 503 at once, their drain after ``shutdown_delay``: `delay`), else
    (QUIT) they leave now."""
    arbiter.supervisor.stopping = True
    arbiter.graceful = graceful
    pending = arbiter.pending
    if pending is not None and pending.settled is not None and not pending.settled.done():
        pending.settled.set_result("the server is stopping")
    if not arbiter.upgrade.replaced:  # a master replaced by USR2 is not the service stopping
        arbiter.notify("STOPPING=1")
    if not graceful:
        _close_doors(arbiter)
    # a master replaced by USR2 retires its workers as a reload does (its successor's take
    # the same listeners: they stay ready); a worker still starting has no handler for
    # SERVER_STOPS yet, TERM ends it
    replaced = arbiter.upgrade.replaced
    for worker in arbiter.workers.values():
        sig = SERVER_STOPS if worker.ready and not replaced else signal.SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, sig if graceful else signal.SIGQUIT)


def _close_doors(arbiter: Arbiter) -> None:
    """The master's copies of the listeners close (the kernel stops queueing connections
    no worker will take, once the workers' close too; the socket files of unix listeners
    stay when a new master or systemd holds them), and so do the hand-off sockets; the
    external programs are asked to stop."""
    close_all(arbiter.sockets, unlink=arbiter.upgrade.unlinks_on_close)
    for _, handoff in arbiter.handoffs.values():
        handoff.close()
    arbiter.handoffs.clear()
    arbiter.externals.stop()


async def delay(arbiter: Arbiter) -> None:
    """``shutdown_delay``: everything serves on, the workers' readiness 503, while the load
    balancers notice. Another TERM ends it, the drain begins; an INT or a QUIT ends it
    and the workers leave at once (as they would in the drain). A master replaced by USR2
    has none: its successor serves the same listeners."""
    wait = arbiter.settings.shutdown_delay if not arbiter.upgrade.replaced else 0.0
    until = time.monotonic() + wait
    if wait > 0:
        arbiter.log.info("serving on for the shutdown delay (%g s), readiness 503", wait)
    cut = None  # the signal the workers get when the delay is cut short
    while time.monotonic() < until:
        try:
            sig = await asyncio.wait_for(arbiter.signals.get(), until - time.monotonic())
        except TimeoutError:
            break
        if sig == signal.SIGCHLD:
            arbiter.exits.reap()
        elif sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            arbiter.log.info("%s: the shutdown delay ends now", signal.Signals(sig).name)
            arbiter.graceful = sig == signal.SIGTERM
            cut = signal.SIGTERM if arbiter.graceful else signal.SIGQUIT
            break
    _close_doors(arbiter)
    if cut is not None:  # the workers' own delay ends too
        for worker in arbiter.workers.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, cut)


async def wait(arbiter: Arbiter) -> None:
    if arbiter.graceful:
        await delay(arbiter)  # (which may make it an immediate stop)
    grace = arbiter.settings.graceful_timeout + 1.0 if arbiter.graceful else 0.5
    deadline = time.monotonic() + grace
    externals = arbiter.externals  # its own SIGKILL comes at graceful_timeout
    while (arbiter.workers or externals.processes) and time.monotonic() < deadline:
        try:
            sig = await asyncio.wait_for(arbiter.signals.get(), 0.05)
        except TimeoutError:
            arbiter.exits.reap()
            continue
        if sig == signal.SIGCHLD:
            arbiter.exits.reap()
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
