"""Applications whose requests wait in functions of known names, for the live stacks tests.

- ``application`` (WSGI): ``/hold?s=SECONDS`` waits in ``held_in_wsgi``; any other path
  answers ``pid N`` at once, with ``X-Worker-Pid`` (as the load of the tests expects).
- ``asgi_application``: ``/hold?s=SECONDS`` awaits in ``awaited_in_asgi``; other paths as
  above.
"""

import asyncio
import os
import time

PID = str(os.getpid()).encode()


def held_in_wsgi(seconds):
    time.sleep(seconds)


def _seconds(query):
    return float(query.partition("=")[2] or "5")


def application(environ, start_response):
    if environ["PATH_INFO"] == "/hold":
        held_in_wsgi(_seconds(environ.get("QUERY_STRING", "")))
    body = b"pid " + PID
    start_response(
        "200 OK",
        [("Content-Length", str(len(body))), ("X-Worker-Pid", PID.decode())],
    )
    return [body]


async def awaited_in_asgi(seconds):
    await asyncio.sleep(seconds)


async def asgi_application(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/hold":
        await awaited_in_asgi(_seconds(scope["query_string"].decode()))
    body = b"pid " + PID
    headers = [(b"content-length", str(len(body)).encode()), (b"x-worker-pid", PID)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
