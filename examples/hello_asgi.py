"""The smallest ASGI application, saying where it was told it is mounted:
``corral examples.hello_asgi:app`` serves it (docs/migrating.md, From Uvicorn and From Granian).
"""


async def app(scope, receive, send):
    if scope["type"] != "http":
        return  # no lifespan: corral serves it without one
    body = f"Hello from {scope['path']} (root_path {scope['root_path']!r})\n".encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
