"""Gunicorn's ``pre_request`` and ``post_request`` hooks around an ASGI application.

As for WSGI (`corral.apps.wsgi.hooked`), the application is wrapped once, when the adapter is
built, and only when one of the two hooks is defined; the wrapper finds its request through
``receive``, the bound method of the cycle (HTTP) or session (WebSocket) that runs it.

- ``pre_request(worker, req)`` runs on the loop just before the application is called.
- ``post_request(worker, req, scope, resp)`` runs once the application returned or raised and
  its answer is complete (a failure's 500 or 504 included) and handed to the connection: the
  cycle calls it last (its ``after``). The scope stands where WSGI's hook gets the environ. A
  WebSocket's runs when its application ends; ``resp`` says 101.
- A hook that raises is logged (by the bound hook); the request is answered all the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.hooks import RequestView, ResponseView


def hooked_application(
    app: Any,
    pre_request: Callable[..., None] | None,
    post_request: Callable[..., None] | None,
) -> Callable[..., Any]:
    """``app``, with the hooks (bound to this worker: see `Hooks.bound`) around it."""

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        owner = receive.__self__  # an AsgiCycle or a WebSocketSession
        exchange = owner.exchange
        request = RequestView(exchange.head, owner.conn.peer)
        if post_request is not None:

            def after() -> None:
                response = ResponseView(
                    None, exchange.status, exchange.response_headers or [], exchange.response_bytes
                )
                post_request(request, scope, response)

            owner.after = after
        if pre_request is not None:
            pre_request(request)
        await app(scope, receive, send)

    return application
