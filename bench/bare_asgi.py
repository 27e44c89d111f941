"""The least an ASGI server does: uvloop + httptools, a scope, the application's coroutine.

Reference point for scenario F, as bare.py is for scenario A: a scope with the keys the
spec requires, the application called with ``receive`` and ``send``, its answer written in
one piece; no limits, no checks of what it sends, no Date header, no timers (the path is
not percent-decoded, every status says "OK": enough for the hello app). By default the
application's coroutine is stepped right where its request was parsed, without a task;
``--task`` runs each request in an asyncio Task instead, as every real ASGI server does
(anyio, and so Starlette and FastAPI, need ``asyncio.current_task()``). Whatever a real
server costs above this is its request path. Single process, single thread.

    python bench/bare_asgi.py --port 8000 [--task] module:app
"""

import argparse
import asyncio
import contextlib
import importlib
import sys
from typing import Any

import httptools
import uvloop
from bare import Bare, serve  # bench/, the script's own directory

REQUEST = {"type": "http.request", "body": b"", "more_body": False}


class BareAsgi(Bare):
    """One connection (bare.py's): parse, build the scope, run the application, write its
    answer."""

    def __init__(self, app: Any, in_task: bool) -> None:
        self.app = app
        self.in_task = in_task
        self.head = b""
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.loop = asyncio.get_running_loop()
        self.base = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "scheme": "http",
            "root_path": "",
            "server": transport.get_extra_info("sockname")[:2],
            "client": transport.get_extra_info("peername")[:2],
        }

    def on_message_begin(self) -> None:
        self.headers = []

    def on_url(self, url: bytes) -> None:
        self.url = url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_message_complete(self) -> None:
        parsed = httptools.parse_url(self.url)
        scope = dict(self.base)
        scope["http_version"] = self.parser.get_http_version()
        scope["method"] = self.parser.get_method().decode("ascii")
        scope["path"] = parsed.path.decode("utf-8")
        scope["raw_path"] = parsed.path
        scope["query_string"] = parsed.query or b""
        scope["headers"] = self.headers
        scope["state"] = {}
        scope["extensions"] = {}
        coro = self.app(scope, self.receive, self.send)
        if self.in_task:
            self.loop.create_task(coro)
            return
        with contextlib.suppress(StopIteration):
            coro.send(None)  # the hello app never waits: its first step is its whole run

    async def receive(self) -> dict[str, Any]:
        return REQUEST

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            fields = b"".join(b"%s: %s\r\n" % field for field in message["headers"])
            self.head = b"HTTP/1.1 %d OK\r\n%s\r\n" % (message["status"], fields)
        elif not message.get("more_body"):
            self.transport.write(self.head + message.get("body", b""))
            if not self.parser.should_keep_alive():
                self.transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--task", action="store_true", help="each request in its own Task")
    parser.add_argument("app", help="module:callable, imported from the working directory")
    args = parser.parse_args()
    module, _, name = args.app.partition(":")
    sys.path.insert(0, "")
    app = getattr(importlib.import_module(module), name)
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(serve(args.host, args.port, lambda: BareAsgi(app, args.task)))


if __name__ == "__main__":
    main()
