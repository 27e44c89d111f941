"""Accepting for a pool of threaded workers: each worker takes its share, then the least loaded.

A keep-alive connection stays with the worker that accepted it for its whole life, and the
workers of a pool race for ``accept()`` on the listener they share; when the application runs
on threads, a worker that happens to win most of a burst of connections queues requests that
a sibling with idle threads could have served. So the workers of such a pool publish how many
connections each holds on a `LoadBoard`, a small array in memory they share with the master,
and each accepts by one rule (`BalancedAcceptor`):

- below its share (as many connections as it has threads) it accepts without looking;
- beyond it, not while a sibling holds less than its share (that sibling has idle threads),
  and otherwise while it holds fewer than the least loaded sibling plus one share: a burst of
  keep-alive connections fills every worker's threads first, and once all are full the
  rest queue evenly, never all in one;
- a worker that declines steps out of the accept race (its listener's readiness is
  level-triggered: staying in would spin) until one of its own connections closes, or for
  `POLL` seconds, and looks again;
- a sibling that holds fewer connections but does not take the waiting ones for `STALL`
  seconds (stopped, or its loop blocked) is not waited for: the worker accepts them.

Nothing of this runs per request: the board is written when a connection is accepted or
closes, and read only when a worker is beyond its share. The module is compiled (setup.py's
`TWINS`): a new connection per request at 100 connections, 2 workers x 4 threads serve what
2 x 1 serve with uvloop's own accept (1.00x, 0.92x with this module in Python), where the
fixed 20 ms step-back it replaced held them to ~400 req/s (bench/RESULTS.md, scenario E).

Only used when a pool has several workers with ``threads > 1``. A one-thread worker runs the
application on its loop, so the count it published is old while it serves: forced on for
such pools, the rule made one worker take a whole burst more often than uvloop's own accept
does (bench/RESULTS.md, "Threaded pools accepting, compiled"), and cost 3 % under
close-per-request traffic.
"""

from __future__ import annotations

import _socket
import asyncio
import logging
import mmap
import os
import select
import socket
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

POLL = 0.001  # seconds a worker that declined stays out of the accept race before it looks again
STALL = 0.1  # seconds a less loaded sibling may leave connections waiting before it is ignored
BATCH = 64  # connections accepted per readiness event at most
ABSENT = -1  # a board slot whose worker does not accept (not started, draining or gone)


class LoadBoard:
    """How many connections each worker of a pool holds, by slot, shared across fork.

    Made by the master before it forks the pool's workers (anonymous shared memory: each
    child maps the same page). A worker writes only its own slot; the master marks a slot
    `ABSENT` when its worker exits, so a dead worker's last count is never waited for.
    Plain aligned 32-bit stores and loads: a reader may see a count one step old, which
    the rule tolerates.
    """

    def __init__(self, slots: int, fd: int = -1) -> None:
        """``fd``: the master's board of ``slots``, inherited by a worker spawned on another
        interpreter (`corral.interpreter`); -1, a new board (a memfd: that worker can map it)."""
        self.slots = slots
        length = max(slots, 1) * 4
        fresh = fd < 0
        if fresh:
            fd = os.memfd_create("corral-load-board")
            os.ftruncate(fd, length)
        self.fd = fd
        self._map = mmap.mmap(fd, length)  # MAP_SHARED
        self._counts = memoryview(self._map).cast("i")
        for slot in range(slots if fresh else 0):
            self.publish(slot, ABSENT)

    def publish(self, slot: int, count: int) -> None:
        if slot < self.slots:
            self._counts[slot] = count

    def leave(self, slot: int) -> None:
        self.publish(slot, ABSENT)

    def least_besides(self, slot: int) -> int | None:
        """The fewest connections a sibling of ``slot`` that accepts holds; None: none does."""
        least = ABSENT
        for other in range(self.slots):
            count = self._counts[other]
            if other != slot and count != ABSENT and (least == ABSENT or count < least):
                least = count
        return None if least == ABSENT else least


class WatchedConnections(set):
    """A worker's set of open connections that tells its acceptors when one leaves.

    It stands for `ServerState.connections` in the workers that balance, so that the
    connection code adds and discards as everywhere else and pays nothing elsewhere. A
    connection whose client has closed its side (`client_gone`, the connection's
    `ServerState.on_client_gone`) stays in the set, since its answer is still due and a
    drain waits for it, but is no longer held: it takes no further request, and its thread
    is free once that answer ends. Counted, such connections made their worker look full to
    its siblings, one of which then took a whole burst of new connections and kept them for
    their whole life, more than its threads.
    """

    def __init__(self) -> None:
        super().__init__()
        self.on_change: Callable[[], None] = _nothing
        self.on_leave: Callable[[], None] = _nothing
        self._gone: set[Any] = set()

    def held(self) -> int:
        return len(self) - len(self._gone)

    def add(self, conn: Any) -> None:
        super().add(conn)
        self.on_change()

    def client_gone(self, conn: Any) -> None:
        if conn in self and conn not in self._gone:
            self._gone.add(conn)
            self.on_leave()

    def discard(self, conn: Any) -> None:
        if conn in self:
            super().discard(conn)
            self._gone.discard(conn)
            self.on_leave()


def _nothing() -> None:
    pass


class AcceptGate:
    """One worker's place on its pool's board, shared by its acceptors (one per listener)."""

    def __init__(
        self, board: LoadBoard, slot: int, share: int, connections: WatchedConnections
    ) -> None:
        self.board = board
        self.slot = slot
        self.share = share
        self.connections = connections
        self.pending = 0  # accepted, their transport and protocol still being set up
        self.acceptors: list[BalancedAcceptor] = []
        self.open = True
        connections.on_change = self._set_up
        connections.on_leave = self._left
        self.publish()

    def held(self) -> int:
        return self.connections.held() + self.pending

    def room(self, stalled: bool) -> int:
        """How many connections to accept now: 0 to decline."""
        held = self.held()
        if held < self.share:
            return self.share - held
        least = self.board.least_besides(self.slot)
        if least is None or stalled:
            return BATCH
        if least < self.share:
            return 0  # a sibling has idle threads: the connection is its
        return least + self.share - held

    def publish(self) -> None:
        if self.open:
            self.board.publish(self.slot, self.held())

    def close(self) -> None:
        """The worker stops accepting (a drain): siblings must not wait for it."""
        if self.open:
            self.open = False
            self.board.leave(self.slot)

    def _set_up(self) -> None:
        """A connection being set up is made (its ``connection_made`` put it in the set) or
        failed: it no longer counts as pending. Counted twice meanwhile, it made this worker
        look busier than it was to its siblings, and each took more than its turn."""
        if self.pending > 0:
            self.pending -= 1
        self.publish()

    def _left(self) -> None:
        self.publish()
        for acceptor in self.acceptors:
            acceptor.start()  # room may have appeared (or a descriptor, after EMFILE)


class Accepted(socket.socket):
    """An accepted connection's socket, handed to ``connect_accepted_socket``.

    A `socket.socket` still (uvloop detaches one of those when its transport closes, where it
    would close any other object's descriptor a second time, maybe another file's by then),
    whose ``family`` and ``type`` are the plain numbers of `_socket.socket`: the enum
    conversions of `socket.socket`'s, five per connection with ``accept()``, were the largest
    part of what accepting in Python cost beyond uvloop's accept in C.
    """

    __slots__ = ()
    family = _socket.socket.family  # type: ignore[assignment]  # the plain int, on purpose
    type = _socket.socket.type  # type: ignore[assignment]


class BalancedAcceptor:
    """Accepts on one listener for a worker of a balanced pool; see the module docstring."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        factory: Callable[[], Any],
        gate: AcceptGate,
        log: logging.Logger,
        door: Any = None,
    ) -> None:
        self._loop = loop
        self._sock = sock
        self._factory = factory
        self._gate = gate
        self._log = log
        # an HTTPS listener's door (corral/server/tlsdoor.py): what comes before the handshake
        self._door = door
        self._reading = False
        self._closed = False
        self._declined_at: float | None = None  # when it began to decline, while it does
        self._nodelay = not type(loop).__module__.startswith("uvloop")
        self._family = int(sock.family)
        self._type = socket.SOCK_STREAM
        self._poller = select.poll()
        self._poller.register(sock.fileno(), select.POLLIN)
        gate.acceptors.append(self)

    def start(self) -> None:
        if not self._reading and not self._closed:
            self._reading = True
            self._loop.add_reader(self._sock.fileno(), self._ready)

    def close(self) -> None:
        self._closed = True
        self._pause()
        self._gate.close()
        # this process's copy of the listener goes too: if it is the last one, the kernel
        # refuses new connections instead of queueing them for no one
        self._sock.close()

    def _pause(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._sock.fileno())

    def _ready(self) -> None:
        gate = self._gate
        declined_at = self._declined_at
        stalled = declined_at is not None and self._loop.time() - declined_at > STALL
        room = gate.room(stalled)
        if room <= 0:
            if declined_at is None:
                self._declined_at = self._loop.time()
            self._pause()
            self._loop.call_later(POLL, self._look_again)
            return
        if not stalled:
            self._declined_at = None
        try:
            for _ in range(min(room, BATCH)):
                try:
                    fd, _ = self._sock._accept()  # type: ignore[attr-defined]  # see above
                except (BlockingIOError, InterruptedError):
                    self._declined_at = None  # nothing waits: whoever was to take it did
                    return
                except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: back off, keep serving
                    self._log.error("accept failed: %s", exc)
                    self._pause()
                    self._loop.call_later(POLL * 100, self.start)
                    return
                conn = Accepted(self._family, self._type, 0, fd)
                # the loop makes the socket non-blocking itself; uvloop sets TCP_NODELAY too
                if self._nodelay and self._family != socket.AF_UNIX:
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                gate.pending += 1
                if self._door is not None:
                    self._door.admit(conn, self._step, gate._set_up)
                else:
                    self._step(self._loop.connect_accepted_socket(self._factory, conn))
        finally:
            gate.publish()

    def _look_again(self) -> None:
        if self._closed or self._reading:
            return
        if not self._poller.poll(0):
            self._declined_at = None  # a sibling took what waited
        self.start()

    def _step(self, making: Coroutine[Any, Any, Any], _: Any = None) -> None:
        """Drive ``connect_accepted_socket`` as a task would, without the task.

        The coroutine only waits for its transport's first callback: resuming it from the
        future's own done-callback halves what accepting in Python costs (29.8 vs 15.0 us
        per connection, where uvloop's accept in C costs 15.3, measured here).
        """
        try:
            waiting = making.send(None)
        except StopIteration:
            return  # made: its connection_made counted it in (`AcceptGate._set_up`)
        except Exception as exc:  # the client went away before its transport was set up
            self._log.debug("accepted connection failed: %s", exc)
            self._gate._set_up()
            return
        waiting.add_done_callback(partial(self._step, making))
