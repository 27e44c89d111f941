"""An answer from an application thread, buffered for its client (nginx's ``proxy_buffering``).

A WSGI application on a thread (``threads`` > 1) hands the bytes of a streamed answer to a
`BufferedAnswer` and goes on with its next request: the event loop sends them as the client
takes them. Up to ``response_buffer_size`` bytes wait in memory (nginx's ``proxy_buffers``);
past them the thread appends to the answer's spool, an unlinked temporary file of at most
``response_spool_size`` bytes (nginx's ``proxy_max_temp_file_size``; 0: no spool). Only when
both are full does the thread wait for the client, as it always did without them.

Owns: the answer's pieces in order (bytes in memory, ranges of the spool), the spool file,
and while the client does not read, the wait for it (the connection's send deadline runs, as
for `SendfileJob`: ``sendfile_job`` is this object then, so that `HttpConnection.expire` drops
the client and `HttpConnection.connection_lost` releases the spool). Must not: finish the
exchange before its last piece left, or write to a transport an earlier answer still fills.

Invariants:
- Bytes leave in the order the thread gave them: ``pieces`` is one queue of bytes and spool
  ranges (``[offset, length]``); the thread appends, the loop takes from the front.
- A client that stops reading holds next to no memory: once a wait for it lasts
  `SPILL_AFTER`, what waits in memory moves to the spool, and the thread writes there
  directly until the client has taken everything. On a plain socket the loop writes with
  os.write and os.sendfile on a duplicate of its descriptor (nothing waits in the transport's
  buffer); on TLS through the transport (it encrypts), whose buffer then holds up to its high
  water mark.
- The spool is truncated whenever the client has taken all of it, and closed when the answer
  ends or the connection is lost, whichever comes first.
- Every field is read and changed under ``cond``, the lock of the thread and the loop; the
  loop's disk writes (a spill) and socket writes never block (page cache, non-blocking socket).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange

# How long a wait for the client lasts before what waits in memory moves to the spool: long
# enough that a client reading at speed (whose socket is full for a moment, again and again)
# never costs a disk write, short enough that a stalled one holds its memory only briefly.
SPILL_AFTER = 0.1
# Bytes of the spool read at a time for a connection that cannot sendfile (TLS).
SLICE = 1 << 16
SENDFILE_MAX = 1 << 20
MEMORY = 1  # where the next piece goes (`BufferedAnswer._room`)
SPOOL = 2


class BufferedAnswer:
    """One streamed answer on its way from an application thread to the client."""

    __slots__ = (
        "cond",
        "conn",
        "direct",
        "dup",
        "ended",
        "exchange",
        "file",
        "finished",
        "keep_alive",
        "loop",
        "memory",
        "memory_limit",
        "pieces",
        "posted",
        "released",
        "sent",
        "slow",
        "spool_end",
        "spool_limit",
        "timer",
        "waiting",
        "watchdog",
    )

    def __init__(
        self, conn: HttpConnection, exchange: Exchange, memory: int, spool: int, watchdog: Any
    ) -> None:
        """``watchdog``: the request timeout's (`corral.apps.deadline.Watchdog`), stopped while
        the thread waits for the client; None: none."""
        self.conn = conn
        self.exchange = exchange
        self.loop = conn.loop
        self.memory_limit = memory
        self.spool_limit = spool
        self.watchdog = watchdog
        self.cond = threading.Condition(threading.Lock())
        self.pieces: deque[Any] = deque()  # bytes, or [offset, length] of the spool
        self.memory = 0  # bytes of the pieces in memory
        self.sent = 0  # bytes of the first piece (in memory) already sent
        self.file: Any = None  # the spool, made when first needed
        self.spool_end = 0  # the spool's size: where the next spooled bytes go
        self.posted = False  # a drain is scheduled on the loop
        self.waiting = False  # the loop waits for the client to read
        self.slow = False  # a wait lasted SPILL_AFTER: spool, not memory, until caught up
        self.timer: Any = None  # the spill's
        self.direct: bool | None = None  # os.write/os.sendfile on `dup`; None: not chosen yet
        self.dup = -1
        self.ended = False  # the thread gave the last piece
        self.keep_alive = False
        self.released = False  # the spool and the duplicate are closed
        self.finished = False  # the exchange is finished

    # -- the application thread's side -------------------------------------------------

    def put(self, data: bytes) -> bool:
        """Queue ``data`` for the client, waiting only when memory and spool are full.
        False: the client is gone."""
        size = len(data)
        with self.cond:
            while True:
                if self.released or self.conn.closed:
                    return False
                where = self._room(size)
                if where == MEMORY:
                    self.pieces.append(data)
                    self.memory += size
                    break
                if where == SPOOL and self._spool(data):
                    break
                if where == 0:
                    self._wait_for_client(size)
            self._post()
        return True

    def end(self, data: bytes, keep_alive: bool) -> None:
        """The answer's last bytes (b"": none): the exchange finishes once they left."""
        if data:
            self.put(data)
        with self.cond:
            self.ended = True
            self.keep_alive = keep_alive
            self._post()

    def wait_sent(self) -> None:
        """Wait until every piece left (before a sendfile, which goes around the pieces)."""
        with self.cond:
            if self.pieces and not self.released:
                self._suspended(lambda: not self.pieces or self.released or self.conn.closed)

    def _room(self, size: int) -> int:
        """Where ``size`` more bytes go now: MEMORY, SPOOL, or 0 (wait)."""
        if not self.slow and self.memory + size <= self.memory_limit:
            return MEMORY
        if self.spool_limit and self.spool_end + size <= self.spool_limit:
            return SPOOL
        if self.memory == 0:  # larger than both: it goes alone, as it would unbuffered
            return MEMORY
        return 0

    def _wait_for_client(self, size: int) -> None:
        self._suspended(lambda: self._room(size) or self.released or self.conn.closed)

    def _suspended(self, done: Any) -> None:
        """Lock held: wait until ``done()``; this is the client's time, not the application's."""
        watchdog = self.watchdog
        clock = watchdog.suspend() if watchdog is not None else None
        try:
            while not done():
                self.cond.wait(0.5)
        finally:
            if clock is not None:
                watchdog.resume(clock)

    def _post(self) -> None:
        if not (self.posted or self.waiting):
            self.posted = True
            self.loop.call_soon_threadsafe(self.drain)

    def _spool(self, data: bytes) -> bool:
        """Lock held: append ``data`` to the spool as the last piece. False: the spool cannot
        take it (the disk is full: the answer goes on without one)."""
        where = self._append(data)
        if where < 0:
            return False
        pieces = self.pieces
        last = pieces[-1] if pieces else None
        if type(last) is list and last[0] + last[1] == where:
            last[1] += len(data)
        else:
            pieces.append([where, len(data)])
        return True

    def _append(self, data: Any) -> int:
        """Lock held: write ``data`` at the spool's end; its offset (-1: not written)."""
        try:
            if self.file is None:
                import tempfile  # here: its import costs every worker 1 MiB (wsgi/input.py)

                self.file = tempfile.TemporaryFile(prefix="corral-answer-")  # noqa: SIM115
            fd = self.file.fileno()
            where = self.spool_end
            view = memoryview(data)
            while view:
                view = view[os.pwrite(fd, view, self.spool_end) :]
                self.spool_end = where + len(data) - len(view)
        except OSError:
            self.spool_limit = 0
            return -1
        return where

    # -- the loop's side ---------------------------------------------------------------

    def drain(self) -> None:
        """On the loop: send what the client takes now; wait for it to take more."""
        conn = self.conn
        with self.cond:
            self.posted = False
            if self.direct is False:
                self.waiting = False  # called back by the connection (on_writable)
            if conn.closed:
                self._release()
            else:
                if self.direct is None and not self._choose():
                    return
                if not (self._send_direct() if self.direct else self._send_through()):
                    return  # waits for the client
                if not self.released:  # (a reset: _send_direct released it)
                    self._caught_up()
            if not self.ended or self.finished:
                return
            self.finished = True
            self._release()
        conn.finish(self.exchange, self.keep_alive)

    def cancel(self) -> None:
        """The connection is gone (`HttpConnection.connection_lost`): release the spool."""
        self.drain()

    def _choose(self) -> bool:
        """Lock held, first drain: write around the transport (a plain socket) or through it.
        False: an earlier answer still fills the transport; this drain comes back."""
        conn = self.conn
        transport = conn.transport
        sock = None if conn.encrypted else transport.get_extra_info("socket")
        if sock is None:
            self.direct = False
            return True
        if transport.get_write_buffer_size():
            # as HttpConnection.sendfile: those bytes go first
            self.posted = True
            self.loop.call_later(0.001, self.drain)
            return False
        self.direct = True
        self.dup = os.dup(sock.fileno())
        return True

    def _send_direct(self) -> bool:
        """Lock held: write pieces to the socket until it is full (False) or all left."""
        pieces = self.pieces
        fd = self.dup
        try:
            while pieces:
                piece = pieces[0]
                if type(piece) is bytes:
                    self.sent += os.write(fd, memoryview(piece)[self.sent :])
                    if self.sent == len(piece):
                        pieces.popleft()
                        self.memory -= len(piece)
                        self.sent = 0
                    continue
                count = os.sendfile(fd, self.file.fileno(), piece[0], min(piece[1], SENDFILE_MAX))
                if count == 0:
                    raise OSError("the spool is shorter than its pieces")
                piece[0] += count
                piece[1] -= count
                if not piece[1]:
                    pieces.popleft()
        except BlockingIOError:
            return self._stall()
        except OSError:  # the client reset the connection: the answer cannot end
            self.conn.close(abort=True)
            self._release()
        return True

    def _send_through(self) -> bool:
        """Lock held: write pieces to the transport until it pauses (False) or all left."""
        conn = self.conn
        pieces = self.pieces
        while pieces:
            if conn.write_paused:
                return self._stall()
            piece = pieces.popleft()
            if type(piece) is bytes:
                self.memory -= len(piece)
                conn.write(piece)
                continue
            count = min(piece[1], SLICE)
            data = os.pread(self.file.fileno(), count, piece[0])
            piece[0] += count
            piece[1] -= count
            if piece[1]:
                pieces.appendleft(piece)
            conn.write(data)
        return True

    def _stall(self) -> bool:
        """Lock held: the client does not take more; wait for it (the send deadline runs)."""
        conn = self.conn
        if self.direct:
            conn.send_wait(True)  # each wait for the client restarts its deadline
            if not self.waiting:
                conn.sendfile_job = self
                self.loop.add_writer(self.dup, self.drain)
        else:
            conn.on_writable = self.drain  # the transport's pause runs the send deadline
        if not self.waiting:
            self.waiting = True
            if self.spool_limit and not self.slow and self.timer is None:
                self.timer = self.loop.call_later(SPILL_AFTER, self._spill)
        self.cond.notify_all()
        return False

    def _stop_waiting(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.waiting and self.direct:
            self.loop.remove_writer(self.dup)
            conn = self.conn
            if conn.sendfile_job is self:
                conn.sendfile_job = None
            conn.send_wait(False)
        self.waiting = False

    def _caught_up(self) -> None:
        """Lock held: every piece left."""
        self._stop_waiting()
        self.slow = False
        if self.spool_end:
            os.ftruncate(self.file.fileno(), 0)
            self.spool_end = 0
        self.cond.notify_all()

    def _spill(self) -> None:
        """The client has not read for SPILL_AFTER: what waits in memory moves to the spool."""
        with self.cond:
            self.timer = None
            if not self.waiting or self.released:
                return
            self.slow = True
            if self.memory and self.spool_end + self.memory <= self.spool_limit:
                self._spill_memory()
            self.cond.notify_all()

    def _spill_memory(self) -> None:
        pieces = self.pieces
        for index, piece in enumerate(pieces):
            if type(piece) is not bytes:
                continue
            data = memoryview(piece)[self.sent :] if index == 0 else piece
            where = self._append(data)
            if where < 0:
                return
            pieces[index] = [where, len(data)]
            self.memory -= len(piece)
            if index == 0:
                self.sent = 0

    def _release(self) -> None:
        """Lock held: the answer is over, or its client gone: close what it holds."""
        self._stop_waiting()
        if self.dup >= 0:
            os.close(self.dup)
            self.dup = -1
        if self.file is not None:
            self.file.close()
            self.file = None
        self.pieces.clear()
        self.memory = 0
        self.released = True
        self.cond.notify_all()
