"""The application bench/slow_clients.py attacks: a hello, a 1 MiB answer and an upload.

``/`` answers the hello of hello.py; ``/big`` 1 MiB yielded in 64 KiB pieces (an answer a
slow reader takes minutes to read; ``/big?mib=N``: N MiB); ``/upload`` reads the whole body and
answers its length."""

from collections.abc import Callable, Iterable
from typing import Any

HELLO = b"Hello, world!"
PIECE = b"x" * 65536


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path = environ["PATH_INFO"]
    if path == "/big":
        pieces = 16 * int(environ.get("QUERY_STRING", "").removeprefix("mib=") or 1)
        length = str(pieces * len(PIECE))
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", length)])
        return (PIECE for _ in range(pieces))
    if path == "/upload":
        length = len(environ["wsgi.input"].read())
        body = str(length).encode()
        start_response("200 OK", [("Content-Length", str(len(body)))])
        return [body]
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "13")])
    return [HELLO]
