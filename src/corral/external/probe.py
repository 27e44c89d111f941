"""Whether a supervised process answers: the readiness the master waits for before the
proxy may send it requests.

``http``: a ``GET`` of the health path, and any HTTP status line back (an application that
answers 404 or 500 at its health path is up: it answers); ``connect``: a connection accepted.
One try is bounded by `TRY_TIMEOUT`, so that a program that accepts and never answers is
asked again rather than waited on.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["answers"]

TRY_TIMEOUT = 2.0  # one probe's connect-and-answer, in seconds


async def answers(address: str, how: str, path: str) -> bool:
    """One try: whether the process at ``address`` ("HOST:PORT" or "unix:PATH") answers."""
    try:
        return await asyncio.wait_for(_ask(address, how, path), TRY_TIMEOUT)
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False


async def _ask(address: str, how: str, path: str) -> bool:
    if address.startswith("unix:"):
        reader, writer = await asyncio.open_unix_connection(address.removeprefix("unix:"))
        host = "localhost"
    else:
        host, _, port = address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
    try:
        if how == "connect":
            return True
        request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
        writer.write((request + "User-Agent: corral-health\r\n\r\n").encode("latin-1"))
        await writer.drain()
        line = await reader.readline()
        return line.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")) and line[9:12].isdigit()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
