"""Real ASGI frameworks under corral, each answering the same bytes as under Uvicorn (issue 11,
point 6): FastAPI (JSON, dependency injection, validation, a background task, a streaming and
a file response, a WebSocket), Starlette and Django's ASGI handler.

Each test starts the application under corral and under Uvicorn (``--fd``: a socket the test
bound), sends the same requests to both and compares status, header fields (names without
case; ``Date`` and ``Server`` aside, which name the server and the second) and body.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from websockets.sync.client import connect as ws_connect

from tests.integration.server import APPS, Server, read_response, wait_for

_SERVER_FIELDS = {"date", "server"}


class Uvicorn:
    """Uvicorn serving ``app`` on a socket bound here (its ``--fd``)."""

    def __init__(self, app: str) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        env = dict(os.environ, PYTHONPATH=str(APPS))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", app, "--fd", str(self.sock.fileno()),
             "--log-level", "warning", "--lifespan", "auto"],
            pass_fds=(self.sock.fileno(),), cwd=str(APPS), env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        wait_for(self._answers, timeout=20)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"GET /__probe HTTP/1.1\r\nHost: t\r\n\r\n")
                return bool(sock.recv(1))
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        finally:
            self.proc.stderr.close()  # type: ignore[union-attr]
            self.sock.close()


@contextmanager
def both(app: str) -> Iterator[tuple[Server, Uvicorn]]:
    with Server(app) as corral:
        uvicorn = Uvicorn(app)
        try:
            yield corral, uvicorn
        finally:
            uvicorn.stop()


def answer(port: int, request: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        status, headers, body = read_response(sock)
    fields = sorted(
        (name, value)
        for name, value in headers.items()
        if name not in _SERVER_FIELDS and name != "transfer-encoding"
    )
    return status, fields, body


def same_answers(corral: Server, uvicorn: Uvicorn, requests: list[bytes]) -> list[tuple]:
    answers = []
    for request in requests:
        ours = answer(corral.port, request)
        theirs = answer(uvicorn.port, request)
        assert ours == theirs, request
        answers.append(ours)
    return answers


def get(target: str) -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: test\r\n\r\n" % target.encode()


def post(target: str, body: bytes, kind: bytes = b"application/json") -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        target.encode(), kind, len(body), body,
    )  # fmt: skip


@pytest.fixture(scope="module")
def fastapi_servers():
    with both("fastapi_app:app") as servers:
        yield servers


def test_fastapi_json_dependencies_and_validation(fastapi_servers) -> None:
    corral, uvicorn = fastapi_servers
    answers = same_answers(corral, uvicorn, [
        get("/items/7?skip=2&limit=3"),
        get("/items/seven"),  # 422: not an int
        post("/items", b'{"name": "pen", "price": 1.5, "tags": ["blue"]}'),
        post("/items", b'{"name": "pen"}'),  # 422: no price
        post("/items", b"not json"),
        get("/missing"),  # 404
        b"DELETE /items/7 HTTP/1.1\r\nHost: test\r\n\r\n",  # 405
    ])  # fmt: skip
    statuses = [status for status, _, _ in answers]
    assert statuses == [200, 422, 200, 422, 422, 404, 405]
    assert json.loads(answers[0][2]) == {"item_id": 7, "page": {"skip": 2, "limit": 3}}
    assert json.loads(answers[2][2])["total"] == 3.0


def test_fastapi_background_task_runs_after_the_answer(fastapi_servers) -> None:
    corral, uvicorn = fastapi_servers
    same_answers(corral, uvicorn, [post("/jobs/first", b"")])
    for server in (corral, uvicorn):
        assert wait_for(lambda s=server: b"first" in answer(s.port, get("/jobs"))[2])


def test_fastapi_streaming_and_file_responses(fastapi_servers) -> None:
    corral, uvicorn = fastapi_servers
    stream, file, head = same_answers(corral, uvicorn, [
        get("/stream"),
        get("/file"),
        b"GET /file HTTP/1.1\r\nHost: test\r\nRange: bytes=0-5\r\n\r\n",
    ])  # fmt: skip
    assert stream[2] == b"".join(b"part %d\n" % index for index in range(5))
    assert file[2].startswith(b"a file served by FileResponse\n") and len(file[2]) > 5000
    assert head[0] == 206 and head[2] == b"a file"


def test_fastapi_websocket_endpoint(fastapi_servers) -> None:
    corral, uvicorn = fastapi_servers
    received = []
    for port in (corral.port, uvicorn.port):
        with ws_connect(f"ws://127.0.0.1:{port}/ws") as ws:
            replies = []
            for text in ("hello", "h\u00e9", "x" * 70_000):
                ws.send(text)
                replies.append(json.loads(ws.recv()))
            received.append(replies)
    assert received[0] == received[1]
    assert received[0][2] == {"echo": "x" * 70_000, "length": 70_000}


def test_starlette(each_core) -> None:
    with both("starlette_app:app") as (corral, uvicorn):
        answers = same_answers(corral, uvicorn, [
            get("/?name=corral"),
            post("/echo", b"x" * 100_000, b"application/octet-stream"),
            get("/moved"),
            get("/nowhere"),
        ])  # fmt: skip
        assert [status for status, _, _ in answers] == [200, 200, 301, 404]
        assert answers[0][2] == b"hello corral"
        for port in (corral.port, uvicorn.port):
            with ws_connect(f"ws://127.0.0.1:{port}/chat", subprotocols=["chat"]) as ws:
                assert ws.subprotocol == "chat"
                ws.send("shout")
                assert ws.recv() == "SHOUT"


def test_django_asgi_handler(each_core) -> None:
    with both("django_asgi_app:application") as (corral, uvicorn):
        answers = same_answers(corral, uvicorn, [
            get("/?name=corral"),
            post("/echo", b"a=1&b=2", b"application/x-www-form-urlencoded"),
            get("/async/thing"),
            get("/not-there"),
        ])  # fmt: skip
        assert [status for status, _, _ in answers] == [200, 200, 200, 404]
        assert answers[0][2] == b"hello corral"
        assert json.loads(answers[2][2]) == {"async": True, "path": "/async/thing", "name": "thing"}
