"""Worker main: one event loop serving one application on the inherited listeners.

The worker owns its loop, its connections and its application; it learns
nothing from the master but a :class:`WorkerSpec` and the TERM/QUIT signals, and
tells the master only through its heartbeat pipe: ``ready`` once the application
is imported and the listeners are served, then once a second a line with the
requests served and the age, method and path of the oldest request in progress.
The heartbeat is sent from the loop, so a loop blocked by the application goes
silent; the oldest-request age shows a request stuck on an application thread.
With ``request_timeout``, the watchdog thread (``wsgi/deadline.py``) may also write
one ``stuck AGE METHOD TARGET`` line: a request did not unwind within the grace,
and the master recycles the worker. One short ``os.write`` to a pipe is atomic, so
lines from two threads never interleave.

Signals: TERM drains (stop accepting, close idle connections, finish in-flight
requests within ``graceful_timeout``); QUIT exits at once; INT is ignored because
a terminal sends it to the whole process group and the master decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from functools import partial
from typing import Any

from corral.acceptor import DeferringAcceptor
from corral.appload import load_app
from corral.connection import HttpConnection, ServerState, sweep
from corral.http.parser import Limits
from corral.http.response import http_date
from corral.observe.errorlog import LOGGER_NAME

EXIT_OK = 0
EXIT_APP_LOAD = 3  # the master stops instead of respawning
EXIT_ABORTED = 6  # killed by the master's ABRT after a timeout


@dataclass
class WorkerSpec:
    """Everything a worker needs; built by the master from the configuration document."""

    application: Any  # config Application
    settings: Any  # config Settings
    sockets: list[socket.socket]
    heartbeat_fd: int
    loaded_app: Any = None  # set when the master preloaded the application
    multiprocess: bool = True
    access_log: Any = None


def new_event_loop(kind: str = "auto") -> asyncio.AbstractEventLoop:
    """uvloop when installed (or asked for), else asyncio's default loop."""
    if kind in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                raise
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class Worker:
    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.log = logging.getLogger(LOGGER_NAME)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.state: ServerState | None = None
        self.servers: list[Any] = []
        self.adapter: Any = None
        self.stopping = False
        self._server_header = ""

    def run(self) -> int:
        spec = self.spec
        settings = spec.settings
        for sig in (signal.SIGTERM, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        # INT reaches the whole process group from a terminal, HUP and the others
        # are the master's to act on: a worker must not die of them
        for sig in (
            signal.SIGINT,
            signal.SIGHUP,
            signal.SIGUSR1,
            signal.SIGUSR2,
            signal.SIGWINCH,
            signal.SIGTTIN,
            signal.SIGTTOU,
        ):
            signal.signal(sig, signal.SIG_IGN)
        signal.set_wakeup_fd(-1)
        os.set_blocking(spec.heartbeat_fd, False)
        app = spec.loaded_app
        if app is None:
            try:
                app = load_app(spec.application.module, spec.application.callable)
            except Exception:
                sys.stderr.write(
                    f"corral: error: application {spec.application.module!r} failed to load:\n"
                    + traceback.format_exc()
                )
                sys.stderr.flush()
                return EXIT_APP_LOAD
        from corral.wsgi.deadline import Watchdog
        from corral.wsgi.runner import WsgiAdapter

        loop = new_event_loop(getattr(settings, "loop", "auto"))
        asyncio.set_event_loop(loop)
        self.loop = loop
        application = spec.application
        watchdog = None
        if application.request_timeout > 0:
            # its thread writes "stuck ..." itself: the loop may be the one stuck
            watchdog = Watchdog(
                application.request_timeout,
                application.request_timeout_grace,
                self.log,
                self._send,
            )
        self.adapter = WsgiAdapter(
            app,
            threads=application.threads,
            body_buffer_size=settings.body_buffer_size,
            multiprocess=spec.multiprocess,
            log=self.log,
            watchdog=watchdog,
        )
        limits = Limits(
            settings.limit_request_line,
            settings.limit_request_fields,
            settings.limit_request_field_size,
            settings.limit_request_body,
        )
        state = ServerState(
            self.adapter,
            limits,
            keep_alive=settings.keep_alive,
            header_timeout=settings.header_timeout,
            body_timeout=settings.body_timeout,
            send_timeout=settings.send_timeout,
            access_log=spec.access_log,
        )
        state.loop = loop
        self.state = state
        header = settings.server_header
        self._server_header = f"Server: {header}\r\n" if header else ""
        self._tick_clock()
        loop.add_signal_handler(signal.SIGTERM, self.begin_drain)
        # QUIT must work while the application blocks the loop: a plain handler
        # runs between bytecodes (and interrupts sleeps) on the main thread.
        signal.signal(signal.SIGQUIT, self.quit)
        signal.signal(signal.SIGABRT, self.abort)
        try:
            loop.run_until_complete(self._serve())
        finally:
            self.adapter.shutdown()
            if spec.access_log is not None:
                spec.access_log.close()
            loop.close()
        return EXIT_OK

    async def _serve(self) -> None:
        loop = self.loop
        state = self.state
        assert loop is not None and state is not None
        backlog = self.spec.settings.backlog
        application = self.spec.application
        for sock in self.spec.sockets:
            factory = partial(HttpConnection, state, sock.getsockname())
            if application.threads > 1 and application.workers > 1:
                acceptor = DeferringAcceptor(
                    loop,
                    sock,
                    factory,
                    state.connections,
                    application.threads,
                    self.log,
                )
                acceptor.start()
                self.servers.append(acceptor)
            else:
                server = await loop.create_server(factory, sock=sock, backlog=backlog)
                self.servers.append(server)
        self._send("ready")
        self._done = loop.create_future()
        self._schedule_tick()
        await self._done

    # -- once a second ------------------------------------------------------------

    def _tick_clock(self) -> None:
        state = self.state
        assert state is not None and self.loop is not None
        state.now = self.loop.time()
        state.prefix = f"Date: {http_date(time.time())}\r\n{self._server_header}"

    def _schedule_tick(self) -> None:
        # aligned to the wall-clock second so the Date header turns over on time
        assert self.loop is not None
        self.loop.call_later(1.0 - time.time() % 1.0 + 0.001, self._tick)

    def _tick(self) -> None:
        self._tick_clock()
        state = self.state
        assert state is not None
        sweep(state.connections, state.now)
        self._heartbeat()
        self._schedule_tick()

    def _oldest_request(self, now: float) -> str:
        """``"AGE METHOD TARGET"`` of the oldest request in progress, or ``"0"``."""
        state = self.state
        assert state is not None
        oldest = None
        for conn in state.connections:
            exchange = conn.active
            if exchange is None or conn.waiting_for_client():
                continue  # a slow reader is the client's time, not the application's
            if oldest is None or exchange.request_start < oldest[0]:
                oldest = (exchange.request_start, exchange)
        if oldest is None:
            return "0"
        head = oldest[1].head
        target = head.target.decode("latin-1").replace(" ", "%20")[:200]
        return f"{now - oldest[0]:.1f} {head.method} {target}"

    def _heartbeat(self) -> None:
        state = self.state
        assert state is not None
        self._send(f"hb {state.served} {self._oldest_request(state.now)}")

    def _send(self, line: str) -> None:
        with contextlib.suppress(BlockingIOError, BrokenPipeError):
            os.write(self.spec.heartbeat_fd, (line + "\n").encode("utf-8", "replace"))

    # -- stopping -----------------------------------------------------------------

    def begin_drain(self) -> None:
        """TERM: stop accepting, close idle connections, let busy ones finish."""
        if self.stopping:
            return
        self.stopping = True
        state = self.state
        assert state is not None and self.loop is not None
        state.draining = True
        for server in self.servers:
            server.close()
        for conn in list(state.connections):
            if conn.idle():
                conn.close()
        self._drain_deadline = self.loop.time() + self.spec.settings.graceful_timeout
        self._drain_poll()

    def _drain_poll(self) -> None:
        state = self.state
        assert state is not None and self.loop is not None
        if not state.connections or self.loop.time() >= self._drain_deadline:
            if state.connections:
                self.log.warning(
                    "graceful timeout: closing %d busy connection(s)", len(state.connections)
                )
            self._finish()
            return
        self.loop.call_later(0.02, self._drain_poll)

    def _finish(self) -> None:
        if not self._done.done():
            self._done.set_result(None)

    def abort(self, *_: object) -> None:
        """ABRT from the master (timeout): say what was being served, then leave.

        A plain handler: it runs on the main thread even while the application
        blocks the loop, which is exactly when the master sends it.
        """
        if self.state is not None and self.loop is not None:
            self._send(f"abort {self._oldest_request(self.loop.time())}")
        os._exit(EXIT_ABORTED)

    def quit(self, *_: object) -> None:
        """QUIT: leave now."""
        os._exit(EXIT_OK)


def run_worker(spec: WorkerSpec) -> int:
    """Serve until told to stop; returns the exit status."""
    return Worker(spec).run()
