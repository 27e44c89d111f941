"""Applications that say what they were told of the connection's encryption (test_tls.py)."""

import json
import os


def wsgi(environ, start_response):
    told = {key: value for key, value in environ.items() if key.startswith("SSL_")}
    told.update(
        scheme=environ["wsgi.url_scheme"],
        HTTPS=environ.get("HTTPS"),
        pid=os.getpid(),
        client=[environ["REMOTE_ADDR"], environ.get("REMOTE_PORT")],
    )
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(told).encode()]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    told = {"scheme": scope["scheme"], "tls": scope["extensions"].get("tls")}
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": json.dumps(told).encode()})
