"""Applications that say what they were told of the connection's encryption (test_tls.py)."""

import json


def wsgi(environ, start_response):
    body = json.dumps(
        {"scheme": environ["wsgi.url_scheme"], "HTTPS": environ.get("HTTPS")}
    ).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    body = json.dumps({"scheme": scope["scheme"]}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})
