"""One ASGI request (HTTP connection scope) between its connection and the application.

The connection (`corral.server.connection.HttpConnection`) stays what it is for WSGI: it
parses, keeps the pipeline in order, runs the one deadline, enforces the limits and answers
protocol errors. The adapter (adapter.py) fills the same two methods as the WSGI one; the
cycle here answers through the same `HttpConnection.write` / `finish`, with heads from
`corral.http.response`:

- ``make_body`` gives a body-bearing request an `AsgiBody` (body.py: the body between the
  connection and ``receive()``, bounded by ``BODY_HIGH_WATER``) and marks the exchange
  ``streaming``, so the application starts while the body still arrives.
- ``run`` starts one task per request (`CycleCoroutine`). A request without a body gets an
  `AsgiBody` of its own there, complete and empty, which is how ``receive()`` learns of a
  disconnect for every request alike.
- ``send()`` keeps the head back until the first body message, so a small answer is one
  write; while the transport is paused it waits for ``resume_writing``
  (`HttpConnection.on_writable`; the connection's send deadline runs meanwhile).

What the spec forbids (a body before the start, a second start, a bad status, a header value
with CR, LF or NUL, a message after the end) raises `AsgiProtocolError` into the application
and is one line in the error log; the answer is a 500 if no byte was sent yet, else the
connection is closed. An exception of the application is one log entry with its traceback
and the same answer.

Lifespan is lifespan.py's, WebSocket websocket_session.py's (an upgrade starts a session, not a
cycle), ``request_timeout`` deadline.py's, ``pre_request``/``post_request`` hooked.py's.
Every scope offers ``http.response.pathsend`` and ``http.response.zerocopysend`` (``sendfile``,
framed by Content-Length or as one chunk) and, after ``TE: trailers``, ``http.response.trailers``
(the answer is then chunked; trailer fields are checked as header fields, framing ones dropped).
"""

from __future__ import annotations

import logging
import os
from asyncio import CancelledError, shield
from collections.abc import Coroutine, Mapping
from functools import partial
from types import CoroutineType
from typing import Any, NoReturn, Protocol

from corral.apps.asgi.body import AsgiBody, release
from corral.http.errors import error_response
from corral.http.response import InvalidResponse, reason, trailer_lines
from corral.server.connection import HttpConnection
from corral.server.exchange import Exchange

# Bytes of a file read at a time when it cannot go by sendfile (a body step encodes it).
FILE_PIECE = 256 * 1024
# where an answer with http.response.trailers stands (AsgiCycle.trailers)
_NO_TRAILERS, _ASKED, _BODY_DONE, _IN_TRAILERS = range(4)
_DISCONNECT = {"type": "http.disconnect"}


class RequestDeadline(Protocol):
    """``request_timeout`` as a cycle holds it: deadline.py's `TaskDeadline`, which reads the
    cycle back (it times the cycle's task out). Suspended while the cycle waits for the client,
    cancelled at its end."""

    def suspend(self) -> None: ...
    def resume(self) -> None: ...
    def cancel(self) -> None: ...


class AsgiProtocolError(RuntimeError):
    """The application sent what the ASGI spec forbids."""


class ClientDisconnected(OSError):
    """``send()`` after the client went away (the spec asks for an OSError subclass)."""


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
        "complete",
        "conn",
        "deadline",
        "exchange",
        "extensions",
        "headers",
        "log",
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
        self.status: str | None = None  # set by http.response.start
        self.headers: list[tuple[str, str]] = []
        self.complete = False  # the whole answer is written (or given up)
        self.deadline: RequestDeadline | None = None  # with request_timeout only
        self.timed_out = False  # the deadline cancelled the task
        self.after: Any = None  # the post_request hook's call (hooked.py), once it ended
        self.trailers = _NO_TRAILERS  # or where http.response.trailers stands
        self.task: Any = None  # the task running it, in ``tasks`` (the adapter's) until it ends
        self.tasks: Any = None
        self.extensions: Any = None  # what the scope offered (the adapter sets it)

    def _where(self) -> str:
        return self.exchange.where()

    def _wrap_up(self) -> None:
        """The application's run ended (`CycleCoroutine`): what the cycle holds goes."""
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
        if conn.closed:  # the cycle's end then finishes the exchange (its bookkeeping): _give_up
            raise ClientDisconnected("client went away")
        exchange = self.exchange
        if exchange.head_sent:
            out = exchange.frame(data)
        elif more or self.trailers:
            out = self._start_head(None) + exchange.frame(data)
        else:  # the whole answer in one message: one write
            try:
                # http.response.start set the status (_send checks it came first)
                out = conn.whole(exchange, self.status, self.headers, data)  # type: ignore[arg-type]
            except InvalidResponse as exc:
                self._violation(str(exc))
            self._end(out)
            return False
        if more or self.trailers:
            if out:
                conn.write(out)
            if more:
                return conn.write_paused and not conn.closed
            self.trailers = _BODY_DONE  # http.response.trailers ends the answer
            return False
        self._end(out + exchange.end())
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
        """The answer's last bytes (framed): finish the exchange."""
        self.complete = True
        self.body.wake()  # a receive() waiting for the end of the answer says disconnect
        exchange = self.exchange
        self.conn.finish(exchange, exchange.keep_alive, out)

    def _start_head(self, body_length: int | None) -> bytes:
        """The head, framed for ``body_length`` (None: not known yet, or trailers follow)."""
        try:
            return self.conn.begin(
                self.exchange,
                self.status,  # type: ignore[arg-type]  # http.response.start set it
                self.headers,
                None if self.trailers else body_length,
            )
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
        out = self.exchange.end(lines, more)
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
        exchange = self.exchange
        out = b"" if exchange.head_sent else self._start_head(None if more else count)
        if not count or not exchange.sends_files:
            if out:
                conn.write(out)
            if count and not exchange.discard:  # a body step encodes it: a copy, not sendfile
                await self._copy(fd, offset, count)
            if self._write_body(b"", more):
                await self._writable()
            return
        count, before = exchange.frame_file(count)
        out += before
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
        after = exchange.file_sent(count)
        if after:
            conn.write(after)
        if self._write_body(b"", more):
            await self._writable()

    async def _copy(self, fd: int, offset: int, count: int) -> None:
        """``count`` bytes of ``fd`` from ``offset`` through the body's framing, read piece by
        piece while the client takes them."""
        while count > 0:
            piece = os.pread(fd, min(count, FILE_PIECE), offset)
            if not piece:
                self._give_up()
                raise ClientDisconnected("the file is shorter than its count")
            offset += len(piece)
            count -= len(piece)
            if self._write_body(piece, True):
                await self._writable()

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
        if not exchange.head_sent and not conn.closed:
            status = exchange.status = 504 if self.timed_out else 500
            conn.finish(exchange, False, error_response(status, conn.server.prefix))
        else:
            conn.finish(exchange, False)


_OVER = object()  # the application's run ended
_TAKEN = object()  # no step's result is waiting for the task


class CycleCoroutine:
    """What a request's task runs: the application's coroutine, stepped here, with the
    cycle's ending (`AsgiCycle._failed`, ``_incomplete``, ``_wrap_up``) where it returns or
    raises. A coroutine to asyncio (the `Coroutine` protocol; the task steps it through
    ``__next__``), not an ``async def`` awaiting the application, so that its first step may
    run before the task's (`first_step`) and no coroutine of corral's sits in between.
    ``cr_await`` is the application's coroutine, as `corral.observe.stacks` follows it."""

    __slots__ = ("app", "cr_await", "cycle", "first", "raised", "scope")

    def __init__(self, cycle: AsgiCycle, app: Any, scope: dict[str, Any]) -> None:
        self.cycle: Any = cycle  # None once the run ended
        self.app = app
        self.scope: dict[str, Any] | None = scope  # None once the application was called
        self.cr_await: Any = None  # the application's coroutine while it runs
        self.first: Any = _TAKEN  # what first_step's step awaits, until the task takes it
        self.raised: BaseException | None = None  # what the task is to raise at the end

    def first_step(self) -> None:
        """Step the application before its task does (see `AsgiAdapter.run`)."""
        self.first = self._step()

    def __await__(self) -> Any:
        return self

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        awaited = self.first
        if awaited is _TAKEN:
            awaited = self._step()
        else:
            self.first = _TAKEN
        if awaited is not _OVER:
            return awaited
        raised = self.raised  # here, not in a helper: its traceback entry cost 2.6k instructions
        if raised is not None:
            self.raised = None
            raise raised
        raise StopIteration

    def send(self, value: Any) -> Any:
        if value is None:
            return self.__next__()
        raise TypeError("a request's task sends None only")

    def throw(self, kind: Any, value: Any = None, traceback: Any = None) -> Any:
        inner = self.cr_await
        error = kind if value is None else value
        if inner is None and self.scope is None:
            raise error  # as a coroutine that is over does
        self.first = _TAKEN
        try:
            if inner is None:  # before its first step: the application is never called
                self.scope = None
                raise error
            if value is None and traceback is None:
                return inner.throw(kind)
            return inner.throw(kind, value, traceback)
        except StopIteration:
            self._end(None)
        except BaseException as exc:
            self._end(exc)
        self.first = _OVER  # the end, which __next__ gives: what the task is to raise, or none
        return self.__next__()

    def close(self) -> None:
        inner = self.cr_await
        self.scope = self.cr_await = None
        if inner is not None:
            inner.close()

    def _step(self) -> Any:
        """One step of the application: what it awaits, or _OVER."""
        inner = self.cr_await
        if inner is None and self.scope is None:
            raise RuntimeError("cannot reuse already awaited coroutine")
        try:
            if inner is None:
                inner = self._call()
            return inner.send(None)
        except StopIteration:  # a bare handler: nothing asks for the exception object
            failure = None
        except BaseException as exc:
            failure = exc
        self._end(failure)
        return _OVER

    def _call(self) -> Any:
        """Call the application: its coroutine, which the task steps from now on."""
        scope, self.scope = self.scope, None
        cycle = self.cycle
        inner = self.app(scope, cycle.receive, cycle.send)
        if type(inner) is not CoroutineType:  # another awaitable, or none: await says which
            inner = _awaited(inner)
        self.cr_await = inner
        return inner

    def _end(self, exc: BaseException | None) -> None:
        """The application returned (``exc`` None) or raised: answer, then let go."""
        self.cr_await = None
        cycle = self.cycle
        try:
            if exc is not None:
                cycle._failed(exc)
            elif not cycle.complete:
                cycle._incomplete()
        except BaseException as again:  # a cancellation or an exit: the task raises it
            self.raised = again
        finally:
            cycle._wrap_up()
            self.app = self.cycle = None  # the cycle holds the task, which holds this


Coroutine.register(CycleCoroutine)


async def _awaited(awaitable: Any) -> None:
    await awaitable
