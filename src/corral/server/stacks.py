"""A worker's live stacks, on the master's demand: the worker's half of ``/stacks``.

The master holds one end of a socket pair per worker (made at the fork, beside the heartbeat
pipe); a daemon thread of the worker blocks on the other end. Why a thread and not a signal:
a signal handler runs on the main thread, between its bytecodes, so it would wait for the
very call an operator wants to see (a worker stuck at import, a loop blocked by the
application); a thread needs only the GIL, which a blocked call has released. It runs from
the start of the worker, before the application is imported, and costs nothing until asked.

The exchange (both sides use this module's `ASK`, `HEADER` and `read_frames`, so only it
knows the bytes): the master writes a request number (4 bytes, big-endian); the worker
answers with the same number, the length of a JSON body (4 bytes each) and the body::

    {"threads": [{"name": ..., "frames": [FRAME, ...]}, ...],
     "tasks": [{"name": ..., "frames": [FRAME, ...]}, ...] | null}

a FRAME being ``{"file", "line", "function", "code"}``, outermost first. ``tasks`` is None
(JSON null) but in an ASGI worker whose loop runs. A number lets the master drop the late
answer to a question it stopped waiting for. The thread that answers leaves itself out.
"""

from __future__ import annotations

import signal
import socket
import struct
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from corral.observe.stacks import await_chain

__all__ = ["ASK", "HEADER", "StackResponder", "snapshot"]

ASK = struct.Struct("!I")  # master -> worker: a request number
HEADER = struct.Struct("!II")  # worker -> master: that number, the body's length
MAX_FRAMES = 200  # per thread or task: a recursion's stack is cut, innermost frames kept


def _frames(summary: traceback.StackSummary) -> list[dict[str, Any]]:
    return [
        {"file": f.filename, "line": f.lineno, "function": f.name, "code": f.line or ""}
        for f in summary[-MAX_FRAMES:]
    ]


def snapshot(loop: Any = None, skip: int | None = None) -> dict[str, Any]:
    """Every thread's stack (but thread ``skip``'s) and, with an asyncio ``loop``, every
    pending task's awaits, as plain data."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    threads = [
        {"name": names.get(ident, str(ident)), "frames": _frames(traceback.extract_stack(frame))}
        for ident, frame in sys._current_frames().items()
        if ident != skip
    ]
    tasks = None
    if loop is not None:
        import asyncio

        tasks = []
        for task in asyncio.all_tasks(loop):  # a copy, taken under the GIL: safe off the loop
            if task.done():
                continue
            chain = await_chain(task.get_coro())
            summary = traceback.StackSummary.extract(iter(chain), lookup_lines=True)
            tasks.append({"name": task.get_name(), "frames": _frames(summary)})
    return {"threads": threads, "tasks": tasks}


class StackResponder:
    """The worker's thread that answers the master's requests for its stacks.

    ``loop`` gives the loop whose tasks to list (None: none, as in a WSGI worker or before
    the loop runs); it is called on this thread, at each request.
    """

    def __init__(self, sock: socket.socket, loop: Callable[[], Any]) -> None:
        self.sock = sock
        self.loop = loop
        self.thread = threading.Thread(target=self._serve, name="corral-stacks", daemon=True)

    def start(self) -> None:
        # Started with every signal blocked (a thread inherits its creator's mask): the kernel
        # gives a process's signal to any thread that does not block it, and one taken here
        # would not interrupt the main thread's wait, whose handlers (ABRT, QUIT) must run.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            self.thread.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _serve(self) -> None:
        sock = self.sock
        sock.setblocking(True)
        try:
            while request := _read_exact(sock, ASK.size):
                (number,) = ASK.unpack(request)
                try:
                    found = snapshot(self.loop(), skip=threading.get_ident())
                except Exception as exc:  # a stack is a diagnosis: never the worker's end
                    found = {"threads": [], "tasks": None, "error": f"{type(exc).__name__}: {exc}"}
                import json  # (on the first demand: most workers are never asked)

                body = json.dumps(found, ensure_ascii=False).encode("utf-8", "replace")
                sock.sendall(HEADER.pack(number, len(body)) + body)
        except OSError:
            pass  # the master is gone, or closed its end: nothing more to answer
        finally:
            sock.close()


def _read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def read_frames(buffer: bytearray) -> list[tuple[int, bytes]]:
    """The complete answers at the start of ``buffer`` (removed from it): (number, body)."""
    answers = []
    while len(buffer) >= HEADER.size:
        number, length = HEADER.unpack_from(buffer)
        if len(buffer) < HEADER.size + length:
            break
        answers.append((number, bytes(buffer[HEADER.size : HEADER.size + length])))
        del buffer[: HEADER.size + length]
    return answers
