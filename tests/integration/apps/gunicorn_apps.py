"""Applications for the Gunicorn compatibility tests (test_gunicorn.py)."""

import json
import os
import sys


def create_app(greeting="hello", repeat=1, **extra):
    """Gunicorn's factory form: ``gunicorn_apps:create_app('hi', repeat=2)``."""
    body = json.dumps({"greeting": greeting * repeat, "extra": extra}).encode()

    def application(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    return application


def links(environ, start_response):
    """What a DRF view's ``request.build_absolute_uri()`` builds, and the client it sees."""
    scheme = environ["wsgi.url_scheme"]
    body = json.dumps(
        {
            "url": f"{scheme}://{environ['HTTP_HOST']}{environ['PATH_INFO']}",
            "scheme": scheme,
            "remote_addr": environ["REMOTE_ADDR"],
        }
    ).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


def chatty(environ, start_response):
    """Prints to standard output and error, as applications do (``--capture-output``)."""
    print(f"chatty stdout {os.getpid()}", flush=True)
    print(f"chatty stderr {os.getpid()}", file=sys.stderr, flush=True)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"printed"]
