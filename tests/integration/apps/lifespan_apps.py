"""ASGI applications with and without lifespan, for tests/integration/test_asgi_lifespan.py.

``app`` fills the lifespan state at startup and answers it as JSON to every request, with the
worker's pid; it prints ``lifespan startup <pid>`` and ``lifespan shutdown <pid>`` on standard
error, the shutdown only after its last request's answer. ``failing`` answers the startup
with ``lifespan.startup.failed``; ``raising`` raises in it; ``http_only`` asserts an HTTP scope,
as many hand-written applications do (no lifespan).
"""

from __future__ import annotations

import json
import os
import sys


async def _answer(send, body):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                scope["state"]["greeting"] = "set at startup"
                print(f"lifespan startup {os.getpid()}", file=sys.stderr, flush=True)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                print(f"lifespan shutdown {os.getpid()}", file=sys.stderr, flush=True)
                await send({"type": "lifespan.shutdown.complete"})
                return
    state = dict(scope.get("state", {}))
    await _answer(send, json.dumps({"state": state, "pid": os.getpid()}).encode())


async def failing(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "database unreachable"})
        return
    await _answer(send, b"never")


async def raising(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        raise RuntimeError("no configuration")
    await _answer(send, b"served")


async def http_only(scope, receive, send):
    assert scope["type"] == "http"
    state = dict(scope.get("state", {}))
    await _answer(send, json.dumps({"state": state, "pid": os.getpid()}).encode())
