"""Applications that answer how many objects the worker's garbage collector has frozen
(``gc.get_freeze_count()``), for the ``gc_freeze`` tests of tests/integration/test_worker.py."""

import gc


def wsgi(environ, start_response):
    body = str(gc.get_freeze_count()).encode()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    body = str(gc.get_freeze_count()).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})
