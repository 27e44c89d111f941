"""Open connections per client and in all, one count across the workers (issue 34, point 2):
nginx's ``limit_conn`` as ``--limit-conn`` and a listener's ``limit_conn``, and the server's
``--limit-concurrency-total``, through real corral processes and real sockets, on both cores.

The clients are told apart by their source address: the loopback network is 127.0.0.0/8, so
a socket bound to 127.0.0.2 is another client than one on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket

import pytest

from tests.integration.server import Server, read_all, read_response, wait_for

pytestmark = pytest.mark.usefixtures("each_core")

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
# threaded workers spread the connections they accept (server/acceptor.py): two each, then on
SPREAD = ("--threads", "2")


def opened(server: Server, source: str = "127.0.0.1") -> socket.socket:
    """A connection from ``source``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect((server.host, server.port))
    return sock


def asked(sock: socket.socket) -> tuple[int, dict[str, str], bool]:
    """One request on ``sock``: its status, fields, and whether the server closed after it."""
    sock.sendall(REQUEST)
    status, fields, _ = read_response(sock)
    closed = fields.get("connection") == "close"
    if closed:
        assert read_all(sock) == b""  # closed after the answer
    return status, fields, closed


def workers_serving(server: Server, held: list[socket.socket]) -> int:
    """How many of the workers hold one of ``held`` (by their sockets' inodes)."""
    ports = {sock.getsockname()[1] for sock in held}
    serving = 0
    for pid in server.worker_pids():
        with contextlib.suppress(FileNotFoundError):
            if _holds(pid, ports):
                serving += 1
    return serving


def _holds(pid: int, ports: set[int]) -> bool:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            remote_port = int(fields[2].split(":")[1], 16)
            if fields[9] in inodes and remote_port in ports and local_port != remote_port:
                return True
    return False


def test_a_client_gets_its_connections_across_workers_and_the_rest_503() -> None:
    with (
        Server("basic:application", *SPREAD, "--limit-conn", "8", workers=4) as server,
        contextlib.ExitStack() as stack,
    ):
        held = [stack.enter_context(opened(server)) for _ in range(20)]
        answers = [asked(sock) for sock in held]
        served = [sock for sock, (status, _, _) in zip(held, answers, strict=True) if status == 200]
        refused = [answer for answer in answers if answer[0] != 200]
        assert len(served) == 8 and len(refused) == 12, [a[0] for a in answers]
        assert all(
            status == 503 and fields["retry-after"] == "1" and closed
            for status, fields, closed in refused
        )
        assert workers_serving(server, served) > 1  # one count for several workers
        # another client is not this one's count
        others = [stack.enter_context(opened(server, "127.0.0.2")) for _ in range(8)]
        assert [asked(sock)[0] for sock in others] == [200] * 8
        # the served ones keep their connections: more requests on them are served
        assert [asked(sock)[0] for sock in served] == [200] * 8
        with opened(server) as ninth:
            assert asked(ninth)[0] == 503
        # closing connections frees their places
        for sock in served[:3]:
            sock.close()

        def three_more() -> bool:
            fresh = [opened(server) for _ in range(3)]
            statuses = [asked(sock)[0] for sock in fresh]
            for sock in fresh:
                sock.close()
            return statuses == [200] * 3

        wait_for(three_more)


def test_a_worker_killed_with_connections_open_leaves_no_count() -> None:
    with (
        Server("basic:application", "--limit-conn", "8", workers=4) as server,
        contextlib.ExitStack() as stack,
    ):
        held = [stack.enter_context(opened(server)) for _ in range(8)]
        assert [asked(sock)[0] for sock in held] == [200] * 8
        with opened(server) as ninth:
            assert asked(ninth)[0] == 503
        for pid in server.worker_pids():  # every worker dies, its counts with it
            os.kill(pid, signal.SIGKILL)
        for sock in held:
            sock.close()

        def all_back() -> bool:  # the master reaped them and started others
            fresh = [opened(server) for _ in range(8)]
            try:
                return [asked(sock)[0] for sock in fresh] == [200] * 8
            except OSError:
                return False
            finally:
                for sock in fresh:
                    sock.close()

        wait_for(all_back, timeout=20)

        def eight_and_no_more() -> bool:
            with contextlib.ExitStack() as stack:
                fresh = [stack.enter_context(opened(server)) for _ in range(9)]
                return sorted(asked(sock)[0] for sock in fresh) == [200] * 8 + [503]

        wait_for(eight_and_no_more)


def test_a_listener_limit_conn_with_its_status(tmp_path) -> None:
    document = {
        "listeners": {
            "127.0.0.1:0": {
                "pass": "applications/basic",
                "limit_conn": {"connections": 2, "status": 429},
            }
        },
        "applications": {"basic": {"module": "basic", "callable": "application", "processes": 2}},
    }
    path = tmp_path / "site.json"
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as server, contextlib.ExitStack() as stack:
        held = [stack.enter_context(opened(server)) for _ in range(3)]
        assert [asked(sock)[0] for sock in held] == [200, 200, 429]


def test_the_whole_server_limit_counts_every_worker_and_client() -> None:
    with (
        Server("basic:application", *SPREAD, "--limit-concurrency-total", "6", workers=4) as server,
        contextlib.ExitStack() as stack,
    ):
        held = [stack.enter_context(opened(server, f"127.0.0.{2 + i % 3}")) for i in range(10)]
        answers = [asked(sock) for sock in held]
        assert sorted(answer[0] for answer in answers) == [200] * 6 + [503] * 4
        assert all(f["retry-after"] == "1" and c for s, f, c in answers if s == 503)
        served = [sock for sock, answer in zip(held, answers, strict=True) if answer[0] == 200]
        assert workers_serving(server, served) > 1
        served[0].close()

        def one_more() -> bool:
            with opened(server) as sock:
                return asked(sock)[0] == 200

        wait_for(one_more)
