"""The application behind tests/integration/test_http.py and test_fuzz.py, chosen by path.

- ``/echo``: reads the whole body; answers JSON with the CGI keys, the headers and
  the body (latin-1), with a Content-Length.
- ``/stream``: a generator of three chunks and no Content-Length (chunked for
  HTTP/1.1, close-delimited for HTTP/1.0).
- ``/slow-read?TAG``: sleeps 0.3 s, logs ``slow-read TAG reading`` to
  ``wsgi.errors``, notes the time, then reads the body (so a ``100 Continue`` can
  only follow that time); answers JSON with ``read_started``.
- ``/no-read``: sleeps 0.3 s and answers without touching the body.
- ``/sleep?SECONDS``: sleeps, then answers the query back.
- ``/gen``: a generator answer with a Content-Type only (for HEAD).
- ``/no-content``: 204 with no body.
- anything else: ``hello`` with a Content-Length.
"""

import json
import time

CGI_KEYS = (
    "REQUEST_METHOD",
    "PATH_INFO",
    "QUERY_STRING",
    "RAW_URI",
    "REQUEST_URI",
    "SERVER_PROTOCOL",
    "CONTENT_TYPE",
    "CONTENT_LENGTH",
)


def _json(start_response, data, status="200 OK"):
    body = json.dumps(data).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def _describe(environ, body):
    data = {key: environ[key] for key in CGI_KEYS if key in environ}
    data["headers"] = {k: v for k, v in environ.items() if k.startswith("HTTP_")}
    data["body"] = body.decode("latin-1")
    return data


def _stream():
    yield b"one"
    yield b""
    yield b"two"
    yield b"three"


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return _stream()
    if path == "/gen":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return _stream()
    if path == "/slow-read":
        time.sleep(0.3)
        errors = environ["wsgi.errors"]
        errors.write(f"slow-read {environ['QUERY_STRING']} reading\n")
        errors.flush()
        started = time.time()
        body = environ["wsgi.input"].read()
        data = _describe(environ, body)
        data["read_started"] = started
        return _json(start_response, data)
    if path == "/no-read":
        time.sleep(0.3)
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
        return [b"done"]
    if path == "/sleep":
        time.sleep(float(environ["QUERY_STRING"] or 0))
        return _json(start_response, {"slept": environ["QUERY_STRING"]})
    if path == "/no-content":
        start_response("204 No Content", [])
        return []
    if path == "/echo" or path.startswith("/echo/"):
        return _json(start_response, _describe(environ, environ["wsgi.input"].read()))
    if path.startswith("/") and path.strip("/") == "a/b":
        return _json(start_response, _describe(environ, b""))
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
    return [b"hello"]
