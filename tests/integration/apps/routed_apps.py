"""Two applications for the routing tests: each answer names the application and its pid,
echoes the method and path, and the request body's length and text.

With ``ROUTED_SLOW_START`` naming a file that exists, the import sleeps as many seconds as
the file says: a worker started while it is there is slow to become ready (a respawn that
cannot accept hand-offs in time)."""

import os
import time

_marker = os.environ.get("ROUTED_SLOW_START")
if _marker and os.path.exists(_marker):
    with open(_marker) as _stream:
        time.sleep(float(_stream.read()))


def _app(name: str):
    def application(environ, start_response):
        body = environ["wsgi.input"].read()
        text = (
            f"app={name} pid={os.getpid()} method={environ['REQUEST_METHOD']}"
            f" path={environ['PATH_INFO']} len={len(body)} body={body.decode('latin-1')}"
        ).encode("latin-1")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [text]

    return application


app_a = _app("a")
app_b = _app("b")
