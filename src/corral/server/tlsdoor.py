"""What comes before the TLS handshake on an HTTPS listener: the PROXY header, and a client
that speaks plain HTTP to the HTTPS port.

The connections of an HTTPS listener are accepted here (`TlsAcceptor`, or a balanced pool's
`corral.server.acceptor.BalancedAcceptor`) and admitted (`TlsDoor.admit`) to corral's TLS
transport (`corral.server.tlstransport.TlsTransport`), which makes the handshake within
``tls_handshake_timeout`` of the accept and then the connection (`HttpConnection`):

- Without the PROXY protocol the socket goes to the transport at once; it looks at the first
  byte it reads: a TLS record (0x16, a handshake's first byte) begins the handshake; an
  upper-case letter, the start of a request line, gets a 400 saying that plain HTTP was sent
  to an HTTPS port (nginx answers so too), and the connection is closed; anything else is
  closed without a word.
- With it, the header is read here from the socket, exactly its bytes and no more (the peer
  checked against ``proxy_allow_from`` first, as on a plain listener:
  `corral.server.proxied`), the socket's first bytes peeked at (``MSG_PEEK``) when they
  arrive; the client the header names becomes the connection's peer
  (`HttpConnection.given_client`). What follows it is looked at as above, then the socket
  goes to the transport.
- Whatever a client sends, it must have said that much within ``tls_handshake_timeout`` of its
  accept, or it is closed. Nothing waits on a client: the door is a reader callback and a
  timer per connection (with the PROXY protocol), the transport a timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from corral.http.proxyheader import ProxyHeaderError, ProxyHeaderParser
from corral.server.acceptor import Accepted
from corral.server.proxied import describe_peer
from corral.server.tlstransport import PLAIN_HTTP_ANSWER, TlsTransport

__all__ = ["PLAIN_HTTP_ANSWER", "TlsAcceptor", "TlsDoor"]

_HANDSHAKE = 0x16  # the content type of a TLS handshake record: every ClientHello starts so
_PEEK = 16 + 65535  # at most a PROXY v2 header (its length field's most)
_BATCH = 16  # connections accepted per readiness of the listener


class TlsDoor:
    """One HTTPS listener's door, for one worker: its plan's context and PROXY protocol."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        plan: Any,
        factory: Callable[[], Any],
        handshake_timeout: float,
        log: logging.Logger,
    ) -> None:
        self.loop = loop
        self.context = plan.tls
        self.proxy = plan.tls_proxy  # the PROXY protocol's `ProxyPlan`, None without it
        self.factory = factory
        self.timeout = handshake_timeout
        self.log = log
        # connections at the door or in their handshake: not yet the worker's connections, but
        # a drain waits for them too (a client in its handshake must not meet the exit)
        self.arriving = 0

    def admit(
        self,
        sock: socket.socket,
        connect: Callable[[Coroutine[Any, Any, Any]], None],
        failed: Callable[[], None],
    ) -> None:
        """Look at what ``sock`` (accepted, non-blocking) sends first; on a handshake, pass
        ``connect`` the coroutine that makes its TLS connection, else close it and call
        ``failed``."""
        self.arriving += 1
        if self.proxy is not None:
            _Arrival(self, sock, connect, failed).start()
            return
        connect(
            self._opened(self.loop.connect_accepted_socket(partial(self._direct, failed), sock))
        )

    def _direct(self, failed: Callable[[], None]) -> TlsTransport:
        """The transport of a connection without a PROXY header: it looks at the first byte
        itself."""
        return TlsTransport(
            self.loop,
            self.context,
            self.factory,
            self.timeout,
            partial(self._finished, failed),
            True,
        )

    def _finished(self, failed: Callable[[], None], ok: bool, exc: BaseException | None) -> None:
        """A connection's handshake ended: the connection is made (``ok``), or not (the
        client's doing: a bad certificate, a timeout, a protocol it may not use, no TLS)."""
        self.arriving -= 1
        if not ok:
            if exc is not None:
                self.log.debug("TLS handshake failed: %s", exc)
            failed()

    async def _opened(self, making: Coroutine[Any, Any, Any]) -> Any:
        """The socket's plain transport made (its handshake then begins), or not: then the
        connection no longer arrives (a made one does until its handshake ends)."""
        try:
            return await making
        except BaseException:
            self.arriving -= 1
            raise


class _Arrival:
    """One connection at the door."""

    __slots__ = ("client", "connect", "consumed", "door", "failed", "sock", "timer")

    def __init__(
        self,
        door: TlsDoor,
        sock: socket.socket,
        connect: Callable[[Coroutine[Any, Any, Any]], None],
        failed: Callable[[], None],
    ) -> None:
        self.door = door
        self.sock = sock
        self.connect = connect
        self.failed = failed
        self.client: tuple[str, int] | None = None
        # the PROXY header's bytes read so far (None: no header expected, or read already)
        self.consumed: bytes | None = None
        self.timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        door = self.door
        self.sock.setblocking(False)
        if door.proxy is not None:
            try:
                peer = self.sock.getpeername()
            except OSError:
                self._close()
                return
            if not door.proxy.allows(peer):
                door.log.warning(
                    "PROXY protocol: connection from %s refused: not in proxy_allow_from",
                    describe_peer(peer),
                )
                self._close()
                return
            self.consumed = b""
        self.timer = door.loop.call_later(door.timeout, self._late)
        door.loop.add_reader(self.sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            seen = self.sock.recv(_PEEK, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close()
            return
        if not seen:  # the client left
            self._close()
            return
        if self.consumed is not None:
            seen = self._proxy_header(seen)
            if not seen:
                return  # the header is not whole yet, or nothing follows it yet
        first = seen[0]
        if first == _HANDSHAKE:
            self._hand_over()
        elif 0x41 <= first <= 0x5A:  # "A" to "Z": a request line's method
            self._stop()
            with contextlib.suppress(OSError):  # a small answer to an empty buffer
                self.sock.send(PLAIN_HTTP_ANSWER)
                self.sock.shutdown(socket.SHUT_WR)
            self._close()
        else:
            self._close()

    def _proxy_header(self, seen: bytes) -> bytes:
        """Read the PROXY header's bytes among ``seen`` (peeked) from the socket, no more; what
        follows it (still in the socket), b"" while there is nothing yet."""
        door = self.door
        consumed = self.consumed
        assert consumed is not None and door.proxy is not None
        parser = ProxyHeaderParser(door.proxy.v1, door.proxy.v2)
        try:
            rest = parser.feed(consumed + seen)
            # every byte seen is the header's until it is whole
            take = len(seen) if rest is None else len(seen) - len(rest)
            if take:
                self.sock.recv(take)
        except ProxyHeaderError as exc:
            door.log.warning(
                "PROXY protocol: connection from %s closed: %s",
                describe_peer(self._peer()),
                exc,
            )
            self._close()
            return b""
        except OSError:
            self._close()
            return b""
        if rest is None:
            self.consumed = consumed + seen
            return b""
        self.consumed = None
        self.client = parser.client
        return rest

    def _hand_over(self) -> None:
        self._stop()
        door = self.door
        client = self.client
        factory = door.factory
        if client is not None:
            made = factory

            def factory() -> Any:  # the header's client is the connection's peer
                conn = made()
                conn.given_client = client
                return conn

        finished = partial(door._finished, self.failed)

        def transport() -> TlsTransport:
            return TlsTransport(door.loop, door.context, factory, door.timeout, finished)

        self.connect(door._opened(door.loop.connect_accepted_socket(transport, self.sock)))

    def _late(self) -> None:
        self.timer = None
        self._close()

    def _stop(self) -> None:
        """Stop watching the socket (it is answered, closed or handed over)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        with contextlib.suppress(OSError, ValueError):  # (a socket closed already)
            self.door.loop.remove_reader(self.sock.fileno())

    def _close(self) -> None:
        self._stop()
        # what the client sent and nobody read would make the close a reset (RST), which may
        # discard an answer on its way: it is read and dropped first
        with contextlib.suppress(OSError):
            while self.sock.recv(65536):
                pass
        self.sock.close()
        self.door.arriving -= 1
        self.failed()

    def _peer(self) -> Any:
        try:
            return self.sock.getpeername()
        except OSError:
            return None


class TlsAcceptor:
    """The accept loop of an HTTPS listener in a pool whose workers accept for themselves
    (a balanced pool's acceptor admits through the door itself): each connection goes to the
    door, each handshake's connection is made in a task of its own."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, door: TlsDoor):
        self._loop = loop
        self._sock = sock
        self._door = door
        self._reading = False
        self._closed = False
        self._family = int(sock.family)
        uvloop = type(loop).__module__.startswith("uvloop")
        self._nodelay = self._family != socket.AF_UNIX and not uvloop

    def start(self) -> None:
        if not self._reading and not self._closed:
            self._reading = True
            self._sock.setblocking(False)
            self._loop.add_reader(self._sock.fileno(), self._ready)

    def close(self) -> None:
        self._closed = True
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._sock.fileno())
        # this process's copy of the listener goes too (as the loop's own server closes it)
        self._sock.close()

    def _ready(self) -> None:
        for _ in range(_BATCH):
            try:
                fd, _ = self._sock._accept()  # type: ignore[attr-defined]  # as acceptor.py
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: back off, keep serving
                self._door.log.error("accept failed: %s", exc)
                self.close_for_a_while()
                return
            # a socket whose family and type are plain numbers (acceptor.Accepted: no enum
            # conversions); the loop or the door makes it non-blocking
            conn = Accepted(self._family, socket.SOCK_STREAM, 0, fd)
            if self._nodelay:  # (uvloop sets TCP_NODELAY itself)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._door.admit(conn, self._connect, _nothing)

    def close_for_a_while(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._sock.fileno())
            self._loop.call_later(0.1, self.start)

    def _connect(self, making: Coroutine[Any, Any, Any], _: Any = None) -> None:
        """Drive ``connect_accepted_socket`` without a task (as
        `corral.server.acceptor.BalancedAcceptor._step` does): it only waits for its
        transport's first callback."""
        try:
            waiting = making.send(None)
        except StopIteration:
            return  # the socket's transport is made: the handshake goes on there
        except Exception as exc:  # the client went away before its transport was set up
            self._door.log.debug("accepted connection failed: %s", exc)
            return
        waiting.add_done_callback(partial(self._connect, making))


def _nothing() -> None:
    return None
