"""``wsgi.input`` streams (corral.apps.wsgi.input) against io.BytesIO as the reference.

No sockets: the streams are fed directly, from the test thread or from a real
feeder thread, the way the connection feeds them.
"""

from __future__ import annotations

import io
import os
import random
import tempfile
import threading

import pytest

from corral.apps.wsgi.input import EMPTY, BufferedInput, ClientDisconnected, StreamingInput


def apply_ops(stream, ops: str) -> list:
    results: list = []
    for op in ops.split(","):
        name, _, arg = op.partition(":")
        if name == "read":
            results.append(stream.read(int(arg)) if arg else stream.read())
        elif name == "readnone":
            results.append(stream.read(None))
        elif name == "readline":
            results.append(stream.readline(int(arg)) if arg else stream.readline())
        elif name == "readlinenone":
            results.append(stream.readline(None))
        elif name == "readlines":
            results.append(stream.readlines())
        elif name == "iter":
            results.append(list(stream))
        else:
            raise ValueError(op)
    return results


BODIES = [
    b"",
    b"x",
    b"\n",
    b"one line\n",
    b"line one\nline two\n\nno newline at the end",
    b"a\r\nb\rc\n\n\nd",
    bytes(range(256)) * 40,
    b"".join(b"%d:" % i + b"y" * (i * 37 % 500) + b"\n" for i in range(200)),
]
OPS = [
    "read",
    "readnone",
    "read:1,read:2,read:0,read:3,read,read,read:5",
    "read:-1,read:1",
    "read:100000,read:1",
    "readline,readline,readline,readline,readline",
    "readline:1,readline:2,readline:0,readline:50,readlinenone,readline:-1,read",
    "readlines,readlines,read,readline",
    "readline,readlines,iter",
    "iter,iter,read:1",
    "read:3,iter,readline",
    "readline:7,read:11,readline,read:1000,readlines",
]


def split(body: bytes, sizes: list[int]) -> list[bytes]:
    pieces, start, index = [], 0, 0
    while start < len(body):
        size = sizes[index % len(sizes)]
        pieces.append(body[start : start + size])
        start += size
        index += 1
    return pieces


def buffered(body: bytes, spill: int, sizes: list[int]) -> BufferedInput:
    stream = BufferedInput(spill)
    for piece in split(body, sizes):
        stream.feed(piece)
    stream.finish()
    return stream


def streaming(body: bytes, sizes: list[int]) -> StreamingInput:
    stream = StreamingInput(1 << 30, None, lambda: None)
    for piece in split(body, sizes):
        stream.feed(piece)
    stream.finish()
    return stream


@pytest.mark.parametrize("ops", OPS)
@pytest.mark.parametrize("spill", [0, 5, 1 << 20])
def test_buffered_input_behaves_like_a_file(ops, spill):
    for body in BODIES:
        for sizes in ([1], [3, 1, 7], [len(body) or 1]):
            stream = buffered(body, spill, sizes)
            try:
                assert apply_ops(stream, ops) == apply_ops(io.BytesIO(body), ops), (body, sizes)
            finally:
                stream.close()


@pytest.mark.parametrize("ops", OPS)
def test_streaming_input_complete_body_behaves_like_a_file(ops):
    for body in BODIES:
        for sizes in ([1], [3, 1, 7], [len(body) or 1]):
            stream = streaming(body, sizes)
            assert apply_ops(stream, ops) == apply_ops(io.BytesIO(body), ops), (body, sizes)


@pytest.mark.parametrize("ops", OPS)
def test_streaming_input_fed_by_a_thread_behaves_like_a_file(ops):
    """The body arrives in small pieces from another thread while the reader reads."""
    rng = random.Random(ops)
    for body in BODIES:
        stream = StreamingInput(1 << 30, None, lambda: None)
        pieces = split(body, [rng.randint(1, 9) for _ in range(20)])

        def feed(stream=stream, pieces=pieces):
            for piece in pieces:
                stream.feed(piece)
            stream.finish()

        feeder = threading.Thread(target=feed)
        feeder.start()
        try:
            assert apply_ops(stream, ops) == apply_ops(io.BytesIO(body), ops), body
        finally:
            feeder.join(10)
        assert not feeder.is_alive()


def test_empty_input():
    assert EMPTY.read() == b""
    assert EMPTY.read(10) == b""
    assert EMPTY.read(None) == b""
    assert EMPTY.readline() == b""
    assert EMPTY.readline(5) == b""
    assert EMPTY.readlines() == []
    assert list(EMPTY) == []


def _feed_later(stream: StreamingInput, data: bytes, reader_done: threading.Event):
    """Feed ``data`` and finish once the reader returned, or after a deadline.

    A correct blocking read only returns after this feed; a read that returns early
    sets ``reader_done`` first and so sees none of ``data``.
    """

    def run():
        reader_done.wait(0.2)
        stream.feed(data)
        stream.finish()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("size", [6, 1000])
def test_streaming_read_n_waits_for_n_bytes_or_the_end(size):
    """read(n) returns fewer than n bytes only at the end of the body (file semantics).

    ``environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))`` is how many
    applications read a body; a short read truncates it.
    """
    stream = StreamingInput(1 << 30, None, lambda: None)
    stream.feed(b"abc")
    done = threading.Event()
    feeder = _feed_later(stream, b"def", done)
    try:
        data = stream.read(size)
    finally:
        done.set()
        feeder.join(10)
    assert data == b"abcdef"


def test_streaming_readline_n_waits_for_n_bytes_a_newline_or_the_end():
    stream = StreamingInput(1 << 30, None, lambda: None)
    stream.feed(b"abc")
    done = threading.Event()
    feeder = _feed_later(stream, b"defgh\nij", done)
    try:
        line = stream.readline(6)
    finally:
        done.set()
        feeder.join(10)
    assert line == b"abcdef"
    assert stream.readline(100) == b"gh\n"
    assert stream.readline() == b"ij"
    assert stream.readline() == b""


def test_streaming_readline_waits_for_the_newline():
    stream = StreamingInput(1 << 30, None, lambda: None)
    stream.feed(b"no newline yet")
    done = threading.Event()
    feeder = _feed_later(stream, b"; now\nnext", done)
    try:
        line = stream.readline()
    finally:
        done.set()
        feeder.join(10)
    assert line == b"no newline yet; now\n"
    assert list(stream) == [b"next"]


def test_on_first_read_runs_once_before_the_first_wait():
    calls: list[int] = []

    def first_read():
        calls.append(1)
        stream.feed(b"hello\n")  # what 100 Continue makes the client do

    stream = StreamingInput(1 << 30, first_read, lambda: None)
    assert stream.readline() == b"hello\n"
    assert calls == [1]
    done = threading.Event()
    feeder = _feed_later(stream, b"more", done)
    try:
        assert stream.read() == b"more"
    finally:
        done.set()
        feeder.join(10)
    assert calls == [1]


def test_on_first_read_not_called_while_data_is_buffered():
    calls: list[int] = []
    stream = StreamingInput(1 << 30, lambda: calls.append(1), lambda: None)
    stream.feed(b"abc")
    stream.finish()
    assert stream.read() == b"abc"
    assert stream.read() == b""
    assert calls == []


def test_feed_asks_to_pause_at_high_water_and_drain_resumes():
    drained: list[int] = []
    stream = StreamingInput(10, None, lambda: drained.append(1))
    assert not stream.feed(b"12345")
    assert stream.feed(b"67890")  # 10 >= high water: the feeder must stop
    stream.paused = True  # what the connection does when it stops reading
    assert stream.read(3) == b"123"  # 7 left, not below low water (5)
    assert drained == []
    assert stream.read(3) == b"456"  # 4 left: resume
    assert drained == [1]
    assert stream.paused is False
    assert stream.read(4) == b"7890"
    assert drained == [1]  # once per pause


def test_drain_resumes_even_when_the_reader_wins_the_race_with_pause():
    """feed() returned True: the feeder stops reading until on_drained.

    The connection marks the stream paused only after feed() returned, outside the
    stream's lock; an application thread may drain the whole buffer in between.
    Then nothing calls on_drained, the socket is never read again, and the reader
    waits for data forever. Whoever drains the buffer after feed() returned True must
    resume the feeder.
    """
    drained: list[int] = []
    stream = StreamingInput(10, None, lambda: drained.append(1))
    assert stream.feed(b"x" * 10)
    assert stream.read(10) == b"x" * 10  # the application thread runs first
    stream.paused = True  # then HttpConnection.on_body marks the pause
    assert drained == [1], "the feeder was told to stop and is never resumed"


def test_fail_wakes_a_blocked_reader():
    stream = StreamingInput(1 << 30, None, lambda: None)
    stream.feed(b"partial")
    outcome: list[object] = []

    def read():
        try:
            outcome.append(stream.read())
        except ClientDisconnected as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    stream.fail()
    reader.join(10)
    assert not reader.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], ClientDisconnected)
    assert isinstance(outcome[0], OSError)
    with pytest.raises(ClientDisconnected):
        stream.read(1)
    with pytest.raises(ClientDisconnected):
        stream.readline()


def test_streaming_large_body_from_a_thread_is_exact():
    """Many random-size pieces, read with random sizes: the bytes arrive intact, in order."""
    rng = random.Random(7)
    body = os.urandom(1 << 20)
    stream = StreamingInput(1 << 30, None, lambda: None)
    pieces = split(body, [rng.randint(1, 70000) for _ in range(50)])

    def feed():
        for piece in pieces:
            stream.feed(piece)
        stream.finish()

    feeder = threading.Thread(target=feed)
    feeder.start()
    parts = []
    try:
        while True:
            block = stream.read(rng.randint(1, 100000))
            if not block:
                break
            parts.append(block)
    finally:
        feeder.join(10)
    assert b"".join(parts) == body


def _open_files_in(directory: str) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(directory + os.sep):
            found.append(target)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to see open files")
def test_buffered_input_spills_to_a_temp_file_above_its_limit(tmp_path, monkeypatch):
    directory = os.path.realpath(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", directory)
    small = BufferedInput(1000)
    try:
        small.feed(b"a" * 600)
        small.feed(b"b" * 400)
        small.finish()
        assert _open_files_in(directory) == []  # exactly at the limit: still in memory
        assert small.read() == b"a" * 600 + b"b" * 400
    finally:
        small.close()
    large = BufferedInput(1000)
    try:
        large.feed(b"a" * 600)
        large.feed(b"b" * 401)
        assert len(_open_files_in(directory)) == 1  # one byte over: on disk
        large.finish()
        assert large.read() == b"a" * 600 + b"b" * 401
    finally:
        large.close()
    assert _open_files_in(directory) == []  # close() releases the file
