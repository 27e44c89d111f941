"""Worker main: one event loop serving one application on the inherited listeners.

The worker owns its loop, its connections and its application; it learns
nothing from the master but a :class:`WorkerSpec` and the TERM/QUIT signals, and
tells the master only through its heartbeat pipe (the messages of ``corral/wire.py``, one
line each): ``ready`` once the application is imported and the listeners are served, then
once a second a line with the requests served and the age, method and path of the oldest
request in progress, an ``alive`` line every quarter of a second between those
(``wire.PULSE``), and ``retire N`` once it has served its ``max_requests``; ``failed CAUSE``
(one line: the exception and where it was raised) when the application cannot be imported.
The heartbeat is sent from the loop, so a loop blocked by the application goes silent; the
oldest-request age shows a request stuck on an application thread.
With ``request_timeout``, the watchdog thread (``apps/deadline.py``) may also write
one ``stuck AGE METHOD TARGET`` line: a request did not unwind within the grace,
and the master recycles the worker. One short ``os.write`` to a pipe is atomic, so
lines from two threads never interleave.

Each listener's plan (``server/plan.py``, ``Plans``) is made once: its parser (uwsgi
listeners: ``http/uwsgi.py``), NGINX Unit's ``forwarded`` (``filters/forwarded.py``), the
PROXY protocol (``server/proxied.py``), and routes with hand-offs from other applications'
workers (``server/routed.py``).

Signals: TERM drains: stop accepting (the listeners and the hand-off socket), finish
in-flight requests within ``graceful_timeout``; every response from then on says
``Connection: close``, and idle keep-alive connections are closed ``drain_idle_timeout``
later, not at once, so that a request a client is already sending on one is served rather
than reset. SERVER_STOPS (``server/health.py``: the whole server stops, where TERM alone
retires one worker) turns the probes' readiness to 503 and closes each answer's connection
at once, and drains ``shutdown_delay`` later, serving what waits in the accept queues before
the listeners close. QUIT exits at
once. USR1 reopens the log files. USR2 writes every thread's stack to the error log
(faulthandler, from C, so it works while the application holds the interpreter), and ABRT
reports the request in progress and exits: the master sends both, in that order, to a worker
it kills for a timeout. INT is ignored because a terminal sends it to the whole process group
and the master decides.

Server hooks (``spec.hooks``, Gunicorn's, see :mod:`corral.hooks`) that run here:
``post_worker_init`` once the application is imported, ``worker_int`` on QUIT,
``worker_abort`` on ABRT and ``worker_exit`` as the process ends, whichever way;
``pre_request``/``post_request`` through the adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import gc
import logging
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

# What every worker runs. A subsystem's modules (ASGI or WSGI, routes, TLS, the filters, the
# PROXY protocol, ...) are imported where the worker's configuration first uses them, and
# before a fork's user switch (server/needs.py: a worker that switched to another user may
# not be able to read the interpreter's own files to import them then).
from corral.apps.loader import (
    application_traceback,
    choose_interface,
    describe_load_failure,
    load_entry_points,
    load_failure,
)
from corral.apps.rootpath import behind
from corral.apps.venv import activate as activate_home
from corral.hooks import Hooks
from corral.http.fields import head_fields, server_fields
from corral.http.head import Limits
from corral.observe.errorlog import LOGGER_NAME, error_log_stream, reopen_error_log
from corral.observe.latency import LatencyHistogram
from corral.server.adapters import asgi_adapter, wsgi_adapter
from corral.server.census import connection_counts, oldest_request
from corral.server.connection import HttpConnection, ServerState
from corral.server.expiry import sweep
from corral.server.health import SERVER_STOPS
from corral.server.plan import Counts, ListenerSpec, Plans
from corral.server.steps import body_steps
from corral.wire import (
    PULSE,
    Abort,
    Alive,
    Beat,
    Closed,
    Failed,
    Latency,
    Message,
    Ready,
    Retire,
    encode,
)

if TYPE_CHECKING:
    from corral.apps.asgi.lifespan import Lifespan
    from corral.server.acceptor import LoadBoard
    from corral.server.handoff import HandoffServer
    from corral.server.routed import Routing
    from corral.server.tlsdoor import TlsDoor

EXIT_OK = 0
EXIT_APP_LOAD = 3  # the master stops instead of respawning
EXIT_ABORTED = 6  # killed by the master's ABRT after a timeout


@dataclass
class WorkerSpec:
    """Everything a worker needs; built by the master from the configuration document."""

    application: Any  # config Application
    settings: Any  # config Settings
    # the pool's listening sockets, each with what its document listener says
    listeners: list[ListenerSpec]
    heartbeat_fd: int
    stacks_socket: socket.socket | None = None  # see server/stacks.py
    orders_socket: socket.socket | None = None  # renewals from the master (server/renewal.py)
    tls_contexts: dict[str, Any] = field(default_factory=dict)  # HTTPS listeners', by address
    loaded_app: Any = None  # set when the master preloaded the application
    multiprocess: bool = True
    access_log: Any = None
    max_requests: int = 0  # this worker's own limit (jitter drawn by the master); 0: none
    hooks: Hooks | None = None  # the server hooks, as the master loaded them
    latency_histogram: bool = False  # count request durations (see Supervisor.latency_histogram)
    # Routes (see routed.py and handoff.py). When every listener passes to this worker's
    # application, nothing below is used.
    router: Any = None  # the compiled routes (routing.Router), needed by a "routes" pass
    app_name: str = ""  # this worker's application, as routes and passes name it
    # this application's hand-off socket: AF_UNIX, SOCK_STREAM, bound and listening (by the
    # master, before the fork, like a listener); every worker of the application accepts on
    # it. A worker must not inherit another application's: it would keep that socket open
    # (a hand-off to it would wait for the timeout, not be refused, once its workers are gone)
    handoff_socket: socket.socket | None = None
    # the hand-off socket path of every application (its own: see routed.Routing.addresses)
    handoff_addresses: dict[str, str] = field(default_factory=dict)
    handoff_timeout: float = 3.0  # connect and greeting from the other application's worker
    # A pool of several threaded workers balances its connections on a board (acceptor.py):
    # this worker's place on it is its slot
    board: LoadBoard | None = None
    slot: int = 0
    # the rate limits of the route steps that have one, by the step's JSON path (the master's)
    route_limiters: dict[str, Any] = field(default_factory=dict)
    seat: int = 0  # its place in the connection counts (the master's: filters/connlimit.py)
    total_conns: Any = None  # the server's limit_concurrency_total count (the master's)
    php: dict[str, Any] = field(default_factory=dict)  # "php" applications (corral.php.apps)


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


def share_event_loop(kind: str = "auto") -> None:
    """In the master, before it forks: import the workers' event loop (uvloop), whose pages
    the workers then share instead of each importing its own (1.2 MiB a worker)."""
    if kind in ("auto", "uvloop"):
        with contextlib.suppress(ImportError):
            import uvloop  # noqa: F401


class Worker:
    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.log = logging.getLogger(LOGGER_NAME)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.state: ServerState | None = None
        self.servers: list[Any] = []
        self.doors: list[TlsDoor] = []  # the HTTPS listeners' (tlsdoor.py), for the drain
        self.adapter: Any = None
        self.asgi = False  # an ASGI application's adapter: its tasks have stacks of their own
        self._task_stacks: Callable[[asyncio.AbstractEventLoop], str] | None = None
        self.stopping = False
        self.lifespans: list[Lifespan] = []  # an ASGI application's, unless lifespan is off
        self._fields: Callable[[float], str] = partial(server_fields, server="")  # the prefix
        self._second = 0  # the wall-clock second of the last whole tick
        self.master_pid = os.getppid()
        # a dynamic pool's master measures how busy the worker is by its latency sum
        measured = spec.latency_histogram or spec.application.dynamic is not None
        self.latency = LatencyHistogram() if measured else None
        self._reopen_asked = False  # USR1 came before the loop could act on it
        self.hooks = spec.hooks if spec.hooks is not None else Hooks()
        self.routing: Routing | None = None  # with routed listeners or a hand-off socket
        self.handoffs: HandoffServer | None = None

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
            signal.SIGWINCH,
            signal.SIGTTIN,
            signal.SIGTTOU,
        ):
            signal.signal(sig, signal.SIG_IGN)
        # USR1 (logrotate) while the application is imported is kept for later: this worker
        # holds the files as they were at its fork, and would write to the rotated ones
        signal.signal(signal.SIGUSR1, self._ask_reopen)
        signal.set_wakeup_fd(-1)
        # the master forks with its signals blocked; those sent since arrive now, to ours
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        self._enable_stack_dumps()
        if spec.stacks_socket is not None:  # from before the import: a hang there shows too
            from corral.server.stacks import StackResponder

            StackResponder(spec.stacks_socket, self._task_loop).start()
        os.set_blocking(spec.heartbeat_fd, False)
        entry_points = spec.application.entry_points
        apps = spec.loaded_app  # a callable per entry point
        if apps is None:
            try:
                activate_home(spec.application.home)
                apps = load_entry_points(entry_points, spec.application.factory)
            except Exception as exc:
                # the application's own frames, where they explain (to the error log, which
                # may be a file: where the operator looks); the one line that says why is the
                # master's, which knows what follows (shut down, retry, keep the old workers)
                # and names the cause to the control API
                shown = application_traceback(exc)
                if shown is not None:
                    # named as the master's line below it names the application
                    head = load_failure(spec.app_name, entry_points)
                    self.log.error("%s\n%s", head, shown)
                self._send(Failed(describe_load_failure(exc)))
                return EXIT_APP_LOAD
        self.hooks.call("post_worker_init")

        loop = new_event_loop(getattr(settings, "loop", "auto"))
        asyncio.set_event_loop(loop)
        self.loop = loop
        application = spec.application
        if application.thread_stack_size is not None:
            threading.stack_size(application.thread_stack_size)  # before the pool's threads
        interface = choose_interface(application.interface, application.protocol, apps[0])
        if application.root_path:  # Uvicorn's: the path a proxy in front took off
            apps = [behind(app, application.root_path, interface) for app in apps]
        # NGINX Unit's further targets, (callable, prefix), for either adapter
        more_targets = tuple(
            (app, entry.prefix) for app, entry in zip(apps[1:], entry_points[1:], strict=True)
        )
        if interface == "asgi":
            from corral.apps.asgi.lifespan import Lifespan
            from corral.observe.stacks import task_stacks

            self.adapter = asgi_adapter(
                apps[0], entry_points[0].prefix, more_targets, spec, self.log, self.hooks
            )
            self.asgi = True
            self._task_stacks = task_stacks  # (imported now: ABRT comes while the app blocks)
            if application.lifespan != "off":
                # each target's own lifespan, all filling the one state the scopes copy
                self.lifespans = [
                    Lifespan(app, self.adapter.state, self.log, application.lifespan)
                    for app, _ in self.adapter.lifespan_targets
                ]
        else:
            watchdog = None
            if application.request_timeout > 0:
                from corral.apps.deadline import Watchdog

                # its thread writes "stuck ..." itself: the loop may be the one stuck
                watchdog = Watchdog(
                    application.request_timeout,
                    application.request_timeout_grace,
                    self.log,
                    self._send,
                )
            self.adapter = wsgi_adapter(
                apps[0], entry_points[0].prefix, more_targets, watchdog, spec, self.log, self.hooks
            )
        limits = Limits(
            settings.limit_request_line,
            settings.limit_request_fields,
            settings.limit_request_field_size,
            settings.limit_request_body,
            settings.limit_request_head,
        )
        state = ServerState(
            self.adapter,
            limits,
            keep_alive=settings.keep_alive,
            header_timeout=settings.header_timeout,
            body_timeout=settings.body_timeout,
            body_min_rate=settings.body_min_rate,
            body_min_rate_grace=settings.body_min_rate_grace,
            send_timeout=settings.send_timeout,
            on_finish=self._on_finish(),
        )
        state.max_connections = settings.limit_concurrency
        if spec.max_requests:
            state.retire_after = spec.max_requests
            state.on_retire = self._retire
        state.loop = loop
        self.state = state
        self._fields = head_fields(settings.server, settings.headers, settings.date_header)
        self._tick_clock()
        # QUIT must work while the application blocks the loop: a plain handler
        # runs between bytecodes (and interrupts sleeps) on the main thread.
        signal.signal(signal.SIGQUIT, self.quit)
        signal.signal(signal.SIGABRT, self.abort)
        try:
            return loop.run_until_complete(self._serve())
        finally:
            if self.adapter.shutdown():  # ASGI: tasks that swallowed their cancellation
                self.log.warning("exiting with application tasks that would not stop")
            if spec.access_log is not None:
                spec.access_log.close()
            if self.routing is not None:
                self.routing.close()
            loop.close()

    async def _serve(self) -> int:
        loop = self.loop
        state = self.state
        assert loop is not None and state is not None
        spec = self.spec
        self._done = loop.create_future()  # a TERM during the lifespan startup ends it too
        # On the running loop, not before it runs: uvloop hears a signal only while its loop
        # runs, and one that came between the two would wait for the next signal to be acted
        # on (a TERM while the worker started: a drain that never began). Until here TERM
        # ends a starting worker, and USR1 is kept for later.
        loop.add_signal_handler(signal.SIGTERM, self.begin_drain)
        loop.add_signal_handler(signal.SIGUSR1, self.reopen_logs)
        loop.add_signal_handler(SERVER_STOPS, self.server_stops)
        if self._reopen_asked:
            self.reopen_logs()
        if self.lifespans:
            from corral.apps.asgi.lifespan import LifespanFailed
        for lifespan in self.lifespans:
            try:
                await lifespan.startup()
            except LifespanFailed as exc:
                self.log.error(
                    "application %r: ASGI lifespan startup failed: %s", spec.app_name, exc
                )
                self._send(Failed(f"ASGI lifespan startup failed: {exc}"))
                return EXIT_APP_LOAD
        if self.stopping:
            await self._end_lifespans()
            return EXIT_OK
        backlog = spec.settings.backlog
        application = spec.application
        routing = self.routing = self._routing()
        plans = Plans(
            spec.listeners,
            spec.app_name,
            routing,
            self.log,
            discard_unsafe_fields=spec.settings.discard_unsafe_fields,
            steps=body_steps(spec.settings),
            counts=Counts(spec),
        )
        gate = None
        if spec.board is not None and spec.listeners:
            from corral.server.acceptor import AcceptGate, BalancedAcceptor, WatchedConnections

            state.connections = WatchedConnections()
            state.on_client_gone = state.connections.client_gone
            gate = AcceptGate(spec.board, spec.slot, application.threads, state.connections)
        # renewals that came meanwhile first (the master sends them only to HTTPS listeners')
        if spec.orders_socket is not None and spec.tls_contexts:
            from corral.server.renewal import Renewals

            Renewals(spec.orders_socket, spec.tls_contexts, self._send, self.log).start(loop)
        for listener in spec.listeners:
            sock = listener.socket
            plan = plans.for_listener(listener)
            factory = partial(HttpConnection, state, plan)  # one class: the plan says the rest
            door = None  # an HTTPS listener's: what comes before the handshake (tlsdoor.py)
            if plan.tls is not None:
                from corral.server.tlsdoor import TlsAcceptor, TlsDoor

                timeout = spec.settings.tls_handshake_timeout
                door = TlsDoor(loop, plan, factory, timeout, self.log)
                self.doors.append(door)
            if gate is not None:
                acceptor = BalancedAcceptor(loop, sock, factory, gate, self.log, door)
                acceptor.start()
                self.servers.append(acceptor)
            elif door is not None:
                tls_acceptor = TlsAcceptor(loop, sock, door)
                tls_acceptor.start()
                self.servers.append(tls_acceptor)
            else:
                # a protocol by its methods: a compiled class cannot subclass asyncio.Protocol
                server = await loop.create_server(
                    factory,  # type: ignore[arg-type]
                    sock=sock,
                    backlog=backlog,
                )
                self.servers.append(server)
        if spec.handoff_socket is not None:
            from corral.server.handoff import HandoffServer
            from corral.server.routed import adopt_factory

            assert routing is not None
            handoffs = HandoffServer(
                loop,
                spec.handoff_socket,
                adopt_factory(state, routing, plans),
                self.log,
                spec.handoff_timeout,
            )
            handoffs.start()
            self.servers.append(handoffs)  # closed with the listeners when a drain begins
            self.handoffs = handoffs
        if application.gc_freeze:
            gc.collect()
            gc.freeze()
        self._send(Ready())
        self._schedule_tick()
        await self._done
        await self._end_lifespans()
        return EXIT_OK

    async def _end_lifespans(self) -> None:
        for lifespan in reversed(self.lifespans):
            await lifespan.shutdown(self.spec.settings.graceful_timeout)

    def _routing(self) -> Routing | None:
        """What routed connections share; None when no listener routes and no hand-off comes."""
        spec = self.spec
        own_pass = f"applications/{spec.app_name}"
        passes = [listener.pass_target for listener in spec.listeners]
        routed = any(p is not None and p != own_pass for p in passes)
        if not routed and spec.handoff_socket is None:
            return None
        from corral.server.routed import Routing

        router = spec.router
        if router is None:
            from corral.routing import compile_routes

            router = compile_routes(None)  # passes straight to applications only
        for pass_target in passes:
            if pass_target is not None and pass_target != own_pass:
                router.check_pass(pass_target)  # RouteError now, not at the first request
        return Routing(
            router,
            spec.app_name,
            dict(spec.handoff_addresses),
            timeout=spec.handoff_timeout,
            log=self.log,
            static=spec.settings.static,
            limiters=spec.route_limiters,
            php=spec.php,
        )

    # -- once a second ------------------------------------------------------------

    def _tick_clock(self) -> None:
        state = self.state
        assert state is not None and self.loop is not None
        wall = time.time()
        self._second = int(wall)
        state.prefix = self._fields(wall)

    def _schedule_tick(self) -> None:
        # aligned to the wall clock's quarters, so that the Date header turns over on time
        assert self.loop is not None
        self.loop.call_later(PULSE - time.time() % PULSE + 0.001, self._tick)

    def _tick(self) -> None:
        """Every PULSE the loop says it is alive; once a second, as the wall-clock second
        turns, the whole tick: the clock and the Date header, the sweep, the heartbeat."""
        if int(time.time()) == self._second:
            self._send(Alive(time.monotonic()))
            self._schedule_tick()
            return
        if os.getppid() != self.master_pid and not self.stopping:
            self.log.warning("the master (pid %d) is gone; draining", self.master_pid)
            self.begin_drain()
        self._tick_clock()
        state = self.state
        assert state is not None
        sweep(state.connections, time.monotonic())  # the clock the deadlines are set by
        self._heartbeat()
        self._schedule_tick()

    def _on_finish(self) -> Any:
        """What runs as each response finishes: the access log, the latency histogram."""
        observers = [spec for spec in (self.spec.access_log, self.latency) if spec is not None]
        if len(observers) < 2:
            return observers[0] if observers else None
        access_log, latency = observers

        def both(conn: Any, exchange: Any) -> None:
            access_log(conn, exchange)
            latency(conn, exchange)

        return both

    def _heartbeat(self) -> None:
        state = self.state
        assert state is not None
        self._send(connection_counts(state))
        latency = self.latency
        if latency is not None:
            self._send(Latency(latency.sum_us, tuple(latency.counts)))
        at = time.monotonic()
        self._send(Beat(state.served, at, oldest_request(state.connections, at)))

    def _send(self, message: Message) -> None:
        """One line to the heartbeat pipe (from the loop, the watchdog thread or a signal
        handler: one write below PIPE_BUF is atomic); dropped when the pipe is full."""
        with contextlib.suppress(BlockingIOError, BrokenPipeError):
            os.write(self.spec.heartbeat_fd, encode(message))

    def _retire(self) -> None:
        """``max_requests`` reached: the master starts a successor, then sends TERM.

        The worker serves on at full capacity until then (a few more requests than
        the limit), so that recycling never leaves a slot without a worker.
        """
        state = self.state
        assert state is not None
        self._send(Retire(state.served))

    # -- logs -------------------------------------------------------------------------

    def _enable_stack_dumps(self) -> None:
        """Python stacks to the error log on a crash (SEGV...) and on USR2 from the master."""
        stream = error_log_stream()
        faulthandler.enable(file=stream, all_threads=True)
        faulthandler.register(signal.SIGUSR2, file=stream, all_threads=True, chain=False)

    def _task_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop whose tasks the live stacks list: an ASGI worker's, once it runs."""
        loop = self.loop
        if loop is not None and loop.is_running() and self.asgi:
            return loop
        return None

    def _ask_reopen(self, *_: object) -> None:
        self._reopen_asked = True

    def reopen_logs(self) -> None:
        """USR1 (logrotate): reopen the error log and the access log at their paths."""
        reopen_error_log()
        self._enable_stack_dumps()  # faulthandler holds the old file's descriptor
        if self.spec.access_log is not None:
            self.spec.access_log.reopen()

    # -- stopping -----------------------------------------------------------------

    def server_stops(self) -> None:
        """The master's SERVER_STOPS: the whole server stops. Readiness is 503 at once and
        each answer closes its connection (server/health.py says why); the drain begins
        after ``shutdown_delay`` (or at a TERM), and serves what waits in the accept queues
        before the listeners close."""
        assert self.state is not None and self.loop is not None
        self.state.draining = True  # (before the drain: what tells it the server stops)
        self.loop.call_later(self.spec.settings.shutdown_delay, self.begin_drain)

    def begin_drain(self) -> None:
        """TERM: stop accepting, finish the requests in progress, then leave."""
        if self.stopping:
            return
        self.stopping = True
        self.hooks.worker_stopping()
        state = self.state
        assert state is not None and self.loop is not None
        server_stops = state.draining  # set by server_stops alone, before a drain
        state.draining = True
        settings = self.spec.settings
        self._drain_deadline = self.loop.time() + settings.graceful_timeout
        if server_stops:  # (a retired worker's successors take its accept queues)
            self._close_when_no_backlog(self.loop.time() + settings.drain_idle_timeout)
        else:
            self._close_listeners()
        if self.routing is not None:
            self.routing.drain()
        self.adapter.drain()
        grace = min(settings.drain_idle_timeout, state.keep_alive)
        self.loop.call_later(grace, self._close_idle)
        # not at once: a connection accepted in this same loop iteration has its
        # connection_made still queued (call_soon), and an empty set now would end the worker
        # with that connection unanswered
        self.loop.call_soon(self._drain_poll)

    def _close_listeners(self) -> None:
        for server in self.servers:
            server.close()
        self.servers.clear()  # (while any is open, the drain waits: what it accepts is due)
        # the master answers a control API change only once its retired workers said this:
        # a connection opened after the answer must not reach the old configuration
        self._send(Closed())

    def _close_when_no_backlog(self, until: float) -> None:
        """The listeners stay open while a connection waits in one's accept queue (the
        loop's accept takes it meanwhile, answered with ``Connection: close``), at most
        until ``until`` (``drain_idle_timeout``: a balancer that still sends keeps them
        full), then close: what a client had already sent is served, not reset."""
        assert self.loop is not None
        waiting = select.poll()
        for listener in self.spec.listeners:
            if listener.socket.fileno() >= 0:
                waiting.register(listener.socket.fileno(), select.POLLIN)
        if waiting.poll(0) and self.loop.time() < until:
            self.loop.call_later(0.005, self._close_when_no_backlog, until)
        else:
            self._close_listeners()

    def _close_idle(self) -> None:
        state = self.state
        assert state is not None
        for conn in list(state.connections):
            if conn.idle():
                conn.close()

    def _drain_poll(self) -> None:
        state = self.state
        assert state is not None and self.loop is not None
        if not self._serving() or self.loop.time() >= self._drain_deadline:
            routing = self.routing
            busy = len(state.connections) + (len(routing.relays) if routing is not None else 0)
            if busy:
                self.log.warning("graceful timeout: closing %d busy connection(s)", busy)
            self._finish()
            return
        self.loop.call_later(0.02, self._drain_poll)

    def _serving(self) -> bool:
        """Connections are open, or on their way in: by hand-off (greeted, or being adopted),
        or through an HTTPS listener's door (in their handshake); or relayed to another
        application's worker (relay.py)."""
        state = self.state
        assert state is not None
        if self.servers or state.connections or any(door.arriving for door in self.doors):
            return True
        routing = self.routing
        return bool(
            (self.handoffs is not None and self.handoffs.receiving)
            or (routing is not None and (routing.adopting or routing.relays))
        )

    def _finish(self) -> None:
        if not self._done.done():
            if self.state is not None:  # the last counts, for the master's totals
                self._heartbeat()
            self._done.set_result(None)

    def abort(self, *_: object) -> None:
        """ABRT from the master (timeout): say what was being served, then leave.

        A plain handler: it runs on the main thread even while the application
        blocks the loop, which is exactly when the master sends it. The hooks run
        first: the master kills the worker as soon as the ``abort`` line arrives.
        """
        self.hooks.call("worker_abort")
        self.hooks.call("worker_exit")
        if self.loop is not None and self._task_stacks is not None:
            # the threads' stacks went out on USR2 (faulthandler); a task waiting in an await
            # is on no thread's stack
            self.log.error("its pending tasks:\n%s", self._task_stacks(self.loop))
        if self.state is not None and self.loop is not None:
            self._send(Abort(oldest_request(self.state.connections, time.monotonic())))
        os._exit(EXIT_ABORTED)

    def quit(self, *_: object) -> None:
        """QUIT: leave now."""
        self.hooks.call("worker_int")
        self.hooks.call("worker_exit")
        os._exit(EXIT_OK)


def run_worker(spec: WorkerSpec) -> int:
    """Serve until told to stop; returns the exit status."""
    worker = Worker(spec)
    try:
        return worker.run()
    finally:
        worker.hooks.call("worker_exit")
