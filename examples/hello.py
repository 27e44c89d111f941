"""The smallest WSGI application: ``corral examples.hello`` serves it on 127.0.0.1:8000."""


def application(environ, start_response):
    body = b"Hello, world!\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
