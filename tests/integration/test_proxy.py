"""NGINX Unit's ``proxy`` action, in Unit's forms, with real upstreams: a corral serving a
WSGI application on IPv4, IPv6 and a unix socket, reached through a corral in front.

What each test shows: the answer comes from the upstream with its fields and body (streamed:
chunked both ways); the request arrives with the proxy's fields (``Via``, ``X-Forwarded-*``,
``Forwarded``) and without the hop-by-hop ones; the connection to the upstream is kept and
reused (the upstream sees one client port for several requests)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.certificates import issue_files
from tests.integration.control import short_dir
from tests.integration.proxy_front import front
from tests.integration.server import Server
from tests.integration.test_cli_server import get
from tests.integration.test_tls import client

pytestmark = pytest.mark.usefixtures("each_core")


@pytest.fixture(scope="module")
def upstream(each_core: str) -> Iterator[Server]:
    with Server("proxy_apps:app", workers=1) as server:
        yield server


@pytest.fixture(scope="module")
def proxied(upstream: Server) -> Iterator[Server]:
    with front({"proxy": f"http://127.0.0.1:{upstream.port}"}) as server:
        yield server


def seen(server: Server, path: str = "/", headers: dict[str, str] | None = None) -> dict:
    status, fields, body = get(server.host, server.port, path, headers)
    assert status == 200 and fields["x-upstream"] == "yes", (status, fields, body)
    return json.loads(body)


def test_the_upstream_answers_with_the_proxy_fields_added(proxied: Server) -> None:
    request = seen(proxied, "/a/b?c=d", {"X-Forwarded-For": "192.0.2.7", "Via": "1.0 edge"})
    assert (request["method"], request["path"], request["query"]) == ("GET", "/a/b", "c=d")
    fields = request["fields"]
    host = f"127.0.0.1:{proxied.port}"
    assert fields["host"] == host  # the client's Host goes upstream as it came
    assert fields["x-forwarded-for"] == "192.0.2.7, 127.0.0.1"  # the client appended
    assert fields["x-forwarded-proto"] == "http"
    assert fields["x-forwarded-host"] == host
    assert fields["forwarded"] == f'for=127.0.0.1;proto=http;host="{host}"'
    assert fields["via"] == "1.0 edge, 1.1 corral"


def test_hop_by_hop_fields_and_those_connection_names_stay_behind(proxied: Server) -> None:
    with socket.create_connection((proxied.host, proxied.port), timeout=10) as sock:
        sock.sendall(
            b"GET /hop HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Secret\r\n"
            b"Keep-Alive: timeout=5\r\nTE: trailers\r\nX-Secret: 1\r\nProxy-Connection: x\r\n"
            b"X-Kept: 2\r\n\r\n"
        )
        response = http.client.HTTPResponse(sock)
        response.begin()
        fields = json.loads(response.read())["fields"]
    for name in ("connection", "keep-alive", "te", "x-secret", "proxy-connection"):
        assert name not in fields, name
    assert fields["x-kept"] == "2"


def test_the_answer_comes_back_with_via_and_its_own_framing(proxied: Server) -> None:
    status, fields, body = get(proxied.host, proxied.port, "/stream")
    assert (status, body) == (200, b"one,two,three")
    assert fields["transfer-encoding"] == "chunked" and fields["via"] == "1.1 corral"
    status, fields, body = get(proxied.host, proxied.port, "/big?4194304")
    assert status == 200 and len(body) == 4194304 and body == b"x" * 4194304


def test_a_chunked_request_body_streams_upstream(proxied: Server) -> None:
    conn = http.client.HTTPConnection(proxied.host, proxied.port, timeout=10)
    pieces = [b"a" * 100_000 for _ in range(20)]
    conn.request("POST", "/upload", body=iter(pieces), encode_chunked=True)
    response = conn.getresponse()
    request = json.loads(response.read())
    assert response.status == 200
    assert request["body_length"] == 2_000_000  # the upstream read it all, as it came
    assert request["fields"].get("transfer-encoding") == "chunked"
    conn.request("PUT", "/upload", body=b"z" * 300_000)  # a length: passed as it came
    request = json.loads(conn.getresponse().read())
    assert (request["content_length"], request["body_length"]) == ("300000", 300_000)
    conn.close()


def test_the_connection_to_the_upstream_is_kept_for_the_next_requests(proxied: Server) -> None:
    remotes = {seen(proxied, f"/n{i}")["remote"] for i in range(5)}
    assert len(remotes) == 1, remotes  # one upstream connection, reused


def test_an_ipv6_upstream(each_core: str) -> None:
    with (
        Server("proxy_apps:app", bind="[::1]:0") as upstream,
        front({"proxy": f"http://[::1]:{upstream.port}"}) as server,
    ):
        assert seen(server, "/six")["path"] == "/six"


def test_a_unix_socket_upstream(each_core: str) -> None:
    with short_dir() as folder:
        path = Path(folder) / "up.sock"
        with (
            Server("proxy_apps:app", "-b", f"unix:{path}"),
            front({"proxy": f"http://unix:{path}"}) as server,
        ):
            assert seen(server, "/unix")["path"] == "/unix"


def test_a_websocket_passes_through_as_a_tunnel(each_core: str) -> None:
    from websockets.sync.client import connect

    with (
        Server("websocket_apps:app") as upstream,
        front({"proxy": f"http://127.0.0.1:{upstream.port}"}) as server,
    ):
        with connect(f"ws://127.0.0.1:{server.port}/echo", open_timeout=30) as ws:
            assert ws.response.headers["Via"] == "1.1 corral"
            ws.send("hello")
            assert ws.recv(timeout=30) == "hello"
            big = bytes(range(256)) * 4096  # 1 MiB each way, through both connections
            ws.send(big)
            assert ws.recv(timeout=30) == big
        # the connection is over on both sides: the front answers the next request
        assert get(server.host, server.port, "/")[0] == 200


def test_a_silent_tunnel_is_closed_after_proxy_tunnel_timeout(each_core: str) -> None:
    """A WebSocket through the proxy that passes no byte for ``proxy_tunnel_timeout`` is
    closed; one that talks more often than that stays open past it."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    settings = {"proxy_tunnel_timeout": 1.0}
    with (
        Server("websocket_apps:app") as upstream,
        front({"proxy": f"http://127.0.0.1:{upstream.port}"}, settings=settings) as server,
    ):
        url = f"ws://127.0.0.1:{server.port}/echo"
        with connect(url, open_timeout=30, ping_interval=None) as ws:
            for _ in range(6):  # 3 s in all, a message every 0.5 s: never silent for 1 s
                time.sleep(0.5)
                ws.send("still here")
                assert ws.recv(timeout=10) == "still here"
            started = time.monotonic()  # the tunnel's last byte
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=10)  # nothing sent: the tunnel goes quiet
            assert 0.9 < time.monotonic() - started < 3.0
        assert get(server.host, server.port, "/")[0] == 200  # the front is fine


def test_an_upgrade_the_upstream_refuses_is_an_ordinary_answer(proxied: Server) -> None:
    with socket.create_connection((proxied.host, proxied.port), timeout=10) as sock:
        sock.sendall(b"GET /up HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: foo\r\n\r\n")
        response = http.client.HTTPResponse(sock)
        response.begin()
        request = json.loads(response.read())
    assert response.status == 200 and response.getheader("Connection") == "close"
    assert request["fields"]["upgrade"] == "foo" and request["fields"]["connection"] == "upgrade"


def test_expect_100_continue_is_answered_by_the_proxy(proxied: Server) -> None:
    with socket.create_connection((proxied.host, proxied.port), timeout=10) as sock:
        sock.sendall(
            b"POST /expect HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
        )
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(b"hello")
        response = http.client.HTTPResponse(sock)
        response.begin()
        request = json.loads(response.read())
    assert (response.status, request["body_length"], request["body_head"]) == (200, 5, "hello")
    assert "expect" not in request["fields"]


def test_over_tls_the_upstream_is_told_https_and_a_websocket_passes(
    each_core: str, ca: trustme.CA
) -> None:
    from websockets.sync.client import connect

    with short_dir() as folder:
        chain, key = issue_files(ca, folder)
        settings = {"certfile": str(chain), "keyfile": str(key)}
        with (
            Server("websocket_apps:app") as ws_upstream,
            Server("proxy_apps:app") as upstream,
            front(
                routes=[
                    {
                        "match": {"uri": "/ws/*"},
                        "action": {"proxy": f"http://127.0.0.1:{ws_upstream.port}"},
                    },
                    {"action": {"proxy": f"http://127.0.0.1:{upstream.port}"}},
                ],
                settings=settings,
            ) as server,
        ):
            context = client(ca)
            raw = socket.create_connection((server.host, server.port), timeout=10)
            with context.wrap_socket(raw, server_hostname="localhost") as sock:
                sock.sendall(b"GET /tls HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                response = http.client.HTTPResponse(sock)
                response.begin()
                fields = json.loads(response.read())["fields"]
            assert fields["x-forwarded-proto"] == "https"
            assert fields["forwarded"].startswith("for=127.0.0.1;proto=https;")
            url = f"wss://localhost:{server.port}/ws/echo"
            with connect(url, ssl=context, open_timeout=30) as ws:
                ws.send("over tls")
                assert ws.recv(timeout=30) == "over tls"
