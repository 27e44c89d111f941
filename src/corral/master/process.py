"""The master's view of one worker process: its place, its pool, its heartbeat."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from corral.master.scaling import IDLE
from corral.observe import latency
from corral.wire import (
    Alive,
    Beat,
    Connections,
    Failed,
    InProgress,
    Latency,
    LineDecoder,
    Message,
    Renewed,
)

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")


class WorkerProcess:
    """One forked worker, as the master tracks it.

    Roles: a worker *serves* its slot; a *successor* (``replaces`` set) boots to take
    over a recycled worker's slot; a *retiring* worker was sent TERM and is draining.
    """

    def __init__(
        self,
        pid: int,
        slot: int,
        generation: Any,
        pool: Any,
        beat_fd: int,
        stacks: socket.socket | None = None,
        orders: socket.socket | None = None,
    ) -> None:
        self.pid = pid
        self.slot = slot
        self.generation = generation  # the newest it serves in (a pool may be carried over)
        self.pool = pool  # its application's pool: what it runs
        self.beat_fd = beat_fd
        self.stacks = stacks  # the master's end of its stacks socket (control/stacks.py)
        self.started = time.monotonic()
        # when its loop last said it ran (its alive and hb lines; its ready line when read)
        self.alive_at = self.started
        self.ready = False
        self.retiring = False
        self.retired_at = 0.0
        self.stopped_accepting = False  # its "closed" line: it drains, its listeners closed
        self.killed = False  # SIGKILL sent after a drain that overran
        self.replaces: WorkerProcess | None = None  # set while it boots as a successor
        self.successor: WorkerProcess | None = None  # set while its successor boots
        self.recycle_not_before = 0.0  # after a successor failed to boot
        # its own "retire" line: (requests served then, its age then)
        self.retire_asked: tuple[int, float] | None = None
        self.max_lifetime = 0.0  # drawn with its jitter at spawn; 0: none
        self.in_progress: InProgress | None = None  # its oldest request, as last reported
        self.request_started = 0.0  # when that request started (CLOCK_MONOTONIC)
        # the master's timer that runs timeouts.check when a timeout would be due
        self.timeout_timer: Any = None
        self.kill_reason: str | None = None  # set while a timeout kill is under way
        self.timed_out = False
        self.served = 0
        self.connections = (0, 0, 0, 0, 0)  # its last Connections message, as a tuple
        self.latency: tuple[int, list[int]] | None = None  # its last Latency: (sum µs, counts)
        self.failure: str | None = None  # its "failed" line: why the application did not load
        self.renewed = 0  # the last renewal (master/renewal.py) it acted on, by number
        self.orders = orders  # the master's end of its orders socket (master/renewal.py)
        # how busy it was (see master/scaling.py), from its "lat" and "conn" lines
        self.busy_share = 0.0
        self.idle_since: float | None = self.started  # idle until its heartbeats say busy
        self._busy_mark: tuple[float, int] | None = None  # (when, latency sum µs) last seen
        self._decoder = LineDecoder(f"worker {slot} (pid {pid})")

    @property
    def age(self) -> float:
        return time.monotonic() - self.started

    @property
    def request(self) -> tuple[float, str] | None:
        """``(age now, "METHOD TARGET")`` of its oldest request, as the log lines name it."""
        request = self.in_progress
        if request is None:
            return None
        return time.monotonic() - self.request_started, request.describe()

    def report(self, request: InProgress | None, at: float) -> None:
        """Its oldest request, as a message written at ``at`` gives it."""
        self.in_progress = request
        if request is not None:
            self.request_started = at - request.age

    @property
    def state(self) -> str:
        """``retiring`` (draining), ``ready``, ``successor`` (booting to take over a recycled
        worker's slot) or ``starting``."""
        if self.retiring:
            return "retiring"
        if self.ready:
            return "ready"
        return "successor" if self.replaces is not None else "starting"

    def close(self) -> None:
        """Close the master's ends of its pipe and socket, once it has exited."""
        if self.timeout_timer is not None:
            self.timeout_timer.cancel()
        os.close(self.beat_fd)
        for end in (self.stacks, self.orders):
            if end is not None:
                end.close()

    def feed(self, data: bytes) -> list[Message]:
        """The heartbeat messages ``data`` completes (a line may span reads; one that is not
        a message is skipped, and logged once per kind: see corral/wire.py)."""
        return self._decoder.feed(data)

    def record(self, message: Message) -> bool:
        """Keep what a heartbeat message reports; False for one that asks the master to act
        (``Ready``, ``Closed``, ``Retire``, ``Abort``, ``Stuck``)."""
        match message:
            case Alive(at):
                self.alive_at = max(self.alive_at, at)
            case Beat(served, at, request):
                self.served = served
                self.alive_at = max(self.alive_at, at)
                self.report(request, at)
            case Connections(accepted, closed, active, idle, busy):
                self.connections = (accepted, closed, active, idle, busy)
            case Latency(sum_us, counts):
                self.latency = (sum_us, list(counts))
                self._measure_busy(sum_us)
            case Failed(cause):
                self.failure = cause
            case Renewed(number):
                self.renewed = max(self.renewed, number)
            case _:
                return False
        return True

    def _measure_busy(self, sum_us: int) -> None:
        """The busy share since the last ``lat`` line: time in the application per thread, or
        the share of threads in it now (its ``conn`` line), whichever is higher."""
        now = time.monotonic()
        mark, self._busy_mark = self._busy_mark, (now, sum_us)
        if mark is None or now <= mark[0]:
            return
        threads = self.pool.application.threads
        spent = (sum_us - mark[1]) / 1e6 / (now - mark[0]) / threads
        self.busy_share = max(spent, self.connections[4] / threads)
        if self.busy_share >= IDLE:
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = now

    def rss_mib(self) -> float:
        return rss_mib(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)


def rss_mib(pid: int) -> float:
    """A process's resident memory from /proc, in MiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as stream:
            return int(stream.read().split()[1]) * _PAGE / (1 << 20)
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_seconds(pid: int) -> float:
    """A process's user and system CPU time from /proc, in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            # after the command's closing parenthesis (a title may hold spaces)
            fields = stream.read().rpartition(b")")[2].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


class Tally:
    """Counts of several workers added up: requests served, connections accepted and
    closed, request durations (None without ``latency_histogram``)."""

    __slots__ = ("accepted", "closed", "latency", "served")

    def __init__(self) -> None:
        self.served = self.accepted = self.closed = 0
        self.latency: tuple[int, list[int]] | None = None

    def add(self, other: WorkerProcess | Tally) -> None:
        if isinstance(other, WorkerProcess):
            served, (accepted, closed, *_) = other.served, other.connections
        else:
            served, accepted, closed = other.served, other.accepted, other.closed
        self.served += served
        self.accepted += accepted
        self.closed += closed
        if other.latency is not None:
            self.latency = latency.add(self.latency, other.latency)
