"""Upstream applications for the proxy's tests (tests/integration/test_proxy*.py): what a
request looked like once it arrived, bodies echoed or made large, answers slow to come."""

from __future__ import annotations

import json
import os
import time


def _fields(environ):
    return {
        key[5:].replace("_", "-").lower(): value
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/sleep":
        time.sleep(float(environ.get("QUERY_STRING") or "1"))
    if path == "/big":
        size = int(environ.get("QUERY_STRING") or "1048576")
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return (b"x" * 65536 for _ in range(size // 65536))
    if path == "/stream":  # no length: chunked to an HTTP/1.1 proxy
        start_response("200 OK", [("Content-Type", "text/plain")])
        return iter([b"one,", b"two,", b"three"])
    body = environ["wsgi.input"].read()
    seen = {
        "pid": os.getpid(),
        "method": environ["REQUEST_METHOD"],
        "path": path,
        "query": environ.get("QUERY_STRING", ""),
        "fields": _fields(environ),
        "content_length": environ.get("CONTENT_LENGTH", ""),
        "body_length": len(body),
        "body_head": body[:64].decode("latin-1"),
        "server_port": environ["SERVER_PORT"],
        "remote": environ.get("REMOTE_ADDR", "") + ":" + str(environ.get("REMOTE_PORT", "")),
    }
    data = json.dumps(seen).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("X-Upstream", "yes")])
    return [data]
