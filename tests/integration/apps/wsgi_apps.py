"""PEP 3333 conformance applications for tests/integration/test_wsgi.py.

``application`` dispatches on PATH_INFO; any path it does not know answers with a
JSON description of the environ (so arbitrary paths such as ``///a`` can be
inspected). ``validated`` is a small application wrapped in
``wsgiref.validate.validator``.

Events that happen after the response (``close()`` calls) are recorded as lines in
``$WSGI_TEST_DIR/<token>``, ``token`` coming from the query string, so the test can
poll for them.
"""

import hashlib
import io
import json
import os
import sys
import tempfile
import time
from urllib.parse import parse_qs
from wsgiref.validate import validator

TEST_DIR = os.environ.get("WSGI_TEST_DIR", "")
INJECTED = "INJECTED-by-the-app"


def _query(environ):
    return {key: values[0] for key, values in parse_qs(environ["QUERY_STRING"]).items()}


def _record(token, event):
    with open(os.path.join(TEST_DIR, token), "a") as stream:
        stream.write(event + "\n")


def _json(start_response, data, status="200 OK"):
    body = json.dumps(data).encode()
    start_response(status, [("Content-Type", "application/json")])
    return [body]


def _describe(value):
    if isinstance(value, (str, bool, int, type(None))):
        shown = value
    elif isinstance(value, tuple):
        shown = list(value)
    else:
        shown = repr(value)
    return {"type": type(value).__name__, "value": shown}


def environ_app(environ, start_response):
    described = {key: _describe(value) for key, value in environ.items()}
    stream = environ["wsgi.input"]
    described["wsgi.input"]["methods"] = [
        name for name in ("read", "readline", "readlines", "__iter__") if hasattr(stream, name)
    ]
    errors = environ["wsgi.errors"]
    described["wsgi.errors"]["methods"] = [
        name for name in ("write", "writelines", "flush") if hasattr(errors, name)
    ]
    described["wsgi.file_wrapper"]["callable"] = callable(environ.get("wsgi.file_wrapper"))
    return _json(start_response, described)


# -- wsgi.input ------------------------------------------------------------------


def apply_ops(stream, ops):
    """Run ``ops`` (``read:5,readline,readlines,iter,...``) on a file-like; JSON-able results.

    The tests run the same list on an io.BytesIO holding the body for the expected value.
    """
    results = []
    for op in ops.split(","):
        name, _, arg = op.partition(":")
        if name == "read":
            value = stream.read(int(arg)) if arg else stream.read()
        elif name == "readnone":
            value = stream.read(None)
        elif name == "readline":
            value = stream.readline(int(arg)) if arg else stream.readline()
        elif name == "readlines":
            value = stream.readlines(int(arg)) if arg else stream.readlines()
        elif name == "iter":
            value = list(stream)
        else:
            raise ValueError(f"unknown op {op!r}")
        if isinstance(value, list):
            results.append([line.decode("latin-1") for line in value])
        else:
            results.append(value.decode("latin-1"))
    return results


def input_app(environ, start_response):
    results = apply_ops(environ["wsgi.input"], _query(environ)["ops"])
    data = {"results": results, "input_terminated": environ.get("wsgi.input_terminated")}
    return _json(start_response, data)


def echo_app(environ, start_response):
    """Streams the body back as it reads it (never holding it whole)."""
    stream = environ["wsgi.input"]
    start_response("200 OK", [("Content-Type", "application/octet-stream")])

    def body():
        while True:
            block = stream.read(65536)
            if not block:
                return
            yield block

    return body()


def spill_app(environ, start_response):
    """Which of this process's descriptors are files in the temp dir, then the body's digest."""
    tmp = os.path.realpath(tempfile.gettempdir())
    spilled = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(tmp + os.sep):
            spilled.append(target)
    digest = hashlib.sha256()
    length = 0
    while True:
        block = environ["wsgi.input"].read(65536)
        if not block:
            break
        digest.update(block)
        length += len(block)
    result = {"spilled": spilled, "length": length, "sha256": digest.hexdigest()}
    return _json(start_response, result)


# -- wsgi.errors, file_wrapper, write() ------------------------------------------


def errors_app(environ, start_response):
    token = _query(environ)["token"]
    errors = environ["wsgi.errors"]
    errors.write(f"{token}-write\n")
    errors.writelines([f"{token}-lines-1\n", f"{token}-lines-2\n"])
    errors.write(f"{token}-flushed")
    errors.flush()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


class TrackedFile(io.FileIO):
    """A real file (it has a fileno, so sendfile applies) that records its close()."""

    token = ""

    def close(self):
        if not self.closed and self.token:
            _record(self.token, "close")
        super().close()


class TrackedBytes(io.BytesIO):
    """A file-like without fileno() that records its close()."""

    token = ""

    def close(self):
        if not self.closed and self.token:
            _record(self.token, "close")
        super().close()


def filewrapper_app(environ, start_response):
    query = _query(environ)
    path = os.path.join(TEST_DIR, query["file"])
    if query.get("kind") == "bytesio":
        with open(path, "rb") as source:
            filelike = TrackedBytes(source.read())
    else:
        filelike = TrackedFile(path, "rb")
    filelike.token = query.get("token", "")
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return environ["wsgi.file_wrapper"](filelike)


def write_app(environ, start_response):
    mode = _query(environ)["mode"]
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"written-1;")
    write(b"written-2;")
    if mode == "only":
        return []
    return [b"iterated-1;", b"iterated-2;"]


# -- start_response with exc_info ------------------------------------------------


def exc_app(environ, start_response):
    case = _query(environ)["case"]
    if case == "replace":
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-First", INJECTED)])
        try:
            raise RuntimeError("failed before the body")
        except RuntimeError:
            start_response("503 Unavailable", [("Content-Type", "text/plain")], sys.exc_info())
        return [b"second answer"]
    if case == "replace-after-empty-write":
        write = start_response("200 OK", [("X-First", INJECTED)])
        write(b"")  # nothing is sent for an empty chunk: the head may still change
        try:
            raise RuntimeError("failed before the body")
        except RuntimeError:
            start_response("503 Unavailable", [("Content-Type", "text/plain")], sys.exc_info())
        return [b"second answer"]
    if case == "again":
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-First", INJECTED)])
        start_response("201 Created", [("Content-Type", "text/plain")])
        return [b"must not be sent " + INJECTED.encode()]
    if case == "after":

        def body():
            start_response("200 OK", [("Content-Type", "text/plain")])
            yield b"first part;"
            try:
                raise RuntimeError("exc-info-after-head")
            except RuntimeError:
                start_response("500 Internal Server Error", [("X-Second", "1")], sys.exc_info())
            yield b"must not be sent " + INJECTED.encode()

        return body()
    raise ValueError(case)


# -- close() of the iterable -----------------------------------------------------


class Recorded:
    """An iterable with close(); yields ``count`` chunks, ``delay`` seconds apart."""

    def __init__(self, token, count, delay=0.0, fail_at=None, size=16):
        self.token = token
        self.count = count
        self.delay = delay
        self.fail_at = fail_at
        self.size = size

    def __iter__(self):
        for index in range(self.count):
            if index == self.fail_at:
                raise RuntimeError(f"{self.token}: failed mid-iteration")
            if index and self.delay:
                time.sleep(self.delay)
            yield b"%0*d" % (self.size, index)
        _record(self.token, "exhausted")

    def close(self):
        _record(self.token, "close")


def close_app(environ, start_response):
    query = _query(environ)
    token = query["token"]
    start_response("200 OK", [("Content-Type", "text/plain")])
    case = query["case"]
    if case == "normal":
        return Recorded(token, 3)
    if case == "raise":
        return Recorded(token, 5, fail_at=2)
    if case == "slow":
        return Recorded(token, 600, delay=0.01, size=1024)
    raise ValueError(case)


def close_generator_app(environ, start_response):
    token = _query(environ)["token"]
    start_response("200 OK", [("Content-Type", "text/plain")])

    def body():
        try:
            yield b"one;"
            yield b"two;"
        finally:
            _record(token, "close")

    return body()


# -- invalid answers and exceptions ----------------------------------------------

BAD_ANSWERS = {
    "value-crlf": ("200 OK", [("X-Ok", "fine"), ("X-Evil", "a\r\nX-" + INJECTED + ": 1")]),
    "value-lf": ("200 OK", [("X-Evil", "a\nX-" + INJECTED + ": 1")]),
    "value-cr": ("200 OK", [("X-Evil", "a\rX-" + INJECTED + ": 1")]),
    "value-nul": ("200 OK", [("X-Evil", INJECTED + "\0")]),
    "value-not-latin1": ("200 OK", [("X-Evil", INJECTED + "\u20ac")]),
    "value-not-str": ("200 OK", [("X-Evil", 42)]),
    "name-space": ("200 OK", [("X " + INJECTED, "1")]),
    "name-colon": ("200 OK", [("X:" + INJECTED, "1")]),
    "name-nul": ("200 OK", [("X-" + INJECTED + "\0", "1")]),
    "name-empty": ("200 OK", [("", INJECTED)]),
    "status-letters": ("abc " + INJECTED, [("Content-Type", "text/plain")]),
    "status-two-digits": ("20 " + INJECTED, [("Content-Type", "text/plain")]),
    "status-four-digits": ("2000 " + INJECTED, [("Content-Type", "text/plain")]),
    "status-crlf": ("200 OK\r\nX-" + INJECTED + ": 1", [("Content-Type", "text/plain")]),
    "status-not-latin1": ("200 " + INJECTED + "\u20ac", [("Content-Type", "text/plain")]),
}


def bad_app(environ, start_response):
    query = _query(environ)
    status, headers = BAD_ANSWERS[query["case"]]
    write = start_response(status, headers)
    body = ("body " + INJECTED).encode()
    how = query.get("how", "list")
    if how == "list":
        return [body]
    if how == "write":
        write(body)
        return []

    def generate():
        yield body
        yield body

    return generate()


def raise_app(environ, start_response):
    query = _query(environ)
    token = query["token"]
    when = query["when"]
    if when == "before":
        raise RuntimeError(f"{token}: before start_response")
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-App", INJECTED)])
    if when == "after-start":
        raise RuntimeError(f"{token}: after start_response")
    if when == "empty-chunk":

        def empty_then_fail():
            yield b""
            raise RuntimeError(f"{token}: after an empty chunk")

        return empty_then_fail()
    if when == "after-body":

        def fail_later():
            yield b"first chunk;"
            raise RuntimeError(f"{token}: after the first chunk")

        return fail_later()
    raise ValueError(when)


def pid_app(environ, start_response):
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]


def running_loop_app(environ, start_response):
    """Whether the application sees a running event loop (Django refuses its ORM if so)."""
    import asyncio

    try:
        asyncio.get_running_loop()
        seen = b"running"
    except RuntimeError:
        seen = b"none"
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [seen]


def garbage_app(environ, start_response):
    """``?start``: stop the cycle collector and clear what it would find; without: how many
    objects it finds now (what the requests since left in reference cycles), and restart it."""
    import gc

    if environ["QUERY_STRING"] == "start":
        gc.disable()
        gc.collect()
        body = b"started"
    else:
        body = str(gc.collect()).encode()
        gc.enable()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]


def scheduling_app(environ, start_response):
    """The scheduling policy of the thread that runs the application (os.SCHED_*)."""
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.sched_getscheduler(0)).encode()]


def changing_app(environ, start_response):
    """Changes its environ, then describes it: the next request must not see the change."""
    environ["HTTP_X_A"] = "changed"
    environ["HTTP_X_ADDED"] = "added"
    return environ_app(environ, start_response)


ROUTES = {
    "/changing": changing_app,
    "/running-loop": running_loop_app,
    "/scheduling": scheduling_app,
    "/garbage": garbage_app,
    "/input": input_app,
    "/echo": echo_app,
    "/spill": spill_app,
    "/errors": errors_app,
    "/filewrapper": filewrapper_app,
    "/write": write_app,
    "/exc": exc_app,
    "/close": close_app,
    "/close-generator": close_generator_app,
    "/bad": bad_app,
    "/raise": raise_app,
    "/pid": pid_app,
}


def application(environ, start_response):
    return ROUTES.get(environ["PATH_INFO"], environ_app)(environ, start_response)


# -- wrapped in wsgiref.validate ---------------------------------------------------


def _plain_app(environ, start_response):
    path = environ["PATH_INFO"]
    stream = environ["wsgi.input"]
    if path == "/read":
        parts = []
        while True:
            block = stream.read(7)
            if not block:
                break
            parts.append(block)
        body = b"".join(parts)
    elif path == "/readline":
        parts = []
        while True:
            line = stream.readline()
            if not line:
                break
            parts.append(line)
        body = b"".join(parts)
    elif path == "/readlines":
        body = b"".join(stream.readlines())
    elif path == "/iter":
        body = b"".join(stream)
    elif path == "/write":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"written;")
        return [b"iterated"]
    elif path == "/filewrapper":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return environ["wsgi.file_wrapper"](io.BytesIO(b"wrapped bytes"))
    else:
        body = b"hello " + path.encode("latin-1")
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


validated = validator(_plain_app)
