"""A Starlette application for tests/integration/test_frameworks_asgi.py."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket


async def home(request):
    return PlainTextResponse(f"hello {request.query_params.get('name', 'world')}")


async def echo_body(request):
    body = await request.body()
    return JSONResponse({"length": len(body), "type": request.headers.get("content-type")})


async def moved(request):
    return RedirectResponse("/", status_code=301)


async def chat(websocket: WebSocket) -> None:
    await websocket.accept(subprotocol="chat")
    async for message in websocket.iter_text():
        await websocket.send_text(message.upper())


app = Starlette(
    routes=[
        Route("/", home),
        Route("/echo", echo_body, methods=["POST"]),
        Route("/moved", moved),
        WebSocketRoute("/chat", chat),
    ]
)
