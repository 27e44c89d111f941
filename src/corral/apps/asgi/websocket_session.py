"""WebSocket (RFC 6455) for ASGI applications: the ASGI WebSocket scope over an upgraded
connection.

The framing is the ``websockets`` library's sans-IO protocol (`websockets.server.
ServerProtocol`: frames, masking, control frames, the closing handshake, message size,
permessage-deflate of RFC 7692); everything around it is here: the handshake on corral's own
parsed head, the ASGI messages, flow control, timers and the worker's drain.

How a connection gets here: the parser ends on a request with ``Connection: upgrade`` and
``Upgrade`` and keeps what followed its head (``Parser.upgraded``); `AsgiAdapter.run` sees
``Upgrade: websocket`` and starts a `WebSocketSession` instead of an HTTP cycle. Then:

- the handshake is checked before the application is called (method, version, key and
  ``Sec-WebSocket-Version``; `ServerProtocol.process_request`, which also negotiates the
  extensions): a bad one is answered 400 (426 with ``Upgrade: websocket`` for a wrong
  ``Upgrade``, and with ``Sec-WebSocket-Version: 13`` too for another version, 405 for a
  method other than GET) and the application never sees it;
- the application's first ``receive()`` is ``websocket.connect``. ``websocket.accept`` writes
  the 101 (its subprotocol and headers; ``Date`` and ``Server`` as in every answer) and the
  transport's protocol becomes this session (`transport.set_protocol`): the HTTP connection
  reads no more bytes, and is told only when the socket closes (`HttpConnection.
  connection_lost`, then `finish`, so the counts and the access log see the session as one
  exchange, with status 101). ``websocket.close`` before the accept is a 403;
  ``websocket.http.response.start``/``body`` (the denial extension) send any answer instead;
  an application that returns without either is a 403 too, one that raises, a 500;
- messages: fragments are joined, text is checked as UTF-8 while it arrives (1007 at the first
  bad byte), a message over ``ws_max_size`` closes with 1009, a frame the RFC forbids with
  1002. At most ``ws_max_queue`` messages wait for ``receive()``: past that the socket is not
  read until the application takes one (backpressure; the client's writes wait in TCP).
  ``send()`` waits while the client does not read (``pause_writing``);
- closing: a close from the client is echoed and the server closes the socket; a close from
  the application waits ``ws_close_timeout`` for the client's; an application that returns
  closes with 1000, one that raises with 1011; a ping unanswered for ``ws_ping_timeout``
  closes with 1011; the worker's graceful stop closes with 1001 (`going_away`). The
  application's ``receive()`` then gives ``websocket.disconnect`` with the code and reason
  (1006 when the socket closed without a close frame), and ``send()`` raises
  `ClientDisconnected`.
"""

from __future__ import annotations

import codecs
import logging
from collections import deque
from typing import Any, NoReturn

from websockets.datastructures import Headers
from websockets.exceptions import (
    InvalidHandshake,
    InvalidHeaderValue,
    InvalidMethod,
    InvalidUpgrade,
)
from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory
from websockets.frames import Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol

from corral.apps.asgi.body import release
from corral.apps.asgi.runner import (
    AsgiCycle,
    AsgiProtocolError,
    ClientDisconnected,
    _str_headers,
)
from corral.apps.asgi.websocket import WebSocketOptions
from corral.http.errors import error_response
from corral.http.response import InvalidResponse, switching_head

_ABNORMAL = 1006  # RFC 6455 7.4.1: closed without a close frame (never sent on the wire)


class WebSocketSession:
    """One WebSocket connection: the ASGI ``receive``/``send`` of its application, and, once
    accepted, the asyncio protocol of its transport."""

    def __init__(
        self,
        options: WebSocketOptions,
        log: logging.Logger,
        conn: Any,
        exchange: Any,
        on_end: Any,
    ) -> None:
        self.options = options
        self.log = log
        self.conn = conn
        self.exchange = exchange
        self.transport = conn.transport
        self.loop = conn.loop
        self.on_end = on_end  # the adapter forgets the session
        extensions = [ServerPerMessageDeflateFactory()] if options.per_message_deflate else []
        # OPEN from the start: corral parsed the handshake itself, so the protocol's parser
        # begins with frames; process_request still checks it and negotiates extensions
        self.protocol = ServerProtocol(
            extensions=extensions, max_size=options.max_size, state=State.OPEN
        )
        self.accepted = False
        self.answered = False  # an HTTP answer (a denial, 403, 500) was written instead
        self.closed = False  # the socket is closed
        self.disconnect: dict[str, Any] | None = None  # what receive() gives once closed
        self.connect_given = False
        self.messages: deque[dict[str, Any]] = deque()
        self.waiter: Any = None  # receive()'s future
        self.writable: Any = None  # send()'s future while the client does not read
        self.write_paused = False
        self.reading_paused = False
        self.fragments: list[bytes] = []
        self.decoder: Any = None  # an incremental UTF-8 decoder while a text message arrives
        self.text_parts: list[str] = []
        self.accept_header = ""
        self.extensions_header: str | None = None
        self.ping_timer: Any = None
        self.close_timer: Any = None
        self.pong_due = False
        # the websocket.http.response denial: an HTTP answer, which an AsgiCycle writes; its
        # body is kept until the last message, so it goes out whole, with a Content-Length
        self.denial: AsgiCycle | None = None
        self.denial_body: list[bytes] = []
        self.after: Any = None  # the post_request hook's call (hooked.py), once it ended

    def _where(self) -> str:
        return f"WebSocket {self.exchange.head.target.decode('latin-1')}"

    # -- the handshake ---------------------------------------------------------------

    def check_handshake(self) -> bool:
        """Validate the request as a WebSocket handshake; if it is not one, answer it (the
        application is not called) and return False."""
        head = self.exchange.head
        headers = Headers()
        for name, value in head.headers:
            headers[name.decode("latin-1")] = value.decode("latin-1")
        request = Request(
            head.target.decode("latin-1"),
            headers,
            method=head.method,
            protocol=f"HTTP/{head.version}",
        )
        try:
            self.accept_header, self.extensions_header, _ = self.protocol.process_request(request)
        except InvalidMethod:
            self._http_error(405, "Allow: GET\r\n")
            return False
        except InvalidUpgrade:
            self._http_error(426, "Upgrade: websocket\r\n")
            return False
        except InvalidHandshake as exc:
            self.log.debug("invalid WebSocket handshake for %s: %s", self._where(), exc)
            if isinstance(exc, InvalidHeaderValue) and exc.name == "Sec-WebSocket-Version":
                # RFC 6455 4.2.2: a version the server does not speak, answered with its own
                self._http_error(426, "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n")
            else:
                self._http_error(400)
            return False
        return True

    def _http_error(self, status: int, fields: str = "") -> None:
        """Answer the handshake with an error of the server's own and close."""
        self.answered = True
        conn = self.conn
        self.exchange.status = status
        conn.finish(self.exchange, False, error_response(status, conn.server.prefix, fields))
        self._ended()

    def _accept(self, message: dict[str, Any]) -> None:
        subprotocol = message.get("subprotocol")
        fields = (
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {self.accept_header}\r\n"
        )
        if self.extensions_header is not None:
            fields += f"Sec-WebSocket-Extensions: {self.extensions_header}\r\n"
        if subprotocol is not None:
            if type(subprotocol) is not str:
                raise AsgiProtocolError(f"subprotocol must be a str, not {subprotocol!r}")
            fields += f"Sec-WebSocket-Protocol: {subprotocol}\r\n"
        try:
            head = switching_head(
                self.conn.server.prefix, fields, _str_headers(message.get("headers", ()))
            )
        except InvalidResponse as exc:
            raise AsgiProtocolError(str(exc)) from None
        conn = self.conn
        if conn.closed:
            raise ClientDisconnected("client went away")
        self.accepted = True
        self.exchange.status = 101
        transport = self.transport
        transport.write(head)
        transport.set_protocol(self)
        if conn.write_paused:
            self.write_paused = True
        rest = conn.parser.upgraded
        if rest:
            self.data_received(rest)
        if not self.closed and not self.reading_paused:
            transport.resume_reading()
        if self.options.ping_interval > 0:
            self.ping_timer = self.loop.call_later(self.options.ping_interval, self._ping)

    # -- asyncio protocol, once accepted ---------------------------------------------

    def connection_made(self, transport: Any) -> None:  # pragma: no cover - set_protocol
        pass

    def data_received(self, data: bytes) -> None:
        protocol = self.protocol
        protocol.receive_data(data)
        # a server protocol past its handshake yields frames only (never a Request)
        for frame in protocol.events_received():
            opcode = frame.opcode  # type: ignore[union-attr]
            if opcode is Opcode.TEXT or opcode is Opcode.BINARY or opcode is Opcode.CONT:
                self._fragment(frame)
            elif opcode is Opcode.PONG:
                self.pong_due = False
            elif opcode is Opcode.CLOSE:
                self._closing(protocol.close_rcvd)
        self._flush()

    def eof_received(self) -> bool:
        self.protocol.receive_eof()
        self._flush()
        return False  # the transport closes itself

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake_writer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed:
            return
        self.closed = True
        for timer in (self.ping_timer, self.close_timer):
            if timer is not None:
                timer.cancel()
        if self.disconnect is None:
            close = self.protocol.close_rcvd
            if close is not None:
                self.disconnect = _disconnect(close.code, close.reason)
            else:
                self.disconnect = _disconnect(_ABNORMAL, "")
        self._wake_reader()
        self._wake_writer()
        conn = self.conn
        conn.connection_lost(exc)
        conn.finish(self.exchange, False)
        self._ended()

    # -- frames to messages ----------------------------------------------------------

    def _fragment(self, frame: Any) -> None:
        opcode = frame.opcode
        data = frame.data
        if opcode is Opcode.TEXT:
            if frame.fin:  # a whole message in one frame, the common case: decoded at once
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    self.protocol.fail(1007, f"invalid UTF-8 at position {exc.start}")
                    return
                self._queue({"type": "websocket.receive", "text": text})
                return
            # the first fragment: checked as it arrives, so a bad byte fails at once
            self.decoder = codecs.getincrementaldecoder("utf-8")()
        decoder = self.decoder
        if decoder is not None:
            try:
                text = decoder.decode(data, frame.fin)
            except UnicodeDecodeError as exc:
                self.protocol.fail(1007, f"invalid UTF-8 at position {exc.start}")
                return
            if not frame.fin:
                self.text_parts.append(text)
                return
            parts = self.text_parts
            if parts:
                parts.append(text)
                text = "".join(parts)
                self.text_parts = []
            self.decoder = None
            message = {"type": "websocket.receive", "text": text}
        else:
            if not frame.fin:
                self.fragments.append(data)
                return
            fragments = self.fragments
            if fragments:
                fragments.append(data)
                data = b"".join(fragments)
                self.fragments = []
            message = {"type": "websocket.receive", "bytes": bytes(data)}
        self._queue(message)

    def _queue(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._wake_reader()
        if len(self.messages) >= self.options.max_queue and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()

    def _closing(self, close: Any) -> None:
        if close is not None and self.disconnect is None:
            self.disconnect = _disconnect(close.code, close.reason)
            self._wake_reader()

    def _flush(self) -> None:
        """Write what the protocol has to send; its end of stream closes the socket (the
        server closes the TCP connection first: RFC 6455 7.1.1)."""
        for data in self.protocol.data_to_send():
            if data:
                self.transport.write(data)
            else:
                self.transport.close()
                return

    # -- timers ----------------------------------------------------------------------

    def _ping(self) -> None:
        self.ping_timer = None
        if self.closed or self.protocol.state is not State.OPEN:
            return
        if self.pong_due:
            self.log.info(
                "%s: ping not answered in %gs, closing", self._where(), self.options.ping_timeout
            )
            self.protocol.fail(1011, "keepalive ping timeout")
            self._flush()
            return
        self.pong_due = True
        self.protocol.send_ping(b"corral")
        self._flush()
        options = self.options
        # the next tick either pings again or finds this one unanswered
        delay = min(options.ping_timeout, options.ping_interval)
        self.ping_timer = self.loop.call_later(delay, self._ping)

    def _close_expired(self) -> None:
        self.close_timer = None
        if not self.closed:
            self.transport.abort()

    def _send_close(self, code: int, reason: str) -> None:
        if self.closed or self.protocol.state is not State.OPEN:
            return
        self.protocol.send_close(code, reason)
        self._flush()
        if self.close_timer is None and not self.closed:
            self.close_timer = self.loop.call_later(self.options.close_timeout, self._close_expired)

    def going_away(self) -> None:
        """The worker stops: close an open session with 1001 (going away)."""
        if self.accepted:
            self._send_close(1001, "server shutting down")

    # -- the application -------------------------------------------------------------

    async def run(self, app: Any, scope: dict[str, Any]) -> None:
        try:
            await self._call(app, scope)
        finally:
            if self.after is not None:
                self.after()

    async def _call(self, app: Any, scope: dict[str, Any]) -> None:
        try:
            await app(scope, self.receive, self.send)
        except BaseException as exc:
            if self.denial is not None:
                self.denial._failed(exc)  # the denial's answer is the cycle's, as any answer
                return
            if not isinstance(exc, Exception):
                self._abort_on_exit()
                raise  # a cancellation or an exit is the loop's business
            if isinstance(exc, ClientDisconnected) or (self.closed and not self.answered):
                self.log.debug("client went away during %s", self._where())
            elif not isinstance(exc, AsgiProtocolError):
                self.log.error("error handling %s", self._where(), exc_info=exc)
            if self.accepted:
                self._send_close(1011, "")
            elif not self.answered:
                self._answer_http(500)
            return
        if self.accepted:
            self._send_close(1000, "")
        elif self.denial is not None:
            if not self.denial.complete:
                self.denial._incomplete()
        elif not self.answered:
            self._answer_http(403)  # returned without accepting: the spec's 403

    def _abort_on_exit(self) -> None:
        if self.accepted:
            if not self.closed:
                self.transport.abort()
        elif not self.answered:
            self._give_up()

    def _answer_http(self, status: int) -> None:
        if self.closed or self.conn.closed:
            self.answered = True
            self._ended()
            return
        self._http_error(status)

    def _give_up(self) -> None:
        self.answered = True
        self.exchange.status = self.exchange.status or 500
        self.conn.finish(self.exchange, False)
        self._ended()

    def _ended(self) -> None:
        on_end, self.on_end = self.on_end, None
        if on_end is not None:
            on_end(self)

    async def receive(self) -> dict[str, Any]:
        if not self.connect_given:
            self.connect_given = True
            return {"type": "websocket.connect"}
        while True:
            messages = self.messages
            if messages:
                message = messages.popleft()
                if self.reading_paused and len(messages) < self.options.max_queue:
                    self.reading_paused = False
                    if not self.closed:
                        self.transport.resume_reading()
                return message
            if self.disconnect is not None:
                return self.disconnect
            if self.answered or (self.conn.closed and not self.accepted):
                return _disconnect(_ABNORMAL, "")
            waiter = self.waiter
            if waiter is None:
                waiter = self.waiter = self.loop.create_future()
            await waiter

    def _wake_reader(self) -> None:
        waiter, self.waiter = self.waiter, None
        release(waiter)

    def _wake_writer(self) -> None:
        writable, self.writable = self.writable, None
        release(writable)

    async def send(self, message: dict[str, Any]) -> None:
        kind = message.get("type") if type(message) is dict else None
        if kind == "websocket.send":
            await self._send_message(message)
        elif kind == "websocket.accept":
            if self.accepted or self.answered:
                self._violation("websocket.accept after the handshake was answered")
            try:
                self._accept(message)
            except AsgiProtocolError as exc:
                self._violation(str(exc))
        elif kind == "websocket.close":
            if self.accepted:
                code = message.get("code") or 1000
                reason = message.get("reason") or ""
                if self.closed:
                    raise ClientDisconnected("client went away")
                self._send_close(code, reason)
            elif self.answered:
                self._violation("websocket.close after the handshake was answered")
            else:
                self._answer_http(403)
        elif kind == "websocket.http.response.start":
            if self.accepted or self.answered:
                self._violation("websocket.http.response.start after the handshake was answered")
            denial = self.denial = AsgiCycle(self.log, self.conn, self.exchange)
            self.exchange.keep_alive = False  # the connection was to be a WebSocket's: it ends here
            self.answered = True
            self._ended()
            await denial.send({**message, "type": "http.response.start"})
        elif kind == "websocket.http.response.body":
            started = self.denial
            if started is None or started.complete:
                self._violation("websocket.http.response.body without its start, or after its end")
            self.denial_body.append(message.get("body", b""))
            if not message.get("more_body", False):
                body = b"".join(self.denial_body)
                await started.send({"type": "http.response.body", "body": body})
        else:
            self._violation(f"unknown message {kind!r} on a WebSocket connection")

    async def _send_message(self, message: dict[str, Any]) -> None:
        if not self.accepted:
            self._violation("websocket.send before websocket.accept")
        if self.closed or self.protocol.state is not State.OPEN:
            raise ClientDisconnected("WebSocket closed")
        text = message.get("text")
        data = message.get("bytes")
        if text is not None and data is None:
            if type(text) is not str:
                self._violation(f"websocket.send's text must be a str, not {type(text)}")
            self.protocol.send_text(text.encode("utf-8"))
        elif data is not None and text is None:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                self._violation(f"websocket.send's bytes must be bytes, not {type(data)}")
            self.protocol.send_binary(bytes(data))
        else:
            self._violation("websocket.send needs exactly one of bytes and text")
        self._flush()
        if self.write_paused and not self.closed:
            writable = self.writable = self.loop.create_future()
            await writable

    def _violation(self, what: str) -> NoReturn:
        self.log.error("ASGI protocol error in %s: %s", self._where(), what)
        if self.accepted:
            self._send_close(1011, "")
        elif self.denial is not None:
            self.denial._give_up()  # 500 if its head is not out yet, else the connection closes
        elif not self.answered:
            self._answer_http(500)
        raise AsgiProtocolError(what)


def _disconnect(code: int, reason: str) -> dict[str, Any]:
    return {"type": "websocket.disconnect", "code": code, "reason": reason}
