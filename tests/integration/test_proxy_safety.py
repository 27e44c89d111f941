"""An upstream's answer is checked as a client's request is: a malformed or cut answer never
reaches the client as if it were whole. Upstreams of the tests' own send the bad bytes
(`RawUpstream`); a real corral upstream is killed in the middle of an answer.

Before the answer's head went to the client: 502 (Unit's error page). After: the client's
connection is aborted (a reset), so neither a length nor a chunked end nor a close can make
a cut answer look complete."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
from collections.abc import Iterator

import pytest

from tests.integration.proxy_front import RawUpstream, front, read_until_closed
from tests.integration.server import Server, wait_for

pytestmark = pytest.mark.usefixtures("each_core")

MALFORMED = {
    "status": b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
    "version": b"HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n",
    "field": b"HTTP/1.1 200 OK\r\nBad Field: x\r\nContent-Length: 0\r\n\r\n",
    "bare-lf": b"HTTP/1.1 200 OK\r\nX: a\nSet-Cookie: evil=1\r\nContent-Length: 0\r\n\r\n",
    "two-lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
    "conflicting-lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\nok",
    "length-and-chunked": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n"
    ),
    "head-cut": b"HTTP/1.1 200 OK\r\nContent-Le",
    # spoiled within the read that would begin it: nothing went, the client gets a 502
    "bad-chunk-size-at-once": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"
    ),
}
BEGUN_THEN_CUT = {
    "length": b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000,
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    # spoiled in a later read than the one that began it (one read is checked whole first)
    "bad-chunk-size": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"zz\r\n",
    ),
    # ... a later read whose first chunk is whole (held, not yet gone) and the next spoiled
    "bad-chunk-size-after-a-chunk": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"5\r\nworld\r\nzz\r\n",
    ),
    "extra-bytes": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n",
}


@pytest.fixture(scope="module")
def raw_front(each_core: str) -> Iterator[tuple[Server, dict[str, RawUpstream]]]:
    cases = {**MALFORMED, **BEGUN_THEN_CUT}
    with contextlib.ExitStack() as stack:
        upstreams = {
            name: stack.enter_context(RawUpstream(answer)) for name, answer in cases.items()
        }
        routes = [
            {"match": {"uri": f"/{name}"}, "action": {"proxy": f"http://127.0.0.1:{up.port}"}}
            for name, up in upstreams.items()
        ]
        with front(routes=routes) as server:
            yield server, upstreams


def ask(server: Server, path: str) -> bytes:
    """A GET of ``path``; everything the client gets until the connection closes."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return read_until_closed(sock)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_answer_is_a_502(raw_front, case: str) -> None:
    server, _ = raw_front
    answer = ask(server, f"/{case}")
    assert answer.startswith(b"HTTP/1.1 502 Bad Gateway\r\n"), answer
    assert b"Set-Cookie" not in answer and b"evil" not in answer
    server.wait_log(r"proxy: 127\.0\.0\.1:")  # (the worker's log line may follow its 502)


@pytest.mark.parametrize("case", sorted(BEGUN_THEN_CUT))
def test_an_answer_cut_or_spoiled_once_begun_aborts_the_client(raw_front, case: str) -> None:
    server, _ = raw_front
    if case == "extra-bytes":  # the answer was whole: the client has it, the upstream goes
        answer = ask(server, f"/{case}")
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nok")
        return
    with pytest.raises(ConnectionResetError):
        ask(server, f"/{case}")


def test_an_upstream_killed_in_the_middle_of_an_answer(each_core: str) -> None:
    with (
        Server("proxy_apps:app", workers=1) as upstream,
        front({"proxy": f"http://127.0.0.1:{upstream.port}"}) as server,
    ):
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        conn.request("GET", "/big?1073741824")  # 1 GiB, chunked: far more than any buffer
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Transfer-Encoding") == "chunked"
        got = response.read(1 << 20)
        assert len(got) == 1 << 20
        for pid in upstream.worker_pids():
            os.kill(pid, signal.SIGKILL)
        with pytest.raises((http.client.IncompleteRead, ConnectionResetError)):
            while response.read(1 << 20):
                pass
        conn.close()

        # the front serves on: the upstream's master starts a new worker
        def answered() -> bool:
            check = http.client.HTTPConnection(server.host, server.port, timeout=5)
            try:
                check.request("GET", "/after")
                return check.getresponse().status == 200
            except (OSError, http.client.HTTPException):
                return False
            finally:
                check.close()

        assert wait_for(answered, timeout=20)
