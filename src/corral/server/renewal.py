"""A running worker's half of a renewal (master/renewal.py): new certificates, served from
the next handshake on, without a restart.

The master sends each renewal on the worker's orders socket (``SOCK_SEQPACKET``: one message
per ``recv``); the worker reads it on its loop, makes a context per new certificate from the
PEM in the message (tls/context.py: from memory, the key's file is not the worker's to read),
and serves them on the session contexts its listeners accept with (`corral.tls.context.renew`):
the connections open go on as they were, a handshake from then on gets the new certificate.
It then says ``renewed N`` on its heartbeat pipe, which the master waits for; a renewal
that cannot be served (the master made the same contexts first, so only a worker's own
trouble) is one line in the log, the old certificates serving on, and acknowledged too.

Messages that came before the loop read them (the worker was importing its application) are
read before the listeners are served (`Renewals.start`): no connection meets the old
certificate once the master has moved on.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable

from corral.tls.context import certificate_contexts, renew
from corral.tls.served import Renewal, TlsError
from corral.wire import Message, Renewed

__all__ = ["Renewals"]

_LARGEST = 1 << 22  # bytes of one message: more than any chain and key the master sends


class Renewals:
    """The worker's reader of its orders socket."""

    def __init__(
        self,
        sock: socket.socket,
        contexts: dict[str, ssl.SSLContext],
        send: Callable[[Message], None],
        log: logging.Logger,
    ) -> None:
        self.sock = sock
        self.contexts = contexts  # its listeners' session contexts, by address
        self.send = send  # a line to the heartbeat pipe
        self.log = log
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Act on what came already, then on each message as it comes."""
        self.sock.setblocking(False)
        self._readable()
        self.loop = loop
        loop.add_reader(self.sock.fileno(), self._readable)

    def _readable(self) -> None:
        while True:
            try:
                data = self.sock.recv(_LARGEST)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:  # the master is gone: its own checks drain the worker
                if self.loop is not None:
                    self.loop.remove_reader(self.sock.fileno())
                    self.loop = None
                return
            try:
                renewal = Renewal.decode(data)
            except ValueError as exc:
                self.log.error("TLS: a renewal from the master could not be read: %s", exc)
                continue
            self.apply(renewal)

    def apply(self, renewal: Renewal) -> None:
        """Serve ``renewal``'s certificates on this worker's listeners, then say so."""
        for address, served in renewal.listeners.items():
            context = self.contexts.get(address)
            if context is None:  # not one of this worker's listeners
                continue
            try:
                renew(context, served, certificate_contexts(served))
            except (TlsError, OSError) as exc:
                self.log.error(
                    "TLS: the new certificates of %s could not be served (%s); the old ones "
                    "serve on",
                    address,
                    exc,
                )
        self.send(Renewed(renewal.number))
