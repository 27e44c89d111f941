"""Hello-world WSGI app that blocks for 0.2 s first: measures concurrency, not CPU."""

import time
from collections.abc import Callable, Iterable
from typing import Any

DELAY = 0.2
BODY = b"Hello, world!"


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    time.sleep(DELAY)
    # A fresh list per call, as real apps do: a server may extend it.
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "13")])
    return [BODY]
