"""ASGI's lifespan protocol for one worker (ASGI spec, lifespan 2.0).

The worker sends ``lifespan.startup`` before it says it is ready and waits for the answer;
``lifespan.shutdown`` once its graceful stop has served the last request. The application
runs in one task for the worker's whole life, with ``receive`` and ``send`` of its own, and
the ``state`` dict it fills at startup is copied into every request's scope
(`corral.apps.asgi.scope.request_scope`).

``mode`` is the ``lifespan`` setting. ``auto``: an application that raises or returns before
it answers the startup does not speak lifespan (Starlette's and Django's do; many hand-written
ones assert ``scope["type"] == "http"``), and is served without it. ``on``: that is a failed
startup too. A failed startup is `LifespanFailed`, which the worker turns into one log line
and exit 3, as an application that cannot be imported.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

SCOPE_ASGI = {"version": "3.0", "spec_version": "2.0"}


class LifespanFailed(Exception):
    """The application's startup failed (its message, or what it raised)."""


class Lifespan:
    """One application's lifespan in one worker."""

    def __init__(self, app: Any, state: dict[str, Any], log: logging.Logger, mode: str) -> None:
        self.app = app
        self.state = state
        self.log = log
        self.mode = mode
        self.supported = True  # until the application shows it is not (mode auto)
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._started: asyncio.Future[None] | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    async def startup(self) -> None:
        """Send ``lifespan.startup`` and wait for its answer; `LifespanFailed` if it failed."""
        loop = asyncio.get_running_loop()
        self._started = loop.create_future()
        self._stopped = loop.create_future()
        scope = {"type": "lifespan", "asgi": dict(SCOPE_ASGI), "state": self.state}
        self._inbox.put_nowait({"type": "lifespan.startup"})
        self._task = loop.create_task(self._main(scope))
        await self._started

    async def shutdown(self, timeout: float) -> None:
        """Send ``lifespan.shutdown`` and wait up to ``timeout`` seconds for its answer."""
        task, stopped = self._task, self._stopped
        if not self.supported or task is None or stopped is None or task.done():
            return
        self._inbox.put_nowait({"type": "lifespan.shutdown"})
        try:
            await asyncio.wait_for(asyncio.shield(stopped), timeout)
        except TimeoutError:
            self.log.warning("ASGI lifespan shutdown did not complete in %g s", timeout)
            task.cancel()

    async def _main(self, scope: dict[str, Any]) -> None:
        started = self._started
        assert started is not None
        try:
            await self.app(scope, self._receive, self._send)
        except Exception as exc:
            if not started.done():
                if self.mode == "auto":
                    self._unsupported(f"it raised {type(exc).__name__}: {exc}")
                else:
                    self.log.error("ASGI lifespan startup raised", exc_info=exc)
                    started.set_exception(LifespanFailed(f"{type(exc).__name__}: {exc}"))
            elif started.exception() is None:  # not after startup.failed: that said it all
                self.log.error("ASGI lifespan raised", exc_info=exc)
        else:
            if not started.done():
                if self.mode == "auto":
                    self._unsupported("it returned before lifespan.startup.complete")
                else:
                    started.set_exception(
                        LifespanFailed("the application returned before lifespan.startup.complete")
                    )
        finally:
            stopped = self._stopped
            if stopped is not None and not stopped.done():
                stopped.set_result(None)

    def _unsupported(self, why: str) -> None:
        self.supported = False
        self.log.info("ASGI lifespan: not supported by the application (%s); serving without", why)
        assert self._started is not None
        self._started.set_result(None)

    async def _receive(self) -> dict[str, Any]:
        return await self._inbox.get()

    async def _send(self, message: dict[str, Any]) -> None:
        kind = message.get("type") if isinstance(message, dict) else None
        started, stopped = self._started, self._stopped
        assert started is not None and stopped is not None
        if kind == "lifespan.startup.complete" and not started.done():
            started.set_result(None)
        elif kind == "lifespan.startup.failed" and not started.done():
            started.set_exception(LifespanFailed(str(message.get("message", "")) or "failed"))
        elif kind == "lifespan.shutdown.complete" and not stopped.done():
            stopped.set_result(None)
        elif kind == "lifespan.shutdown.failed" and not stopped.done():
            self.log.error("ASGI lifespan shutdown failed: %s", message.get("message", ""))
            stopped.set_result(None)
        else:
            raise RuntimeError(f"unexpected lifespan message {kind!r}")
