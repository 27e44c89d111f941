"""A request's body between its connection and the application's ``receive()`` (`AsgiBody`).

The connection feeds it (``feed``, ``finish``, ``fail``) as the request arrives; the request's
cycle (runner.py's `AsgiCycle.receive`) takes what came and waits on ``waiter`` for the rest.
`AsgiBody.feed` returns True past `BODY_HIGH_WATER` buffered bytes: the connection then stops
reading the socket (and its body deadline, the wait being the application's), and
``receive()`` reads it again once it took the buffer (`HttpConnection.resume_body`).

A request without a body waits in the pipeline with `EMPTY`, then gets an `AsgiBody` of its
own when its cycle starts (`AsgiAdapter.run`), complete and empty: the connection fails every
pending exchange's body when the client goes away, which is how ``receive()`` learns of the
disconnect for every request alike.
"""

from __future__ import annotations

from typing import Any

# Bytes of a request body buffered before the socket stops being read.
BODY_HIGH_WATER = 256 * 1024


class _EmptyBody:
    """The body of a request without one until it starts (`AsgiAdapter.run` gives it its
    own): the connection may fail or close it while it waits in the pipeline."""

    __slots__ = ()

    def feed(self, chunk: bytes) -> bool:  # pragma: no cover - never fed
        return False

    def finish(self) -> None:
        pass

    def fail(self) -> None:
        pass

    def close(self) -> None:
        pass


EMPTY = _EmptyBody()


class AsgiBody:
    """A request's body between the connection (``feed``/``finish``/``fail``) and the
    application's ``receive()``, which waits on ``waiter`` for whatever comes next."""

    __slots__ = ("chunks", "done", "failed", "given", "over", "size", "waiter")

    def __init__(self, done: bool = False) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.done = done  # the whole body arrived
        self.failed = False  # it never will, or the client went away
        self.given = False  # receive() gave its last http.request
        self.over = False  # the buffer passed the high water: the socket is not read
        self.waiter: Any = None  # a future while receive() waits

    def feed(self, chunk: bytes) -> bool:
        self.chunks.append(chunk)
        self.size += len(chunk)
        self.wake()
        if self.size > BODY_HIGH_WATER:
            self.over = True
            return True
        return False

    def finish(self) -> None:
        self.done = True
        self.wake()

    def fail(self) -> None:
        self.failed = True
        self.wake()

    def close(self) -> None:
        self.chunks = []
        self.size = 0

    def wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        release(waiter)

    def take(self) -> bytes:
        chunks = self.chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self.chunks = []
        self.size = 0
        return data


def release(waiter: Any) -> None:
    """Let whoever awaits ``waiter`` (a future, or None: nobody) go on."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
