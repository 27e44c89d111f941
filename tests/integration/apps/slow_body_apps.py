"""A WSGI application for tests/integration/test_slow_bodies.py.

``/digest`` reads the whole body and answers its length and SHA-256 with the deleted files
this process holds open (a spooled body's, seen from inside the worker while the call runs);
with ``?log=NAME`` it first writes ``called NAME`` to ``wsgi.errors`` (a streamed body's
application runs before the body is complete). Anything else: ``hello``.
"""

import hashlib
import json
import os


def _deleted_files():
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.endswith(" (deleted)"):
            found.append(target)
    return found


def application(environ, start_response):
    if environ["PATH_INFO"] != "/digest":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello"]
    name = environ["QUERY_STRING"].removeprefix("log=")
    if name:
        environ["wsgi.errors"].write(f"called {name}\n")
        environ["wsgi.errors"].flush()
    digest = hashlib.sha256()
    length = 0
    while block := environ["wsgi.input"].read(65536):
        digest.update(block)
        length += len(block)
    result = {"length": length, "sha256": digest.hexdigest(), "deleted": _deleted_files()}
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(result).encode()]
