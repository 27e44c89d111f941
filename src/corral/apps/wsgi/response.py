"""One WSGI call: ``start_response``, ``write()``, body framing, errors, ``close()``.

The same code answers on the loop thread (inline) and on an application thread;
only the :class:`Output` differs. Rules kept here (PEP 3333):
- ``start_response`` may be called again only with ``exc_info``; if the head was
  already sent, the exception is re-raised into the application, else the new
  status and headers replace the old ones.
- The head goes out with the first non-empty body chunk (or at the end), in the
  same write; a body that is one known chunk gets a Content-Length.
- ``close()`` of the application's iterable is always called, also when the
  client went away or the application failed.
- An exception before any byte was sent becomes a 500; after, the connection is
  closed. Either way the traceback goes to the error log and the worker goes on. An
  invalid answer (a status or header that must not be sent, a body chunk that is not
  bytes: ``str`` is the usual one) is one line in the log instead of a traceback.
- A bare ``bytes`` object returned as the iterable (NGINX Unit's sample application) is
  the whole body, as in Unit, not a sequence of ints.
- A :class:`~corral.apps.deadline.RequestTimeoutExceeded` (``request_timeout``) is
  caught wherever application code runs, beside ``Exception`` (it derives from
  ``BaseException``); it becomes a 504 before any byte was sent, else the connection
  is closed. The watchdog has logged it; ``fail`` adds no traceback.
"""

from __future__ import annotations

from asyncio import _set_running_loop
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.apps.deadline import RequestTimeoutExceeded
from corral.apps.wsgi.environ import ConnectionEnviron
from corral.apps.wsgi.filewrapper import FileWrapper
from corral.apps.wsgi.input import ClientDisconnected
from corral.http.errors import error_response
from corral.http.response import InvalidResponse
from corral.server.connection import HttpConnection
from corral.server.exchange import Exchange

# What application code may raise into the server: its errors, and the request timeout.
_APP_ERRORS = (Exception, RequestTimeoutExceeded)


class Output:
    """Where a call's bytes go: the connection itself (runner.LoopOutput, on the loop thread),
    or the bridge from an application thread (runner.ThreadOutput). A base class rather than
    a protocol, so that the compiled call reaches its methods in C."""

    def __init__(self, on_loop: bool) -> None:
        self.on_loop = on_loop  # True: calls run on the event loop thread

    @property
    def paused(self) -> bool:
        """The client does not read: the pump waits (`wait_writable`) before the next chunk."""
        return False

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def complete(self, data: bytes, keep_alive: bool) -> None:
        """The answer's last bytes (b"": none), then the exchange is finished."""
        raise NotImplementedError

    def finish(self, keep_alive: bool) -> None:
        raise NotImplementedError

    def wait_writable(self, callback: Any) -> None:
        raise NotImplementedError

    def sendfile(self, fd: int, offset: int, count: int, done: Any) -> None:
        raise NotImplementedError


def make_call(
    targets: tuple[Any, ...],
    log: Any,
    conn: HttpConnection,
    exchange: Exchange,
    out: Output,
    environ: ConnectionEnviron,
) -> WsgiCall:
    """A new call, without a constructor call's argument parsing: compiled, an allocation and
    C stores, for the call every request makes."""
    call = WsgiCall.__new__(WsgiCall)
    # NGINX Unit's targets: the one routing chose (Exchange.target; 0, the application,
    # on a plain listener or an application without targets)
    call.app = targets[exchange.target]
    call.environ = environ
    call.conn = conn
    call.exchange = exchange
    call.out = out
    call.log = log
    call.status = None
    call.headers = None
    call.result = None
    call.iterator = None
    return call


class WsgiCall:
    """One request's call of the application, over HTTP or a uwsgi packet (its environ is
    the connection's `ConnectionEnviron`'s; the answer is the same HTTP/1.x response either
    way). Made by `make_call`."""

    if TYPE_CHECKING:  # compiled, response.pxd declares them; made by make_call
        app: Any
        environ: ConnectionEnviron
        conn: HttpConnection
        exchange: Exchange
        out: Output
        log: Any
        status: str | None
        headers: list[tuple[str, str]] | None
        result: Any
        iterator: Any

    # -- the application's side -------------------------------------------------

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        if exc_info:
            try:
                if self.exchange.head_sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self.status is not None:
            raise AssertionError("start_response called a second time without exc_info")
        self.status = status
        self.headers = headers
        return self.write

    def write(self, data: bytes) -> None:
        """PEP 3333's write() callable, and the path of every body chunk."""
        if type(data) is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                # one line in the log (fail), not a traceback: the fix is the same everywhere
                raise InvalidResponse(
                    "the response iterable must yield bytes (and write() take bytes), "
                    f"not {type(data).__name__}"
                )
            data = bytes(data)
        conn = self.conn
        if conn.closed or conn.transport.is_closing():
            # a failed write closes the transport at once, but connection_lost
            # only runs on the next loop turn, which an inline app never yields
            raise ClientDisconnected("client went away")
        exchange = self.exchange
        if not exchange.head_sent:
            if not data:
                return
            out = self._head(None) + exchange.frame(data)
        else:
            out = exchange.frame(data)
        if out:
            self.out.write(out)

    # -- the server's side ------------------------------------------------------

    def _head(self, body_length: int | None) -> bytes:
        if self.status is None:
            raise AssertionError("the application sent a body before calling start_response")
        return self.conn.begin(
            self.exchange,
            self.status,
            self.headers,  # type: ignore[arg-type]  # start_response set both
            body_length,
        )

    def run(self) -> None:
        """Call the application and answer; may return early and go on when writable."""
        if self.out.on_loop:
            _set_running_loop(None)  # see _off_loop; inlined, as this runs per request
            try:
                self._run()
            finally:
                _set_running_loop(self.conn.loop)
        else:
            self._run()

    def resume(self) -> None:
        """Go on pumping the application's iterable once the client reads again (loop)."""
        self._off_loop(self.pump)

    def _off_loop(self, step: Any) -> None:
        # The application is synchronous code: on the loop thread it must not
        # see a running loop (Django, for one, then refuses database access).
        _set_running_loop(None)
        try:
            step()
        finally:
            _set_running_loop(self.conn.loop)

    def _run(self) -> None:
        exchange = self.exchange
        try:
            environ = self.environ.request(exchange.head, exchange.body, exchange.forwarded)
            result = self.app(environ, self.start_response)
        except _APP_ERRORS as exc:
            self.fail(exc)
            return
        self.result = result
        try:
            exchange = self.exchange
            if type(result) is list and len(result) == 1 and not exchange.head_sent:
                data = result[0]
            elif type(result) is bytes:
                # NGINX Unit's sample app returns bytes: served whole, as Unit does (iterated,
                # they would be ints); a bytes object has no close()
                data = None if exchange.head_sent else result
                result = self.result = (result,)
            else:
                data = None
            if type(data) is bytes:
                # the common answer: one known chunk, head and body in one write
                if self.status is None:
                    raise AssertionError(
                        "the application sent a body before calling start_response"
                    )
                headers = self.headers
                data = self.conn.whole(exchange, self.status, headers, data)  # type: ignore[arg-type]
                self.result = None  # a plain list has no close()
                self.out.complete(data, exchange.keep_alive)
                return
            if type(result) is FileWrapper:
                span = result.sendfile_range()
                if span is not None and self._sendfile(*span):
                    return
                if exchange.head_sent and exchange.discard:  # HEAD, 204 or 304: the head only
                    self._end_and_finish()
                    return
            self.iterator = iter(result)
        except _APP_ERRORS as exc:
            self.fail(exc)
            return
        self.pump()

    def pump(self) -> None:
        out = self.out
        iterator = self.iterator
        try:
            while True:
                if out.paused:
                    out.wait_writable(self.resume)
                    return
                try:
                    chunk = next(iterator)
                except StopIteration:
                    break
                self.write(chunk)
        except _APP_ERRORS as exc:
            self.fail(exc)
            return
        self._end_and_finish()

    def _end_and_finish(self) -> None:
        exchange = self.exchange
        try:
            data = b"" if exchange.head_sent else self._head(0)
            data += exchange.end()
        except Exception as exc:
            self.fail(exc)
            return
        self._close_result()
        self.out.complete(data, exchange.keep_alive)

    def _sendfile(self, fd: int, offset: int, count: int) -> bool:
        """The file range by sendfile, if the answer's framing lets it go so (False: the
        caller iterates the file instead, the head made)."""
        exchange = self.exchange
        prefix = self._head(count)
        if not exchange.sends_files:
            if prefix:
                self.out.write(prefix)
            return False
        count, before = exchange.frame_file(count)
        self.out.write(prefix + before)
        self.out.sendfile(fd, offset, count, self._sendfile_done)
        return True

    def _sendfile_done(self, ok: bool) -> None:
        exchange = self.exchange
        if not ok:
            exchange.keep_alive = False
        self._close_result()
        self.out.finish(exchange.keep_alive)

    def _close_result(self) -> None:
        result, self.result = self.result, None
        close = getattr(result, "close", None)
        if close is not None:
            try:
                close()
            except RequestTimeoutExceeded:
                # logged by the watchdog; the answer may still be whole
                self.exchange.keep_alive = False
            except Exception:
                self.log.exception("error in the close() of the application's iterable")

    def fail(self, exc: BaseException) -> None:
        """The application (or its answer) failed: 500 if nothing was sent, else close.

        Past ``request_timeout`` the answer is 504 instead of 500.
        """
        where = self.exchange.where()
        timed_out = type(exc) is RequestTimeoutExceeded
        if isinstance(exc, ClientDisconnected) or self.conn.closed:
            self.log.debug("client went away during %s", where)
        elif timed_out:
            self.log.debug("%s unwound after its request timeout", where)
        elif isinstance(exc, InvalidResponse):
            self.log.error("invalid response from the application to %s: %s", where, exc)
        else:
            self.log.error("error handling %s", where, exc_info=exc)
        self._close_result()
        exchange = self.exchange
        exchange.keep_alive = False
        if not exchange.head_sent and not self.conn.closed:
            status = 504 if timed_out else 500
            exchange.status = status
            self.out.complete(error_response(status, self.conn.server.prefix), False)
        else:
            self.out.finish(False)
