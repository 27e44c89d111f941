"""Gunicorn's ``pre_request`` and ``post_request`` hooks around the application.

:func:`hooked_application` wraps the application once, when the adapter is built, and only
when one of the two hooks is defined: a server without them runs the very same request path.
:class:`~corral.apps.wsgi.response.WsgiCall` calls the application with its own bound
``start_response``; the wrapper finds the call through it.

Rules kept here:
- ``pre_request`` runs just before the application is called, on the thread that calls it.
- ``post_request`` runs once per call of the application, on the thread that ran the call,
  after the response's last bytes were handed to the connection and before the exchange is
  finished: the connection's next request waits for it, and a pool thread counts as busy
  until it returns. It also runs when the application failed or the client went away.
- A hook that raises is logged (by the bound hook); the request is answered all the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.apps.wsgi.input import ClientDisconnected
from corral.apps.wsgi.response import Output, WsgiCall
from corral.hooks import RequestView, ResponseView


def hooked_application(
    app: Any,
    pre_request: Callable[..., None] | None,
    post_request: Callable[..., None] | None,
) -> Callable[[dict[str, Any], Any], Any]:
    """``app``, with the hooks (bound to this worker: see :meth:`Hooks.bound`) around it."""

    def application(environ: dict[str, Any], start_response: Any) -> Any:
        call: WsgiCall = start_response.__self__
        request = RequestView(call.exchange.head, call.conn.peer)
        if post_request is not None:
            call.out = _PostRequestOutput(call.out, call, request, environ, post_request)
        if pre_request is not None:
            pre_request(request)
        return app(environ, start_response)

    return application


class _PostRequestOutput(Output):
    """A call's output, with ``post_request`` run between the last bytes and the finish."""

    def __init__(
        self,
        out: Output,
        call: WsgiCall,
        request: RequestView,
        environ: dict[str, Any],
        hook: Callable[..., None],
    ) -> None:
        super().__init__(out.on_loop)
        self.out = out
        self.call = call
        self.request = request
        self.environ = environ
        self.hook = hook

    @property
    def paused(self) -> bool:
        return self.out.paused

    def write(self, data: bytes) -> None:
        self.out.write(data)

    def wait_writable(self, callback: Any) -> None:
        self.out.wait_writable(callback)

    def sendfile(self, fd: int, offset: int, count: int, done: Any) -> None:
        self.out.sendfile(fd, offset, count, done)

    def complete(self, data: bytes, keep_alive: bool) -> None:
        if data:
            try:
                self.out.write(data)
            except ClientDisconnected:
                keep_alive = False
        self.finish(keep_alive)

    def finish(self, keep_alive: bool) -> None:
        call = self.call
        exchange = call.exchange
        sent = exchange.head_sent  # else the answer, if any, is the server's own error
        response = ResponseView(
            call.status if sent else None,
            exchange.status,
            (call.headers or []) if sent else [],
            exchange.response_bytes,
        )
        try:
            self.hook(self.request, self.environ, response)
        finally:
            self.out.finish(keep_alive)
