"""Applications for tests/integration/test_compression.py: answers that compression takes,
leaves alone, or streams, by path (the same paths for WSGI and ASGI where both have them).

- ``/text``: 2,400 bytes of text/plain with a strong ``ETag``, known in full;
- ``/pieces``: the same text in three pieces, its length unknown to the server;
- ``/small``: below ``min_length``; ``/png``: a type not listed; ``/encoded``: already gzip;
  ``/no-transform``: ``Cache-Control: no-transform``; ``/identity``: ``Content-Encoding:
  identity`` (the application's opt-out, BREACH); ``/partial``: a 206; ``/not-modified``: a
  304 with the ETag;
- ``/events?flags=DIR``: server-sent events, one at a time: event N+1 goes only once the
  test created ``DIR/goN`` (after it read event N: so each piece must have left alone).
"""

from __future__ import annotations

import asyncio
import gzip
import os
import time
from urllib.parse import parse_qs

TEXT = b"corral compresses what the client accepts. " * 56  # 2,408 bytes
ETAG = '"v1"'


def _answer(path: str) -> tuple[str, list[tuple[str, str]], bytes] | None:
    plain = ("Content-Type", "text/plain; charset=utf-8")
    if path == "/text":
        return "200 OK", [plain, ("ETag", ETAG)], TEXT
    if path == "/small":
        return "200 OK", [plain], b"hello"
    if path == "/png":
        return "200 OK", [("Content-Type", "image/png")], TEXT
    if path == "/encoded":
        return "200 OK", [plain, ("Content-Encoding", "gzip")], gzip.compress(TEXT)
    if path == "/no-transform":
        return "200 OK", [plain, ("Cache-Control", "no-transform")], TEXT
    if path == "/identity":
        return "200 OK", [plain, ("Content-Encoding", "identity")], TEXT
    if path == "/partial":
        fields = [plain, ("Content-Range", f"bytes 0-99/{len(TEXT)}")]
        return "206 Partial Content", fields, TEXT[:100]
    if path == "/not-modified":
        return "304 Not Modified", [plain, ("ETag", ETAG)], b""
    return None


def _flag(query: str, number: int) -> str:
    return os.path.join(parse_qs(query)["flags"][0], f"go{number}")


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/pieces":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [TEXT[:800], TEXT[800:1600], TEXT[1600:]]
    if path == "/events":
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        return _events(environ["QUERY_STRING"])
    status, fields, body = _answer(path) or ("404 Not Found", [], b"")
    start_response(status, fields)
    return [body]


def _events(query: str):
    for number in range(3):
        yield b"data: event %d\n\n" % number
        deadline = time.monotonic() + 10
        while not os.path.exists(_flag(query, number)) and time.monotonic() < deadline:
            time.sleep(0.01)


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path in ("/pieces", "/events"):
        kind = b"text/plain" if path == "/pieces" else b"text/event-stream"
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]}
        )
        if path == "/pieces":
            for piece in (TEXT[:800], TEXT[800:1600], TEXT[1600:]):
                await send({"type": "http.response.body", "body": piece, "more_body": True})
        else:
            query = scope["query_string"].decode()
            for number in range(3):
                event = b"data: event %d\n\n" % number
                await send({"type": "http.response.body", "body": event, "more_body": True})
                deadline = time.monotonic() + 10
                while not os.path.exists(_flag(query, number)) and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b""})
        return
    status, fields, body = _answer(path) or ("404 Not Found", [], b"")
    await send(
        {
            "type": "http.response.start",
            "status": int(status[:3]),
            "headers": [(n.lower().encode(), v.encode()) for n, v in fields],
        }
    )
    await send({"type": "http.response.body", "body": body})
