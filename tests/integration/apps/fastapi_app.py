"""A FastAPI application for tests/integration/test_frameworks_asgi.py: JSON with dependency
injection and validation, a background task, a streaming and a file response, a WebSocket."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

from fastapi import BackgroundTasks, Depends, FastAPI, WebSocket, WebSocketDisconnect
from fastapi.responses import FileResponse, StreamingResponse
from pydantic import BaseModel

app = FastAPI()
_done: list[str] = []
FILE = Path(__file__).with_name("static_file.txt")


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


def paging(skip: int = 0, limit: int = 10) -> dict[str, int]:
    return {"skip": skip, "limit": limit}


@app.get("/items/{item_id}")
async def read_item(item_id: int, page: Annotated[dict, Depends(paging)]) -> dict:
    return {"item_id": item_id, "page": page}


@app.post("/items")
async def create_item(item: Item) -> dict:
    return {"created": item.model_dump(), "total": item.price * 2}


def _record(what: str) -> None:
    _done.append(what)


@app.post("/jobs/{name}")
async def start_job(name: str, tasks: BackgroundTasks) -> dict:
    tasks.add_task(_record, name)
    return {"queued": name}


@app.get("/jobs")
async def jobs() -> list[str]:
    return _done


@app.get("/stream")
async def stream() -> StreamingResponse:
    async def parts():
        for index in range(5):
            await asyncio.sleep(0)
            yield f"part {index}\n".encode()

    return StreamingResponse(parts(), media_type="text/plain")


@app.get("/file")
async def file() -> FileResponse:
    return FileResponse(FILE, media_type="text/plain")


@app.websocket("/ws")
async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        while True:
            text = await websocket.receive_text()
            await websocket.send_json({"echo": text, "length": len(text)})
    except WebSocketDisconnect:
        pass
