"""The per-request deadline (``request_timeout``): a 504, the stack, an exception in the thread.

Owns the worker's one watchdog thread (started only when ``request_timeout`` > 0), the
wrappers that time the application's code (:class:`TimedApp`, :class:`TimedIterable`) and
:class:`RequestTimeoutExceeded`.

What is counted is the application's own running time since the request was handed to it:
the sum of the *segments* in which its code runs, namely ``app(environ, start_response)``,
``iter()`` of its iterable, each ``__next__`` and ``close()``. Not counted: the wait for a free
thread (the request is not the application's yet), and the waits for the client: writing to
a client that does not read (the inline pump parks between chunks, a thread blocks in
``ThreadOutput.write``) and waiting for request body bytes the client has not sent. Those are
the client's time, bounded by ``send_timeout`` and ``body_timeout``; counting them would give
a 504 to a fast application behind a slow client. The blocking waits call
:meth:`Watchdog.suspend` and :meth:`Watchdog.resume` around themselves, which also keeps
the exception out of the server's condition variables.

At the deadline the watchdog logs one line naming the request, then the stack of its thread,
and raises :class:`RequestTimeoutExceeded` in that thread with ``PyThreadState_SetAsyncExc``.
Such an exception is only delivered when the thread runs bytecode, so when the thread is the
main one (``--threads 1``: the application runs inline on the event loop) it also gets
``SIGALRM``: a system call it blocks in (``time.sleep``, a socket read) returns ``EINTR``,
the do-nothing Python handler runs, and the pending exception is raised from it. The
exception unwinds the application; ``WsgiCall.fail`` answers 504 (or closes a connection
whose response had begun) and calls the iterable's ``close()``, as for any failure. A pool
thread blocked in C cannot be reached until the call returns: if a thread is still inside the
application ``request_timeout_grace`` seconds after the exception was raised, the watchdog logs
its stack again and reports a :class:`~corral.wire.Stuck` message (the line ``stuck AGE
METHOD TARGET`` on the heartbeat pipe), and the master kills and replaces the worker.

Invariants:
- An exception is raised into a thread only while that thread is inside a segment of the
  request it is meant for. The watchdog decides and raises holding :attr:`Watchdog.lock`; a
  thread leaving a segment takes the same lock, clears what is still pending for it
  (``PyThreadState_SetAsyncExc(tid, NULL)``) and, if it was fired at, raises
  :class:`RequestTimeoutExceeded` itself. Nothing is therefore delivered into server code or
  into a later request, and a timeout that lands while a segment ends surfaces from the same
  call as one delivered inside the application.
- The entry of a segment is inside its ``try``, and its exit clears the pending exception in
  the first call made under the lock: an exception delivered between two bytecodes there
  leaves no stale entry in :attr:`Watchdog.inside` (a stale one would look stuck).
- A request is fired at most once; a worker reports ``stuck`` at most once.
- With the feature off none of this runs: the adapter wraps the application only when
  ``request_timeout`` > 0.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from threading import get_ident
from time import monotonic
from typing import Any

from corral.apps.wsgi.filewrapper import FileWrapper
from corral.wire import InProgress, Stuck

# Sent to the main thread with the exception, so that a blocking system call returns.
WAKE_SIGNAL = signal.SIGALRM

# PyThreadState_SetAsyncExc(unsigned long thread_id, PyObject *exc); exc NULL clears. Called
# with explicitly typed arguments: setting argtypes would change the function object that
# ctypes.pythonapi shares with the application. Set with ctypes by the first `Watchdog` (a
# worker without ``request_timeout`` never imports ctypes), as are the exception and the
# thread id's type.
_set_async_exc: Any = None
_EXCEPTION: Any = None
_thread_id: Any = None


class RequestTimeoutExceeded(BaseException):
    """Raised inside the application's thread when its request ran past ``request_timeout``.

    A ``BaseException``, like ``KeyboardInterrupt``: applications wrap their work in
    ``except Exception:`` to log and go on, or to retry, and that would swallow the timeout;
    the request would run on until the grace is over and the whole worker is recycled.
    """


def _use_ctypes() -> None:
    global _set_async_exc, _EXCEPTION, _thread_id
    import ctypes

    _set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    _EXCEPTION = ctypes.py_object(RequestTimeoutExceeded)
    _thread_id = ctypes.c_ulong


def _wake(signum: int, frame: Any) -> None:
    """SIGALRM: nothing to do; running a Python handler is what delivers the exception."""


class RequestClock:
    """The application's time of one request, summed over the segments its code runs in."""

    __slots__ = (
        "entered",
        "fired_at",
        "method",
        "pending",
        "spent",
        "target",
        "thread_id",
        "watchdog",
    )

    def __init__(self, watchdog: Watchdog, method: str, target: str) -> None:
        self.watchdog = watchdog
        self.method = method
        self.target = target
        self.spent = 0.0  # seconds in finished segments
        self.entered = 0.0  # when the current segment began
        self.fired_at = 0.0  # when the exception was raised; 0: not yet
        self.pending = False  # raised, and the segment it was raised in has not ended
        self.thread_id: Any = None  # ctypes.c_ulong, set when fired

    def run(self, step: Callable[..., Any], *args: Any) -> Any:
        """``step(*args)`` as a segment of the application's time.

        Raises :class:`RequestTimeoutExceeded` when the deadline passed during it, whether
        the exception reached the application or the step returned first.
        """
        watchdog = self.watchdog
        lock = watchdog.lock
        inside = watchdog.inside
        tid = get_ident()
        try:
            with lock:
                self.entered = monotonic()
                inside[tid] = self
            value = step(*args)
        except BaseException as exc:
            with lock:
                fired = self.pending
                if fired:
                    self.pending = False
                    _set_async_exc(self.thread_id, None)  # the first call: see the invariants
                inside.pop(tid, None)
                self.spent += monotonic() - self.entered
            if fired and type(exc) is not RequestTimeoutExceeded:
                raise RequestTimeoutExceeded from exc  # the application turned it into another
            raise
        with lock:
            fired = self.pending
            if fired:
                self.pending = False
                _set_async_exc(self.thread_id, None)
            inside.pop(tid, None)
            self.spent += monotonic() - self.entered
        if fired:
            raise RequestTimeoutExceeded  # the step returned before the exception landed
        return value


class TimedIterable:
    """The application's iterable, each of its calls a timed segment."""

    __slots__ = ("_clock", "_iterator", "_result")

    def __init__(self, result: Any, clock: RequestClock) -> None:
        self._result = result
        self._clock = clock
        self._iterator: Any = None

    def __iter__(self) -> TimedIterable:
        self._iterator = self._clock.run(iter, self._result)
        return self

    def __next__(self) -> Any:
        return self._clock.run(next, self._iterator)

    def close(self) -> None:
        close = getattr(self._result, "close", None)
        if close is not None:
            self._clock.run(close)


class TimedApp:
    """The application as the adapter calls it when ``request_timeout`` > 0."""

    __slots__ = ("app", "watchdog")

    def __init__(self, app: Any, watchdog: Watchdog) -> None:
        self.app = app
        self.watchdog = watchdog

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        # read before the call: the application may change its environ
        clock = RequestClock(self.watchdog, environ["REQUEST_METHOD"], environ["RAW_URI"])
        result = clock.run(self.app, environ, start_response)
        if type(result) is list or type(result) is FileWrapper:
            # no application code runs past this point (a FileWrapper over a file the
            # runner cannot sendfile is read untimed: reading a file is not the app stuck)
            return result
        return TimedIterable(result, clock)


_SEGMENT_CODE = RequestClock.run.__code__


def _stack(frame: Any) -> traceback.StackSummary | None:
    """The application's frames: those above the segment (the server's are all alike)."""
    if frame is None:
        return None
    frames = []
    for entry in traceback.walk_stack(frame):
        if entry[0].f_code is _SEGMENT_CODE:
            break
        frames.append(entry)
    summary = traceback.StackSummary.extract(iter(frames), lookup_lines=False)
    summary.reverse()
    return summary


def _format(summary: traceback.StackSummary | None) -> str:
    if summary is None:
        return "  (no Python frame)"
    if not summary:
        return "  (in a C function the server called)"
    return "".join(summary.format()).rstrip("\n")


class Watchdog:
    """One thread per worker: fires at requests past the deadline, reports a stuck thread."""

    def __init__(
        self,
        timeout: float,
        grace: float,
        log: logging.Logger,
        report: Callable[[Stuck], None],
        *,
        interval: float | None = None,
    ) -> None:
        if _set_async_exc is None:
            _use_ctypes()
        self.timeout = timeout
        self.grace = grace
        self.log = log
        self.report = report  # writes the message to the heartbeat pipe (Worker._send)
        # a tenth of a second late at most, so the 504 leaves well within 0.25 s
        self.interval = interval or max(0.01, min(0.1, timeout / 4))
        self.lock = threading.Lock()
        self.inside: dict[int, RequestClock] = {}  # thread id -> the request it runs app code of
        self.recycling = False
        self.main_thread = 0
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """On the main thread: install the SIGALRM handler, start the thread."""
        self.main_thread = get_ident()
        signal.signal(WAKE_SIGNAL, _wake)
        self._thread = threading.Thread(target=self._watch, name="corral-deadline", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(1.0)  # it wakes every interval (at most 0.1 s)

    def _watch(self) -> None:
        while not self._stopped.wait(self.interval):
            self.check(monotonic())

    def check(self, now: float) -> None:
        """Fire at every segment past the deadline; report one still inside after the grace."""
        fired: list[tuple[RequestClock, int, float, Any]] = []
        stuck: tuple[RequestClock, int, float, Any] | None = None
        with self.lock:
            frames = None
            for tid, clock in self.inside.items():
                ran = clock.spent + now - clock.entered
                if not clock.fired_at:
                    if ran < self.timeout:
                        continue
                    if frames is None:
                        frames = sys._current_frames()
                    stack = _stack(frames.get(tid))  # where it is, before the exception moves it
                    clock.fired_at = now
                    clock.pending = True
                    clock.thread_id = _thread_id(tid)
                    _set_async_exc(clock.thread_id, _EXCEPTION)
                    if tid == self.main_thread:
                        signal.pthread_kill(tid, WAKE_SIGNAL)
                    fired.append((clock, tid, ran, stack))
                elif not self.recycling and now - clock.fired_at >= self.grace:
                    self.recycling = True
                    if frames is None:
                        frames = sys._current_frames()
                    stuck = (clock, tid, ran, _stack(frames.get(tid)))
        if fired or stuck:
            self._log(fired, stuck)

    def _log(self, fired: list[Any], stuck: Any) -> None:
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        for clock, tid, ran, stack in fired:
            self.log.error(
                "request timeout: %s %s has run %.2fs in the application (request_timeout "
                "%gs); raising RequestTimeoutExceeded in thread %s, at:\n%s",
                clock.method,
                clock.target,
                ran,
                self.timeout,
                names.get(tid, tid),
                _format(stack),
            )
        if stuck is not None:
            clock, tid, ran, stack = stuck
            self.log.critical(
                "request timeout: %s %s did not unwind within request_timeout_grace (%gs), "
                "%.1fs in the application; recycling the worker. Thread %s is at:\n%s",
                clock.method,
                clock.target,
                self.grace,
                ran,
                names.get(tid, tid),
                _format(stack),
            )
            # encode() cuts the target and writes its spaces %20
            self.report(Stuck(InProgress(round(ran, 1), clock.method, clock.target)))

    # -- for the server's blocking waits, called from inside a segment -------------------

    def suspend(self) -> RequestClock | None:
        """Stop the calling thread's clock before it waits for the client.

        Returns what :meth:`resume` needs, or None when the thread runs no application code.
        A timeout already raised at this thread is raised here, before the wait, rather than
        inside the wait's condition variable.
        """
        tid = get_ident()
        with self.lock:
            clock = self.inside.get(tid)
            if clock is None:
                return None
            if clock.pending:
                clock.pending = False
                _set_async_exc(clock.thread_id, None)
                raise RequestTimeoutExceeded
            del self.inside[tid]
            clock.spent += monotonic() - clock.entered
        return clock

    def resume(self, clock: RequestClock) -> None:
        """The wait for the client is over: the application's clock runs again."""
        with self.lock:
            clock.entered = monotonic()
            self.inside[get_ident()] = clock
