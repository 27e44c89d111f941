"""Hello-world ASGI app: the same answer as hello.py, for the ASGI servers."""

from typing import Any

BODY = b"Hello, world!"
START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"13")],
}
ANSWER = {"type": "http.response.body", "body": BODY}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":  # no lifespan: every server here runs it as "not supported"
        return
    await send(START)
    await send(ANSWER)
