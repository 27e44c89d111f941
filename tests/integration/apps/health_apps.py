"""The application behind the probes' tests: it counts what reaches it, and sleeps when asked.

- ``/sleep?S``: sleeps S seconds, then answers ``slept``;
- ``/count``: how many requests reached this worker's application before this one;
- ``/echo``: the request's body;
- anything else (``/readyz`` too: the application's own, when the probes are elsewhere):
  ``app PATH``.
"""

import threading
import time

_lock = threading.Lock()
_seen = [0]


def application(environ, start_response):
    path = environ["PATH_INFO"]
    with _lock:
        seen = _seen[0]
        _seen[0] += 1
    if path == "/sleep":
        time.sleep(float(environ["QUERY_STRING"] or "1"))
        body = b"slept"
    elif path == "/count":
        body = str(seen).encode()
    elif path == "/echo":
        body = environ["wsgi.input"].read()
    else:
        body = f"app {path}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
