"""Applications for tests/integration/test_response_fields.py: answers that give fields the
server writes itself (``Date``, ``Server``, ``Content-Length``, ``Transfer-Encoding``,
``Connection``).

Each answers ``ok`` with the header fields its query string names, in order and repeated as
given (``?Date=...&Server=...``: a field per pair, so that a value may hold a comma, as a
``Date`` does):

- ``application`` (WSGI): by PATH_INFO, ``/one`` returns a list of one bytes (the server
  knows the body's length), ``/stream`` a generator of two parts (it does not);
- ``asgi_app`` (ASGI): ``/one`` sends one body message, ``/stream`` two; a WebSocket
  handshake is accepted with the fields as ``websocket.accept``'s headers, then closed.
"""

from __future__ import annotations

from urllib.parse import parse_qsl


def _fields(query: str) -> list[tuple[str, str]]:
    return parse_qsl(query, keep_blank_values=True)


def application(environ, start_response):
    start_response("200 OK", _fields(environ["QUERY_STRING"]))
    if environ["PATH_INFO"] == "/stream":
        return _parts()
    return [b"ok"]


def _parts():
    yield b"o"
    yield b"k"


async def asgi_app(scope, receive, send):
    if scope["type"] == "lifespan":
        return
    headers = [
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in _fields(scope["query_string"].decode("latin-1"))
    ]
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept", "headers": headers})
        await send({"type": "websocket.close", "code": 1000})
        return
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if scope["path"] == "/stream":
        await send({"type": "http.response.body", "body": b"o", "more_body": True})
        await send({"type": "http.response.body", "body": b"k"})
    else:
        await send({"type": "http.response.body", "body": b"ok"})
