"""An application for NGINX Unit's ``stdout``, ``stderr``, ``thread_stack_size`` and ``factory``.

Routes (chosen by PATH_INFO):

- ``/print?text=T``: ``print(T)`` (standard output); answers ``printed``.
- ``/warn?text=T``: writes T and a newline to ``sys.stderr``; answers ``warned``.
- ``/boom``: raises, so that corral's worker logs an error (its own line, not the app's).
- ``/stack``: JSON with ``threading.stack_size()`` and the thread serving the request.
- anything else: ``plain``.

``create_app`` is a factory (no arguments) returning an application that answers
``made N``, N the times the factory was called in this process; ``factories`` is not one.
"""

import json
import sys
import threading
from urllib.parse import parse_qs

_made = 0


def _answer(start_response, body, content_type="text/plain"):
    start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


def application(environ, start_response):
    path = environ["PATH_INFO"]
    query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if path == "/print":
        print(query["text"])
        return _answer(start_response, b"printed")
    if path == "/warn":
        sys.stderr.write(query["text"] + "\n")
        return _answer(start_response, b"warned")
    if path == "/boom":
        raise RuntimeError("boom from the application")
    if path == "/stack":
        body = {"stack_size": threading.stack_size(), "thread": threading.current_thread().name}
        return _answer(start_response, json.dumps(body).encode(), "application/json")
    return _answer(start_response, b"plain")


def create_app():
    global _made
    _made += 1
    made = _made

    def made_app(environ, start_response):
        return _answer(start_response, f"made {made}".encode())

    return made_app


def factories():
    return "not an application"
