"""The master's supervised pools of processes that are not corral workers.

`Externals` keeps, per application a `Kind` runs (``kinds.py``), a pool of processes: started
at the master's start and at each change that adds or alters the application (an unchanged
one is kept, its processes serving on; an altered one's successor starts beside it, which
stops once every new process answers), each asked until it answers (``probe.py``) before it
counts as ready, restarted when it exits (at once after a ready life of at least
``min_worker_lifetime``, else with the crash backoff of `corral.master.lifecycle.Backoff`),
killed when it is not ready within ``startup_timeout``, and stopped with SIGTERM, then
SIGKILL after ``graceful_timeout``. Its log lines and events are the workers' own kinds
(``crash``, ``timeout``); `status` gives the control API the shape of a pool of workers.

It runs on the master's loop; `exited` is called by the master's reaping (``Exits.reap``).
Every master has one: what starts, places and asks the processes (``spawn.py``,
``places.py``, ``probe.py``) is imported with the first pool, not by a master that has none
(its modules would be every forked worker's memory too).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from corral.config.app_types import pool_size, runs_in_workers
from corral.external.board import board
from corral.master.identity import Identity
from corral.master.lifecycle import Backoff
from corral.master.process import cpu_seconds, rss_mib

if TYPE_CHECKING:
    import logging
    import socket
    from collections.abc import Callable

    from corral.config import Document
    from corral.external.kinds import Kind, Place
    from corral.master.events import Events
    from corral.master.generation import Generations

__all__ = ["ExternalPool", "ExternalProcess", "Externals"]


class ExternalPool:
    """One application's supervised processes: what they run and where they listen."""

    def __init__(self, name: str, app: Any, kind: Kind) -> None:
        from corral.external.places import Places

        self.name = name
        self.app = app
        self.kind = kind
        identity = Identity(app.user, app.group)  # resolved by its Generation already
        owner = (_or_none(identity.uid), _or_none(identity.gid))
        self.places = Places(name, kind.listen(app), owner)
        # a dynamic pool runs its max: the master cannot see how busy a foreign program is
        self.count = pool_size(app) if kind.processes is None else kind.processes(app)
        self.restarts = 0  # processes started again after one exited
        # the pool of the same application it replaces: serving until this one answers
        self.replaces: ExternalPool | None = None
        self.failed = False  # a process of it failed to start or died young: it is retried

    def place(self, slot: int) -> Place:
        return self.places.at(slot)


class ExternalProcess:
    """The master's record of one running process of a pool."""

    def __init__(self, pid: int, slot: int, pool: ExternalPool, place: Place) -> None:
        self.pid = pid
        self.slot = slot
        self.pool = pool
        self.place = place
        self.started = time.monotonic()
        self.ready = False
        self.stopping = False  # sent SIGTERM on purpose (a change, the server's stop)
        self.timed_out = False
        self.probing: asyncio.Task[None] | None = None
        self.kill_timer: asyncio.TimerHandle | None = None

    @property
    def state(self) -> str:
        return "stopping" if self.stopping else "ready" if self.ready else "starting"


class Externals:
    """Every supervised pool of the running document, and their processes by pid."""

    def __init__(
        self,
        generations: Generations,
        events: Events,
        log: logging.Logger,
        settled: Callable[[], None],
    ) -> None:
        self._generations = generations  # the running one's settings and number
        self._events = events
        self.log = log
        self._settled = settled  # every pool's processes answer (or failed): start-up may end
        self.pools: dict[str, ExternalPool] = {}
        self.processes: dict[int, ExternalProcess] = {}
        self.backoff = Backoff()
        self.stopping = False
        self._leaving: list[ExternalPool] = []  # pools gone from the document, still exiting
        self.board = board()  # made before the first fork: the workers read it (board.py)

    @property
    def sockets(self) -> list[socket.socket]:
        """The listening sockets corral holds for its pools (a forked worker closes them)."""
        return [pool.places.socket for pool in self._all() if pool.places.socket is not None]

    def _all(self) -> list[ExternalPool]:
        """Every pool that has processes or places: current, replaced, leaving."""
        current = list(self.pools.values())
        return [*current, *(p.replaces for p in current if p.replaces), *self._leaving]

    # -- the document's pools -----------------------------------------------------------

    def update(self, doc: Document, restart: Collection[str] | None = ()) -> None:
        """Start, keep, restart or stop the pools so that they run what ``doc`` says; those
        ``restart`` names (None: all, as a reload does) restart even unchanged."""
        if self.stopping:
            return
        # (a program's kind, `corral.external.kinds`, is imported for the first one: a master of
        # Python applications only never needs it)
        wanted = {n: app for n, app in doc.applications.items() if not runs_in_workers(app)}
        replaced: dict[str, ExternalPool] = {}
        for name, pool in list(self.pools.items()):
            asked = restart is None or name in restart
            if wanted.get(name) == pool.app and not asked:
                continue  # unchanged: its processes serve on
            del self.pools[name]
            if name not in wanted:
                self._leave(pool, "removed")
                continue
            if pool.replaces is not None:  # a successor that never answered: replaced too
                self._leave(pool, "replaced before it answered")
                pool = pool.replaces
            replaced[name] = pool  # it serves on until its successor answers
        for name, app in wanted.items():
            if name in self.pools:
                continue
            from corral.external.kinds import kind_of

            kind = kind_of(app)
            assert kind is not None
            pool = self.pools[name] = ExternalPool(name, app, kind)
            pool.replaces = replaced.get(name)
            self.log.info(
                "serving %s with %d process(es) of %r (%s)%s",
                name,
                pool.count,
                app.executable or app.type,
                pool.places.mode,
                "; the running ones serve until these answer" if pool.replaces else "",
            )
            for slot in range(pool.count):
                self._start(pool, slot)

    def _leave(self, pool: ExternalPool, why: str) -> None:
        self.log.info("%s %s: stopping its %s", pool.name, why, _processes(pool, self))
        self._leaving.append(pool)
        for process in self.processes.values():
            if process.pool is pool:
                self._stop(process)
        self._forget_if_gone(pool)
        self.publish()

    def answered(self) -> bool:
        """Whether every pool's processes answer, but for pools that failed (they are retried
        and the others serve, as an application that fails to load with the state directory):
        the master's start-up is complete with them (systemd's READY, an upgrade's)."""
        for pool in self.pools.values():
            ready = sum(p.pool is pool and p.ready for p in self.processes.values())
            if ready < pool.count and not pool.failed:
                return False
        return True

    def _take_over(self, pool: ExternalPool) -> None:
        """Once every process of ``pool`` answers, the pool it replaces stops."""
        old = pool.replaces
        ready = sum(p.pool is pool and p.ready for p in self.processes.values())
        if old is not None and ready >= pool.count:
            pool.replaces = None
            self._leave(old, "replaced")

    def _forget_if_gone(self, pool: ExternalPool) -> None:
        if pool in self._leaving and not any(p.pool is pool for p in self.processes.values()):
            self._leaving.remove(pool)
            pool.places.close()

    # -- one process --------------------------------------------------------------------

    def _start(self, pool: ExternalPool, slot: int) -> None:
        if self.stopping or self.pools.get(pool.name) is not pool or slot >= pool.count:
            return
        if any(p.pool is pool and p.slot == slot for p in self.processes.values()):
            return
        from corral.external import spawn

        try:
            place = pool.place(slot)
            pool.places.clear(slot)
            command = pool.kind.command(pool.name, pool.app, place)
            pid = spawn.start(pool.name, command, place, pool.places.socket)
        except (OSError, ValueError) as exc:  # CannotRun, a bind, an unknown user
            self._failed(pool, slot, str(exc))
            return
        process = ExternalProcess(pid, slot, pool, place)
        self.processes[pid] = process
        self.log.info("%s process %d started (pid %d) at %s", pool.name, slot, pid, place.address)
        process.probing = asyncio.get_running_loop().create_task(self._until_ready(process))

    async def _until_ready(self, process: ExternalProcess) -> None:
        from corral.external import probe

        app = process.pool.app
        deadline = process.started + app.startup_timeout if app.startup_timeout else None
        while process.pid in self.processes and not process.stopping:
            if await probe.answers(process.place.address, process.pool.kind.probe, app.health_path):
                if process.pid in self.processes and not process.stopping:
                    process.ready = True
                    self.publish()
                    self.log.info(
                        "%s process %d ready (pid %d)", process.pool.name, process.slot, process.pid
                    )
                    self._take_over(process.pool)
                    self._settled()
                return
            if deadline is not None and time.monotonic() >= deadline:
                why = f"not ready after {app.startup_timeout:g}s (startup_timeout)"
                self.log.error(
                    "%s process %d (pid %d) %s; killing it",
                    process.pool.name,
                    process.slot,
                    process.pid,
                    why,
                )
                self._events.record("timeout", why, process.pool.name, process.pid, process.slot)
                process.timed_out = True
                _signal(process.pid, signal.SIGKILL)
                return
            await asyncio.sleep(app.health_interval)

    def _stop(self, process: ExternalProcess) -> None:
        """SIGTERM now, SIGKILL if it still runs ``graceful_timeout`` later."""
        if process.stopping:
            return
        process.stopping = True
        self.publish()  # no request for it from now on
        _signal(process.pid, signal.SIGTERM)
        grace = self._generations.current.settings.graceful_timeout
        process.kill_timer = asyncio.get_running_loop().call_later(
            grace, self._kill_late, process, grace
        )

    def _kill_late(self, process: ExternalProcess, grace: float) -> None:
        if self.processes.get(process.pid) is process:
            self.log.warning(
                "%s process %d (pid %d) did not stop within graceful_timeout (%gs); killing it",
                process.pool.name,
                process.slot,
                process.pid,
                grace,
            )
            _signal(process.pid, signal.SIGKILL)

    def exited(self, pid: int, status: int) -> bool:
        """A child exited: whether it was one of these processes (then dealt with)."""
        process = self.processes.pop(pid, None)
        if process is None:
            return False
        if process.probing is not None:
            process.probing.cancel()
        if process.kill_timer is not None:
            process.kill_timer.cancel()
        pool, slot = process.pool, process.slot
        if process.ready:
            self.publish()
        code = os.waitstatus_to_exitcode(status)
        how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
        lived = time.monotonic() - process.started
        if process.stopping or self.stopping:
            self.log.info("%s process %d (pid %d) exited: %s", pool.name, slot, pid, how)
            self._forget_if_gone(pool)
            return True
        detail = f"exited: {how} after {lived:.1f}s"
        if not process.timed_out:  # (a timeout's event says why it was killed)
            self._events.record("crash", detail, pool.name, pid, slot)
        if process.ready and lived >= pool.app.min_worker_lifetime:
            self.log.error("%s process %d (pid %d) %s; restarting it", pool.name, slot, pid, detail)
            self.backoff.forget((pool.name, slot))
            pool.restarts += 1
            self._start(pool, slot)
        else:
            self._failed(pool, slot, f"(pid {pid}) {detail}")
        return True

    def _failed(self, pool: ExternalPool, slot: int, why: str) -> None:
        """Not started, or dead young: tried again after the crash backoff."""
        pool.failed = True
        self._settled()
        delay = self.backoff.failed((pool.name, slot), time.monotonic())
        failures = self.backoff.failures((pool.name, slot))
        self.log.error(
            "%s process %d %s (%d in a row): restarting it in %.1fs",
            pool.name,
            slot,
            why,
            failures,
            delay,
        )
        asyncio.get_running_loop().call_later(delay, self._restart, pool, slot)

    def _restart(self, pool: ExternalPool, slot: int) -> None:
        if self.pools.get(pool.name) is pool and not self.stopping:
            pool.restarts += 1
            self._start(pool, slot)

    # -- the server's stop --------------------------------------------------------------

    def stop(self) -> None:
        """The server stops: every process is sent SIGTERM, and SIGKILL after
        ``graceful_timeout`` (the master waits for them as for its workers)."""
        self.stopping = True
        for process in list(self.processes.values()):
            self._stop(process)

    def kill_left(self) -> None:
        """The master's stop is over: any process still there is killed."""
        for process in self.processes.values():
            self.log.warning(
                "%s process %d (pid %d) did not stop in time; killing it",
                process.pool.name,
                process.slot,
                process.pid,
            )
            _signal(process.pid, signal.SIGKILL)

    def closed(self) -> None:
        """Every process is gone: the sockets and socket files go too."""
        for pool in self._all():
            pool.places.close()

    # -- what the control API shows -----------------------------------------------------

    def ready_addresses(self, name: str) -> list[str]:
        """Where the proxy may send ``name``'s requests now: its ready processes' addresses."""
        found = [
            p.place.address
            for p in self.processes.values()
            if p.pool.name == name and p.ready and not p.stopping
        ]
        return list(dict.fromkeys(found))

    def publish(self) -> None:
        """The workers' board (board.py) says what runs now."""
        self.board.publish({name: self.ready_addresses(name) for name in self.pools})

    def status(self, workers: bool) -> dict[str, Any]:
        """Per pool, the control API's application status (`corral.control.api.status`'s
        shape: processes running, starting and idle, requests), corral's ``external`` facts
        and, with ``workers``, a row per process as a worker's."""
        found: dict[str, Any] = {}
        for name, pool in self.pools.items():
            mine = sorted(  # those it replaces too, while they serve or stop
                (p for p in self.processes.values() if p.pool.name == name),
                key=lambda p: (p.slot, p.started),
            )
            running = sum(p.ready and not p.stopping for p in mine)
            starting = sum(not p.ready and not p.stopping for p in mine)
            found[name] = {
                # the master cannot tell a foreign process busy from idle: none is counted idle
                "processes": {"running": running, "starting": starting, "idle": 0},
                "requests": {"active": 0, "total": 0},  # counted by the proxy, not here
                "latency": None,
                "external": {
                    "listen": pool.places.mode,
                    "addresses": pool.places.addresses,
                    "restarts": pool.restarts,
                },
            }
            if workers:
                found[name]["workers"] = [self._row(p) for p in mine]
        return found

    def _row(self, process: ExternalProcess) -> dict[str, Any]:
        return {
            "pid": process.pid,
            "slot": process.slot,
            "generation": self._generations.current.number,
            "state": process.state,
            "served": 0,
            "in_flight": 0,
            "oldest": None,
            "rss_mib": round(rss_mib(process.pid), 1),
            "cpu_seconds": round(cpu_seconds(process.pid), 2),
            "uptime": round(time.monotonic() - process.started, 1),
            "last_restart": self._events.last_restart(process.pool.name, process.slot),
            "address": process.place.address,
        }


def _processes(pool: ExternalPool, externals: Externals) -> str:
    count = sum(p.pool is pool for p in externals.processes.values())
    return f"{count} process(es)"


def _or_none(number: int | None) -> int:
    return -1 if number is None else number


def _signal(pid: int, sig: int) -> None:
    """``sig`` to the program; a SIGKILL to its process group (spawn.py makes one per
    program), so that the children of a program killed outright (php-fpm's, Starman's) do not
    outlive it, holding its socket."""
    with contextlib.suppress(ProcessLookupError):
        if sig == signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
        os.kill(pid, sig)
