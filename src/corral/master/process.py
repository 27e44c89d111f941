"""The master's view of one worker process: its place, its generation, its heartbeat."""

from __future__ import annotations

import os
import time
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE")


class WorkerProcess:
    """One forked worker, as the master tracks it.

    Roles: a worker *serves* its slot; a *successor* (``replaces`` set) boots to take
    over a recycled worker's slot; a *retiring* worker was sent TERM and is draining.
    """

    def __init__(self, pid: int, slot: int, generation: Any, beat_fd: int) -> None:
        self.pid = pid
        self.slot = slot
        self.generation = generation
        self.beat_fd = beat_fd
        self.started = time.monotonic()
        self.last_beat = self.started
        self.ready = False
        self.retiring = False
        self.retired_at = 0.0
        self.killed = False  # SIGKILL sent after a drain that overran
        self.replaces: WorkerProcess | None = None  # set while it boots as a successor
        self.successor: WorkerProcess | None = None  # set while its successor boots
        self.recycle_not_before = 0.0  # after a successor failed to boot
        self.retire_asked: str | None = None  # the worker's own "retire" line, as a reason
        self.max_lifetime = 0.0  # drawn with its jitter at spawn; 0: none
        self.request: tuple[float, str] | None = None  # (age seconds, "METHOD /path")
        self.kill_reason: str | None = None  # set while a timeout kill is under way
        self.timed_out = False
        self.served = 0
        self.connections = (0, 0, 0, 0, 0)  # its last "conn" line: see Worker._connections_line
        self.latency: tuple[int, list[int]] | None = None  # its last "lat" line: (sum µs, counts)
        self.failure: str | None = None  # its "failed" line: why the application did not load
        self._partial = b""

    @property
    def age(self) -> float:
        return time.monotonic() - self.started

    def feed(self, data: bytes) -> list[str]:
        """Complete heartbeat lines in ``data`` (a line may span reads)."""
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        return [line.decode("utf-8", "replace") for line in lines]

    def rss_mib(self) -> float:
        """Resident memory from /proc, in MiB (0 when the process is gone)."""
        try:
            with open(f"/proc/{self.pid}/statm", "rb") as stream:
                return int(stream.read().split()[1]) * _PAGE / (1 << 20)
        except (OSError, IndexError, ValueError):
            return 0.0


def request_of(fields: list[str]) -> tuple[float, str] | None:
    """``["AGE", "METHOD", "TARGET"]`` from a heartbeat, or None for ``["0"]``."""
    if len(fields) < 3:
        return None
    return float(fields[0]), f"{fields[1]} {fields[2]}"
