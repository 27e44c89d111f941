"""Stacks for the log: where each thread is, and where each asyncio task waits.

A task's own ``get_stack()`` gives one frame for a suspended coroutine (its outermost); what
an operator needs is the chain it awaits down to the innermost ``await``, which the
coroutines' ``cr_await`` links give (``ag_await`` for an async generator, ``gi_yieldfrom`` for
a generator-based awaitable). Nothing here runs unless a log line asks for it.
"""

from __future__ import annotations

import sys
import threading
import traceback
from typing import Any


def await_chain(awaitable: Any) -> list[Any]:
    """(frame, line) of ``awaitable`` and of each awaitable it awaits, outermost first."""
    frames = []
    seen = 0
    while awaitable is not None and seen < 200:  # a chain of awaits is finite: bound it anyway
        seen += 1
        frame = (
            getattr(awaitable, "cr_frame", None)
            or getattr(awaitable, "ag_frame", None)
            or getattr(awaitable, "gi_frame", None)
        )
        # a compiled coroutine's frame has no line: it is corral's own, not worth a line
        if frame is not None and (frame.f_lineno or 0) > 0:
            frames.append((frame, frame.f_lineno))
        inner = (
            getattr(awaitable, "cr_await", None)
            or getattr(awaitable, "ag_await", None)
            or getattr(awaitable, "gi_yieldfrom", None)
        )
        if inner is None and frame is None:
            inner = _wrapped(awaitable)
        awaitable = inner
    return frames


def _wrapped(awaitable: Any) -> Any:
    """The coroutine inside ``coro.__await__()``'s wrapper, which a compiled coroutine awaits
    (the wrapper shows no attribute for it; the garbage collector knows its referents)."""
    import gc
    import types

    for referent in gc.get_referents(awaitable):
        if isinstance(referent, (types.CoroutineType, types.GeneratorType)):
            return referent
    return None


def task_stack(task: Any) -> str:
    """Where ``task`` is: its coroutine and every coroutine it awaits, outermost first."""
    frames = await_chain(task.get_coro())
    if not frames:
        return "  (no Python frame: finished, or not started)"
    summary = traceback.StackSummary.extract(iter(frames), lookup_lines=True)
    return "".join(summary.format()).rstrip("\n")


def thread_stacks() -> str:
    """Every thread's stack, each under its name."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame)).rstrip("\n")
        parts.append(f"thread {names.get(ident, ident)}:\n{stack}")
    return "\n".join(parts)


def task_stacks(loop: Any) -> str:
    """Every pending task of ``loop``, each under its name."""
    import asyncio

    parts = [
        f"task {task.get_name()}:\n{task_stack(task)}"
        for task in asyncio.all_tasks(loop)
        if not task.done()
    ]
    return "\n".join(parts) if parts else "(no pending task)"
