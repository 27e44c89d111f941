"""The application for tests/integration/test_hooks.py: one route per way a response ends.

- ``/stream``: three chunks from a generator (chunked), 15 bytes of body.
- ``/file``: this file, through ``wsgi.file_wrapper`` (sendfile).
- ``/fail``: raises before ``start_response`` (a 500).
- ``/echo`` (POST): the request body back.
- anything else: ``Hello, world!`` with a Content-Length.
"""


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return (chunk for chunk in (b"first", b"secon", b"third"))
    if path == "/file":
        start_response("200 OK", [("Content-Type", "text/x-python")])
        return environ["wsgi.file_wrapper"](open(__file__, "rb"))
    if path == "/fail":
        raise RuntimeError("hooks_app: failed on purpose")
    if path == "/echo":
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Length", str(len(body)))])
        return [body]
    body = b"Hello, world!"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "13")])
    return [body]
