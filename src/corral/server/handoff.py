"""Hand a client connection to a worker of another application (fd passing on a unix socket).

Owns: the hand-off byte protocol, its sending side (:class:`HandoffSender`), its receiving
side (:class:`HandoffServer`) and :func:`message_end`, which finds where a request ends in
the raw bytes of a connection. It knows nothing of routing or HTTP answers: the routed
connection (``routed.py``) decides when to hand off and what to do when it fails.

Each application has one hand-off socket: an ``AF_UNIX``/``SOCK_STREAM`` listening socket
bound by the master before it forks, inherited by every worker of that application, each of
which accepts on it from its loop. A worker whose request routes to application B:

1. connects to B's hand-off address (refused or missing: the hand-off failed, 502; the
   backlog full: 503);
2. waits for B's greeting, the one byte ``R`` that the accepting worker sends as soon as it
   has accepted (EOF or nothing within the timeout: 503). Until then nothing has been
   given away, so the sender can still answer the client itself; the greeting is what
   tells a live worker from a socket that is only held open (by the master while B's
   workers are gone or reloading);
3. sends one frame, the client's descriptor riding as ``SCM_RIGHTS`` on its first bytes::

       b"CHO1" | u32 header length | u32 payload length | header (JSON) | payload

   header ``{"pass": PASS, "sockname": LISTENER_ADDRESS, "hops": N}``: the listener's pass
   target (the receiver routes the connection's later requests with it), the listener's
   address as the sender's connection knew it (for the environ), and how many hand-offs the
   connection has had (bounds a loop between workers whose configurations disagree); and
   ``"peer": [ADDRESS, PORT]`` when a PROXY protocol header named the client (the socket's
   own peer is the proxy); ``"counted": true`` when the listener's rate limit counted the
   request already (the receiver does not count it again).
   payload: the raw bytes received on the connection from the first byte of the request
   being handed off (leading CRLFs at most before it) up to the last byte read, whatever
   they hold (the rest of its body, pipelined requests).
   A relayed connection (``relay.py``: the far end of a socketpair, its TLS session held by
   the relaying worker) has a second descriptor after the first, the relay's *watch*: an end
   of another pair, whose other end the relaying worker closes when it drains;
4. once the first ``sendmsg`` has passed the descriptor, the connection belongs to B: the
   sender finishes the frame, then closes its own copies (no ``shutdown``, nothing written
   to the client) and forgets the connection.

The receiver reads the frame (at most ``timeout`` seconds), closes the unix connection and
adopts the descriptor as a new connection of its own, fed the payload before anything it
reads from the socket; it answers nothing on the unix socket after the greeting.

Invariants: the client's bytes are consumed by exactly one worker at a time (the sender has
stopped reading before it connects, and the receiver reads only after adopting); a response
is written by exactly one worker (the sender writes its 502/503 only when the descriptor was
never sent, and it sends only after every earlier response left its write buffer); the
descriptor passed is a duplicate, so a client that goes away meanwhile cannot make the
sender pass a reused descriptor number.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
from collections.abc import Callable
from typing import Any

import httptools

MAGIC = b"CHO1"
GREETING = b"R"
_PREFIX = struct.Struct(">4sII")
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
HEADER_MAX = 64 * 1024
PAYLOAD_MAX = 64 * 1024 * 1024  # a sanity bound: a sender holds at most a few reads

# What the sender's ``done`` callback receives: the hand-off happened, or the status the
# client must be answered with.
HANDED = 0
BAD_GATEWAY = 502  # no application behind the address: refused, missing, not a socket
UNAVAILABLE = 503  # the address is there but no worker took the connection in time


def encode_frame(header: dict[str, Any], payload: bytes) -> bytes:
    """The frame that carries ``header`` and ``payload`` (the descriptor rides on it)."""
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return _PREFIX.pack(MAGIC, len(head), len(payload)) + head + payload


def decode_frame(data: bytes | bytearray) -> tuple[dict[str, Any], bytes] | None:
    """``(header, payload)`` once ``data`` holds a whole frame, None while it is short.

    Raises ``ValueError`` for anything that is not a frame.
    """
    if len(data) < _PREFIX.size:
        return None
    magic, head_length, payload_length = _PREFIX.unpack_from(data)
    if magic != MAGIC or head_length > HEADER_MAX or payload_length > PAYLOAD_MAX:
        raise ValueError("not a hand-off frame")
    end = _PREFIX.size + head_length + payload_length
    if len(data) < end:
        return None
    if len(data) > end:
        raise ValueError("bytes after the hand-off frame")
    header = json.loads(bytes(data[_PREFIX.size : _PREFIX.size + head_length]))
    if not isinstance(header, dict):
        raise ValueError("hand-off header is not an object")
    return header, bytes(data[_PREFIX.size + head_length : end])


class _Counter:
    __slots__ = ("completed",)

    def __init__(self) -> None:
        self.completed = 0

    def on_message_complete(self) -> None:
        self.completed += 1


def _completed(data: bytes) -> int:
    counter = _Counter()
    # what comes after the requests counted is not for this parser to judge
    with contextlib.suppress(httptools.HttpParserError):
        httptools.HttpRequestParser(counter).feed_data(data)
    return counter.completed


def message_end(raw: bytes | bytearray, messages: int) -> int:
    """The offset in ``raw`` just past its ``messages``-th complete request.

    ``raw`` must start at the first byte of a request (leading CRLFs allowed). The
    connection's own parser gives no offsets, so llhttp itself is the measure: a fresh
    parser counts the requests complete in a prefix, and the count only grows with the
    prefix, so a bisection finds the shortest prefix holding ``messages`` of them; llhttp
    completes a request on its last byte, so that prefix ends exactly where the next
    request begins. Cost: about log2(len(raw)) parses of at most ``raw``; it runs only
    when a pipelined request is handed off.
    """
    low, high = 0, len(raw)
    while low < high:
        middle = (low + high) // 2
        if _completed(bytes(raw[:middle])) >= messages:
            high = middle
        else:
            low = middle + 1
    return low


class HandoffSender:
    """One hand-off attempt, on the loop: connect, greeting, frame with the descriptor.

    ``done(result)`` is called exactly once, unless :meth:`cancel` came first: ``HANDED``
    once the descriptor is B's, else the status (502/503) the client must be answered.
    ``frame()`` makes the frame when it is sent (after the greeting: it carries what was read
    until then). ``watch_fd``: a relayed connection's watch, sent with it (-1: none).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        address: str,
        client_fd: int,
        frame: Callable[[], bytes],
        done: Callable[[int], None],
        timeout: float,
        watch_fd: int = -1,
    ) -> None:
        self.loop = loop
        self.address = address
        self.fd = os.dup(client_fd)
        self.watch = os.dup(watch_fd) if watch_fd >= 0 else -1
        self.make_frame = frame
        self.frame: memoryview | None = None
        self.done: Callable[[int], None] | None = done
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.committed = False  # the descriptor was sent: the connection is B's
        self.watching = 0  # 1: reader, 2: writer

    def start(self) -> None:
        sock = self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(self.address)
        except (BlockingIOError, InterruptedError):
            self._end(UNAVAILABLE)  # a unix socket's backlog is full: nobody keeps up
            return
        except OSError:
            self._end(BAD_GATEWAY)
            return
        self.timer = self.loop.call_later(self.timeout, self._end, UNAVAILABLE)
        self._watch(1, self._on_greeting)

    def _watch(self, kind: int, callback: Callable[[], None]) -> None:
        self._unwatch()
        assert self.sock is not None
        if kind == 1:
            self.loop.add_reader(self.sock.fileno(), callback)
        else:
            self.loop.add_writer(self.sock.fileno(), callback)
        self.watching = kind

    def _unwatch(self) -> None:
        if self.watching and self.sock is not None:
            if self.watching == 1:
                self.loop.remove_reader(self.sock.fileno())
            else:
                self.loop.remove_writer(self.sock.fileno())
        self.watching = 0

    def _on_greeting(self) -> None:
        assert self.sock is not None
        try:
            greeting = self.sock.recv(1)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            greeting = b""
        if greeting != GREETING:
            self._end(UNAVAILABLE)  # the worker went away between accept and greeting
            return
        self._send()

    def _send(self) -> None:
        sock = self.sock
        assert sock is not None
        if self.frame is None:
            self.frame = memoryview(self.make_frame())
        try:
            while self.frame:
                if self.committed:
                    sent = sock.send(self.frame)
                else:
                    fds = array.array("i", [self.fd] if self.watch < 0 else [self.fd, self.watch])
                    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
                    sent = sock.sendmsg([self.frame], rights)
                    self.committed = True
                self.frame = self.frame[sent:]
        except (BlockingIOError, InterruptedError):
            if self.watching != 2:
                self._watch(2, self._send)
            return
        except OSError:
            # before the descriptor left, the client is still ours to answer; after, the
            # receiver has a truncated frame and drops it, and the connection with it
            self._end(HANDED if self.committed else UNAVAILABLE)
            return
        self._end(HANDED)

    def cancel(self) -> None:
        """The client connection is gone: stop, without calling ``done``."""
        self.done = None
        self._end(HANDED)

    def _end(self, result: int) -> None:
        if self.fd < 0:
            return
        if self.committed:
            result = HANDED  # the descriptor left: whatever happens now is B's
        self._unwatch()
        if self.timer is not None:
            self.timer.cancel()
        if self.sock is not None:
            self.sock.close()
        os.close(self.fd)
        self.fd = -1
        if self.watch >= 0:
            os.close(self.watch)
            self.watch = -1
        done, self.done = self.done, None
        if done is not None:
            done(result)


class HandoffServer:
    """Accepts hand-offs on this application's hand-off socket; ``adopt(sock, header,
    payload, watch)`` takes each connection received (on the loop); ``watch``: a relayed
    connection's (relay.py), else None."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        adopt: Callable[[socket.socket, dict[str, Any], bytes, socket.socket | None], None],
        log: logging.Logger,
        timeout: float,
    ) -> None:
        self.loop = loop
        self.sock = sock
        self.adopt = adopt
        self.log = log
        self.timeout = timeout
        self.closed = False
        self.receiving: set[_Incoming] = set()  # greeted, their frame not read yet

    def start(self) -> None:
        self.sock.setblocking(False)
        self.loop.add_reader(self.sock.fileno(), self._accept)

    def close(self) -> None:
        """Stop accepting (drain): hand-offs under way (`receiving`) are still read and
        adopted."""
        if not self.closed:
            self.closed = True
            self.loop.remove_reader(self.sock.fileno())
            self.sock.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self.log.warning("hand-off accept failed: %s", exc)
                return
            if not from_sibling(conn):
                conn.close()
                self.log.warning("hand-off refused: the peer is not a worker of this server")
                continue
            _Incoming(self, conn).start()


def from_sibling(conn: socket.socket) -> bool:
    """Whether the peer of a hand-off connection is a worker of this worker's master: any
    other process reaching the address (an abstract one has no file permissions) could
    otherwise pass a request past the routes, to any application."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid = _PEERCRED.unpack(creds)[0]
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            stat = stream.read()
    except OSError:
        return False
    fields = stat.rpartition(b")")[2].split()  # after "PID (COMMAND)": state, ppid, ...
    return len(fields) > 1 and int(fields[1]) == os.getppid()


class _Incoming:
    """One hand-off being received: greeting sent, frame and descriptor read."""

    def __init__(self, server: HandoffServer, conn: socket.socket) -> None:
        self.server = server
        self.conn = conn
        self.buffer = bytearray()
        self.fds: list[int] = []
        self.timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        conn = self.conn
        conn.setblocking(False)
        try:
            conn.send(GREETING)
        except OSError:
            conn.close()  # the sender gave up already
            return
        loop = self.server.loop
        self.server.receiving.add(self)
        self.timer = loop.call_later(self.server.timeout, self._fail, "timed out")
        loop.add_reader(conn.fileno(), self._read)

    def _read(self) -> None:
        try:
            data, fds, _flags, _address = socket.recv_fds(self.conn, 1 << 16, 4)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._fail(str(exc))
            return
        self.fds.extend(fds)
        if not data:
            self._fail("the sender closed before the frame was complete")
            return
        self.buffer += data
        try:
            frame = decode_frame(self.buffer)
        except ValueError as exc:
            self._fail(str(exc))
            return
        if frame is None:
            return
        if len(self.fds) not in (1, 2):
            self._fail(f"{len(self.fds)} descriptors with the frame")
            return
        self._stop()
        fds, self.fds = self.fds, []
        sockets = []
        for fd in fds:
            try:
                sockets.append(socket.socket(fileno=fd))
            except OSError as exc:
                os.close(fd)
                self.server.log.warning("hand-off: the descriptor is not a socket: %s", exc)
        if len(sockets) < len(fds):
            for sock in sockets:
                sock.close()
            return
        header, payload = frame
        self.server.adopt(sockets[0], header, payload, sockets[1] if len(sockets) > 1 else None)

    def _stop(self) -> None:
        self.server.receiving.discard(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.conn.fileno() >= 0:
            self.server.loop.remove_reader(self.conn.fileno())
            self.conn.close()

    def _fail(self, why: str) -> None:
        self._stop()
        for fd in self.fds:
            os.close(fd)  # the client's copy only: the socket is not shut down
        self.fds = []
        self.server.log.warning("hand-off dropped: %s", why)
