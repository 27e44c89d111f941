"""Applications for tests/integration/test_conformance.py: answers as NGINX Unit's samples and
old posts write them, and ASGI applications handed to the WSGI server.

``application``, by PATH_INFO:

- ``/unit-sample``: NGINX Unit's sample, ``return (b"Hello, Unit!")``: a bare bytes object;
- ``/bytes-after-write``: ``write(b"head;")``, then returns bare bytes;
- ``/str``: returns a str (``"hello"``): Python 2 habits;
- ``/str-list``: returns ``["hello"]``;
- ``/str-later``: a generator yielding bytes, then a str: the head was sent before it;
- ``/str-write``: ``write("hello")``;
- ``/raise``: raises before ``start_response``;
- anything else: ``ok``.

ASGI applications (served as ASGI, each of them answering ``asgi``): ``asgi_coroutine`` (a
coroutine function), ``asgi_instance`` (an object whose ``__call__`` is ``async def``, as
FastAPI's and Starlette's are), ``AsgiClass`` (a class with an async ``__call__``) and
``make_asgi`` (a factory returning one, for NGINX Unit's ``factory``).
"""


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/unit-sample":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return b"Hello, Unit!"
    if path == "/bytes-after-write":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"head;")
        return b"tail"
    if path == "/raise":
        raise RuntimeError("conformance_apps: raised on purpose")
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    if path == "/str":
        return "hello"
    if path == "/str-list":
        return ["hello"]
    if path == "/str-later":
        return _bytes_then_str()
    if path == "/str-write":
        write("hello")
    return [b"ok"]


def _bytes_then_str():
    yield b"first;"
    yield "second"


async def asgi_coroutine(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"asgi"})


class _Asgi:
    async def __call__(self, scope, receive, send):
        await asgi_coroutine(scope, receive, send)


asgi_instance = _Asgi()


class AsgiClass:
    """An ASGI 2 application: the class is called with the scope, the instance awaited."""

    def __init__(self, scope):
        self.scope = scope

    async def __call__(self, receive, send):
        await asgi_coroutine(self.scope, receive, send)


def make_asgi():
    return _Asgi()
