"""docs/migrating.md's "From nginx" limits, run as the page writes them (issue 34, point 7).

The command line the page gives for the nginx configuration of the tutorials (``limit_req``,
``limit_conn``, ``allow``/``deny``, ``client_*_timeout``, ``client_max_body_size``) is read
from the page and started for real, with three changes a test needs: the application is the
tests' own, the clients come from loopback (so ``--allow-from``'s network becomes
127.0.0.0/8, and the page's own network is checked to refuse loopback), and the timeouts of
10 s become 1 s. Each nginx directive's behaviour is then checked on it. Buffering
(``proxy_request_buffering``, ``proxy_buffering``, ``send_timeout``) has its own tests:
test_slow_bodies.py, test_slow_readers.py.
"""

from __future__ import annotations

import re
import shlex
import socket
import time
from pathlib import Path

import pytest

from tests.integration.server import Server, read_all, read_response

pytestmark = [pytest.mark.usefixtures("each_core"), pytest.mark.wallclock]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "migrating.md"


def page_command() -> list[str]:
    """The flags of the ``corral`` command of the page's limits section."""
    text = PAGE.read_text()
    section = text[text.index("### Limits: `limit_req`") :]
    block = re.search(r"```sh\n(corral .*?)\n```", section, re.S)
    assert block is not None, "the section's command is gone"
    argv = shlex.split(block.group(1))
    assert argv[0] == "corral"
    app, flags = argv[1], argv[2:]
    assert app == "myproject.wsgi:application"
    bind = flags.index("-b")
    del flags[bind : bind + 2]
    return flags


def with_value(flags: list[str], flag: str, value: str) -> list[str]:
    at = flags.index(flag)
    return [*flags[: at + 1], value, *flags[at + 2 :]]


def for_loopback(flags: list[str]) -> list[str]:
    flags = with_value(flags, "--allow-from", "127.0.0.0/8")
    for timeout in ("--header-timeout", "--body-timeout", "--send-timeout"):
        assert flags[flags.index(timeout) + 1] == "10"
        flags = with_value(flags, timeout, "1")
    return flags


def get(sock: socket.socket) -> tuple[int, dict[str, str]]:
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    status, fields, _ = read_response(sock)
    return status, fields


def test_the_pages_network_is_the_only_one_let_in() -> None:
    with Server("basic:application", *page_command()) as server, server.connect() as sock:
        assert get(sock)[0] == 403  # loopback is not 192.168.1.0/24


def test_each_nginx_directive_of_the_page_holds() -> None:
    with Server("basic:application", *for_loopback(page_command())) as server:
        # client_max_body_size 10m: one byte more is 413
        with server.connect() as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10485761\r\n\r\n")
            assert read_response(sock)[0] == 413
        # limit_conn 8: eight open connections of one client are served, a ninth is not
        held = [server.connect() for _ in range(8)]
        try:
            assert [get(sock)[0] for sock in held] == [200] * 8
            with server.connect() as ninth:
                status, fields = get(ninth)
                assert (status, "retry-after" in fields) == (503, True)
            held.pop().close()
            time.sleep(0.2)  # the worker sees the close
            with server.connect() as another:
                assert get(another)[0] == 200
        finally:
            for sock in held:
                sock.close()
        # limit_req rate=10r/s burst=20 nodelay: a flood is refused with Retry-After
        with server.connect() as sock:
            answers = [get(sock) for _ in range(40)]
        statuses = [status for status, _ in answers]
        assert 200 in statuses and 429 in statuses, statuses
        assert all("retry-after" in f for status, f in answers if status == 429)
        time.sleep(2.5)  # the bucket refills: 20 requests in 2 s
        # client_header_timeout: a head never finished is 408 past it
        with server.connect(timeout=5) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            start = time.monotonic()
            assert read_all(sock).startswith(b"HTTP/1.1 408")
            assert 1.0 <= time.monotonic() - start < 3.0
        # client_body_timeout: a body that stops is 408 past it
        with server.connect(timeout=5) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nabc")
            start = time.monotonic()
            assert read_all(sock).startswith(b"HTTP/1.1 408")
            assert 1.0 <= time.monotonic() - start < 3.0
