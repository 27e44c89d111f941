"""``GET /control/applications/NAME/stacks``: every worker's live stacks, asked all at once.

The master's half of the exchange in ``server/stacks.py``: each worker of the application is
asked on its stacks socket at the same time, and its answer awaited on the master's loop until
`DEADLINE`; a worker that has not answered by then (stopped, or a thread holding the GIL) is
listed with ``"answered": false`` and no stacks, so the answer comes within a second however
the workers are. Nothing is sent to a worker but the question: it goes on serving.

One question at a time per worker (a lock), and each numbered: the answer to a question given
up on arrives later and is dropped by its number, so it cannot pass for the next one's.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any

from corral.master.process import WorkerProcess
from corral.server.stacks import ASK, read_frames

DEADLINE = 0.9  # seconds for every worker to answer: the API answers within a second


class _Asking:
    """What the master keeps of its exchange with one worker."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.number = 0
        self.buffer = bytearray()  # an answer's bytes read so far, kept if a wait is given up


_asking: weakref.WeakKeyDictionary[WorkerProcess, _Asking] = weakref.WeakKeyDictionary()


async def collect(workers: list[WorkerProcess]) -> list[dict[str, Any]]:
    """One entry per worker, in the order given: its pid, slot, state, and stacks."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    answers = await asyncio.gather(*(_ask(worker, deadline) for worker in workers))
    return [
        {
            "pid": worker.pid,
            "slot": worker.slot,
            "state": worker.state,
            "ready": worker.ready,
            "retiring": worker.retiring,
            "answered": answer is not None,
            **(answer or {"threads": [], "tasks": None}),
        }
        for worker, answer in zip(workers, answers, strict=True)
    ]


async def _ask(worker: WorkerProcess, deadline: float) -> dict[str, Any] | None:
    sock = worker.stacks
    if sock is None or sock.fileno() < 0:
        return None
    loop = asyncio.get_running_loop()
    asking = _asking.setdefault(worker, _Asking())
    try:
        async with asyncio.timeout_at(deadline):
            async with asking.lock:
                asking.number = (asking.number + 1) % (1 << 32)
                number = asking.number
                await loop.sock_sendall(sock, ASK.pack(number))
                while True:
                    for answered, body in read_frames(asking.buffer):
                        if answered == number:
                            found: dict[str, Any] = json.loads(body)
                            return found
                    data = await loop.sock_recv(sock, 65536)
                    if not data:
                        return None  # the worker closed its end: it is exiting
                    asking.buffer += data
    except (TimeoutError, OSError, ValueError):
        return None
