"""Applications for the process-level integration tests (CLI, workers, master, logs).

Routes (chosen by PATH_INFO):

- ``/info``: JSON with the worker's pid, cwd, sys.path, environment and event loop module.
- ``/sleep?s=SECONDS[&name=N]``: sleeps, then answers ``slept``. With ``name`` and the
  ``PROC_FLAGS`` directory set, it first writes its worker's pid to ``PROC_FLAGS/N.started``.
- ``/block?name=N``: creates ``PROC_FLAGS/N.started``, then waits (at most 60 s) until the
  test creates ``PROC_FLAGS/N.release``; answers ``released N``.
- ``/length[?name=N]``: reads the whole request body, answers how many bytes it had. With
  ``name`` (and ``PROC_FLAGS``), it first creates ``PROC_FLAGS/N.started``.
- ``/big?mb=N``: N MiB of ``x`` from a generator (no Content-Length: chunked).
- ``/ctype``: answers with ``Content-Type: text/x-proc`` and an ``X-App`` header.
- anything else: ``Hello, world!`` (13 bytes).

The module also offers ``app`` (a second callable) so the ``module``-only lookup order
(``application`` first, then ``app``) can be observed.
"""

import asyncio
import json
import os
import sys
import time
from urllib.parse import parse_qs


def _query(environ):
    return {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _flag(name, suffix):
    return os.path.join(os.environ["PROC_FLAGS"], f"{name}.{suffix}")


def _loop_module():
    # the worker's loop, as set for its main thread (the application never sees it
    # running: it is synchronous code)
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        return None
    return type(loop).__module__


def _answer(start_response, body, content_type="text/plain", extra=()):
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    headers.extend(extra)
    start_response("200 OK", headers)
    return [body]


def _big(megabytes):
    block = b"x" * (1 << 20)
    for _ in range(megabytes):
        yield block


def application(environ, start_response):
    path = environ["PATH_INFO"]
    query = _query(environ)
    if path == "/big":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return _big(int(query.get("mb", "1")))
    if path == "/info":
        body = json.dumps(
            {
                "pid": os.getpid(),
                "cwd": os.getcwd(),
                "sys_path": sys.path,
                "environ": dict(os.environ),
                "loop": _loop_module(),
                "callable": "application",
            }
        ).encode()
        return _answer(start_response, body, "application/json")
    if path == "/sleep":
        if "name" in query and "PROC_FLAGS" in os.environ:
            with open(_flag(query["name"], "started"), "w") as flag:
                flag.write(str(os.getpid()))
        time.sleep(float(query.get("s", "1")))
        return _answer(start_response, b"slept")
    if path == "/block":
        name = query["name"]
        with open(_flag(name, "started"), "w"):
            pass
        deadline = time.monotonic() + 60
        while not os.path.exists(_flag(name, "release")) and time.monotonic() < deadline:
            time.sleep(0.01)
        return _answer(start_response, f"released {name}".encode())
    if path == "/length":
        if "name" in query:
            with open(_flag(query["name"], "started"), "w"):
                pass
        stream = environ["wsgi.input"]
        length = 0
        while chunk := stream.read(65536):
            length += len(chunk)
        return _answer(start_response, str(length).encode())
    if path == "/ctype":
        return _answer(start_response, b"typed", "text/x-proc", [("X-App", "proc")])
    return _answer(start_response, b"Hello, world!")


def app(environ, start_response):
    return _answer(start_response, b"from app")
