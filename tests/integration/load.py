"""Client load for the supervision tests: keep-alive connections sending GETs until stopped.

``Load(server, connections=8, path="/pid")`` runs one thread per connection; ``server`` is
anything with ``host`` and ``port`` (a :class:`~tests.integration.server.Server`); with
``close=True`` every request asks for ``Connection: close``, so each opens a new connection
(and may land on any worker). Each thread
owns one HTTP/1.1 keep-alive connection at a time, a plain socket, and sends ``GET path`` on
it, one request after the other (no pipelining), until :meth:`Load.stop`. As a context
manager it starts on entry and stops on exit.

The contract the tests' accounting relies on:

- Every request sent is recorded exactly once, when it ends, as a :class:`Request`: its start
  and end (``time.monotonic()``), and either the response's ``status`` (``error`` is None: a
  complete, well-formed response, whatever its status) or the ``error`` that ended it, one of
  :data:`ERRORS`. Nothing is retried: after a failure the socket is closed and the thread's next
  request opens a new connection. Opening a connection is part of the request that needs it,
  so a refused connection is a failed request.
- ``pid`` is the worker pid the response named in its ``X-Worker-Pid`` header (None if it named
  none). For a failed request it is the pid the connection's last response named, None when
  the connection had not answered yet. A connection is served by one worker for its whole life,
  so this is the worker that held it.
- A response that ends its connection (``Connection: close``, HTTP/1.0 without keep-alive, a
  body delimited by the close) is a success; the next request opens a new connection.
- After a failure the thread waits ``failure_pause`` seconds before its next request, so that
  a stopped server is not hammered in a tight loop of refused connections.
- :meth:`Load.stop` lets each thread end the request it has started (each socket operation
  waits at most ``timeout``), then joins the threads; an exception in a thread (a bug here) is
  raised again there.

:func:`unexplained` applies the rule that a failure is explained by a ``kill -9`` of the
worker holding its connection while the request was in progress.
"""

from __future__ import annotations

import itertools
import re
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

REFUSED = "refused"  # the connection could not be opened
RESET = "reset"  # ECONNRESET or EPIPE while sending or receiving
EOF = "eof"  # the server closed the connection before a complete response
TIMEOUT = "timeout"  # no byte for `timeout` seconds
BAD = "bad"  # bytes that are not a well-formed response, or bytes after a complete one
OSERROR = "oserror"  # any other socket error
ERRORS = (REFUSED, RESET, EOF, TIMEOUT, BAD, OSERROR)

MAX_LINE = 65536  # longest status line, header block or chunk-size line accepted
STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-9]\d\d)(?: [^\r\n]*)?")
TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


class Address(Protocol):
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Request:
    """One request of the load, recorded when it ended."""

    connection: int  # serial number of the connection that carried it (1, 2, ... per Load)
    start: float  # time.monotonic() before connecting (if it had to) and sending
    end: float  # time.monotonic() once the response was read or the request failed
    status: int | None  # the response's status; None for a failed request
    error: str | None  # one of ERRORS; None for a complete response
    pid: int | None  # the worker that answered, or held the connection (see the module doc)
    closed: bool  # the connection ended with this request (the server's choice, or a failure)
    body: bytes = b""
    detail: str = ""  # what went wrong, for a failure

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class Kill:
    """A ``kill -9`` sent by a test: the pid and time.monotonic() just before the kill."""

    pid: int
    time: float


def unexplained(failures: list[Request], kills: list[Kill], slack: float = 0.5) -> list[Request]:
    """The failed requests that no kill explains.

    A failure is explained by a kill at a time within ``[start - slack, end]`` of the pid the
    request's connection last saw, or, on a connection that had not answered yet, by any
    kill in that window. The slack is on the start side only: a request may be sent on a
    connection whose worker is already dead when the client has not read the close yet. Kill
    times are taken before the kill, so a request that failed of it ends after that time.
    """
    return [
        request
        for request in failures
        if not any(
            request.start - slack <= kill.time <= request.end
            and (request.pid is None or request.pid == kill.pid)
            for kill in kills
        )
    ]


class _Failure(Exception):
    def __init__(self, error: str, detail: str) -> None:
        super().__init__(detail)
        self.error = error
        self.detail = detail


class _Connection:
    """One client socket and its receive buffer; reads responses strictly (RFC 9112)."""

    def __init__(self, sock: socket.socket, serial: int, pid_header: str) -> None:
        self.sock = sock
        self.serial = serial
        self.pid_header = pid_header
        self.pid: int | None = None  # named by the last response on this connection
        self.buffer = bytearray()

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> bool:
        """Receive more bytes; False at the end of the stream."""
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def _eof(self, what: str) -> _Failure:
        return _Failure(EOF, f"connection closed {what} ({len(self.buffer)} bytes buffered)")

    def _need(self, size: int, what: str) -> None:
        while len(self.buffer) < size:
            if not self._fill():
                raise self._eof(what)

    def _line(self, what: str) -> bytes:
        while (end := self.buffer.find(b"\r\n")) < 0:
            if len(self.buffer) > MAX_LINE:
                raise _Failure(BAD, f"{what} longer than {MAX_LINE} bytes")
            if not self._fill():
                raise self._eof(f"in the {what}")
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 2]
        return line

    def _head(self) -> bytes:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            if len(self.buffer) > MAX_LINE:
                raise _Failure(BAD, f"response head longer than {MAX_LINE} bytes")
            if not self._fill():
                raise self._eof("before the response" if not self.buffer else "in the head")
        head = bytes(self.buffer[:end])
        del self.buffer[: end + 4]
        return head

    def read_response(self) -> tuple[int, dict[str, list[str]], bytes, bool]:
        """``(status, headers, body, keep_alive)`` of the next final response."""
        while True:
            head = self._head()
            status_line, *fields = head.split(b"\r\n")
            match = STATUS_LINE.fullmatch(status_line)
            if match is None:
                raise _Failure(BAD, f"status line {status_line[:80]!r}")
            minor, status = int(match[1]), int(match[2])
            headers: dict[str, list[str]] = {}
            for field in fields:
                name, colon, value = field.partition(b":")
                if not colon or TOKEN.fullmatch(name) is None:
                    raise _Failure(BAD, f"header line {field[:80]!r}")
                key = name.decode("ascii").lower()
                headers.setdefault(key, []).append(value.strip(b" \t").decode("latin-1"))
            if status == 101:
                raise _Failure(BAD, "101 Switching Protocols to a plain GET")
            if status >= 200:
                break  # 1xx are interim: the final response follows
        tokens = _tokens(headers.get("connection", []))
        keep_alive = "close" not in tokens and (minor == 1 or "keep-alive" in tokens)
        body, delimited = self._body(status, headers)
        if not delimited:
            keep_alive = False  # the body ran to the end of the stream
        elif keep_alive and self.buffer:
            raise _Failure(BAD, f"{len(self.buffer)} bytes after a complete response")
        return status, headers, body, keep_alive

    def _body(self, status: int, headers: dict[str, list[str]]) -> tuple[bytes, bool]:
        """The body, and whether its end was framed (False: it ran until the close)."""
        if status in (204, 304):
            return b"", True
        codings = _tokens(headers.get("transfer-encoding", []))
        lengths = set(_items(headers.get("content-length", [])))
        if codings and lengths:
            raise _Failure(BAD, "both Transfer-Encoding and Content-Length")
        if codings:
            if codings[-1] == "chunked":
                return self._chunked(), True
            return self._to_close(), False
        if lengths:
            text = lengths.pop() if len(lengths) == 1 else ""
            if not (text.isascii() and text.isdigit()):
                raise _Failure(BAD, f"Content-Length {headers['content-length']}")
            length = int(text)
            self._need(length, "in the body")
            body = bytes(self.buffer[:length])
            del self.buffer[:length]
            return body, True
        return self._to_close(), False

    def _chunked(self) -> bytes:
        body = bytearray()
        while True:
            size_text = self._line("chunk size line").split(b";", 1)[0].strip(b" \t")
            if CHUNK_SIZE.fullmatch(size_text) is None:
                raise _Failure(BAD, f"chunk size {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                break
            self._need(size + 2, "in a chunk")
            if self.buffer[size : size + 2] != b"\r\n":
                raise _Failure(BAD, "chunk data not followed by CRLF")
            body += self.buffer[:size]
            del self.buffer[: size + 2]
        while self._line("trailer section"):
            pass
        return bytes(body)

    def _to_close(self) -> bytes:
        while self._fill():
            pass
        body = bytes(self.buffer)
        self.buffer.clear()
        return body

    def pid_of(self, headers: dict[str, list[str]]) -> int | None:
        values = headers.get(self.pid_header, [])
        return int(values[0]) if len(values) == 1 and values[0].isdigit() else None


def _items(values: list[str]) -> list[str]:
    """The comma-separated items of a field's lines."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def _tokens(values: list[str]) -> list[str]:
    return [item.lower() for item in _items(values)]


class Load:
    """Keep-alive GET load from ``connections`` threads; see the module docstring."""

    def __init__(
        self,
        server: Address,
        connections: int = 8,
        path: str = "/pid",
        *,
        pid_header: str = "X-Worker-Pid",
        timeout: float = 10.0,
        failure_pause: float = 0.01,
        close: bool = False,
    ) -> None:
        self.address = (server.host, server.port)
        self.connections = connections
        self.path = path
        self.timeout = timeout
        self.failure_pause = failure_pause
        self._pid_header = pid_header.lower()
        host = f"[{server.host}]" if ":" in server.host else server.host
        self._request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{server.port}\r\n"
            "User-Agent: corral-tests-load\r\n"
            + ("Connection: close\r\n" if close else "")
            + "\r\n"
        ).encode("latin-1")
        self._records: list[Request] = []
        self._served = 0
        self._changed = threading.Condition()
        self._serials = itertools.count(1)
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._crash: BaseException | None = None

    # -- running ------------------------------------------------------------------------

    def start(self) -> Load:
        for index in range(self.connections):
            thread = threading.Thread(target=self._run, name=f"load-{index}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> None:
        """Let every thread end its request, then join them."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(self.timeout * 3 + self.failure_pause + 5)  # connect, send, receive
            if thread.is_alive():
                raise AssertionError(f"{thread.name} did not stop")
        if self._crash is not None:
            raise AssertionError("a load thread crashed") from self._crash

    def __enter__(self) -> Load:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        conn: _Connection | None = None
        try:
            while not self._stopping.is_set():
                record, conn = self._one(conn)
                with self._changed:
                    self._records.append(record)
                    self._served += record.error is None
                    self._changed.notify_all()
                if record.error is not None:
                    self._stopping.wait(self.failure_pause)
        except BaseException as exc:
            self._crash = exc
            with self._changed:
                self._changed.notify_all()
        finally:
            if conn is not None:
                conn.close()

    def _one(self, conn: _Connection | None) -> tuple[Request, _Connection | None]:
        """Send one request (opening a connection if needed); its record and the connection."""
        start = time.monotonic()
        serial = conn.serial if conn is not None else next(self._serials)
        pid = conn.pid if conn is not None else None
        error = None
        try:
            if conn is None:
                try:
                    sock = socket.create_connection(self.address, timeout=self.timeout)
                except ConnectionRefusedError as exc:
                    raise _Failure(REFUSED, str(exc)) from None
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn = _Connection(sock, serial, self._pid_header)
            conn.sock.sendall(self._request)
            status, headers, body, keep_alive = conn.read_response()
        except _Failure as failure:
            error, detail = failure.error, failure.detail
        except TimeoutError as exc:
            error, detail = TIMEOUT, str(exc) or "timed out"
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
            error, detail = RESET, str(exc)
        except OSError as exc:
            error, detail = OSERROR, str(exc)
        end = time.monotonic()
        if error is not None:
            if conn is not None:
                conn.close()
            return Request(serial, start, end, None, error, pid, True, detail=detail), None
        assert conn is not None
        answered = conn.pid_of(headers)
        if answered is not None:
            conn.pid = answered
        record = Request(serial, start, end, status, None, answered, not keep_alive, body)
        if not keep_alive:
            conn.close()
            return record, None
        return record, conn

    # -- results --------------------------------------------------------------------------

    def wait_requests(self, count: int, timeout: float = 10.0) -> None:
        """Wait until ``count`` more requests than now were answered (``ok``)."""
        with self._changed:
            target = self._served + count
            if not self._changed.wait_for(
                lambda: self._served >= target or self._crash is not None, timeout
            ):
                raise AssertionError(
                    f"{count} more requests not answered within {timeout}s; {self.summary()}"
                )
        if self._crash is not None:
            raise AssertionError("a load thread crashed") from self._crash

    @property
    def requests(self) -> list[Request]:
        """Every request recorded so far, in the order they ended."""
        with self._changed:
            return list(self._records)

    @property
    def ok(self) -> list[Request]:
        return [request for request in self.requests if request.ok]

    @property
    def failures(self) -> list[Request]:
        return [request for request in self.requests if not request.ok]

    @property
    def statuses(self) -> Counter[int]:
        return Counter(request.status for request in self.ok if request.status is not None)

    @property
    def pids(self) -> set[int]:
        """The worker pids that answered."""
        return {request.pid for request in self.ok if request.pid is not None}

    def last_pids(self) -> dict[int, int | None]:
        """Connection serial → the pid its last request saw (answered or held it)."""
        return {request.connection: request.pid for request in self.requests}

    def summary(self) -> str:
        """One paragraph for assertion messages: counts, errors, pids."""
        records = self.requests
        failed = Counter(request.error for request in records if request.error is not None)
        pids = {request.pid for request in records if request.ok and request.pid is not None}
        connections = {request.connection for request in records}
        return (
            f"{len(records)} requests on {len(connections)} connections: "
            f"{len(records) - sum(failed.values())} answered {dict(self.statuses)}, "
            f"{sum(failed.values())} failed {dict(failed)}; {len(pids)} worker pids seen"
        )
