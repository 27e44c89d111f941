"""The master's ends: a graceful or an immediate stop (TERM, INT, QUIT). (Its replacement by a
new master, USR2, is ``upgrade.py``'s.)"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable

from corral.external.supervisor import Externals
from corral.hooks import Hooks
from corral.master.generation import Generations
from corral.master.listeners import close_all
from corral.master.supervisor import Supervisor
from corral.master.upgrade import Upgrade
from corral.server.health import SERVER_STOPS


def delay_cut(sig: int) -> tuple[bool, signal.Signals] | None:
    """What ``sig`` does to the shutdown delay: None (nothing: it goes on), or whether the
    stop stays graceful and the signal the workers get (their own delay ends too): another
    TERM starts the drain, an INT or a QUIT makes the workers leave at once."""
    if sig == signal.SIGTERM:
        return True, signal.SIGTERM
    if sig in (signal.SIGINT, signal.SIGQUIT):
        return False, signal.SIGQUIT
    return None


def stops_now(sig: int, graceful: bool) -> bool:
    """Whether ``sig``, while the master waits for its workers to stop, ends the wait at once
    (the stragglers killed): asked to stop a second time, or harder (INT, QUIT)."""
    return sig in (signal.SIGINT, signal.SIGQUIT) or (sig == signal.SIGTERM and not graceful)


class Stop:
    """A stop of the master: whether it is graceful, and the master's exit code. It stops the
    supervisor's workers and the external programs, and closes the generations' sockets."""

    def __init__(
        self,
        supervisor: Supervisor,
        generations: Generations,
        externals: Externals,
        upgrade: Upgrade,
        hooks: Hooks,
        log: logging.Logger,
        notify: Callable[..., None],
    ) -> None:
        self._supervisor = supervisor
        self._generations = generations
        self._externals = externals
        self._upgrade = upgrade  # a master replaced by USR2 stops as a reload retires
        self._hooks = hooks
        self._log = log
        self._notify = notify  # systemd's, when this master speaks for the service
        self.graceful = True
        self.exit_code = 0

    def shut_down(self, code: int) -> None:
        """An immediate stop, the master exiting with ``code``."""
        self.exit_code = code
        self.begin(graceful=False)

    def begin(self, graceful: bool) -> None:
        """A stop begins: graceful (TERM, INT), its workers are told the server stops (their
        probes' readiness 503 at once, their drain after ``shutdown_delay``: `_delay`), else
        (QUIT) they leave now."""
        self._supervisor.stopping = True
        self.graceful = graceful
        pending = self._generations.pending
        if pending is not None and pending.settled is not None and not pending.settled.done():
            pending.settled.set_result("the server is stopping")
        replaced = self._upgrade.replaced
        if not replaced:  # a master replaced by USR2 is not the service stopping
            self._notify("STOPPING=1")
        if not graceful:
            self._close_doors()
        # a master replaced by USR2 retires its workers as a reload does (its successor's take
        # the same listeners: they stay ready); a worker still starting has no handler for
        # SERVER_STOPS yet, TERM ends it
        for worker in self._supervisor.workers.values():
            sig = SERVER_STOPS if worker.ready and not replaced else signal.SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, sig if graceful else signal.SIGQUIT)

    def _close_doors(self) -> None:
        """The master's copies of the listeners close (the kernel stops queueing connections
        no worker will take, once the workers' close too; the socket files of unix listeners
        stay when a new master or systemd holds them), and so do the hand-off sockets; the
        external programs are asked to stop."""
        close_all(self._generations.sockets, unlink=self._upgrade.unlinks_on_close)
        handoffs = self._generations.handoffs
        for _, handoff in handoffs.values():
            handoff.close()
        handoffs.clear()
        self._externals.stop()

    async def _delay(self, signals: asyncio.Queue[int], reap: Callable[[], None]) -> None:
        """``shutdown_delay``: everything serves on, the workers' readiness 503, while the load
        balancers notice. Another TERM ends it, the drain begins; an INT or a QUIT ends it
        and the workers leave at once (as they would in the drain). A master replaced by USR2
        has none: its successor serves the same listeners."""
        settings = self._generations.current.settings
        wait = settings.shutdown_delay if not self._upgrade.replaced else 0.0
        until = time.monotonic() + wait
        if wait > 0:
            self._log.info("serving on for the shutdown delay (%g s), readiness 503", wait)
        supervisor = self._supervisor
        told = set(supervisor.workers)  # (begin's signal): a worker started since is not
        supervisor.serving_on = wait > 0  # a worker that dies meanwhile is replaced
        cut = None  # the signal the workers get when the delay is cut short
        while time.monotonic() < until:
            try:
                sig = await asyncio.wait_for(signals.get(), until - time.monotonic())
            except TimeoutError:
                break
            if sig == signal.SIGCHLD:
                reap()
            elif (ends := delay_cut(sig)) is not None:
                self._log.info("%s: the shutdown delay ends now", signal.Signals(sig).name)
                self.graceful, cut = ends
                break
        supervisor.serving_on = False
        self._close_doors()
        if cut is not None:  # the workers' own delay ends too
            supervisor.signal_all(cut)
            return
        # a replacement's own delay began when it was ready, later: it drains now, as the
        # others do (TERM ends one still starting)
        for pid in supervisor.workers.keys() - told:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    async def wait(self, signals: asyncio.Queue[int], reap: Callable[[], None]) -> None:
        """Until every worker and external program exited (killed past the grace), the
        master's ``signals`` read meanwhile: a child's exit is reaped (``reap``), a second
        stop signal makes it immediate."""
        if self.graceful:
            await self._delay(signals, reap)  # (which may make it an immediate stop)
        settings = self._generations.current.settings
        grace = settings.graceful_timeout + 1.0 if self.graceful else 0.5
        deadline = time.monotonic() + grace
        workers = self._supervisor.workers
        externals = self._externals  # its own SIGKILL comes at graceful_timeout
        while (workers or externals.processes) and time.monotonic() < deadline:
            try:
                sig = await asyncio.wait_for(signals.get(), 0.05)
            except TimeoutError:
                reap()
                continue
            if sig == signal.SIGCHLD:
                reap()
            elif stops_now(sig, self.graceful):
                deadline = min(deadline, time.monotonic())  # asked twice: stop now
        for worker in workers.values():
            self._log.warning(
                "worker %d (pid %d) did not stop in time; killing", worker.slot, worker.pid
            )
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
        externals.kill_left()
        while workers or externals.processes:
            pid, status = os.waitpid(-1, 0)
            if externals.exited(pid, status):
                continue
            gone = workers.pop(pid, None)
            if gone is not None:
                gone.close()
                self._hooks.call("child_exit", gone)
        externals.closed()
        self._log.info("shutdown complete")
