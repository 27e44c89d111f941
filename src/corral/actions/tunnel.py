"""An upgraded connection through the proxy (WebSocket, or any ``Upgrade`` the upstream
accepts with 101): from the 101 on, the client's and the upstream's connections are one tunnel,
their bytes relayed unchanged each way (`corral.server.relay` is the model).

Each side's transport gets a protocol of the tunnel's; what the client sent after its request's
head (``conn.parser.upgraded``) goes upstream first, what the upstream sent after its 101 goes
to the client first. Backpressure: a side whose write buffer is full pauses reading the other.
Ends: an EOF is passed on as a half-close (``write_eof``), so each side may still answer; when
either connection is lost, the other is closed once what it holds is sent (aborted if the
client is the one gone). The client's HTTP connection is then over, as after a WebSocket
session (`HttpConnection.connection_lost`, then ``finish``, for the counts and the access log).
A tunnel that passes no byte either way for ``proxy_tunnel_timeout`` is closed on both sides:
a peer gone without a word (a laptop shut, a NAT that forgot it) would otherwise hold both
connections for ever. Each read notes the loop's time; one timer, moved only when it fires,
looks at it.
"""

from __future__ import annotations

from typing import Any

from corral.actions.proxy_head import answer_fields
from corral.http.response import InvalidResponse, switching_head
from corral.server.connection import NEVER

__all__ = ["Tunnel", "open_tunnel"]


def open_tunnel(conn: Any, exchange: Any, call: Any, response: Any) -> Tunnel | None:
    """The upstream answered 101 to ``call``'s upgrade: the 101 to the client, then the
    tunnel. None when the answer cannot go to the client (its fields refused: 502)."""
    wire = call.wire
    call.wire = None
    wire.call = None
    wire.uncount()  # a tunnel, no longer its server's to count against proxy_max_conns
    fields = f"Upgrade: {call.upgrade.decode('latin-1')}\r\nConnection: Upgrade\r\n"
    try:
        head = switching_head(conn.server.prefix, fields, answer_fields(response.headers))
    except (InvalidResponse, UnicodeDecodeError):
        wire.close(abort=True)
        call.ended = False
        call.upstream_failed("101 answer refused")
        return None
    exchange.status = 101
    return Tunnel(conn, exchange, wire, head, call.options.tunnel_timeout)


class Tunnel:
    """Both connections of one upgraded request."""

    __slots__ = (
        "client",
        "conn",
        "eofs",
        "exchange",
        "finished",
        "idle_timeout",
        "last_read",
        "timer",
        "upstream",
    )

    def __init__(
        self, conn: Any, exchange: Any, wire: Any, head: bytes, idle_timeout: float
    ) -> None:
        self.conn = conn
        self.exchange = exchange
        self.finished = False
        self.eofs = 0  # sides that ended their sending: at 2 both connections close
        conn.deadline = NEVER
        loop = conn.loop
        self.idle_timeout = idle_timeout
        self.last_read = loop.time()
        self.timer = loop.call_later(idle_timeout, self.idle) if idle_timeout > 0 else None
        client = self.client = conn.transport
        upstream = self.upstream = wire.transport
        client.write(head)
        client.set_protocol(_Side(self, upstream, self.client_lost))
        upstream.set_protocol(_Side(self, client, self.upstream_lost))
        early = wire.parser.upgraded
        if early:
            client.write(early)
        rest = conn.parser.upgraded
        if rest:
            upstream.write(rest)
        client.resume_reading()
        upstream.resume_reading()

    def idle(self) -> None:
        """The timer: closes both sides after ``idle_timeout`` without a byte, else waits
        for what is left of it since the last read."""
        left = self.last_read + self.idle_timeout - self.conn.loop.time()
        if left > 0:
            self.timer = self.conn.loop.call_later(left, self.idle)
            return
        self.timer = None
        self.upstream.close()
        self.client.close()  # client_lost follows, which ends the exchange

    def client_lost(self, exc: Exception | None) -> None:
        if self.finished:
            return
        self.finished = True
        if self.timer is not None:
            self.timer.cancel()
        self.upstream.abort()
        conn = self.conn
        conn.connection_lost(exc)
        conn.finish(self.exchange, False)

    def upstream_lost(self, exc: Exception | None) -> None:
        self.client.close()  # once what it holds is sent; client_lost follows

    def ended(self, other: Any) -> bool:
        """One side sent its EOF: passed on to ``other`` (a half-close), or both close once
        both sides did. The return is the transport's ``eof_received``'s: keep it open."""
        self.eofs += 1
        if self.eofs >= 2 or not other.can_write_eof():
            self.upstream.close()
            self.client.close()
        elif not other.is_closing():
            other.write_eof()
        return True


class _Side:
    """One connection's protocol in the tunnel: what it reads is written to ``other`` (the
    other connection's transport), whose full buffer pauses this side's reading; ``lost`` is
    the tunnel's handler of this connection's end."""

    __slots__ = ("lost", "other", "tunnel")

    def __init__(self, tunnel: Tunnel, other: Any, lost: Any) -> None:
        self.tunnel = tunnel
        self.other = other
        self.lost = lost

    def connection_made(self, transport: Any) -> None:  # pragma: no cover - set_protocol
        pass

    def data_received(self, data: bytes) -> None:
        self.tunnel.last_read = self.tunnel.conn.loop.time()
        self.other.write(data)

    def eof_received(self) -> bool:
        return self.tunnel.ended(self.other)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost(exc)

    def pause_writing(self) -> None:
        self.other.pause_reading()

    def resume_writing(self) -> None:
        self.other.resume_reading()
