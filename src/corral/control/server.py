"""The control API's HTTP/1.1 transport, served from the master's own asyncio loop.

Invariants:
- requests are parsed by corral's own strict parser (`corral.http.parser`), bodies limited to
  `MAX_BODY`; a request not complete within `READ_TIMEOUT` is dropped; at most
  `MAX_CONNECTIONS` at once, more are closed unanswered;
- one request per connection, answered with ``Connection: close`` (as Unit's controller does);
- with a token, a request whose head lacks ``Authorization: Bearer TOKEN`` (compared in
  constant time) gets 401 before any of its body is read;
- a unix socket is created with mode 0600 (under a umask, never wider for a moment); the
  state directory holding it is created 0700;
- workers are forked while a change waits for them: `close_in_child` closes the API's
  descriptors in each child, so that a connection ends when the master closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import socket
import stat
import sys
import time
from http import HTTPStatus
from typing import Any

import msgspec

from corral.control import api, state
from corral.control.options import ControlOptions
from corral.core import RequestParser
from corral.http.errors import ContentTooLarge, HttpError
from corral.http.fields import server_fields
from corral.http.head import Limits, RequestHead, RequestSink
from corral.http.response import server_head
from corral.master.listeners import bind, describe
from corral.tls.store import CertificateStore

MAX_BODY = 8 << 20
MAX_CONNECTIONS = 64
READ_TIMEOUT = 30.0  # seconds for a whole request to arrive


class ControlServer:
    """The control socket and the connections on it, for one master."""

    def __init__(self, options: ControlOptions, log: logging.Logger) -> None:
        self.options = options
        self.log = log
        self.socket: socket.socket | None = None
        self.bound_here = False  # False: inherited from the master this one replaces (USR2)
        self.arbiter: Any = None  # set by serve() once the arbiter exists
        self.server: asyncio.Server | None = None
        self.connections: set[ControlConnection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.limits = Limits(body=MAX_BODY)
        self.token = options.token.encode() if options.token else None
        # NGINX Unit's /certificates, kept in the state directory; restored by bind()
        self.certificates = CertificateStore(options.state_dir, log)

    def prefix(self) -> str:
        """``Date`` and ``Server``, as the workers' answers carry them (the running document's
        ``server_header``); built per answer: the API answers a few requests, not a stream."""
        arbiter = self.arbiter
        server = arbiter.settings.server if arbiter is not None else ""
        return server_fields(time.time(), server)

    @property
    def inherit_key(self) -> str:
        """The name the socket goes by among the listeners passed to a new master (USR2)."""
        return f"control {self.options.address}"

    def bind(self, inherited: socket.socket | None = None) -> None:
        """Create the socket (or take the one an old master passed on). Raises `ListenError`
        or `ConfigError` (the state directory could not be created). Restores the
        certificate store first: the document's listeners may name its bundles."""
        self.certificates.load()
        if inherited is not None:
            self.socket = inherited
            return
        address = self.options.address
        in_state_dir = os.path.dirname(address.path or "") == self.options.state_dir
        if self.options.owns_config or in_state_dir:
            state.make_state_dir(self.options.state_dir)
        self.socket = bind(address, backlog=64, unix_mode=0o600)
        self.bound_here = True

    async def start(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.socket is not None
        extra: dict[str, Any] = {}
        if self.socket.family == socket.AF_UNIX:
            if sys.version_info >= (3, 13):
                extra["cleanup_socket"] = False  # close_socket decides (a new master may own it)
            self.server = await loop.create_unix_server(
                lambda: ControlConnection(self), sock=self.socket, **extra
            )
        else:
            self.server = await loop.create_server(
                lambda: ControlConnection(self), sock=self.socket
            )
        self.log.info("control API on %s", describe(self.socket))

    def save(self, doc: Any) -> None:
        """Persist an applied document (`Reloads.persist`). Raises OSError."""
        state.save(self.options.state_file, doc)

    def close_in_child(self) -> None:
        """In a freshly forked worker: let go of the API's socket and of every connection
        accepted on it, without touching the master's loop. The connections are found among
        the process's descriptors, not in ``connections``: asyncio accepts one a loop step
        before connection_made registers it, and a copy kept by a fork in that step would
        make its client wait for the close until its timeout."""
        if self.socket is None:
            return
        family, address = self.socket.family, self.socket.getsockname()
        self.socket.close()
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed since
                if stat.S_ISSOCK(os.fstat(fd).st_mode) and _accepted_on(fd, family, address):
                    os.close(fd)

    async def close(self, *, unlink: bool) -> None:
        """Stop serving: end the requests still waiting, close the socket."""
        if self.server is not None:
            self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.abort()
        self.close_socket(unlink=unlink)

    def close_socket(self, *, unlink: bool) -> None:
        sock, self.socket = self.socket, None
        if sock is None:
            return
        sock.close()
        address = self.options.address
        if unlink and address.kind == "unix" and address.path:
            with contextlib.suppress(OSError):
                os.unlink(address.path)


def _accepted_on(fd: int, family: int, address: Any) -> bool:
    """Whether socket ``fd`` is a connection accepted by the listener at ``address``: not a
    listener itself (a worker's own may have the API's port on another address), with the
    listener's family and local address, or only its port where the listener's host is a
    wildcard (the connection has the host's own address)."""
    sock = socket.socket(fileno=fd)
    try:
        if sock.family != family or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            return False
        local = sock.getsockname()
    finally:
        sock.detach()
    if family not in (socket.AF_INET, socket.AF_INET6):
        return bool(local == address)
    host, port = address[0], address[1]
    return bool(local[1] == port and (host in ("0.0.0.0", "::") or local[0] == host))


class ControlConnection(asyncio.Protocol, RequestSink):
    """One connection to the control socket: one request, one answer."""

    def __init__(self, server: ControlServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.fileno = -1
        self.parser = RequestParser(self, server.limits)
        self.head: RequestHead | None = None
        self.body: list[bytes] = []
        self.answered = False
        self.timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if len(self.server.connections) >= MAX_CONNECTIONS:
            self.answered = True
            transport.abort()
            return
        self.fileno = transport.get_extra_info("socket").fileno()
        self.server.connections.add(self)
        self.timer = asyncio.get_running_loop().call_later(READ_TIMEOUT, self._too_slow)

    def data_received(self, data: bytes) -> None:
        if self.answered:
            return
        try:
            self.parser.feed(data)
        except HttpError as exc:
            detail = exc.detail
            if isinstance(exc, ContentTooLarge):  # not the application's limit_request_body
                detail = f"a control request body has at most {MAX_BODY} bytes"
            self.respond(api.error(exc.status, HTTPStatus(exc.status).phrase + ".", detail))

    def eof_received(self) -> bool | None:
        if not self.answered and self.head is not None and self.timer is not None:
            self.respond(api.error(400, "Bad Request.", "the request ended before its body"))
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()

    # -- the parser's sink --------------------------------------------------------------

    def on_request(self, head: RequestHead) -> None:
        if self.answered:
            return
        self.head = head
        if self.server.token is not None and not self._authorized(head):
            reply = api.error(
                401, "Unauthorized.", "this request needs 'Authorization: Bearer TOKEN'"
            )
            reply.headers.append(("WWW-Authenticate", 'Bearer realm="corral"'))
            self.respond(reply)
        elif head.expect_continue and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, chunk: bytes) -> None:
        if not self.answered:
            self.body.append(chunk)

    def on_request_end(self) -> None:
        if self.answered or self.transport is None:
            return
        self.transport.pause_reading()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        task = asyncio.get_running_loop().create_task(self._answer())
        self.server.tasks.add(task)
        task.add_done_callback(self.server.tasks.discard)

    # -- answering ----------------------------------------------------------------------

    def _authorized(self, head: RequestHead) -> bool:
        token = self.server.token
        assert token is not None
        given = [value for name, value in head.headers if name.lower() == b"authorization"]
        if len(given) != 1:
            return False
        scheme, _, credentials = given[0].strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(credentials.strip(), token)

    async def _answer(self) -> None:
        head = self.head
        assert head is not None
        log = self.server.log
        try:
            target = head.target.decode("utf-8")
            reply = await api.handle(self.server.arbiter, head.method, target, b"".join(self.body))
        except UnicodeDecodeError:
            target = repr(head.target)
            reply = api.error(400, "Bad Request.", "the request target is not UTF-8")
        except Exception:
            log.exception("control API: %s %r failed", head.method, head.target)
            reply = api.error(500, "Internal error.", "see the server's error log")
        reads = head.method == "GET" and not target.startswith("/control/")
        level = logging.DEBUG if reads and reply.status < 500 else logging.INFO  # changes: INFO
        log.log(level, "control API: %s %s: %d", head.method, target, reply.status)
        self.respond(reply)

    def _too_slow(self) -> None:
        self.timer = None
        if not self.answered and self.head is None:
            self.respond(api.error(408, "Request Timeout.", "the request did not arrive in time"))
        elif not self.answered:
            self.answered = True
            if self.transport is not None:
                self.transport.abort()

    def respond(self, reply: api.Reply) -> None:
        """Write the whole answer and close the connection."""
        self.answered = True
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if reply.content_type == "application/json":
            body = msgspec.json.format(msgspec.json.encode(reply.body), indent=4) + b"\n"
        else:
            body = reply.body.encode("utf-8")
        fields = [
            f"Content-Type: {reply.content_type}\r\n",
            f"Content-Length: {len(body)}\r\n",
            *(f"{name}: {value}\r\n" for name, value in reply.headers),
        ]
        transport.write(
            server_head(reply.status, self.server.prefix(), "".join(fields), True) + body
        )
        transport.close()
