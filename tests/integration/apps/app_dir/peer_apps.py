"""Applications for Uvicorn's and Granian's flags (tests/integration/test_peer_flags.py).

This directory is not on the Python path the tests give corral: the module imports only
through ``--app-dir``. Each application answers with what the server told it: where it is
mounted, and the environment variables the tests set through ``--env-file``.
"""

import json
import os

SHOWN = ("PEER_FROM_FILE", "PEER_KEPT")


def _environment() -> dict:
    return {name: os.environ.get(name) for name in SHOWN}


def wsgi(environ, start_response):
    body = json.dumps(
        {
            "script_name": environ["SCRIPT_NAME"],
            "path_info": environ["PATH_INFO"],
            "env": _environment(),
        }
    ).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("X-A", "from-the-app")])
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return  # no lifespan
    body = json.dumps(
        {
            "root_path": scope["root_path"],
            "path": scope["path"],
            "raw_path": scope["raw_path"].decode("latin-1"),
            "env": _environment(),
        }
    ).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
