"""Raw ASGI WebSocket applications for tests/integration/test_websocket.py (no framework).

``app`` answers WebSocket handshakes by path:

- ``/echo``: accepts (the first subprotocol offered, and an ``x-session: 1`` header), sends
  back every message as it came (text as text, bytes as bytes) until the disconnect;
- ``/scope``: accepts and sends the scope as JSON text;
- ``/reject`` (``websocket.close`` before the accept), ``/deny`` (``websocket.http.response``:
  401 with a body; ``/deny-bad``: its header holds CR LF), ``/return`` (returns without
  accepting), ``/raise`` (raises before accepting), ``/bad-header`` (accepts with a header
  value holding CR LF);
- ``/close``: accepts, then closes with 4000 "bye"; ``/crash``: accepts, then raises;
- ``/hold``: accepts, waits until the HTTP request ``/release`` came, then receives every
  message and sends their count and total size as text;
- ``/send-after-close``: accepts, waits for the disconnect, then sends, and reports what
  that raised.

Over HTTP: ``/last`` is the last ``websocket.disconnect`` an application received (JSON),
``/release`` lets ``/hold`` go on, ``/raised`` what ``/send-after-close`` saw; anything else
is 200 "http".
"""

from __future__ import annotations

import asyncio
import json

from asgi_apps import _jsonable  # the scope as JSON, bytes as latin-1

_last: dict = {}
_raised: list[str] = []
_release = asyncio.Event()


async def _http(scope, receive, send):
    path = scope["path"]
    if path == "/last":
        body = json.dumps(_last).encode()
    elif path == "/release":
        _release.set()
        body = b"released"
    elif path == "/raised":
        body = json.dumps(_raised).encode()
    else:
        body = b"http"
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def _receive(receive):
    message = await receive()
    if message["type"] == "websocket.disconnect":
        _last.clear()
        _last.update(message)
    return message


async def app(scope, receive, send):
    if scope["type"] == "http":
        await _http(scope, receive, send)
        return
    if scope["type"] != "websocket":
        return  # lifespan: none
    path = scope["path"]
    connect = await receive()
    assert connect == {"type": "websocket.connect"}, connect
    if path == "/reject":
        await send({"type": "websocket.close"})
        return
    if path == "/deny":
        await send(
            {
                "type": "websocket.http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"text/plain"), (b"x-denied", b"yes")],
            }
        )
        await send({"type": "websocket.http.response.body", "body": b"not ", "more_body": True})
        await send({"type": "websocket.http.response.body", "body": b"you"})
        return
    if path == "/deny-bad":
        await send({"type": "websocket.http.response.start", "status": 401,
                    "headers": [(b"x-bad", b"a\r\nInjected: 1")]})  # fmt: skip
        await send({"type": "websocket.http.response.body", "body": b"no"})
        return
    if path == "/return":
        return
    if path == "/raise":
        raise RuntimeError("refusing before the accept")
    if path == "/bad-header":
        await send({"type": "websocket.accept", "headers": [(b"x-bad", b"a\r\nInjected: 1")]})
        return
    offered = scope["subprotocols"]
    await send(
        {
            "type": "websocket.accept",
            "subprotocol": offered[0] if offered else None,
            "headers": [(b"x-session", b"1")],
        }
    )
    if path == "/scope":
        await send({"type": "websocket.send", "text": json.dumps(_jsonable(scope))})
        await _receive(receive)
    elif path == "/close":
        await send({"type": "websocket.close", "code": 4000, "reason": "bye"})
        await _receive(receive)
    elif path == "/crash":
        raise RuntimeError("crashing after the accept")
    elif path == "/hold":
        await _release.wait()
        _release.clear()
        count = size = 0
        while True:
            message = await _receive(receive)
            if message["type"] == "websocket.disconnect":
                return
            count += 1
            size += len(message.get("bytes") or b"")
            if message.get("text") == "done":
                await send({"type": "websocket.send", "text": f"{count} {size}"})
    elif path == "/send-after-close":
        await _receive(receive)
        try:
            await send({"type": "websocket.send", "text": "too late"})
        except OSError as exc:
            _raised.append(type(exc).__name__)
    else:
        while True:
            message = await _receive(receive)
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is not None:
                await send({"type": "websocket.send", "text": message["text"]})
            else:
                await send({"type": "websocket.send", "bytes": message["bytes"]})
