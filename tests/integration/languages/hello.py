"""The seed article's Python "Hello, Unit!" (a WSGI application), as corral's workers run it."""


def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"Hello, Unit!\n"]
