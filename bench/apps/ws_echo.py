"""A raw ASGI application for bench/ws_echo.py: a WebSocket echo on any path, and
``Hello, world!`` over HTTP (the bench's readiness check)."""


async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b"Hello, world!"})
        return
    if scope["type"] != "websocket":
        return  # lifespan: none
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})
