"""The bare minimum: uvloop + httptools answering a fixed response, with no checks.

Reference point for the benchmark: no limits, no Date header, no timers, no
environ, no application. Whatever a real server costs above this is its
request path. Single process, single thread; keep-alive aware.

    python bench/bare.py --port 8000
"""

import argparse
import asyncio
import contextlib
from collections.abc import Callable
from typing import cast

import httptools

try:
    import uvloop
except ImportError:  # pragma: no cover - asyncio fallback
    uvloop = None

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
KEEP = HEAD + b"\r\nHello, world!"
CLOSE = HEAD + b"Connection: close\r\n\r\nHello, world!"
BAD = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class Bare(asyncio.Protocol):
    """One connection: feed bytes to the parser, answer each complete request."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.parser = httptools.HttpRequestParser(self)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.write(BAD)
            self.transport.close()

    def on_message_complete(self) -> None:
        if self.parser.should_keep_alive():
            self.transport.write(KEEP)
        else:
            self.transport.write(CLOSE)
            self.transport.close()


async def serve(host: str, port: int, protocol: Callable[[], asyncio.Protocol] = Bare) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(protocol, host, port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    run = uvloop.run if uvloop is not None else asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
