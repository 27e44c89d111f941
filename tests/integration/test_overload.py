"""A worker over its share of clients sheds (issue 34, point 2): Uvicorn's
``--limit-concurrency`` and Granian's ``--backpressure`` answer 503 with ``Retry-After`` and
close, rather than queue; real corral processes and sockets, both cores."""

from __future__ import annotations

import pytest

from tests.integration.server import Server, read_all, read_response, wait_for

pytestmark = pytest.mark.usefixtures("each_core")


@pytest.mark.parametrize("flag", ["--limit-concurrency", "--backpressure"])
def test_a_worker_over_its_connections_sheds_with_503_and_closes(flag: str) -> None:
    with Server("basic:application", flag, "2") as server:
        held = [server.connect(), server.connect()]
        for sock in held:  # each answered: both inside the limit
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(sock)[0] == 200
        with server.connect() as third:
            third.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = read_all(third)  # then closed
        head = answer.partition(b"\r\n\r\n")[0].decode()
        assert head.startswith("HTTP/1.1 503 ")
        assert "Retry-After: 1" in head and "Connection: close" in head
        for sock in held:
            sock.close()

        def served() -> bool:  # once the worker has seen them go
            with server.connect() as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                return read_response(sock)[0] == 200

        wait_for(served)
