"""Applications the integration tests serve, chosen by path."""

import json


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/environ":
        keys = {k: v for k, v in environ.items() if isinstance(v, (str, bool, int, tuple))}
        body = json.dumps(keys, default=list).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]
    if path == "/echo":
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return [body]
    body = b"Hello, world!"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "13")])
    return [body]
