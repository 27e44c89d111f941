"""The heartbeat protocol (corral/wire.py): every message round-trips; the decoder keeps
partial lines, skips what is not a message, logs it once per kind, and never raises."""

from __future__ import annotations

import logging
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.observe.latency import BOUNDS
from corral.wire import (
    PIPE_BUF,
    TARGET_MAX,
    Abort,
    Alive,
    Beat,
    Closed,
    Connections,
    Failed,
    InProgress,
    Latency,
    LineDecoder,
    Malformed,
    Ready,
    Renewed,
    Retire,
    Stuck,
    decode,
    encode,
)

REQUEST = InProgress(12.5, "GET", "/a%20b?x=1")
EVERY_KIND = [
    Ready(),
    Closed(),
    Connections(10, 7, 2, 1, 1),
    Latency(123456, tuple(range(BOUNDS + 1))),
    Alive(8123.456789012),
    Beat(41, 8123.75, None),
    Beat(41, 8123.75, REQUEST),
    Retire(1000),
    Renewed(3),
    Failed("RuntimeError: boom at import (app.py:3)"),
    Failed(""),
    Abort(None),
    Abort(REQUEST),
    Stuck(InProgress(0.3, "POST", "/upload")),
]


@pytest.fixture
def logged(caplog):
    """The WARNING lines the decoder logs (the "corral" logger may not propagate)."""
    logger = logging.getLogger("corral")
    propagate, logger.propagate = logger.propagate, True
    with caplog.at_level(logging.WARNING, "corral"):
        yield lambda: [r.getMessage() for r in caplog.records if r.name == "corral"]
    logger.propagate = propagate


@pytest.mark.parametrize("message", EVERY_KIND, ids=repr)
def test_every_kind_round_trips(message):
    line = encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert len(line) < PIPE_BUF
    assert LineDecoder().feed(line) == [message]


@pytest.mark.parametrize(
    ("message", "line"),
    [
        (Ready(), b"ready\n"),
        (Closed(), b"closed\n"),
        (Connections(10, 7, 2, 1, 1), b"conn 10 7 2 1 1\n"),
        (Alive(8123.456789012), b"alive 8123.456789012\n"),
        (Beat(41, 8123.75, None), b"hb 41 8123.75 0\n"),
        (Beat(41, 8123.75, REQUEST), b"hb 41 8123.75 12.5 GET /a%20b?x=1\n"),
        (Retire(1000), b"retire 1000\n"),
        (Renewed(3), b"renewed 3\n"),
        (Failed("boom"), b"failed boom\n"),
        (Abort(None), b"abort 0\n"),
        (Stuck(InProgress(0.3, "POST", "/upload")), b"stuck 0.3 POST /upload\n"),
    ],
)
def test_the_lines_are_as_they_were(message, line):
    assert encode(message) == line


def test_a_latency_line():
    counts = (0,) * BOUNDS + (3,)
    assert encode(Latency(5, counts)) == b"lat 5 " + b",".join([b"0"] * BOUNDS) + b",3\n"


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=50)
_clean = st.text(st.characters(min_codepoint=0x21, blacklist_categories=("Cs",)), max_size=50)
_cause = st.text(st.characters(min_codepoint=0x20, blacklist_categories=("Cs",)), max_size=50).map(
    lambda s: s.replace("\x7f", "")
)
_count = st.integers(min_value=0, max_value=2**64)
_time = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
_requests = st.builds(
    InProgress,
    st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False),
    _clean.filter(lambda s: " " not in s and "\x7f" not in s).map(lambda s: s[:32]),
    _clean.filter(lambda s: " " not in s and "\x7f" not in s),
)
_messages = st.one_of(
    st.just(Ready()),
    st.just(Closed()),
    st.builds(Connections, _count, _count, _count, _count, _count),
    st.builds(Latency, _count, st.tuples(*[_count] * (BOUNDS + 1))),
    st.builds(Alive, _time),
    st.builds(Beat, _count, _time, st.none() | _requests),
    st.builds(Retire, _count),
    st.builds(Renewed, _count),
    st.builds(Failed, _cause),
    st.builds(Abort, st.none() | _requests),
    st.builds(Stuck, _requests),
)


@given(_messages)
def test_any_message_with_clean_text_round_trips(message):
    assert decode(encode(message)[:-1]) == message


@given(st.builds(InProgress, st.floats(0, 1e6), _text, _text), _text)
def test_any_text_stays_one_short_line(request, cause):
    for message in (Beat(1, 2.0, request), Abort(request), Stuck(request), Failed(cause)):
        line = encode(message)
        assert line.count(b"\n") == 1 and line.endswith(b"\n")
        assert len(line) < PIPE_BUF
        assert len(LineDecoder().feed(line)) == 1  # still a message


def test_spaces_and_control_characters_do_not_split_a_line():
    request = InProgress(1.0, "G T", "/a b\r\nhb 9 0\tx")
    assert encode(Beat(1, 2.0, request)) == b"hb 1 2.0 1.0 G%20T /a%20b%0D%0Ahb%209%200%09x\n"
    assert encode(Failed("boom\nat line 3\r\n")) == b"failed boom at line 3  \n"


def test_long_fields_are_cut_below_pipe_buf():
    target = "/" + "x" * 5000
    line = encode(Stuck(InProgress(1.0, "M" * 5000, target)))
    message = decode(line[:-1])
    assert isinstance(message, Stuck)
    assert message.request.target == target[:TARGET_MAX]
    assert len(message.request.method) == 32
    # a cause of 4-byte characters: 1000 of them, still below PIPE_BUF with its kind
    line = encode(Failed("\U0001f600" * 5000))
    assert len(line) < PIPE_BUF
    assert decode(line[:-1]) == Failed("\U0001f600" * 1000)


def test_a_lone_surrogate_is_replaced():
    assert encode(Failed("bad \udcff name")) == b"failed bad ? name\n"


def test_encode_refuses_what_is_not_a_message():
    with pytest.raises(TypeError):
        encode("hb 1 0")  # type: ignore[arg-type]


def test_a_line_split_across_reads_is_kept_until_its_newline():
    decoder = LineDecoder()
    beat = Beat(41, 8123.75, REQUEST)
    data = encode(beat)
    for cut in range(1, len(data)):
        assert decoder.feed(data[:cut]) == []
        assert decoder.feed(data[cut:]) == [beat]
    pieces = [data[i : i + 1] for i in range(len(data))]
    assert [m for piece in pieces for m in decoder.feed(piece)] == [beat]


def test_several_lines_in_one_read_come_in_order():
    data = b"".join(encode(message) for message in EVERY_KIND)
    decoder = LineDecoder()
    assert decoder.feed(data[:-3]) == EVERY_KIND[:-1]
    assert decoder.feed(data[-3:]) == EVERY_KIND[-1:]


@pytest.mark.parametrize(
    "line",
    [
        b"hb x 5.0 0",  # bad int
        b"hb -1 5.0 0",
        b"hb 1_0 5.0 0",
        b"hb \xd9\xa1 5.0 0",  # an Arabic-Indic digit: int() would take it
        b"hb 1 5.0 nan GET /",
        b"hb 1 5.0 inf GET /",
        b"hb 1 5.0 1e999 GET /",
        b"hb 1 nan 0",
        b"hb 1 soon 0",
        b"hb 1 0",  # no time
        b"hb 1 5.0 1.5 GET",  # missing field
        b"hb 1 5.0 1.5 GET / extra",
        b"hb 1",
        b"alive",
        b"alive ",
        b"alive nan",
        b"alive 1.0 2.0",
        b"hb",
        b"hb ",
        b"conn 1 2 3 4",
        b"conn 1 2 3 4 5 6",
        b"conn 1 2 x 4 5",
        b"lat 5 1,2,3",  # too few buckets
        b"lat 5 " + b",".join([b"1"] * (BOUNDS + 2)),
        b"lat x " + b",".join([b"1"] * (BOUNDS + 1)),
        b"lat 5",
        b"ready now",
        b"ready ",
        b"closed x",
        b"retire",
        b"retire ten",
        b"failed",
        b"abort",
        b"abort 1.0 GET",
        b"stuck 0",
        b"stuck 1.0 GET /\xff",  # not UTF-8
        b"failed \xc3\x28",
    ],
)
def test_a_malformed_line_is_skipped(line, logged):
    with pytest.raises(Malformed):
        decode(line)
    decoder = LineDecoder("worker 2 (pid 99)")
    assert decoder.feed(line + b"\n" + encode(Ready())) == [Ready()]
    (message,) = logged()
    kind = line.partition(b" ")[0].decode()
    assert message.startswith("worker 2 (pid 99): skipped a heartbeat line, ")
    assert f"(further {kind} lines are skipped unlogged)" in message


@pytest.mark.parametrize(
    "line", [b"", b"hello", b"HB 1 0", b"\xff\xfe 1 2", b" hb 1 0", b"hb\t1 0"]
)
def test_an_unknown_line_is_skipped(line, logged):
    assert LineDecoder("w").feed(line + b"\nclosed\n") == [Closed()]
    (message,) = logged()
    assert "unknown kind" in message and "(unknown)" in message


def test_each_kind_is_logged_once(logged):
    decoder = LineDecoder("worker 0 (pid 7)")
    bad = b"hb x 0\nconn 1\nnope\nhb y 0\nconn 2\nnope2\nwhat\n"
    assert decoder.feed(bad * 3 + b"ready\n") == [Ready()]
    lines = logged()
    assert len(lines) == 3, lines
    assert "'hb x 0'" in lines[0] and "'conn 1'" in lines[1] and "'nope'" in lines[2]
    # another decoder (another worker) logs its own first ones
    assert LineDecoder("worker 1 (pid 8)").feed(b"hb x 0\n") == []
    assert len(logged()) == 4 and logged()[3].startswith("worker 1 (pid 8): ")


def test_a_line_over_the_size_limit_is_skipped(logged):
    decoder = LineDecoder()
    long = b"failed " + b"x" * PIPE_BUF
    assert decoder.feed(long + b"\n" + encode(Ready())) == [Ready()]
    assert decoder.feed(long[:3000]) == []
    assert decoder.feed(long[3000:]) == []  # over the limit: dropped, not kept
    assert decoder._partial == b""
    assert decoder.feed(b"more of it, still no newline " * 100) == []
    assert decoder._partial == b""
    assert decoder.feed(b"its end\nclosed\n") == [Closed()]
    (message,) = logged()
    assert "a line of" in message and "(further (over-long) lines" in message
    # the longest line encode could write still decodes
    longest = b"failed " + b"y" * (PIPE_BUF - 9) + b"\n"
    assert len(longest) == PIPE_BUF - 1
    assert decoder.feed(longest) == [Failed("y" * (PIPE_BUF - 9))]
    assert decoder.feed(b"failed " + b"y" * (PIPE_BUF - 8) + b"\n") == []


@given(st.lists(st.binary(max_size=300), max_size=20))
def test_no_bytes_make_the_decoder_raise(chunks):
    decoder = LineDecoder(log=logging.getLogger("corral_test_wire"))
    for chunk in chunks:
        for message in decoder.feed(chunk):
            assert len(encode(message)) < PIPE_BUF
    assert len(decoder._partial) < PIPE_BUF


@given(st.lists(_messages, max_size=10), st.lists(st.integers(0, 4000), max_size=5))
def test_messages_cut_anywhere_come_out_whole(messages, cuts):
    data = b"".join(encode(message) for message in messages)
    decoder = LineDecoder()
    out = []
    start = 0
    for cut in sorted(c for c in cuts if c <= len(data)):
        out += decoder.feed(data[start:cut])
        start = cut
    out += decoder.feed(data[start:])
    assert out == messages


def test_in_progress_describes_the_request():
    assert REQUEST.describe() == "GET /a%20b?x=1"


def test_the_master_keeps_what_a_worker_reports(logged):
    """WorkerProcess.feed and record (master/process.py) read the messages, not the text."""
    from types import SimpleNamespace

    from corral.master.process import WorkerProcess

    pool = SimpleNamespace(application=SimpleNamespace(threads=2))
    worker = WorkerProcess(1234, 2, None, pool, -1)
    base = time.monotonic() + 100.0  # a later time of the clock the worker and master share
    counts = (1,) * (BOUNDS + 1)
    data = b"".join(
        encode(message)
        for message in (
            Connections(5, 3, 2, 0, 1),
            Latency(2_000_000, counts),
            Beat(9, base, InProgress(3.5, "GET", "/slow")),
            Ready(),
            Failed("boom"),
            Renewed(2),
        )
    )
    last = f"conn x\nhb 1 {base + 1!r} 0".encode()
    kept = [worker.record(message) for message in worker.feed(data + last)]
    assert kept == [True, True, True, False, True, True]
    assert worker.connections == (5, 3, 2, 0, 1)
    assert worker.latency == (2_000_000, list(counts))
    # the request's start on the shared clock: the line's time less its age
    assert (worker.served, worker.request_started) == (9, base - 3.5)
    assert worker.request is not None and worker.request[1] == "GET /slow"
    assert worker.alive_at == base
    assert worker.failure == "boom"
    assert worker.renewed == 2
    # the malformed conn line changed nothing; the hb line waits for its newline
    assert [worker.record(m) for m in worker.feed(b"\n")] == [True]
    assert (worker.served, worker.request, worker.connections[0]) == (1, None, 5)
    assert worker.alive_at == base + 1
    assert worker.record(Alive(base + 2)) and worker.alive_at == base + 2
    assert worker.record(Alive(base + 1.5)) and worker.alive_at == base + 2  # never goes back
    (message,) = logged()
    assert message.startswith("worker 2 (pid 1234): skipped a heartbeat line, ")
