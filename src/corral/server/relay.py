"""The relay: how a request on a TLS connection reaches another application's worker.

A hand-off (handoff.py) moves the client's socket to a worker of another application; a TLS
session cannot move with it (its keys, sequence numbers and buffers live in this process's
OpenSSL). So a routed connection whose transport this worker decrypts is handed off as one end
of a socketpair instead, by the same hand-off, and this worker relays between the two::

    client ══ TLS ══ this worker (the session) ── socketpair ── the other application's worker

- The other worker receives the pair's far end as it receives a handed-off client socket: the
  frame carries the bytes already read from the request on, and its header says what the far
  end cannot say by itself: the client's address (``peer``), the listener's local address
  (``local``) and the TLS facts (``tls``: the SSL_* keys and the ASGI tls extension,
  corral/tls/facts.py), which make the connection ``encrypted`` there too (https, wss).
- The far end then moves as a plain connection does: a later request that routes to a third
  application is handed off again, descriptor and header, by whichever worker holds the end;
  the relay stays where the session is, one per connection however many hand-offs follow.
- A request routed to this worker's own application before any hand-off is served here,
  without the hop; after one, every request of the connection goes through the relay.

The relay (`Relay`) becomes the TLS transport's protocol, and the near end's transport gets a
protocol of its own (`_NearEnd`). Bytes go each way as they come, with backpressure: a side
whose write buffer passes its high-water mark pauses reading on the other side, so a client
that does not read stops the application's worker writing (its ``send_timeout`` then runs), and
a worker that does not read stops the client. What each side's ending does:

- the client leaves (close_notify, EOF, reset): over TLS the transport closes then, whatever
  is still to come, so the near end is aborted and the other worker sees its client go;
- the other worker closes its end (an answer that said ``Connection: close``, its keep-alive,
  header or body timeout, its drain, its death): the TLS transport is closed once what it
  holds is sent (close_notify), or aborted ``send_timeout`` later when the client does not read
  it; when nothing at all came back through the relay the client gets a 502 first (the worker
  died, or dropped the hand-off, before answering).

The HTTP limits and timeouts are the other worker's, applied to the far end as to any
connection: the relay has no deadline of its own while both sides are open.

A relaying worker that drains cannot hand its sessions to anyone, and the far end may by then
be held by a worker that does not drain (a new one of another application, after a reload):
so with the far end goes the *watch*, the far end of a second pair, from holder to holder as
the connection moves (routed.py). When the relaying worker drains it closes its end of the
watch (`Relay.drain`); the holder, reading EOF, answers the connection's next request with
``Connection: close`` and then closes its end, which ends the relay as above: no request is
cut, and the drain waits only for the requests in progress (an idle connection, for its
holder's keep-alive timeout). A draining worker waits for its relays as for its connections
(``Routing.relays``), up to its graceful timeout.

Invariants: bytes are relayed in order and unchanged, each direction by one callback; the
frame carried every byte the connection read (routed.py makes it as it sends it, and the
relay starts in the same callback), and the TLS side reads nothing more until the near end's
transport exists.
"""

from __future__ import annotations

import asyncio
import socket
from functools import partial
from typing import Any

from corral.http.errors import error_response

__all__ = ["Relay"]


class Relay:
    """One TLS connection relayed to a socketpair's near end: from the hand-off of its far end
    on, the protocol of the connection's TLS transport (``conn``'s, which stops being served)."""

    __slots__ = (
        "answered",
        "ending",
        "eof",
        "log",
        "loop",
        "making",
        "near",
        "pending",
        "relays",
        "server",
        "timer",
        "tls",
        "tls_closed",
        "watch",
    )

    def __init__(self, conn: Any, near: socket.socket, watch: socket.socket) -> None:
        """``near``: the pair's end kept here; ``watch``: the watch's end kept here."""
        routing = conn.plan.routing
        self.loop: asyncio.AbstractEventLoop = conn.loop
        self.tls: Any = conn.transport
        self.server = conn.server  # its prefix (the 502) and send_timeout
        self.relays: set[Relay] = routing.relays
        self.log = routing.log
        self.near: Any = None  # the near end's transport, once made
        self.pending = b""  # read before the near end's transport exists (its first bytes)
        self.eof = False  # the client ended before the near end's transport was made
        self.answered = False  # a byte came back through the relay
        self.ending = False  # the far end closed: the TLS side is closing
        self.tls_closed = False
        self.timer: asyncio.TimerHandle | None = None
        self.watch: socket.socket | None = watch
        self.relays.add(self)
        self.tls.set_protocol(self)
        making = self.loop.connect_accepted_socket(partial(_NearEnd, self), near)
        self.making: asyncio.Task[Any] | None = self.loop.create_task(making)  # (kept: a task
        self.making.add_done_callback(self._made)  # only weakly referenced is collectable)
        if conn.server.draining:  # handed off as the drain began: its next request is its last
            self.drain()

    def drain(self) -> None:
        """This worker drains: the far end's holder makes the connection's next request its
        last (it reads EOF on the watch)."""
        if self.watch is not None:
            self.watch.close()
            self.watch = None

    def _made(self, task: asyncio.Task[Any]) -> None:
        self.making = None
        if task.cancelled() or task.exception() is None:
            return
        self.log.warning("relay: the pair's transport could not be made: %s", task.exception())
        self._far_closed()

    def _near_made(self, near: Any) -> None:
        if self.tls_closed:
            near.abort()
            return
        self.near = near
        if self.pending:
            near.write(self.pending)
            self.pending = b""
        if self.eof:
            near.write_eof()
        else:
            self.tls.resume_reading()  # paused by the connection when its hand-off began

    # -- the TLS transport's protocol ---------------------------------------------------

    def connection_made(self, transport: Any) -> None:  # pragma: no cover
        raise AssertionError("a relay takes over a made transport")

    def data_received(self, data: bytes) -> None:
        if self.ending:
            return  # the far end is gone: nobody reads it
        if self.near is None:
            self.pending += data
        else:
            self.near.write(data)

    def eof_received(self) -> None:
        # the client's close_notify; over TLS the transport closes whatever this returns
        if self.near is None:
            self.eof = True
        elif not self.ending:
            self.near.write_eof()

    def connection_lost(self, exc: Exception | None) -> None:
        self.tls_closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.relays.discard(self)
        self.drain()  # (the watch's end goes with the relay)
        if self.near is not None and not self.ending:
            self.near.abort()  # the client is gone: the other worker sees it go

    def pause_writing(self) -> None:
        if self.near is not None:
            self.near.pause_reading()

    def resume_writing(self) -> None:
        if self.near is not None and not self.ending:
            self.near.resume_reading()

    # -- from the near end -----------------------------------------------------------------

    def _answer(self, data: bytes) -> None:
        self.answered = True
        if not self.tls_closed:
            self.tls.write(data)

    def _far_closed(self) -> None:
        """The other worker closed its end (or died): close the TLS side once it is sent."""
        if self.ending:
            return
        self.ending = True
        if self.tls_closed:
            return
        if not self.answered:
            self.tls.write(error_response(502, self.server.prefix))
        self.tls.close()
        self.timer = self.loop.call_later(self.server.send_timeout, self.tls.abort)


class _NearEnd:
    """The protocol of the near end's transport: what the other worker writes goes to the
    client."""

    __slots__ = ("relay",)

    def __init__(self, relay: Relay) -> None:
        self.relay = relay

    def connection_made(self, transport: Any) -> None:
        self.relay._near_made(transport)

    def data_received(self, data: bytes) -> None:
        self.relay._answer(data)

    def eof_received(self) -> None:
        self.relay._far_closed()  # returning None: the near end's transport closes too

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay._far_closed()

    def pause_writing(self) -> None:
        self.relay.tls.pause_reading()

    def resume_writing(self) -> None:
        self.relay.tls.resume_reading()
