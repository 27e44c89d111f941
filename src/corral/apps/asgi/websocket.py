"""WebSocket for ASGI applications: what the adapter decides and configures before any
session exists (which requests are WebSocket handshakes, their scope, the ``ws_*`` settings).
The session itself, and the ``websockets`` library it needs, are imported at the first
handshake only (`corral.apps.asgi.websocket_session`): a worker that never sees one does not
pay for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_EXTENSIONS: dict[str, dict[str, Any]] = {"websocket.http.response": {}}


@dataclass(frozen=True)
class WebSocketOptions:
    """The ``ws_*`` settings, taken once per worker."""

    max_size: int = 16 * 1024 * 1024
    max_queue: int = 32
    ping_interval: float = 20.0
    ping_timeout: float = 20.0
    close_timeout: float = 5.0
    per_message_deflate: bool = True


def wants_websocket(headers: list[tuple[bytes, bytes]]) -> bool:
    """The request asks for WebSocket (``Upgrade: websocket``); ``headers`` are the scope's,
    names lower-cased. The parser already saw ``Connection: upgrade`` beside an ``Upgrade``,
    or it would not have ended on it."""
    for name, value in headers:
        if name == b"upgrade":
            return b"websocket" in value.lower()
    return False


def websocket_scope(scope: dict[str, Any]) -> dict[str, Any]:
    """The WebSocket scope, made from the HTTP scope the same request would have had."""
    del scope["method"]
    scope["type"] = "websocket"
    scope["scheme"] = "wss" if scope["scheme"] in ("https", "wss") else "ws"
    subprotocols = []
    for name, value in scope["headers"]:
        if name == b"sec-websocket-protocol":
            subprotocols += [p.strip() for p in value.decode("latin-1").split(",") if p.strip()]
    scope["subprotocols"] = subprotocols
    tls = scope["extensions"].get("tls")
    scope["extensions"] = dict(_EXTENSIONS)
    if tls is not None:
        scope["extensions"]["tls"] = tls
    return scope
