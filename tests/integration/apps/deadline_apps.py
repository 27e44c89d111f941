"""Applications for tests/integration/test_request_timeout.py (``--request-timeout``).

Routes (chosen by PATH_INFO); ``name`` in the query string names the request's files in
``$DEADLINE_DIR``: ``NAME.started`` is created when the application begins, ``NAME.closed``
when the iterable's ``close()`` runs, ``NAME.caught`` each time ``/swallow`` catches.

- ``/busy``: a pure Python busy loop in ``busy_loop``, never answers.
- ``/swallow``: a busy loop that catches ``Exception`` around every step, never answers.
- ``/stream``: answers 200 with a first chunk, then busy-loops in ``stream_then_loop``.
- ``/closing``: an iterable (a class) whose ``__next__`` busy-loops; its ``close()`` records.
- ``/sleep?s=N``: ``time.sleep(N)``, then ``slept``.
- ``/wait``: ``threading.Event().wait()``: blocks in C for ever.
- ``/big?mb=N``: N MiB from a generator; ``/bigwrite?mb=N``: the same through ``write()``.
- ``/echo``: the request body.
- ``/pid``: the worker's pid.
- anything else: ``fast``.
"""

import os
import threading
import time
from urllib.parse import parse_qs

DIR = os.environ.get("DEADLINE_DIR", "")


def _query(environ):
    return {key: values[0] for key, values in parse_qs(environ["QUERY_STRING"]).items()}


def _touch(name, suffix):
    if DIR and name:
        with open(os.path.join(DIR, f"{name}.{suffix}"), "a") as stream:
            stream.write("x")


def _answer(start_response, body):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def _blocks(megabytes):
    block = b"x" * (1 << 20)
    for _ in range(megabytes):
        yield block


def busy_loop():
    x = 0
    while True:
        x += 1


def swallowing_loop(name):
    x = 0
    while True:
        try:
            for _ in range(1000):
                x += 1
        except Exception:
            _touch(name, "caught")


def stream_then_loop(name):
    yield b"first chunk\n"
    _touch(name, "streamed")
    busy_loop()
    yield b"never\n"


class ClosingIterable:
    def __init__(self, name):
        self.name = name

    def __iter__(self):
        return self

    def __next__(self):
        busy_loop()

    def close(self):
        _touch(self.name, "closed")


def application(environ, start_response):
    path = environ["PATH_INFO"]
    query = _query(environ)
    name = query.get("name", "")
    _touch(name, "started")
    if path == "/busy":
        busy_loop()
    if path == "/swallow":
        swallowing_loop(name)
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return stream_then_loop(name)
    if path == "/closing":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return ClosingIterable(name)
    if path == "/sleep":
        time.sleep(float(query.get("s", "1")))
        return _answer(start_response, b"slept")
    if path == "/wait":
        threading.Event().wait()
    if path == "/big":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return _blocks(int(query["mb"]))
    if path == "/bigwrite":
        write = start_response("200 OK", [("Content-Type", "application/octet-stream")])
        for block in _blocks(int(query["mb"])):
            write(block)
        return []
    if path == "/echo":
        return _answer(start_response, environ["wsgi.input"].read())
    if path == "/pid":
        return _answer(start_response, str(os.getpid()).encode())
    return _answer(start_response, b"fast")
