"""Hello-world WSGI app: the smallest possible response, the same for every server."""

from collections.abc import Callable, Iterable
from typing import Any

BODY = b"Hello, world!"


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    # A fresh list per call, as real apps do: a server may extend it.
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "13")])
    return [BODY]
