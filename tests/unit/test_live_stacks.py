"""The live stacks' pure parts (server/stacks.py): the answer's framing and the snapshot."""

from __future__ import annotations

import asyncio
import threading

from corral.server.stacks import HEADER, read_frames, snapshot


def test_frames_are_read_whole_and_a_partial_one_is_kept_for_later():
    buffer = bytearray(HEADER.pack(7, 3) + b"abc" + HEADER.pack(8, 5) + b"de")
    assert read_frames(buffer) == [(7, b"abc")]
    assert bytes(buffer) == HEADER.pack(8, 5) + b"de"
    buffer += b"fgh"
    assert read_frames(buffer) == [(8, b"defgh")]
    assert buffer == bytearray()
    buffer += HEADER.pack(9, 0)[:5]
    assert read_frames(buffer) == [] and len(buffer) == 5


def _parked_here(event: threading.Event, done: threading.Event) -> None:
    event.set()
    done.wait(10)


def test_a_snapshot_names_each_thread_and_leaves_out_the_one_asked_to():
    started, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=_parked_here, args=(started, done), name="parked")
    thread.start()
    started.wait(10)
    try:
        found = snapshot(skip=threading.get_ident())
    finally:
        done.set()
        thread.join(10)
    names = {entry["name"]: entry for entry in found["threads"]}
    assert "parked" in names and "MainThread" not in names
    innermost = [frame["function"] for frame in names["parked"]["frames"]]
    assert "_parked_here" in innermost and innermost[-1] == "wait"
    assert found["tasks"] is None


async def _awaited_deep() -> None:
    await asyncio.sleep(10)


async def _awaits_deep() -> None:
    await _awaited_deep()


def test_a_snapshot_with_a_loop_gives_each_pending_task_s_await_chain():
    found: dict = {}

    def on_its_own_thread() -> None:  # a loop of its own, whatever a test before left running
        loop = asyncio.new_event_loop()
        try:
            task = loop.create_task(_awaits_deep(), name="deep")
            loop.run_until_complete(asyncio.sleep(0.01))
            found.update(snapshot(loop))
            task.cancel()
            loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
        finally:
            loop.close()

    thread = threading.Thread(target=on_its_own_thread)
    thread.start()
    thread.join(10)
    (entry,) = [t for t in found["tasks"] if t["name"] == "deep"]
    assert [f["function"] for f in entry["frames"]][:2] == ["_awaits_deep", "_awaited_deep"]
