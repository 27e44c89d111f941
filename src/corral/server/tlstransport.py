"""corral's TLS transport: OpenSSL on memory BIOs, between the loop's plain transport of an
accepted socket and the connection (`HttpConnection`, or a WebSocket session after it).

Compiled (setup.py's ``TWINS``), it replaced the loop's own TLS transport (uvloop's
``SSLProtocol``, asyncio's on a plain loop) after the three were measured side by side
(bench/tls_micro.py; bench/RESULTS.md, "Issue 33, point 7 again"). What it does differently:

- It is the plain transport's protocol (a buffered one on uvloop: the loop reads into one
  buffer shared by every TLS connection of the worker, ``get_buffer``), and the transport of
  the connection above it, with no object, queue or scheduled callback in between.
- The bytes read go into the incoming memory BIO whole; each record is decrypted with
  ``read(n)`` for the bytes that could be there (no 256 KiB read buffer per read, no
  ``SSLWantReadError`` raised while whole records remain: the BIO's and OpenSSL's counts say
  when to stop) and handed to the connection at once.
- A write is one ``SSL_write`` of the whole answer (one record for a small one) and one write
  of the records to the socket.
- ``close`` sends the close_notify after what is buffered and closes without waiting for the
  client's (as nginx does); a client's close_notify, or its EOF, is the connection's
  ``eof_received``, and its answer decides whether the side that writes stays open
  (half-close: the answers still due go out, then the close_notify).
- The handshake is made here within ``timeout`` seconds, then the connection is made by
  ``factory``; ``finished(ok)`` says how the handshake ended (the door counts connections
  arriving, a balanced pool's board counts pending ones).

Files never go by sendfile over it (the connection knows it is ``encrypted``). The calls into
``ssl`` are those of the `ssl.SSLObject`'s own C object (``_sslobj``), without the Python
wrapper's frame per call; the application and the SNI callback see the `ssl.SSLObject`.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

FIRST = -1  # nothing read yet: the first byte says whether a handshake comes (the door's)
REFUSED = -2  # not a handshake: answered (or not), the client's bytes dropped until it leaves
HANDSHAKE = 0  # the TLS handshake is being made
OPEN = 1  # the connection is made: records pass both ways
CLOSING = 2  # closed by this side: the close_notify is sent after what is buffered
CLOSED = 3  # the socket is closed, or closes now

_HANDSHAKE_RECORD = 0x16  # the content type of a TLS handshake record: every ClientHello's
_BODY = b"400 Bad Request: this port speaks HTTPS, and the request came as plain HTTP.\n"
# what a client that speaks plain HTTP to an HTTPS port is told (nginx answers so too)
PLAIN_HTTP_ANSWER = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: "
    + str(len(_BODY)).encode()
    + b"\r\nConnection: close\r\n\r\n"
    + _BODY
)

READ_SIZE = 65536  # bytes read from the socket at once
HOLD_MOST = 65536  # bytes held while reading, past which they are written all the same
MOST = 1 << 17  # plaintext asked of OpenSSL at once at most (a record holds 16 KiB)

# every TLS connection of a worker is read into this one buffer: the loop reads into it and
# calls `buffer_updated` at once, which moves its bytes into the connection's memory BIO
_READ_BUFFER = memoryview(bytearray(READ_SIZE))

_WantRead = ssl.SSLWantReadError
_SSLError = ssl.SSLError


class TlsTransport:
    """One TLS connection: the protocol of its socket's transport, the transport of its
    connection (an asyncio transport: write, close, abort, pause and resume reading, flow
    control, ``get_extra_info``, ``set_protocol``)."""

    __slots__ = (
        "context",
        "factory",
        "finished",
        "held",
        "holding",
        "incoming",
        "loop",
        "outgoing",
        "paused",
        "peer_done",
        "protocol",
        "raw",
        "sslobj",
        "state",
        "timeout",
        "timer",
        "tls",
    )

    def __init__(
        self,
        loop: Any,
        context: ssl.SSLContext,
        factory: Callable[[], Any],
        timeout: float,
        finished: Callable[[bool, BaseException | None], None],
        first: bool = False,
    ) -> None:
        """``first``: nothing was read from the socket yet (a listener without the PROXY
        protocol): its first byte is looked at here, as `corral.server.tlsdoor` does."""
        self.loop = loop
        self.context = context
        self.factory = factory
        self.timeout = timeout
        self.finished = finished
        self.raw: Any = None  # the socket's plain transport
        self.tls: Any = None  # the ssl.SSLObject (what the application and SNI see)
        self.sslobj: Any = None  # its C object (_ssl._SSLSocket)
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.protocol: Any = None  # the connection, once the handshake is made
        self.state = FIRST if first else HANDSHAKE
        self.timer: Any = None
        self.paused = False  # the connection paused reading
        self.holding = False  # reading: what the connection writes is written after the read
        self.held = 0  # bytes written by the connection since the last write to the socket
        self.peer_done = False  # the client's close_notify or EOF came (not told yet if paused)

    # -- the socket's side: the protocol of its plain transport ------------------------------

    def connection_made(self, raw: Any) -> None:
        self.raw = raw
        tls = self.tls = self.context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.sslobj = tls._sslobj  # type: ignore[attr-defined]  # its C object: see above
        self.timer = self.loop.call_later(self.timeout, self._late)

    def get_buffer(self, hint: int) -> memoryview:
        return _READ_BUFFER

    def buffer_updated(self, count: int) -> None:
        if self.state == OPEN:
            self.incoming.write(_READ_BUFFER[:count])
            self._decrypt()
        else:
            self._received(_READ_BUFFER[:count])

    def data_received(self, data: bytes) -> None:  # a loop without buffered protocols
        if self.state == OPEN:
            self.incoming.write(data)
            self._decrypt()
        else:
            self._received(data)

    def eof_received(self) -> bool:
        """The client closed its side of the socket (without a close_notify, or after it)."""
        if self.state == FIRST or self.state == HANDSHAKE:
            self._fail(ConnectionResetError("the client closed during the TLS handshake"))
            return False
        if self.state != OPEN:
            return False
        self.peer_done = True
        self._decrypt()  # what came before the EOF first; then the connection hears of it
        return self.state == OPEN

    def connection_lost(self, exc: BaseException | None) -> None:
        state = self.state
        self.state = CLOSED
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if state in (HANDSHAKE, FIRST):
            self.finished(False, exc)
            return
        protocol = self.protocol
        if protocol is not None:
            self.protocol = None
            protocol.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.protocol is not None and self.state == OPEN:
            self.protocol.pause_writing()

    def resume_writing(self) -> None:
        if self.protocol is not None and self.state == OPEN:
            self.protocol.resume_writing()

    # -- TLS ----------------------------------------------------------------------------------

    def _received(self, data: Any) -> None:
        """``data`` read before the connection is open (or after it closed)."""
        state = self.state
        if state == FIRST:
            first = data[0]
            if first != _HANDSHAKE_RECORD:
                self._refuse(first)
                return
            self.state = state = HANDSHAKE
        if state == HANDSHAKE:
            self.incoming.write(data)
            self._handshake()
        # refused, closing or closed: what the client sends now is nobody's

    def _refuse(self, first: int) -> None:
        """The first byte is no handshake's: a request line's (an upper-case letter) is told
        that this port speaks HTTPS; the side that writes closes, and what the client sends
        is dropped until it closes too (or the timer ends it): a close with its bytes unread
        would be a reset, which may discard the answer on its way."""
        self.state = REFUSED
        if 0x41 <= first <= 0x5A:
            self.raw.write(PLAIN_HTTP_ANSWER)
        self.finished(False, None)
        self.raw.write_eof()

    def _handshake(self) -> None:
        try:
            self.sslobj.do_handshake()
        except _WantRead:
            self._send()  # the server's flight; the client's next one is awaited
            return
        except (_SSLError, OSError) as exc:
            self._send()  # the alert saying why
            self._fail(exc)
            return
        # the last flight (TLS 1.2) or the session tickets (TLS 1.3) wait in the outgoing BIO
        # for the first answer (the request often came with the client's last flight): one
        # write for both
        self.state = OPEN
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        protocol = self.protocol = self.factory()
        self.finished(True, None)
        protocol.connection_made(self)
        if self.state == OPEN and self.incoming.pending:
            self._decrypt()
        elif self.outgoing.pending and self.state != CLOSED:
            self._send()

    def _decrypt(self) -> None:
        """Hand the connection what the incoming BIO holds, record by record, while it reads;
        then the client's close_notify or EOF, if it came."""
        sslobj = self.sslobj
        incoming = self.incoming
        # what the connection writes meanwhile is encrypted and held in the outgoing BIO, then
        # written at once (the answers to pipelined requests, an answer and its close_notify,
        # the session tickets and the first answer: one write each)
        self.holding = True
        try:
            while not self.paused and self.state == OPEN:
                available = incoming.pending + sslobj.pending()
                if available == 0:
                    break
                try:
                    # plaintext is never longer than its record: `available` is enough
                    data = sslobj.read(available if available < MOST else MOST)
                except _WantRead:
                    break  # a record not whole yet, or one without data (a key update)
                except (_SSLError, OSError):
                    self.abort()  # a record that is not the client's (bad MAC): nothing to say
                    return
                if not data:  # the client's close_notify
                    self.peer_done = True
                    break
                self.protocol.data_received(data)
        finally:
            self.holding = False
        if self.outgoing.pending and self.state != CLOSED:
            self._send()
        if self.peer_done and not self.paused and self.state == OPEN:
            self.peer_done = False
            self._client_done()

    def _client_done(self) -> None:
        """The client will send nothing more: the connection says whether it still answers
        (its side stays open until it closes) or not (closed now)."""
        if not self.protocol.eof_received():
            self.close()

    def _send(self) -> None:
        self.held = 0
        data = self.outgoing.read()
        if data:
            self.raw.write(data)

    def _late(self) -> None:
        self.timer = None
        state = self.state
        if state in (HANDSHAKE, FIRST):
            self._fail(TimeoutError(f"no TLS handshake within {self.timeout:g} s"))
        elif state == REFUSED:
            self.state = CLOSED
            self.raw.abort()  # a client that neither reads its 400 nor leaves

    def _fail(self, exc: BaseException) -> None:
        """The handshake failed: the socket closes (after the alert, if one was written)."""
        self.state = CLOSED
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.finished(False, exc)
        self.raw.close()

    # -- the connection's side: an asyncio transport ------------------------------------------

    def write(self, data: Any) -> None:
        if self.state != OPEN or not data:
            return  # closed (as a closed transport, it drops what comes after)
        self.sslobj.write(data)
        if self.holding:
            self.held += len(data)
            if self.held < HOLD_MOST:
                return
        self._send()

    def writelines(self, pieces: Any) -> None:
        self.write(b"".join(pieces))

    def close(self) -> None:
        """Close after what is buffered, with a close_notify; nothing more is read."""
        state = self.state
        if state == OPEN:
            self.state = CLOSING
            # writes the close_notify, then waits for the client's, which is not waited for
            # (a try, not contextlib.suppress: compiled, a with-block costs a context manager
            # object and two calls per connection)
            try:  # noqa: SIM105
                self.sslobj.shutdown()
            except (_SSLError, OSError):
                pass
            self._send()
            self.raw.close()
        elif state in (HANDSHAKE, FIRST):
            self.abort()

    def abort(self) -> None:
        """Close at once: what is buffered is dropped."""
        if self.state != CLOSED:
            self.state = CLOSED
            self.raw.abort()

    def is_closing(self) -> bool:
        return self.state >= CLOSING

    def pause_reading(self) -> None:
        if not self.paused:
            self.paused = True
            if self.state == OPEN:
                self.raw.pause_reading()

    def resume_reading(self) -> None:
        if self.paused:
            self.paused = False
            if self.state == OPEN:
                self.raw.resume_reading()
                # what the BIO holds (and the client's end, if it came) is not read again from
                # the socket: it is handed over from the loop, after the caller's own work
                if self.incoming.pending or self.sslobj.pending() or self.peer_done:
                    self.loop.call_soon(self._decrypt)

    def is_reading(self) -> bool:
        return not self.paused and self.state == OPEN

    def get_write_buffer_size(self) -> int:
        if self.raw is None:
            return 0
        return self.raw.get_write_buffer_size() + self.outgoing.pending

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.raw.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.raw.get_write_buffer_limits()

    def can_write_eof(self) -> bool:
        return False  # TLS closes both ways with its close_notify

    def write_eof(self) -> None:
        raise NotImplementedError("TLS closes both ways: close() sends the close_notify")

    def set_protocol(self, protocol: Any) -> None:
        self.protocol = protocol

    def get_protocol(self) -> Any:
        return self.protocol

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self.tls
        if name == "sslcontext":
            return self.context
        if name == "peercert":
            return self.tls.getpeercert()
        if name == "cipher":
            return self.tls.cipher()
        if name == "compression":
            return self.tls.compression()
        if self.raw is None:
            return default
        return self.raw.get_extra_info(name, default)
