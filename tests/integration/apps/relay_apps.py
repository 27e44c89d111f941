"""Three applications behind one TLS listener's routes (test_tls_relay.py): each answer says
which application and pid served it and what it was told of the connection.

Paths (after the application's own prefix, ``/a``, ``/b`` or ``/c``):
- ``/told``: JSON: app, pid, scheme, HTTPS, client address, the SSL_* keys (WSGI) or the ASGI
  tls extension, and the body's length and SHA-256;
- ``/big/N``: N bytes of a fixed pattern, with their Content-Length;
- ``/chunks/N``: the same pattern in N pieces of 64 KiB, with no length (chunked);
- ``/slow/S``: waits S seconds, then answers (and writes ``RELAY_MARKS/slow-PID`` first, so a
  test knows the request reached the worker);
- ``/drip/S``: a first piece of an answer without a length, then (``RELAY_MARKS/drip-PID``
  written) S seconds later the rest;
- ``/echo``: the request body back;
- ``/ws`` (``c``, ASGI): a WebSocket that echoes each message with the scope's scheme.
"""

import asyncio
import hashlib
import json
import os
import time

PATTERN = bytes(range(256)) * 4096  # 1 MiB


def pattern(length: int) -> bytes:
    return (PATTERN * (length // len(PATTERN) + 1))[:length]


def _mark(name: str) -> None:
    marks = os.environ.get("RELAY_MARKS")
    if marks:
        with open(os.path.join(marks, f"{name}-{os.getpid()}"), "w") as out:
            out.write("1")


def _wsgi(name: str):
    def application(environ, start_response):
        path = environ["PATH_INFO"].removeprefix(f"/{name}")
        body = environ["wsgi.input"].read()
        if path.startswith("/big/"):
            data = pattern(int(path[5:]))
            start_response("200 OK", [("Content-Length", str(len(data)))])
            return [data]
        if path.startswith("/chunks/"):
            data = pattern(int(path[8:]) * 65536)
            start_response("200 OK", [("Content-Type", "application/octet-stream")])
            return (data[i : i + 65536] for i in range(0, len(data), 65536))
        if path.startswith("/slow/"):
            _mark("slow")
            time.sleep(float(path[6:]))
        if path.startswith("/drip/"):
            start_response("200 OK", [("Content-Type", "text/plain")])
            return _drip(float(path[6:]))
        if path == "/echo":
            start_response("200 OK", [("Content-Length", str(len(body)))])
            return [body]
        told = {key: value for key, value in environ.items() if key.startswith("SSL_")}
        told.update(
            app=name,
            pid=os.getpid(),
            path=path,
            scheme=environ["wsgi.url_scheme"],
            HTTPS=environ.get("HTTPS"),
            client=[environ.get("REMOTE_ADDR"), environ.get("REMOTE_PORT")],
            length=len(body),
            sha256=hashlib.sha256(body).hexdigest(),
        )
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(told).encode()]

    return application


def _drip(seconds: float):
    yield b"first piece\n"
    _mark("drip")
    time.sleep(seconds)
    yield b"the rest\n"


app_a = _wsgi("a")
app_b = _wsgi("b")


async def app_c(scope, receive, send):
    """ASGI: ``/c/told`` (the tls extension) and ``/c/ws`` (a WebSocket echo)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text") or message.get("bytes", b"").decode()
            reply = f"{scope['scheme']} {os.getpid()} {text}"
            await send({"type": "websocket.send", "text": reply})
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope["path"].removeprefix("/c")
    if path.startswith("/slow/"):
        _mark("slow")
        await asyncio.sleep(float(path[6:]))
    told = {
        "app": "c",
        "pid": os.getpid(),
        "path": path,
        "scheme": scope["scheme"],
        "client": scope["client"],
        "tls": scope.get("extensions", {}).get("tls"),
        "length": len(body),
    }
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": json.dumps(told).encode()})
