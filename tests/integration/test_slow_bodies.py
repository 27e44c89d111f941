"""Slow clients on the request side (issue 34, point 3): a threaded WSGI application never holds
a thread while a client sends its body (`request_buffering`: the loop reads it first, spooled to
a deleted file past `body_buffer_size`, `100 Continue` as it starts), `--no-request-buffering`
streams as before, and a body under `body_min_rate` gets 408 (the slow POST); real corral
processes and sockets, both cores."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time

import pytest

from tests.integration.server import Server, fetch, read_all, read_response, run_cli

pytestmark = pytest.mark.usefixtures("each_core")

APP = "slow_body_apps"


def post(path: str, length: int, *fields: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: x", f"Content-Length: {length}", *fields]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def digest(answer: bytes) -> tuple[int, str]:
    result = json.loads(answer)
    return result["length"], result["sha256"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def interim(sock) -> bytes:
    """The head of an interim answer (read byte by byte: nothing after it is taken)."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        assert byte, f"closed after {head!r}"
        head += byte
    return head


@pytest.mark.wallclock
def test_forty_slow_posts_hold_none_of_four_threads() -> None:
    """Each sends its 20 bytes one every 0.5 s (10 s); streamed, the first four would hold the
    four threads and every other request would wait behind them."""
    body = bytes(range(65, 85))
    with Server(APP, "--threads", "4", "--body-min-rate", "0") as server:
        slow = [server.connect(timeout=30) for _ in range(40)]
        for sock in slow:
            sock.sendall(post("/digest", len(body)))
        begun = threading.Event()

        def trickle() -> None:
            for index in range(len(body)):
                for sock in slow:
                    sock.sendall(body[index : index + 1])
                begun.set()
                time.sleep(0.5)

        sender = threading.Thread(target=trickle)
        sender.start()
        try:
            assert begun.wait(10)
            started = time.monotonic()
            status, _, answer = fetch(server, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            took = time.monotonic() - started
            still_sending = sender.is_alive()
        finally:
            sender.join()
        assert (status, answer) == (200, b"hello")
        assert took < 2.0 and still_sending, took
        for sock in slow:
            with sock:
                status, _, answer = read_response(sock)
                assert (status, digest(answer)) == (200, (len(body), sha256(body)))


def test_a_body_over_the_buffer_is_read_whole_from_a_deleted_file(tmp_path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    argv = ["--threads", "4", "--body-buffer-size", "65536", "--body-temp-dir", str(spool)]
    with Server(APP, *argv) as server:
        for size, spooled in [(65536, False), (3 << 20, True)]:
            body = os.urandom(size)
            status, _, answer = fetch(server, post("/digest", size) + body)
            assert (status, digest(answer)) == (200, (size, sha256(body)))
            # seen by the worker itself while the application ran: the body's file, unlinked
            deleted = json.loads(answer)["deleted"]
            here = [path for path in deleted if path.startswith(f"{spool}/")]
            assert bool(here) is spooled, deleted
    assert list(spool.iterdir()) == []


@pytest.mark.parametrize("threads", ["1", "4"])
def test_100_continue_goes_as_the_loop_starts_reading_the_body(threads: str) -> None:
    with Server(APP, "--threads", threads, "--limit-request-body", "1000") as server:
        with server.connect() as sock:
            sock.sendall(post("/digest?log=c", 5, "Expect: 100-continue"))
            assert interim(sock) == b"HTTP/1.1 100 Continue\r\n\r\n"
            assert "called c" not in server.stderr  # buffered: the application waits for all
            sock.sendall(b"hello")
            status, _, answer = read_response(sock)
            assert (status, digest(answer)) == (200, (5, sha256(b"hello")))
        with server.connect() as sock:  # the head's own checks first: 413, and no 100
            sock.sendall(post("/digest", 5000, "Expect: 100-continue"))
            assert read_all(sock).startswith(b"HTTP/1.1 413 ")


def test_without_request_buffering_the_body_streams_to_the_application() -> None:
    with (
        Server(APP, "--threads", "4", "--no-request-buffering") as server,
        server.connect() as sock,
    ):
        sock.sendall(post("/digest?log=s", 10) + b"first")
        server.wait_log(r"called s")  # the application runs with half of its body
        sock.sendall(b"-last")
        status, _, answer = read_response(sock)
        assert (status, digest(answer)) == (200, (10, sha256(b"first-last")))


KINDS = {
    "wsgi": (APP, "/digest", "--threads", "4"),
    "wsgi-streamed": (APP, "/digest", "--threads", "4", "--no-request-buffering"),
    "asgi": ("asgi_apps:app", "/echo"),
}


@pytest.mark.wallclock
@pytest.mark.parametrize("kind", KINDS)
def test_a_body_under_the_minimum_rate_gets_408_one_above_is_never_cut(kind: str) -> None:
    """100 bytes/s after 2 s: one client sends 10 bytes and stops, the other 100 bytes every
    0.2 s (500 bytes/s) for 4 s; `body_timeout` alone would keep the first for 60 s."""
    app, path, *flags = KINDS[kind]
    argv = [*flags, "--body-min-rate", "100", "--body-min-rate-grace", "2"]
    body = bytes(range(200)) * 10
    with Server(app, *argv) as server, server.connect() as slow, server.connect() as fast:
        slow.sendall(post(path, 1000) + b"x" * 10)
        fast.sendall(post(path, len(body)))
        started = time.monotonic()
        for start in range(0, len(body), 100):
            fast.sendall(body[start : start + 100])
            time.sleep(0.2)
        status, _, answer = read_response(fast)
        assert status == 200
        if kind == "asgi":  # the echo
            assert answer == body
        else:
            assert digest(answer) == (len(body), sha256(body))
        cut = read_all(slow)  # by then answered and closed (else: this read times out)
        assert cut.startswith(b"HTTP/1.1 408 "), cut
        assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--body-min-rate", "-1"), '--body-min-rate: expected int >= 0, got "-1"'),
        (
            ("--body-min-rate-grace", "0"),
            '--body-min-rate-grace: expected number > 0 and <= 86400, got "0"',
        ),
        (
            ("--body-temp-dir", "/nowhere/spool"),
            '--body-temp-dir: "/nowhere/spool": no such directory',
        ),
        (("--request-buffering=no",), "--request-buffering: takes no value"),
    ],
)
def test_a_bad_value_is_one_line(argv: tuple[str, ...], message: str) -> None:
    result = run_cli(APP, *argv)
    assert result.returncode == 2
    assert result.stderr.strip() == f"corral: error: {message}"
