"""Runs a WSGI application for the connections of one worker.

With one thread (the default) the application runs inline on the event loop
thread once the whole request body has arrived (buffered, spilling to a temp
file), and its iterable is pumped only while the transport accepts more, so a
large streaming answer never piles up in memory. With ``threads > 1`` every call
runs on a fixed pool. Request bodies are read by the loop before the call (`BufferedInput`:
in memory up to ``body_buffer_size``, then in a temporary file), so that a slow client holds
no application thread (nginx's ``proxy_request_buffering``); ``100 Continue`` goes out when the
loop starts reading (the connection sends it). With ``request_buffering`` off, bodies of a
threaded application, and those of a request with ``Expect: 100-continue`` whatever the
threads, stream to the application through a bounded buffer, ``100 Continue`` at its first
read; with one thread a single helper thread runs the application for that.

Threads: every call is queued for the pool at once (`ThreadPool`: a busy pool runs its jobs
back to back; threads are woken once per turn of the loop, and answers go back to the loop in
one hop per batch: `answered`). Backpressure: the queue holds at most one request per
connection (a connection's next request is dispatched only when its answer is complete, and
one pipelined behind it stops the reading), and a queued request's streamed body fills its
bounded buffer at most before its connection stops being read. A streamed answer's bytes go to
a `~corral.server.buffering.BufferedAnswer` (nginx's ``proxy_buffering``: memory up to
``response_buffer_size``, then a spool file up to ``response_spool_size``), so that a thread
does not wait for a slow client unless both are full.

With ``request_timeout`` > 0 the adapter is given a :class:`~corral.apps.deadline.Watchdog`
and calls the application through :class:`~corral.apps.deadline.TimedApp`; otherwise the
application is called as it is (the choice is made once, here).

With a ``pre_request`` or ``post_request`` server hook the application is wrapped
once, at construction (:mod:`corral.apps.wsgi.hooked`); without them nothing changes. So is one
with a ``prefix`` (:class:`~corral.apps.wsgi.environ.Mounted`, outermost: hooks see the split).

NGINX Unit's ``targets``: the adapter holds one (wrapped) callable per target, the application
itself first; a call runs the one routing set on the exchange (``Exchange.target``, 0 elsewhere).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from corral.apps.deadline import TimedApp, Watchdog
from corral.apps.wsgi.environ import ConnectionEnviron, Mounted, connection_environ
from corral.apps.wsgi.errors import ErrorStream
from corral.apps.wsgi.filewrapper import FileWrapper
from corral.apps.wsgi.hooked import hooked_application
from corral.apps.wsgi.input import EMPTY, BufferedInput, ClientDisconnected, StreamingInput
from corral.apps.wsgi.response import Output, make_call
from corral.server.buffering import BufferedAnswer
from corral.server.connection import Adapter, HttpConnection
from corral.server.exchange import Exchange

# Bytes of a streamed request body buffered before the socket stops being read.
BODY_HIGH_WATER = 256 * 1024


def _batch_scheduling() -> None:
    """The calling thread runs under SCHED_BATCH: once woken, it does not preempt the thread
    that runs, but waits for it to block or for the scheduler's tick. The loop thread that
    wakes an application thread holds the GIL until it waits for events: preempted, it
    would only hand the CPU to a thread that blocks on the GIL at once and hands it back
    (5.5 context switches per request under close-per-request traffic on one core, 0.2 with
    it: bench/RESULTS.md). Nothing changes where the system has no such policy or refuses it."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is not None:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, policy, os.sched_param(0))


class ThreadPool:
    """Fixed threads taking jobs from one deque (at most one job per connection: see above).

    The GIL lets one thread run Python at a time, so waking a thread per job only trades the
    GIL at every job. Here a thread that finishes a job takes the next one at once, and a
    parked thread is woken only for a job that no awake thread is about to take (threads
    woken and not yet at a job count as about to: `_searching`); a woken thread that finds
    jobs behind its own wakes threads for them. So a busy pool runs its jobs back to back (as
    Granian's does), and still no job waits while a thread is parked, also when the running
    ones block."""

    def __init__(self, size: int, name: str, batch: bool = False) -> None:
        """``batch``: the threads run under Linux's SCHED_BATCH (`_batch_scheduling`)."""
        self._jobs: deque[Callable[[], None] | None] = deque()
        self._parked: list[Any] = []  # the locks parked threads wait on
        self._searching = 0  # threads woken that have not taken a job yet
        self._mutex = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, args=(batch,), name=f"{name}-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def _work(self, batch: bool) -> None:
        if batch:
            _batch_scheduling()
        jobs = self._jobs
        mutex = self._mutex
        park = threading.Lock()
        park.acquire()
        searching = False
        while True:
            try:
                job = jobs.popleft()
            except IndexError:
                with mutex:
                    if jobs:  # one came since the look: take it rather than park
                        continue
                    if searching:
                        self._searching -= 1
                        searching = False
                    self._parked.append(park)
                park.acquire()  # released by _wake, which counted this thread searching
                searching = True
                continue
            if searching:
                with mutex:
                    self._searching -= 1
                searching = False
                if jobs:
                    self.wake()
            if job is None:
                return
            job()

    def wake(self) -> None:
        """Jobs wait: wake a parked thread for each that no awake thread is about to take."""
        with self._mutex:
            count = min(len(self._jobs) - self._searching, len(self._parked))
            if count <= 0:
                return
            self._searching += count
            parks = [self._parked.pop() for _ in range(count)]
        for park in parks:
            park.release()

    def submit(self, job: Callable[[], None] | None) -> None:
        self._jobs.append(job)
        self.wake()

    def add(self, job: Callable[[], None]) -> None:
        """Queue a job without waking a thread: the caller calls `wake` soon (the adapter
        does at the end of the loop's turn, once for every job the turn queued)."""
        self._jobs.append(job)

    def shutdown(self) -> None:
        for _ in self._threads:
            self.submit(None)


class LoopOutput(Output):
    """Output straight to the connection, on the loop thread (one per connection)."""

    def __init__(self, conn: HttpConnection) -> None:
        self.on_loop = True  # Output's field, set here: one per connection, no super() call
        self.conn = conn

    @property
    def paused(self) -> bool:
        return self.conn.write_paused

    def write(self, data: bytes) -> None:
        self.conn.write(data)

    def complete(self, data: bytes, keep_alive: bool) -> None:
        self.conn.finish(self.conn.active, keep_alive, data)  # type: ignore[arg-type]

    def finish(self, keep_alive: bool) -> None:
        self.conn.finish(self.conn.active, keep_alive)  # type: ignore[arg-type]

    def wait_writable(self, callback: Callable[[], None]) -> None:
        self.conn.on_writable = callback

    def sendfile(self, fd: int, offset: int, count: int, done: Callable[[bool], None]) -> None:
        self.conn.sendfile(fd, offset, count, done)


class ThreadOutput(Output):
    """Output from an application thread: a streamed answer's bytes go to a `BufferedAnswer`
    (memory, then a spool: the thread goes on while a slow client reads; it blocks only when
    both are full, so it is never `paused`); a one-chunk answer goes to the loop at once."""

    def __init__(self, adapter: WsgiAdapter, conn: HttpConnection, exchange: Exchange) -> None:
        super().__init__(False)
        self.adapter = adapter
        self.conn = conn
        self.exchange = exchange
        self.loop = conn.loop
        # made by the first write(): most answers are one chunk (complete), never written here
        self._buffer: BufferedAnswer | None = None

    def write(self, data: bytes) -> None:
        buffer = self._buffer
        if buffer is None:
            adapter = self.adapter
            buffer = self._buffer = BufferedAnswer(
                self.conn,
                self.exchange,
                adapter.response_buffer_size,
                adapter.response_spool_size,
                adapter.watchdog,
            )
        if not buffer.put(data):
            raise ClientDisconnected("client went away")

    def complete(self, data: bytes, keep_alive: bool) -> None:
        if self._buffer is None:
            self.adapter.answered(self, data, keep_alive)
        else:
            self._buffer.end(data, keep_alive)

    def finish(self, keep_alive: bool) -> None:
        if self._buffer is None:
            self.loop.call_soon_threadsafe(self._finish_on_loop, keep_alive)
        else:
            self._buffer.end(b"", keep_alive)

    def _finish_on_loop(self, keep_alive: bool) -> None:
        self.conn.finish(self.exchange, keep_alive)

    def wait_writable(self, callback: Callable[[], None]) -> None:  # pragma: no cover
        callback()

    def sendfile(self, fd: int, offset: int, count: int, done: Callable[[bool], None]) -> None:
        finished = threading.Event()
        outcome: list[bool] = []

        def on_loop_done(ok: bool) -> None:
            outcome.append(ok)
            finished.set()

        if self._buffer is not None:
            self._buffer.wait_sent()  # the head, written before, goes first
        self.loop.call_soon_threadsafe(self.conn.sendfile, fd, offset, count, on_loop_done)
        finished.wait()
        done(outcome[0])


class WsgiAdapter(Adapter):
    """The WSGI side of a worker: builds bodies and environs, runs calls, counts threads."""

    def __init__(
        self,
        app: Any,
        *,
        threads: int,
        body_buffer_size: int,
        response_buffer_size: int,
        response_spool_size: int,
        multiprocess: bool,
        request_buffering: bool = True,
        body_temp_dir: str | None = None,
        log: logging.Logger,
        watchdog: Watchdog | None = None,
        hooks: Any = None,
        prefix: str = "",
        more_targets: tuple[tuple[Any, str], ...] = (),
        thread_scheduling: str = "batch",
    ) -> None:
        """``app`` mounted at ``prefix`` ("": none) is target 0; ``more_targets`` are the
        further ``(callable, prefix)`` of an application with NGINX Unit's ``targets``."""
        self.watchdog = watchdog
        self.targets = tuple(
            self._wrap(target, mount, hooks, watchdog)
            for target, mount in ((app, prefix), *more_targets)
        )
        if watchdog is not None:
            watchdog.start()
        self.threads = threads
        self.body_buffer_size = body_buffer_size
        # a streamed answer from a thread: bytes in memory, then spooled (server/buffering.py)
        self.response_buffer_size = response_buffer_size
        self.response_spool_size = response_spool_size
        self.request_buffering = request_buffering
        self.body_temp_dir = body_temp_dir
        self.multiprocess = multiprocess
        self.log = log
        self.errors = ErrorStream(log)
        batch = thread_scheduling == "batch"
        self.pool = ThreadPool(threads, "corral-app", batch) if threads > 1 else None
        self._helper: ThreadPool | None = None
        self._answers: deque[tuple[ThreadOutput, bytes, bool]] = deque()
        self._woken = False
        self._wake_planned = False
        self._listener_environs: dict[Any, dict[str, Any]] = {}

    @staticmethod
    def _wrap(app: Any, prefix: str, hooks: Any, watchdog: Watchdog | None) -> Any:
        if hooks is not None and hooks.defines("pre_request", "post_request"):
            # chosen once: without these hooks the request path does not change at all
            app = hooked_application(app, hooks.bound("pre_request"), hooks.bound("post_request"))
        if watchdog is not None:  # request_timeout > 0: every application call is timed
            app = TimedApp(app, watchdog)
        return Mounted(app, prefix) if prefix else app

    # -- connection side --------------------------------------------------------

    empty_body = EMPTY

    def make_body(self, conn: HttpConnection, exchange: Exchange) -> Any:
        head = exchange.head
        if self.request_buffering or (self.pool is None and not head.expect_continue):
            return BufferedInput(self.body_buffer_size, self.body_temp_dir)
        exchange.streaming = True
        call = conn.loop.call_soon_threadsafe
        return StreamingInput(
            BODY_HIGH_WATER,
            partial(call, conn.send_continue, exchange) if head.expect_continue else None,
            partial(call, conn.resume_body),
            self.watchdog,
        )

    def _connection_state(self, conn: HttpConnection) -> tuple[ConnectionEnviron, LoopOutput]:
        """The per-connection environ part and output, made on its first request.

        The kind of environ is chosen here, once per connection: a uwsgi listener's (never
        routed, never `forwarded`: the document refuses both) are the packet's vars."""
        sockname = conn.sockname
        key = sockname if isinstance(sockname, (tuple, str)) else None
        uwsgi = conn.plan.uwsgi  # its listener's parser reads uwsgi packets (http/uwsgi.py)
        base = self._listener_environs.get(key)
        if base is None:
            base = self._listener_environs[key] = connection_environ(
                sockname,
                None,
                multithread=self.threads > 1,
                multiprocess=self.multiprocess,
                file_wrapper=FileWrapper,
                errors=self.errors,
                http=not uwsgi,
                scheme="https" if conn.encrypted else "http",
            )
        environ = base.copy()
        if conn.encrypted:  # mod_ssl's SSL_* keys, once per connection (relayed ones too)
            from corral.tls.facts import wsgi_keys_of

            environ.update(wsgi_keys_of(conn))
        peer = conn.peer
        if isinstance(peer, tuple):
            environ["REMOTE_ADDR"] = peer[0]
            environ["REMOTE_PORT"] = str(peer[1])
        state = conn.adapter_state = (ConnectionEnviron(environ, uwsgi), LoopOutput(conn))
        return state

    def run(self, conn: HttpConnection, exchange: Exchange) -> None:
        environ, loop_output = conn.adapter_state or self._connection_state(conn)
        if self.pool is None and not exchange.streaming:
            make_call(self.targets, self.log, conn, exchange, loop_output, environ).run()
            return
        out = ThreadOutput(self, conn, exchange)
        job = make_call(self.targets, self.log, conn, exchange, out, environ)
        if self.pool is None:  # a streamed body on one thread: read by a helper thread
            if self._helper is None:
                self._helper = ThreadPool(1, "corral-body")
            self._helper.submit(job.run)
            return
        self.pool.add(job.run)
        if not self._wake_planned:
            # a thread woken now would take the CPU from the loop (one core: the wake-up
            # preempts) only to wait for the GIL it holds; woken as the turn ends, it runs
            self._wake_planned = True
            conn.loop.call_soon(self._wake_pool)

    def _wake_pool(self) -> None:
        self._wake_planned = False
        self.pool.wake()  # type: ignore[union-attr]

    def answered(self, out: ThreadOutput, data: bytes, keep_alive: bool) -> None:
        """On an application thread: a call's last bytes, written by the loop.

        Answers gather in one deque and the loop is woken once for all that came before it
        looks (a wake-up is a write to its self-pipe and a GIL hand-over each): ``_woken`` is
        cleared before the loop looks, so an answer added after the look wakes it again."""
        self._answers.append((out, data, keep_alive))
        if not self._woken:
            self._woken = True
            out.loop.call_soon_threadsafe(self._write_answers)

    def _write_answers(self) -> None:
        self._woken = False
        answers = self._answers
        while answers:
            out, data, keep_alive = answers.popleft()
            out.conn.finish(out.exchange, keep_alive, data)

    def shutdown(self) -> None:
        if self.watchdog is not None:
            self.watchdog.stop()
        for pool in (self.pool, self._helper):
            if pool is not None:
                pool.shutdown()
