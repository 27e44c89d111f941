"""Every request the server refuses itself has its reason (issue 34, point 5): named in the
access log (``$refusal``), counted by reason and listener in ``/metrics`` and shown by ``corral
ctl top``. One real server per reason, its refusal made by a real client, on both cores.

The clients are told apart by their source address (127.0.0.0/8 is all loopback)."""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.control import Control, ctl, short_dir
from tests.integration.server import Server, read_all, read_response, wait_for
from tests.integration.test_limit_conn import REQUEST, opened

pytestmark = pytest.mark.usefixtures("each_core")


def status_of(sock: socket.socket, request: bytes = REQUEST) -> int:
    sock.sendall(request)
    return read_response(sock)[0]


def rate_limit(server: Server) -> int:
    with opened(server) as sock:
        assert status_of(sock) == 200
        return status_of(sock)


def limit_conn(server: Server) -> int:
    with opened(server) as first, opened(server) as second:
        assert status_of(first) == 200
        return status_of(second)


def overload(server: Server) -> int:
    with opened(server) as first, opened(server, "127.0.0.2") as second:
        assert status_of(first) == 200
        return status_of(second)


def timeout(server: Server) -> int:
    with opened(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost:")  # and no more: the head never ends
        return int(read_all(sock).split(b" ", 2)[1])


def body_timeout(server: Server) -> int:
    with opened(server) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
        return int(read_all(sock).split(b" ", 2)[1])


def denied(server: Server) -> int:
    with opened(server, "127.0.0.9") as sock:
        return status_of(sock)


CASES: dict[str, tuple[tuple[str, ...], Callable[[Server], int], int]] = {
    "rate_limit": (("--limit-rate", "1r/m"), rate_limit, 429),
    "limit_conn": (("--limit-conn", "1"), limit_conn, 503),
    "overload": (("--limit-concurrency", "1"), overload, 503),
    "timeout": (("--header-timeout", "1"), timeout, 408),
    "body timeout": (("--body-timeout", "1"), body_timeout, 408),
    "denied": (("--deny-from", "127.0.0.9"), denied, 403),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_refusal_is_logged_counted_and_shown(case: str, tmp_path: Path) -> None:
    flags, refuse, expected = CASES[case]
    reason = case.split()[-1] if case != "body timeout" else "timeout"
    log = tmp_path / "access.log"
    with short_dir() as directory:
        argv = [
            *flags,
            f"--access-logfile={log}",
            "--access-logformat=$status $refusal",
            f"--control=unix:{directory}/c.sock",
        ]
        with Server("basic:application", *argv) as server:
            assert refuse(server) == expected
            wait_for(lambda: f"{expected} {reason}" in log.read_text().splitlines())
            served = [line for line in log.read_text().splitlines() if line != "200 -"]
            assert served == [f"{expected} {reason}"]
            metrics = Control.of(server).get("/metrics").raw.decode()
            counts = dict(
                re.findall(r'refused_total\{reason="(\w+)",listener="[^"]+"\} (\d+)', metrics)
            )
            assert counts == {r: "1" if r == reason else "0" for r in counts}
            assert set(counts) == {"rate_limit", "limit_conn", "overload", "timeout", "denied"}
            top = ctl(f"--socket=unix:{directory}/c.sock", "top", "--once")
            assert top.returncode == 0, top.stderr
            assert f"refused: {reason} 1\n" in top.stdout, top.stdout


def test_a_server_without_refusals_says_none() -> None:
    with short_dir() as directory, Server(
        "basic:application", f"--control=unix:{directory}/c.sock"
    ) as server:  # fmt: skip
        with contextlib.closing(server.connect()) as sock:
            assert status_of(sock) == 200
        top = ctl(f"--socket=unix:{directory}/c.sock", "top", "--once")
        assert "refused: none" in top.stdout, top.stdout
