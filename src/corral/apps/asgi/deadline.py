"""``request_timeout`` for ASGI requests (`TaskDeadline`): the adapter starts one per request
when the setting is on; the cycle suspends it while it waits for the client."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from corral.observe.stacks import task_stack

if TYPE_CHECKING:
    from corral.apps.asgi.runner import AsgiCycle


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
