"""Accepting for a pool of threaded workers: take a fair share, defer beyond it.

A keep-alive connection stays with the worker that accepted it for its whole life,
and workers race for ``accept()`` on the socket they share; when the application
runs on threads, a worker that happens to win most of a burst of connections
queues requests that a sibling with idle threads could have served. So a worker
that already holds as many connections as it has threads steps back from accept
for ``DEFER`` seconds, leaving the next connections to less loaded siblings; if
none takes them, it accepts them after the pause, so a lone busy worker still
serves everyone.

Only used when a pool has several workers with ``threads > 1``: with one thread
the loop's own accept (in C, for uvloop) is faster and balance matters less.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Sized
from typing import Any

DEFER = 0.02  # seconds a worker holding its share stays out of the accept race
BATCH = 64  # connections accepted per readiness event at most


class DeferringAcceptor:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        factory: Callable[[], Any],
        connections: Sized,
        share: int,
        log: logging.Logger,
    ) -> None:
        self._loop = loop
        self._sock = sock
        self._factory = factory
        self._connections = connections
        self._share = share
        self._log = log
        self._reading = False
        self._after_pause = False
        self._closed = False
        self._pending = 0

    def start(self) -> None:
        if not self._reading and not self._closed:
            self._reading = True
            self._loop.add_reader(self._sock.fileno(), self._ready)

    def close(self) -> None:
        self._closed = True
        self._pause()
        # this process's copy of the listener goes too: if it is the last one, the kernel
        # refuses new connections instead of queueing them for no one
        self._sock.close()

    def _pause(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._sock.fileno())

    def _resume(self) -> None:
        self._after_pause = True
        self.start()

    def _ready(self) -> None:
        # connections accepted but not yet made (their protocol is set up by a
        # task) count too, or a burst would all go to whoever woke first
        room = self._share - len(self._connections) - self._pending
        if room <= 0:
            if not self._after_pause:
                self._pause()
                self._loop.call_later(DEFER, self._resume)
                return
            room = 1  # over the share: one connection per pause, siblings first
        self._after_pause = False
        for _ in range(min(room, BATCH)):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: back off, keep serving
                self._log.error("accept failed: %s", exc)
                self._pause()
                self._loop.call_later(DEFER * 10, self._resume)
                return
            conn.setblocking(False)
            if conn.family != socket.AF_UNIX:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pending += 1
            task = self._loop.create_task(self._loop.connect_accepted_socket(self._factory, conn))
            task.add_done_callback(self._made)

    def _made(self, task: asyncio.Task[Any]) -> None:
        self._pending -= 1
        if not task.cancelled() and task.exception() is not None:
            self._log.debug("accepted connection failed: %s", task.exception())
