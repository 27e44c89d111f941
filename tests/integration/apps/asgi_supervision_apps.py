"""ASGI applications for tests/integration/test_asgi_supervision.py.

``app`` by path: ``/slow`` awaits for ever in ``awaiting_for_ever``; ``/stream`` sends a first
chunk, then awaits for ever; ``/swallow`` catches the cancellation and goes on sleeping in
``swallowing``; ``/upload`` reads the whole body and answers its size; ``/block`` blocks the
event loop in ``blocking_the_loop`` (``time.sleep``); ``/pid`` the worker's pid; anything
else ``fast``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time


async def _answer(send, body: bytes, status: int = 200) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def awaiting_for_ever() -> None:
    await asyncio.sleep(3600)


async def swallowing() -> None:
    for _ in range(3600):
        with contextlib.suppress(asyncio.CancelledError):  # a badly behaved application
            await asyncio.sleep(1)


def blocking_the_loop() -> None:
    time.sleep(3600)


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/slow":
        await awaiting_for_ever()
    elif path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await awaiting_for_ever()
    elif path == "/swallow":
        await swallowing()
    elif path == "/upload":
        size = 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await _answer(send, str(size).encode())
    elif path == "/block":
        blocking_the_loop()
    elif path == "/pid":
        await _answer(send, str(os.getpid()).encode())
    else:
        await _answer(send, b"fast")
