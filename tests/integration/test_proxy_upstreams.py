"""Unit's ``upstreams`` through the proxy, and the proxy's timeouts, with real upstreams:
corrals serving a WSGI application, a port nothing listens on, a port whose backlog is full
(its connections never complete), an upstream that never reads.

Weights spread requests (a smooth round robin: exactly by weight); a server that refuses is
left out for ``proxy_fail_timeout`` and the request that never reached it is served by the
next; connect, send and read timeouts answer 504, a refusal 502."""

from __future__ import annotations

import collections
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.integration.control import Control, listening_port, short_dir
from tests.integration.proxy_front import RawUpstream, front
from tests.integration.server import Server, wait_for
from tests.integration.test_cli_server import get

pytestmark = pytest.mark.usefixtures("each_core")


@pytest.fixture(scope="module")
def two_upstreams(each_core: str) -> Iterator[tuple[Server, Server]]:
    with Server("proxy_apps:app") as first, Server("proxy_apps:app") as second:
        yield first, second


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pid_of(server: Server, path: str = "/") -> int:
    status, _, body = get(server.host, server.port, path)
    assert status == 200, (status, body)
    return json.loads(body)["pid"]


def test_weights_spread_the_requests(two_upstreams: tuple[Server, Server]) -> None:
    first, second = two_upstreams
    servers = {
        f"127.0.0.1:{first.port}": {"weight": 3},
        f"127.0.0.1:{second.port}": {},  # Unit's default weight: 1
    }
    with front({"pass": "upstreams/app"}, upstreams={"app": {"servers": servers}}) as server:
        counts = collections.Counter(pid_of(server) for _ in range(40))
    assert sorted(counts.values()) == [10, 30], counts
    assert counts[first.worker_pids()[0]] == 30


def test_a_pass_built_from_variables_chooses_the_upstream_group(
    two_upstreams: tuple[Server, Server],
) -> None:
    """Unit's ``"pass": "upstreams/$arg_group"``: the group named by the request; a name of no
    group is a 404, as for ``applications/$...``."""
    first, second = two_upstreams
    upstreams = {
        "blue": {"servers": {f"127.0.0.1:{first.port}": {}}},
        "green": {"servers": {f"127.0.0.1:{second.port}": {}}},
    }
    with front({"pass": "upstreams/$arg_group"}, upstreams=upstreams) as server:
        assert pid_of(server, "/?group=blue") == first.worker_pids()[0]
        assert pid_of(server, "/?group=green") == second.worker_pids()[0]
        assert get(server.host, server.port, "/?group=red")[0] == 404
        assert get(server.host, server.port, "/")[0] == 404


def test_a_refusing_server_is_left_out_for_a_while(two_upstreams: tuple[Server, Server]) -> None:
    live = two_upstreams[0]
    dead = f"127.0.0.1:{free_port()}"
    servers = {dead: {}, f"127.0.0.1:{live.port}": {}}
    upstreams = {"app": {"servers": servers}}
    settings = {"proxy_fail_timeout": 3}
    with front({"pass": "upstreams/app"}, upstreams, settings) as server:
        for _ in range(10):  # the first went to the dead one first: retried on the live one
            assert pid_of(server) == live.worker_pids()[0]
        refusals = f"proxy: {dead} refused the connection"
        server.wait_log(refusals)
        assert server.stderr.count(refusals) == 1  # then left out
        time.sleep(3.1)  # proxy_fail_timeout passed: tried again (and refused again)
        for _ in range(4):
            assert pid_of(server) == live.worker_pids()[0]
        server.wait_log(refusals, count=2)
        time.sleep(0.2)
        assert server.stderr.count(refusals) == 2


def test_refused_everywhere_is_a_502() -> None:
    with front({"proxy": f"http://127.0.0.1:{free_port()}"}) as server:
        status, _, body = get(server.host, server.port, "/")
        assert status == 502 and b"Error 502" in body


def test_a_connection_that_never_completes_is_a_504_after_the_connect_timeout() -> None:
    # a listener whose backlog is full: the kernel drops the next SYNs, the connect hangs
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        fillers = [socket.create_connection(hole.getsockname(), timeout=1)]  # the queue full
        spare = socket.socket()
        spare.setblocking(False)
        spare.connect_ex(hole.getsockname())  # (its SYN dropped too, should one more fit)
        fillers.append(spare)
        settings = {"proxy_connect_timeout": 0.5}
        try:
            with front(
                {"proxy": f"http://127.0.0.1:{hole.getsockname()[1]}"}, None, settings
            ) as server:
                started = time.monotonic()
                status, _, _ = get(server.host, server.port, "/")
                took = time.monotonic() - started
                assert status == 504 and 0.4 < took < 3, took
                server.wait_log("connect timed out")
        finally:
            for filler in fillers:
                filler.close()


def test_an_answer_slower_than_the_read_timeout_is_a_504(
    two_upstreams: tuple[Server, Server],
) -> None:
    upstream = two_upstreams[0]
    settings = {"proxy_read_timeout": 0.5}
    with front({"proxy": f"http://127.0.0.1:{upstream.port}"}, None, settings) as server:
        started = time.monotonic()
        status, _, _ = get(server.host, server.port, "/sleep?3")
        took = time.monotonic() - started
        assert status == 504 and 0.4 < took < 2.5, took
        server.wait_log("read timed out")
        time.sleep(3.2 - took)  # the upstream's one thread is still in the first request
        assert pid_of(server, "/sleep?0.1") > 0  # within the timeout: answered


def test_an_upstream_that_does_not_take_the_body_is_a_504_after_the_send_timeout() -> None:
    with RawUpstream(b"", read=False) as upstream:
        settings = {"proxy_send_timeout": 0.5}
        with front({"proxy": f"http://127.0.0.1:{upstream.port}"}, None, settings) as server:
            size = 64 << 20  # more than every socket buffer between here and there
            conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
            conn.putrequest("POST", "/upload")
            conn.putheader("Content-Length", str(size))
            conn.endheaders()
            sender = threading.Thread(target=_send_quietly, args=(conn.sock, size), daemon=True)
            sender.start()
            wait_for(lambda: "send timed out" in server.stderr, timeout=20)
            try:
                status = conn.getresponse().status
            except (ConnectionError, http.client.HTTPException):
                status = 0  # the client's unread bytes made the close a reset
            assert status in (504, 0)
            conn.close()


def _send_quietly(sock: socket.socket, size: int) -> None:
    piece = b"b" * (1 << 20)
    try:
        for _ in range(size // len(piece)):
            sock.sendall(piece)
    except OSError:
        pass


def test_the_control_api_changes_an_upstream_group_live(
    two_upstreams: tuple[Server, Server],
) -> None:
    first, second = two_upstreams
    with short_dir() as directory:
        server = Server(f"--state-dir={directory / 'state'}", bind=None, wait_ready=False)
        with server:
            server.wait_log("no application configured: waiting for the control API")
            control = Control.of(server)
            doc = {
                "listeners": {"127.0.0.1:0": {"pass": "upstreams/app"}},
                "upstreams": {"app": {"servers": {f"127.0.0.1:{first.port}": {}}}},
            }
            assert control.put("/config", doc).status == 200
            server.host, server.port = "127.0.0.1", listening_port(server, "127.0.0.1:0")
            assert pid_of(server) == first.worker_pids()[0]
            servers = {f"127.0.0.1:{second.port}": {"weight": 2}}
            answer = control.put("/config/upstreams/app/servers", servers)
            assert answer.status == 200, answer.raw
            assert wait_for(lambda: pid_of(server) == second.worker_pids()[0], timeout=20)
            bad = control.put("/config/upstreams/app/servers", {"nowhere:80": {}})
            assert bad.status == 400
            assert "$.upstreams.app.servers" in bad.raw.decode() and "nowhere" in bad.raw.decode()
            assert pid_of(server) == second.worker_pids()[0]  # the bad change changed nothing
