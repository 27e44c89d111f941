"""The ASGI side of a worker (`AsgiAdapter`): a scope and a `corral.apps.asgi.runner.AsgiCycle`
per request, each run by its task on the worker's loop, the first step of the application in
the turn that parsed the request (`AsgiAdapter.run`); a WebSocket upgrade starts a session of
websocket_session.py's instead; ``request_timeout`` is deadline.py's."""

from __future__ import annotations

import logging
from asyncio import Task, current_task, wait
from asyncio.tasks import _enter_task, _leave_task  # the current task, around a first step
from contextvars import copy_context
from typing import Any

from corral.apps.asgi.body import EMPTY, AsgiBody
from corral.apps.asgi.deadline import TaskDeadline
from corral.apps.asgi.hooked import hooked_application
from corral.apps.asgi.legacy import as_asgi3
from corral.apps.asgi.runner import _TAKEN, AsgiCycle, CycleCoroutine
from corral.apps.asgi.scope import connection_scope, request_scope
from corral.apps.asgi.websocket import WebSocketOptions, wants_websocket, websocket_scope
from corral.server.connection import Adapter, HttpConnection
from corral.server.exchange import Exchange

REQUEST_TASK = "corral-request"  # every request's task


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
        self.tasks: set[Any] = set()  # the running cycles, kept from the garbage collector
        self.websocket = websocket
        self.request_timeout = request_timeout
        self.request_timeout_grace = request_timeout_grace
        self.sessions: set[Any] = set()  # the WebSocket sessions (websocket_session.py)
        self.eager: Any = None  # the last request whose first step ran in run()
        # each request's context is a copy of the worker's (the application imported): not
        # of whatever runs run(), which for a pipelined request is the previous one's task
        self.context = copy_context()

    def make_body(self, conn: HttpConnection, exchange: Exchange) -> AsgiBody:
        exchange.streaming = True
        return AsgiBody()

    def run(self, conn: HttpConnection, exchange: Exchange) -> None:
        if exchange.body is EMPTY:
            exchange.body = AsgiBody(done=True)
        base = conn.adapter_state
        if base is None:
            scheme = "https" if conn.encrypted else "http"
            base = conn.adapter_state = connection_scope(conn.sockname, conn.peer, scheme)
            if conn.encrypted:  # the tls extension, once per connection (relayed ones too)
                from corral.tls.facts import asgi_extension_of  # (an HTTPS listener's only)

                tls = asgi_extension_of(conn)
                if tls is not None:
                    base["extensions"] = {"tls": tls}
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
        cycle.extensions = scope["extensions"]
        coro = CycleCoroutine(cycle, app, scope)
        loop = conn.loop
        context = self.context.copy()
        if loop.get_task_factory() is None:  # a name given is not formatted
            task = Task(coro, loop=loop, name=REQUEST_TASK, context=context)
            # the first step runs now, as WSGI's whole call does, in the task's own context
            # and with the task current (what Python 3.12's eager_start does): the answer
            # leaves in this turn of the loop. One request per turn: the first step of the
            # next waits for the task of this one to have taken its step's result
            # (``first``), so that under load (many connections ready in a turn) the others
            # wait their turn as tasks, which costs less; not inside another task (a
            # pipelined request that an answer dispatched), nor off the loop.
            last = self.eager
            eager = (
                (last is None or last.first is _TAKEN)
                and loop.is_running()  # not asyncio's get_running_loop: a getpid() each call
                and current_task(loop) is None
            )
        else:  # called as it is everywhere (uvloop's would format a Task-N name first)
            task = context.run(loop.create_task, coro, name=REQUEST_TASK)
            eager = False
        # the cycle takes its task out of the set when it ends (no done callback: that would
        # be one more handle on the loop per request)
        cycle.task = task
        tasks = cycle.tasks = self.tasks
        tasks.add(task)
        if self.request_timeout:
            cycle.deadline = TaskDeadline(
                cycle, task, self.request_timeout, self.request_timeout_grace, self.log
            )
        if eager:
            self.eager = coro
            _enter_task(loop, task)
            try:
                context.run(coro.first_step)
            finally:
                _leave_task(loop, task)

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
        return self.context.copy().run(conn.loop.create_task, session.run(app, scope))

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
