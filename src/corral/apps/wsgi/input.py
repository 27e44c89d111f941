"""``wsgi.input`` streams.

Three kinds, chosen by the runner:
- :data:`EMPTY`: a request without a body (stateless, shared).
- :class:`BufferedInput`: the whole body arrives before the application runs
  (the inline runner never blocks the loop on a read, and a slow client never holds
  an application thread). Bodies larger than ``body_buffer_size`` spill from memory
  to an anonymous temporary file (in ``body_temp_dir``, deleted as it is made).
- :class:`StreamingInput`: the application runs on a thread while the body still
  arrives. The loop feeds it, the application thread reads it; the buffer is
  bounded (the connection stops reading the socket above ``high_water``) and the
  first read sends ``100 Continue`` when the client asked for it. With a request
  timeout, a read waiting for the client suspends the application's clock.
Every stream ends at the end of the body (``wsgi.input_terminated``). The
connection drives each through one interface: ``feed``, ``finish`` (the body is
complete), ``fail`` (it never will be: a waiting reader gets an error) and
``close`` (the exchange is over: release what it holds).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any


class ClientDisconnected(OSError):
    """The client went away, or sent a body that broke HTTP framing."""


class _ReadLines:
    """readlines() and iteration on top of readline()."""

    def readline(self, size: int | None = -1) -> bytes:  # pragma: no cover - overridden
        raise NotImplementedError

    def readlines(self, hint: int | None = -1) -> list[bytes]:
        lines: list[bytes] = []
        total = 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < hint <= total:
                return lines

    def __iter__(self) -> Iterator[bytes]:
        while True:
            line = self.readline()
            if not line:
                return
            yield line


class EmptyInput(_ReadLines):
    __slots__ = ()

    def feed(self, chunk: bytes) -> None:
        pass

    def finish(self) -> None:
        pass

    def fail(self) -> None:
        pass

    def close(self) -> None:
        pass

    def read(self, size: int | None = -1) -> bytes:
        return b""

    def readline(self, size: int | None = -1) -> bytes:
        return b""


EMPTY = EmptyInput()


class BufferedInput(_ReadLines):
    """A complete body, in memory up to ``spill`` bytes, in a temp file beyond."""

    __slots__ = ("_file",)

    def __init__(self, spill: int, directory: str | None = None) -> None:
        """``directory``: where a spilled body's file goes (None: the system's temp dir)."""
        import tempfile  # here: its import (shutil, bz2, lzma, random) costs every worker 1 MiB

        self._file: Any = tempfile.SpooledTemporaryFile(  # noqa: SIM115
            max_size=spill, dir=directory
        )

    def feed(self, chunk: bytes) -> None:
        self._file.write(chunk)

    def finish(self) -> None:
        self._file.seek(0)

    def fail(self) -> None:
        self._file.close()  # nobody reads a body before it is complete

    def read(self, size: int | None = -1) -> bytes:
        return self._file.read(-1 if size is None else size)

    def readline(self, size: int | None = -1) -> bytes:
        return self._file.readline(-1 if size is None else size)

    def close(self) -> None:
        self._file.close()


class StreamingInput(_ReadLines):
    """A body read by an application thread while the event loop still receives it.

    ``on_first_read`` runs (on the reading thread) before the first read waits;
    ``on_drained`` when the buffer falls below ``low_water`` after the loop was told
    to stop reading. Both must be thread-safe callables supplied by the connection.
    ``watchdog`` (a :class:`~corral.apps.deadline.Watchdog`, when ``request_timeout``
    is on) is told when a read waits for the client: that is not the application's time.
    """

    def __init__(
        self,
        high_water: int,
        on_first_read: Callable[[], object] | None,
        on_drained: Callable[[], object],
        watchdog: Any = None,
    ) -> None:
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._done = False
        self._failed = False
        self._cond = threading.Condition(threading.Lock())
        self.high_water = high_water
        self._on_first_read = on_first_read
        self._on_drained = on_drained
        self.paused = False  # set by the feeder when it stopped the socket
        self._watchdog = watchdog

    # -- loop side -------------------------------------------------------------

    def feed(self, chunk: bytes) -> bool:
        """Add body bytes; returns True when the feeder must stop reading.

        The paused flag is set here, under the lock, so that a reader draining
        the buffer right after cannot miss that it has to call ``on_drained``.
        """
        with self._cond:
            self._chunks.append(chunk)
            self._buffered += len(chunk)
            self._cond.notify()
            if self._buffered >= self.high_water and not self.paused:
                self.paused = True
                return True
            return False

    def finish(self) -> None:
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def fail(self) -> None:
        with self._cond:
            self._failed = True
            self._done = True
            self._cond.notify_all()

    def close(self) -> None:
        pass  # chunks only: nothing to release

    # -- application side ------------------------------------------------------

    def _wait(self) -> None:
        """Called with the lock held while the buffer is empty and the body not done."""
        if self._on_first_read is not None:
            callback, self._on_first_read = self._on_first_read, None
            self._cond.release()
            try:
                callback()
            finally:
                self._cond.acquire()
            if self._chunks or self._done:
                return
        watchdog = self._watchdog
        if watchdog is None:
            self._cond.wait()
            return
        clock = watchdog.suspend()
        try:
            self._cond.wait()
        finally:
            if clock is not None:
                watchdog.resume(clock)

    def _take(self, size: int) -> bytes:
        """Remove up to ``size`` bytes (all when negative) from the buffer; lock held."""
        chunks = self._chunks
        if size < 0 or size >= self._buffered:
            data = b"".join(chunks)
            chunks.clear()
        else:
            data = b"".join(chunks)
            chunks[:] = [data[size:]]
            data = data[:size]
        self._buffered -= len(data)
        if self.paused and self._buffered < self.high_water // 2:
            self.paused = False
            self._on_drained()
        return data

    def _check(self) -> None:
        if self._failed:
            raise ClientDisconnected("request body aborted")

    def read(self, size: int | None = -1) -> bytes:
        if size is None:
            size = -1
        with self._cond:
            if size < 0:
                parts = []
                while True:
                    self._check()
                    if self._chunks:
                        parts.append(self._take(-1))
                    if self._done:
                        self._check()
                        return b"".join(parts)
                    self._wait()
            if size == 0:
                return b""
            # like a file: n bytes, or fewer only at the end of the body; taking
            # what is buffered as it comes keeps the buffer (and the socket) moving
            parts = []
            while size > 0:
                self._check()
                if self._buffered:
                    data = self._take(size)
                    parts.append(data)
                    size -= len(data)
                elif self._done:
                    break
                else:
                    self._wait()
            return b"".join(parts)

    def readline(self, size: int | None = -1) -> bytes:
        if size is None:
            size = -1
        parts = []
        with self._cond:
            while size != 0:
                self._check()
                if self._buffered:
                    data = b"".join(self._chunks)
                    self._chunks[:] = [data]
                    end = data.find(b"\n") + 1 or len(data)
                    if size >= 0:
                        end = min(end, size)
                        size -= end
                    taken = self._take(end)
                    parts.append(taken)
                    if taken.endswith(b"\n"):
                        break
                elif self._done:
                    break
                else:
                    self._wait()
        return b"".join(parts)
