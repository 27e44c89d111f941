"""Runs an ASGI application (HTTP connection scope) for the connections of one worker.

The connection (`corral.server.connection.HttpConnection`) stays what it is for WSGI: it
parses, keeps the pipeline in order, runs the one deadline, enforces the limits and answers
protocol errors. This adapter fills the same two methods as the WSGI one and answers through
the same `HttpConnection.write` / `finish`, with heads from `corral.http.response`:

- ``make_body`` gives a body-bearing request an `AsgiBody` and marks the exchange
  ``streaming``, so the application starts while the body still arrives. `AsgiBody.feed`
  returns True past ``BODY_HIGH_WATER`` buffered bytes: the connection then stops reading
  the socket (and its body deadline, the wait being the application's), and ``receive()``
  reads it again once it took the buffer (`HttpConnection.resume_body`).
- ``run`` starts one task per request on the worker's loop (`AsgiCycle.run`). A request
  without a body gets an `AsgiBody` of its own there, complete and empty: the connection
  fails every pending exchange's body when the client goes away, which is how ``receive()``
  learns of the disconnect for every request alike.
- ``send()`` keeps the head back until the first body message, so a small answer is one
  write; while the transport is paused it waits for ``resume_writing``
  (`HttpConnection.on_writable`; the connection's send deadline runs meanwhile).

What the spec forbids (a body before the start, a second start, a bad status, a header value
with CR, LF or NUL, a message after the end) raises `AsgiProtocolError` into the application
and is one line in the error log; the answer is a 500 if no byte was sent yet, else the
connection is closed. An exception of the application is one log entry with its traceback
and the same answer.

Lifespan is lifespan.py's, WebSocket websocket_session.py's (an upgrade starts a session, not a
cycle), ``request_timeout`` `TaskDeadline`'s, ``pre_request``/``post_request`` hooked.py's.
Every scope offers ``http.response.pathsend`` and ``http.response.zerocopysend`` (``sendfile``,
framed by Content-Length or as one chunk) and, after ``TE: trailers``, ``http.response.trailers``
(the answer is then chunked; trailer fields are checked as header fields, framing ones dropped).
"""

from __future__ import annotations

import logging
import os
from asyncio import CancelledError, Task, shield, wait
from collections.abc import Coroutine, Mapping
from functools import partial
from typing import Any, NoReturn

from corral.apps.asgi.hooked import hooked_application
from corral.apps.asgi.legacy import as_asgi3
from corral.apps.asgi.scope import connection_scope, request_scope
from corral.apps.asgi.websocket import WebSocketOptions, wants_websocket, websocket_scope
from corral.http.errors import error_response
from corral.http.response import InvalidResponse, reason, trailer_lines
from corral.observe.stacks import task_stack
from corral.server.connection import Adapter, Exchange, HttpConnection

# Bytes of a request body buffered before the socket stops being read.
BODY_HIGH_WATER = 256 * 1024

_CHUNK_END = b"0\r\n\r\n"
# where an answer with http.response.trailers stands (AsgiCycle.trailers)
_NO_TRAILERS, _ASKED, _BODY_DONE, _IN_TRAILERS = range(4)
_DISCONNECT = {"type": "http.disconnect"}


class AsgiProtocolError(RuntimeError):
    """The application sent what the ASGI spec forbids."""


class ClientDisconnected(OSError):
    """``send()`` after the client went away (the spec asks for an OSError subclass)."""


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


class Sent:
    """What ``send()`` returns once its message went out whole: an awaitable that is
    already done. It is a coroutine to asyncio and anyio (the `Coroutine` protocol), so
    ``create_task(send(message))`` and ``start_soon(send, message)`` still take it."""

    __slots__ = ()

    def __await__(self) -> Any:
        return self

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        raise StopIteration

    def send(self, value: Any) -> Any:
        raise StopIteration

    def throw(self, kind: Any, value: Any = None, traceback: Any = None) -> Any:
        raise kind if value is None else value

    def close(self) -> None:
        pass


SENT = Sent()
Coroutine.register(Sent)


def release(waiter: Any) -> None:
    """Let whoever awaits ``waiter`` (a future, or None: nobody) go on."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


REQUEST_TASK = "corral-request"  # every request's task: a name given is not formatted


def request_task(loop: Any, coro: Any) -> Any:
    """A request cycle's named task: uvloop's ``create_task`` formats a ``Task-N`` name first."""
    if loop.get_task_factory() is None:
        return Task(coro, loop=loop, name=REQUEST_TASK)
    return loop.create_task(coro, name=REQUEST_TASK)


# "200 OK" for each status code, made once: build_head takes WSGI's status strings
_STATUS_TEXT: dict[int, str] = {}


def _status_text(status: Any) -> str:
    text = _STATUS_TEXT.get(status) if type(status) is int else None
    if text is None:
        if type(status) is not int or not 100 <= status <= 999:
            raise AsgiProtocolError(f"invalid status {status!r}: an int from 100 to 999")
        text = _STATUS_TEXT[status] = f"{status} {reason(status)}"
    return text


# the application's (name, value) byte pairs as latin-1 strings, made once for each pair seen
# (most answers repeat their fields); long values are converted every time, not kept
_STR_FIELDS: dict[tuple[bytes, bytes], tuple[str, str]] = {}
_STR_FIELDS_MAX = 4096
_STR_FIELD_KEPT = 256


def _str_headers(headers: Any) -> list[tuple[str, str]]:
    """The application's byte-string header pairs as build_head's latin-1 strings (which
    build_head then checks: a token name, no CR, LF or NUL in a value)."""
    out = []
    fields = _STR_FIELDS
    try:
        for header in headers:
            try:
                field = fields.get(header) if type(header) is tuple else None
            except TypeError:  # an unhashable name or value: refused below
                field = None
            if field is None:
                field = _str_field(header)
            out.append(field)
    except TypeError:
        raise AsgiProtocolError(f"headers must be an iterable of pairs, not {headers!r}") from None
    return out


def _str_field(header: Any) -> tuple[str, str]:
    try:
        name, value = header
    except (TypeError, ValueError):
        raise AsgiProtocolError(f"a header must be a (name, value) pair, not {header!r}") from None
    if type(name) is not bytes or type(value) is not bytes:
        if not isinstance(name, bytes) or not isinstance(value, bytes):
            raise AsgiProtocolError(f"header {name!r}: name and value must be bytes")
        name, value = bytes(name), bytes(value)
    field = (name.decode("latin-1"), value.decode("latin-1"))
    if type(header) is tuple and len(name) + len(value) <= _STR_FIELD_KEPT:
        if len(_STR_FIELDS) >= _STR_FIELDS_MAX:
            _STR_FIELDS.clear()
        _STR_FIELDS[header] = field
    return field


class AsgiCycle:
    """One request's run of the application: its scope, ``receive`` and ``send``."""

    __slots__ = (
        "after",
        "body",
        "chunked",
        "complete",
        "conn",
        "deadline",
        "discard_body",
        "exchange",
        "extensions",
        "head_sent",
        "headers",
        "keep_alive",
        "log",
        "remaining",
        "sent",
        "status",
        "task",
        "tasks",
        "timed_out",
        "trailers",
    )

    def __init__(self, log: logging.Logger, conn: HttpConnection, exchange: Exchange) -> None:
        self.log = log
        self.conn = conn
        self.exchange = exchange
        self.body: AsgiBody = exchange.body
        self.keep_alive = exchange.head.keep_alive
        self.discard_body = exchange.head.method == "HEAD"
        self.status: str | None = None  # set by http.response.start
        self.headers: list[tuple[str, str]] = []
        self.head_sent = False
        self.chunked = False
        self.remaining: int | None = None  # body bytes the Content-Length still allows
        self.sent = 0
        self.complete = False  # the whole answer is written (or given up)
        self.deadline: TaskDeadline | None = None  # with request_timeout only
        self.timed_out = False  # the deadline cancelled the task
        self.after: Any = None  # the post_request hook's call (hooked.py), once it ended
        self.trailers = _NO_TRAILERS  # or where http.response.trailers stands
        self.task: Any = None  # the task running it, in ``tasks`` (the adapter's) until it ends
        self.tasks: Any = None
        self.extensions: Any = None  # what the scope offered (set when it runs)

    def _where(self) -> str:
        head = self.exchange.head
        return f"{head.method} {head.target.decode('latin-1')}"

    async def run(self, app: Any, scope: dict[str, Any]) -> None:
        self.extensions = scope["extensions"]
        try:
            await app(scope, self.receive, self.send)
        except BaseException as exc:
            self._failed(exc)
        else:
            if not self.complete:
                self._incomplete()
        finally:
            if self.deadline is not None:
                self.deadline.cancel()
            if self.after is not None:
                self.after()
            self.tasks.discard(self.task)

    def _failed(self, exc: BaseException) -> None:
        """The application raised: log it as it deserves, answer what can be answered."""
        if self.complete and isinstance(exc, AsgiProtocolError):
            return  # logged and answered where it was raised
        if self.timed_out and isinstance(exc, CancelledError):
            self._give_up()  # 504, logged by the deadline; the task ends here
            return
        if isinstance(exc, ClientDisconnected) or self.conn.closed:
            self.log.debug("client went away during %s", self._where())
        elif not isinstance(exc, Exception):
            self._give_up()
            raise exc  # a cancellation or an exit is the loop's business
        else:
            self.log.error("error handling %s", self._where(), exc_info=exc)
        self._give_up()

    def _incomplete(self) -> None:
        """The application returned before the end of its answer."""
        if self.conn.closed or self.body.failed:
            # the application stopped on http.disconnect: nothing is wrong with it
            self.log.debug("client went away during %s", self._where())
        elif self.status is None:
            self.log.error("ASGI application returned without a response to %s", self._where())
        else:
            self.log.error(
                "ASGI application returned before the end of its response to %s", self._where()
            )
        self._give_up()

    # -- receive --------------------------------------------------------------------

    async def receive(self) -> dict[str, Any]:
        body = self.body
        while True:
            # what arrived is given before the disconnect: a client that half-closed after
            # its request still has its body read
            if body.chunks or (body.done and not body.given):
                break
            if body.failed or self.complete or self.conn.closed:
                return _DISCONNECT
            # 100 Continue once the application asks for the body (the connection sends it
            # only while the body is incomplete, and once)
            if self.exchange.head.expect_continue:
                self.conn.send_continue(self.exchange)
            waiter = body.waiter
            if waiter is None:
                waiter = body.waiter = self.conn.loop.create_future()
            # shared by concurrent receive() calls (Starlette listens for the disconnect in a
            # task of its own), each shielded: one cancelled caller leaves the others waiting
            await self._client_wait(shield(waiter))
        data = body.take() if body.chunks else b""
        if body.over:
            body.over = False
            self.conn.resume_body()
        more = not body.done
        if not more:
            body.given = True  # a later receive() waits for the disconnect or the answer's end
        return {"type": "http.request", "body": data, "more_body": more}

    # -- send -----------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> Any:
        """ASGI's ``send``: the message goes out now, the rest is awaited (`SENT`: no wait)."""
        if type(message) is not dict:  # compiled, _send reads the message as a typed dict
            if not isinstance(message, Mapping):
                self._violation(f"a message is a dict, not {type(message).__name__}")
            message = dict(message)  # a dict subclass or another mapping: Uvicorn takes them
        return self._send(message)

    def _send(self, message: dict[str, Any]) -> Any:
        kind = message.get("type")
        if kind == "http.response.body":
            if self.status is None:
                self._violation("http.response.body before http.response.start")
            if self.complete:
                if self.conn.closed:
                    raise ClientDisconnected("client went away")
                self._violation("http.response.body after the end of the response")
            if self._write_body(message.get("body", b""), message.get("more_body", False)):
                return self._writable()
        elif kind == "http.response.start":
            if self.status is not None:
                self._violation("a second http.response.start")
            try:
                self.status = _status_text(message.get("status"))
                self.headers = _str_headers(message.get("headers", ()))
            except AsgiProtocolError as exc:
                self.status = None
                self._violation(str(exc))
            # only where the scope offered the extension (the client said TE: trailers)
            if message.get("trailers") and "http.response.trailers" in self.extensions:
                self.trailers = _ASKED
        elif kind == "http.response.trailers":
            self._trailers(message)
        elif kind == "http.response.pathsend":
            return self._pathsend(message)
        elif kind == "http.response.zerocopysend":
            return self._zerocopysend(message)
        else:
            self._violation(f"unknown message {kind!r} on an HTTP connection")
        return SENT

    def _write_body(self, data: Any, more: Any) -> bool:
        """Frame and write a body message; True when the caller must wait for the client
        to read (``more`` and the transport paused)."""
        if type(data) is not bytes:
            if not isinstance(data, (bytearray, memoryview)):
                self._violation(f"http.response.body's body must be bytes, not {type(data)}")
            data = bytes(data)
        conn = self.conn
        if conn.closed:  # run() then finishes the exchange (its bookkeeping) with _give_up
            raise ClientDisconnected("client went away")
        out = b""
        if not self.head_sent:
            out = self._start_head(None if more else len(data))
        if not self.discard_body:
            remaining = self.remaining
            if remaining is not None:
                if len(data) > remaining:
                    self.log.error(
                        "application sent more than its Content-Length; truncated (%s)",
                        self._where(),
                    )
                    data = data[:remaining]
                    self.keep_alive = False
                self.remaining = remaining - len(data)
                out += data
            elif self.chunked:
                if data:
                    out += b"%x\r\n%b\r\n" % (len(data), data)
                if not more and not self.trailers:
                    out += _CHUNK_END
            else:
                out += data
            self.sent += len(data)
        if more or self.trailers:
            if out:
                conn.write(out)
            if more:
                return conn.write_paused and not conn.closed
            self.trailers = _BODY_DONE  # http.response.trailers ends the answer
            return False
        self._end(out)
        return False

    async def _writable(self) -> None:
        """Wait while the client does not read (the connection's send deadline runs)."""
        conn = self.conn
        if conn.write_paused and not conn.closed:
            waiter = conn.loop.create_future()
            conn.on_writable = partial(release, waiter)
            await self._client_wait(waiter)

    async def _client_wait(self, waiter: Any) -> None:
        """Await ``waiter``, a wait for the client (its body, or its reading)."""
        deadline = self.deadline
        if deadline is None:
            await waiter
        else:  # the client's time, not the application's (request_timeout)
            deadline.suspend()
            try:
                await waiter
            finally:
                deadline.resume()

    def _end(self, out: bytes) -> None:
        """The answer's last bytes: finish the exchange."""
        conn = self.conn
        if self.remaining and not self.discard_body:
            self.log.error(
                "application sent less than its Content-Length; closing (%s)", self._where()
            )
            self.keep_alive = False
        self.complete = True
        self.exchange.response_bytes = self.sent
        self.body.wake()  # a receive() waiting for the end of the answer says disconnect
        conn.finish(self.exchange, self.keep_alive, out)

    def _start_head(self, body_length: int | None) -> bytes:
        """The head, framed for ``body_length`` (None: not known yet, or trailers follow)."""
        try:
            return self._head(None if self.trailers else body_length)
        except InvalidResponse as exc:
            self._violation(str(exc))
            raise  # not reached: _violation raises

    # -- the extensions: trailers, pathsend, zerocopysend -----------------------------

    def _trailers(self, message: dict[str, Any]) -> None:
        if self.trailers < _BODY_DONE:
            self._violation("http.response.trailers without trailers asked, or before the body")
        try:
            lines = trailer_lines(_str_headers(message.get("headers", ())))
        except (AsgiProtocolError, InvalidResponse) as exc:
            self._violation(str(exc))
        more = message.get("more_trailers", False)
        out = b""
        if self.chunked and not self.discard_body:
            first = b"0\r\n" if self.trailers == _BODY_DONE else b""
            out = first + lines.encode("latin-1") + (b"" if more else b"\r\n")
        if more:
            self.trailers = _IN_TRAILERS
            if out:
                self.conn.write(out)
            return
        self.trailers = _NO_TRAILERS
        self._end(out)

    async def _pathsend(self, message: dict[str, Any]) -> None:
        path = message.get("path")
        if type(path) is not str or not os.path.isabs(path):
            self._violation(f"http.response.pathsend needs an absolute path, not {path!r}")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self._violation(f"http.response.pathsend cannot open {path}: {exc.strerror}")
        try:
            size = os.fstat(fd).st_size
            await self._file(fd, 0, size, False)
        finally:
            os.close(fd)

    async def _zerocopysend(self, message: dict[str, Any]) -> None:
        try:
            fd = message["file"].fileno()
            offset = message.get("offset")
            if offset is None:
                offset = os.lseek(fd, 0, os.SEEK_CUR)
            count = message.get("count")
            if count is None:
                count = os.fstat(fd).st_size - offset
        except (KeyError, AttributeError, OSError, TypeError) as exc:
            self._violation(f"http.response.zerocopysend needs a readable file: {exc}")
        if type(offset) is not int or type(count) is not int or offset < 0 or count < 0:
            self._violation("http.response.zerocopysend: offset and count must be ints >= 0")
        await self._file(fd, offset, count, bool(message.get("more_body")))

    async def _file(self, fd: int, offset: int, count: int, more: bool) -> None:
        """``count`` bytes of ``fd`` from ``offset`` as (part of) the body, with sendfile."""
        if self.status is None:
            self._violation("a file sent before http.response.start")
        if self.complete or self.trailers >= _BODY_DONE:
            self._violation("a file sent after the end of the body")
        conn = self.conn
        if conn.closed:
            raise ClientDisconnected("client went away")
        out = b"" if self.head_sent else self._start_head(None if more else count)
        if self.discard_body or not count:
            if out:
                conn.write(out)
            if self._write_body(b"", more):
                await self._writable()
            return
        if self.remaining is not None:
            count = min(count, self.remaining)
            self.remaining -= count
        if self.chunked:
            out += b"%x\r\n" % count
        if out:
            conn.write(out)
        done = conn.loop.create_future()

        def sent(ok: bool) -> None:
            if not done.done():
                done.set_result(ok)

        conn.sendfile(fd, offset, count, sent)
        await self._client_wait(done)
        if not done.result():
            self._give_up()
            raise ClientDisconnected("the file could not be sent whole")
        self.sent += count
        if self.chunked:
            conn.write(b"\r\n")
        if self._write_body(b"", more):
            await self._writable()

    def _head(self, body_length: int | None) -> bytes:
        head = self.conn.answer_head(
            self.exchange,
            self.status,  # type: ignore[arg-type]  # http.response.start set it
            self.headers,
            self.keep_alive,
            body_length,
        )
        self.head_sent = True
        self.chunked = head.chunked
        self.remaining = head.content_length
        if head.close:
            self.keep_alive = False
        if head.bodiless:
            self.discard_body = True
        return head.data

    # -- errors -----------------------------------------------------------------------

    def _violation(self, what: str) -> NoReturn:
        """Log, answer (500, or close if the answer began), and raise into the application."""
        self.log.error("ASGI protocol error in the answer to %s: %s", self._where(), what)
        self._give_up()
        raise AsgiProtocolError(what)

    def _give_up(self) -> None:
        """No whole answer will come: 500 (504 past the request timeout) if nothing was sent,
        else close the connection."""
        if self.complete:
            return
        self.complete = True
        self.body.wake()
        conn = self.conn
        exchange = self.exchange
        if not self.head_sent and not conn.closed:
            status = exchange.status = 504 if self.timed_out else 500
            conn.finish(exchange, False, error_response(status, conn.server.prefix))
        else:
            conn.finish(exchange, False)


class TaskDeadline:
    """``request_timeout`` for one ASGI request: the application's time is the task's, less
    its waits for the client (its body, a client that does not read: ``suspend``/``resume``,
    as for WSGI). Past it, one log line with the task's stack, then the task is cancelled and
    the answer is a 504 (or the connection closed, if the answer began). An application that
    swallows the cancellation and still runs ``grace`` seconds later has its connection
    closed. A coroutine that blocks the loop is out of reach here: the loop does not run the
    timer until it returns, and the master's ``timeout`` replaces the worker (whose abort
    logs every thread's and task's stack)."""

    __slots__ = ("cycle", "grace", "handle", "log", "loop", "start", "task", "timeout",
                 "wait_began", "waited")  # fmt: skip

    def __init__(
        self, cycle: AsgiCycle, task: Any, timeout: float, grace: float, log: logging.Logger
    ) -> None:
        self.cycle = cycle
        self.task = task
        self.timeout = timeout
        self.grace = grace
        self.log = log
        loop = self.loop = task.get_loop()
        self.start = loop.time()
        self.waited = 0.0
        self.wait_began: float | None = None
        self.handle: Any = loop.call_later(timeout, self._check)

    def suspend(self) -> None:
        self.wait_began = self.loop.time()

    def resume(self) -> None:
        if self.wait_began is not None:
            self.waited += self.loop.time() - self.wait_began
            self.wait_began = None

    def _ran(self, now: float) -> float:
        waiting = now - self.wait_began if self.wait_began is not None else 0.0
        return now - self.start - self.waited - waiting

    def _check(self) -> None:
        ran = self._ran(self.loop.time())
        if ran < self.timeout:
            self.handle = self.loop.call_later(self.timeout - ran, self._check)
            return
        self.log.error(
            "request timeout: %s has run %.2fs in the application (request_timeout %gs); "
            "cancelling its task, at:\n%s",
            self.cycle._where(),
            ran,
            self.timeout,
            task_stack(self.task),
        )
        self.cycle.timed_out = True
        self.task.cancel()
        self.handle = self.loop.call_later(self.grace, self._stuck)

    def _stuck(self) -> None:
        if self.task.done():
            return
        self.log.error(
            "request timeout: %s still runs %gs after its task was cancelled (the "
            "application caught the cancellation); closing its connection, at:\n%s",
            self.cycle._where(),
            self.grace,
            task_stack(self.task),
        )
        self.handle = None
        self.cycle._give_up()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class AsgiAdapter(Adapter):
    """The ASGI side of a worker: bodies, scopes, one task per request."""

    empty_body = EMPTY

    def __init__(
        self,
        app: Any,
        *,
        log: logging.Logger,
        prefix: str = "",
        more_targets: tuple[tuple[Any, str], ...] = (),
        websocket: WebSocketOptions | None = WebSocketOptions(),  # noqa: B008 (frozen)
        request_timeout: float = 0.0,
        request_timeout_grace: float = 5.0,
        hooks: Any = None,
    ) -> None:
        """``app`` mounted at ``prefix`` (the scope's ``root_path``) is target 0;
        ``more_targets`` are NGINX Unit's further ``(callable, prefix)``; ``websocket`` the
        ``ws_*`` settings, None to serve upgrade requests as plain HTTP (``ws = none``);
        ``request_timeout`` (0: none) and its grace as `TaskDeadline` applies them; ``hooks``
        the worker's `corral.hooks.Hooks` (``pre_request``/``post_request``: hooked.py)."""
        targets = [(as_asgi3(target), mount) for target, mount in ((app, prefix), *more_targets)]
        self.lifespan_targets = tuple(targets)
        if hooks is not None and hooks.defines("pre_request", "post_request"):
            # chosen once: without these hooks the request path does not change at all
            pre, post = hooks.bound("pre_request"), hooks.bound("post_request")
            targets = [(hooked_application(target, pre, post), mount) for target, mount in targets]
        self.targets = tuple(targets)
        self.log = log
        # what lifespan's startup fills (corral.apps.asgi.lifespan); each scope gets a copy
        self.state: dict[str, Any] = {}
        self._bases: dict[Any, dict[str, Any]] = {}
        self.tasks: set[Any] = set()  # the running cycles, kept from the garbage collector
        self.websocket = websocket
        self.request_timeout = request_timeout
        self.request_timeout_grace = request_timeout_grace
        self.sessions: set[Any] = set()  # the WebSocket sessions (websocket_session.py)

    def make_body(self, conn: HttpConnection, exchange: Exchange) -> AsgiBody:
        exchange.streaming = True
        return AsgiBody()

    def run(self, conn: HttpConnection, exchange: Exchange) -> None:
        if exchange.body is EMPTY:
            exchange.body = AsgiBody(done=True)
        base = conn.adapter_state
        if base is None:
            base = conn.adapter_state = connection_scope(conn.sockname, conn.peer)
        app, root_path = self.targets[exchange.target]
        head = exchange.head
        scope = request_scope(base, head, root_path, self.state, exchange.forwarded)
        # the parser ends on an upgrade and says so: the headers are looked at only then
        if (
            conn.parser.upgraded is not None
            and self.websocket is not None
            and wants_websocket(scope["headers"])
        ):
            task = self._websocket(self.websocket, conn, exchange, app, websocket_scope(scope))
            if task is None:
                return
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return
        cycle = AsgiCycle(self.log, conn, exchange)
        # the cycle takes its task out of the set when it ends (no done callback: that would
        # be one more handle on the loop per request)
        task = cycle.task = request_task(conn.loop, cycle.run(app, scope))
        tasks = cycle.tasks = self.tasks
        tasks.add(task)
        if self.request_timeout:
            cycle.deadline = TaskDeadline(
                cycle, task, self.request_timeout, self.request_timeout_grace, self.log
            )

    def _websocket(
        self,
        options: WebSocketOptions,
        conn: HttpConnection,
        exchange: Exchange,
        app: Any,
        scope: Any,
    ) -> Any:
        """Start a WebSocket session; None when its handshake was refused (and answered)."""
        from corral.apps.asgi.websocket_session import WebSocketSession

        session = WebSocketSession(options, self.log, conn, exchange, self.sessions.discard)
        if not session.check_handshake():
            return None
        self.sessions.add(session)
        return conn.loop.create_task(session.run(app, scope))

    def drain(self) -> None:
        """The worker's graceful stop began: open WebSockets are closed with 1001."""
        for session in list(self.sessions):
            session.going_away()

    def client_gone(self, conn: HttpConnection) -> None:
        """The client closed its side while answers are due (`HttpConnection.eof_received`):
        for ASGI that is the disconnect, as every ASGI server reads an EOF, so a streaming
        application waiting on ``receive()`` stops; the answers may still be written."""
        for exchange in conn.pipeline:
            if exchange.body is EMPTY:  # not started yet: it gets its own body now
                exchange.body = AsgiBody(done=True)
            exchange.body.fail()

    def shutdown(self) -> int:
        """The worker's loop has stopped serving: cancel what still runs and let it unwind (its
        ``finally`` blocks run) for a second at most; how many swallowed their cancellation."""
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        loop = tasks[0].get_loop() if tasks else None
        if loop is None or loop.is_running() or loop.is_closed():
            return 0
        return len(loop.run_until_complete(wait(tasks, timeout=1.0))[1])
