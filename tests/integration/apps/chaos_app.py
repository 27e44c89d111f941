"""The application the load and chaos tests serve: every answer names the worker that gave it.

Every route answers 200 with ``X-Worker-Pid: PID`` and the body ``PID N\\n``, where N counts
the requests this process has answered (1, 2, ...), so a test can check that the client saw
exactly the responses the server produced.

Routes (chosen by PATH_INFO):

- ``/pid``: at once, with a Content-Length.
- ``/sleep?s=SECONDS``: after sleeping, which keeps the request in flight that long.
- ``/chunked``: the body from a generator, so the server frames it chunked (in two chunks).
"""

import os
import threading
import time
from urllib.parse import parse_qs

_lock = threading.Lock()
_answered = 0


def _next_body() -> bytes:
    global _answered
    with _lock:
        _answered += 1
        return f"{os.getpid()} {_answered}\n".encode()


def _chunks(body: bytes):
    yield body[:3]
    yield body[3:]


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/sleep":
        query = parse_qs(environ.get("QUERY_STRING", ""))
        time.sleep(float(query.get("s", ["0.1"])[0]))
    body = _next_body()
    headers = [("Content-Type", "text/plain"), ("X-Worker-Pid", str(os.getpid()))]
    if path == "/chunked":
        start_response("200 OK", headers)
        return _chunks(body)
    headers.append(("Content-Length", str(len(body))))
    start_response("200 OK", headers)
    return [body]
