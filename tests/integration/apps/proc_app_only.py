"""A module whose only WSGI callable is named ``app`` (no ``application``)."""


def app(environ, start_response):
    body = b"found app"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "9")])
    return [body]
