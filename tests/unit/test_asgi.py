"""The ASGI adapter without sockets: the scope's pure parts, and `AsgiAdapter` driving a real
`HttpConnection` over a recording transport (the connection test's), where each step of the
body's flow control and the send side's backpressure can be observed. The integration tests
(tests/integration/test_asgi.py) prove the same over real sockets."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from corral.apps.asgi.adapter import AsgiAdapter
from corral.apps.asgi.body import BODY_HIGH_WATER
from corral.apps.asgi.runner import AsgiProtocolError
from corral.apps.asgi.scope import connection_scope, decode_path, request_scope, split_target
from corral.http.head import RequestHead
from corral.server.connection import HttpConnection
from tests.unit.test_connection import RecordingTransport, connect_to


def head(target: bytes, headers=(), version="1.1", method="GET") -> RequestHead:
    return RequestHead(method, target, version, list(headers), True, None, False, False)


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (b"/", "/"),
        (b"/a%20b", "/a b"),
        (b"/%C3%A9", "/\u00e9"),
        (b"/%2F%2f", "///"),
        (b"/%FF", "/\ufffd"),  # not UTF-8: replaced; raw_path keeps it
        (b"/caf\xc3\xa9", "/caf\u00e9"),
    ],
)
def test_decode_path(raw, path):
    assert decode_path(raw) == path


def test_split_target():
    assert split_target(b"/p?q=1&r") == (b"/p", b"q=1&r")
    assert split_target(b"/p") == (b"/p", b"")
    assert split_target(b"/p?q#frag") == (b"/p", b"q")


def test_connection_scope_for_tcp_and_unix():
    tcp = connection_scope(("::1", 80, 0, 0), ("::1", 5000, 0, 0))
    assert (tcp["server"], tcp["client"], tcp["scheme"]) == (("::1", 80), ("::1", 5000), "http")
    unix = connection_scope("/run/app.sock", "")
    assert (unix["server"], unix["client"]) == (("/run/app.sock", None), None)


def test_a_request_scope_has_every_key_in_the_spec_order():
    base = connection_scope(("127.0.0.1", 8000), ("127.0.0.1", 4000))
    scope = request_scope(base, head(b"/a%20b?q"), "", {})
    assert list(scope) == [
        "type", "asgi", "http_version", "method", "scheme", "path", "raw_path",
        "query_string", "root_path", "headers", "client", "server", "extensions", "state",
    ]  # fmt: skip
    assert (scope["type"], scope["method"], scope["path"], scope["raw_path"]) == (
        "http", "GET", "/a b", b"/a%20b"
    )  # fmt: skip
    assert scope["client"] == ("127.0.0.1", 4000) and base["client"] == ("127.0.0.1", 4000)


def test_request_scope_is_fresh_and_copies_the_state():
    base = connection_scope(("127.0.0.1", 8000), ("127.0.0.1", 4000))
    state = {"db": 1}
    one = request_scope(base, head(b"/mnt/x?y", [(b"X-Up", b"V")]), "/mnt", state)
    two = request_scope(base, head(b"/x?y"), "", state)
    assert one["headers"] == [(b"x-up", b"V")]
    assert one["root_path"] == "/mnt" and one["query_string"] == b"y"
    one["state"]["db"] = 2
    assert two["state"] == {"db": 1} and state == {"db": 1}
    one["asgi"]["version"] = "x"
    assert two["asgi"]["version"] == "3.0"


@pytest.mark.parametrize(
    ("target", "root_path"),
    [(b"/app", "/app"), (b"/app/x?q", "/app"), (b"/apple", ""), (b"/", "")],
)
def test_root_path_is_the_prefix_for_paths_under_it(target, root_path):
    base = connection_scope(("127.0.0.1", 8000), None)
    scope = request_scope(base, head(target), "/app", None)
    assert scope["root_path"] == root_path
    assert scope["path"] == target.partition(b"?")[0].decode()


class Forwarded:
    address, port, scheme = "203.0.113.9", None, "https"


def test_a_trusted_proxy_names_the_client_and_scheme():
    base = connection_scope(("127.0.0.1", 8000), ("127.0.0.1", 4000))
    scope = request_scope(base, head(b"/"), "", None, Forwarded())
    assert scope["client"] == ("203.0.113.9", 0) and scope["scheme"] == "https"
    assert (base["client"], base["scheme"]) == (("127.0.0.1", 4000), "http")
    assert "state" not in scope


# -- the adapter on a connection -----------------------------------------------------


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def connect(loop, app) -> tuple[HttpConnection, RecordingTransport]:
    return connect_to(loop, AsgiAdapter(app, log=logging.getLogger("corral.test")))


def settle(loop, turns: int = 20) -> None:
    for _ in range(turns):
        loop.run_until_complete(asyncio.sleep(0))


def test_the_body_buffer_stops_the_reading_until_receive_takes_it(loop):
    gate = asyncio.Event()
    got: list[int] = []

    async def app(scope, receive, send):
        await gate.wait()
        while True:
            message = await receive()
            got.append(len(message["body"]))
            if not message["more_body"]:
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"%d" % sum(got)})

    conn, transport = connect(loop, app)
    size = BODY_HIGH_WATER * 3
    conn.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size)
    conn.data_received(b"a" * (BODY_HIGH_WATER + 1))
    settle(loop)
    assert not transport.reading  # over the high water, the application not reading yet
    gate.set()
    settle(loop)
    assert transport.reading  # receive() took the buffer: read again
    conn.data_received(b"a" * (size - BODY_HIGH_WATER - 1))
    settle(loop)
    assert transport.data.endswith(b"\r\n\r\n%d" % size)
    assert sum(got) == size


def test_send_waits_while_the_transport_is_paused(loop):
    sent: list[int] = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for index in range(3):
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
            sent.append(index)
        await send({"type": "http.response.body", "body": b""})

    conn, transport = connect(loop, app)
    conn.pause_writing()
    conn.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    settle(loop)
    assert sent == []  # the first chunk is written, then the send waits
    conn.resume_writing()
    settle(loop)
    assert sent == [0, 1, 2] and transport.data.endswith(b"0\r\n\r\n")


def test_a_violation_raises_into_the_application_and_answers_500(loop):
    raised: list[BaseException] = []

    async def app(scope, receive, send):
        try:
            await send({"type": "http.response.body", "body": b"x"})
        except AsgiProtocolError as exc:
            raised.append(exc)
            raise

    conn, transport = connect(loop, app)
    conn.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    settle(loop)
    assert len(raised) == 1
    assert transport.data.startswith(b"HTTP/1.1 500 ") and transport.closed


def test_receive_after_the_answer_is_the_disconnect(loop):
    messages: list[dict] = []

    async def app(scope, receive, send):
        messages.append(await receive())
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        messages.append(await receive())

    conn, transport = connect(loop, app)
    conn.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    settle(loop)
    assert messages == [
        {"type": "http.request", "body": b"", "more_body": False},
        {"type": "http.disconnect"},
    ]
    assert transport.data.startswith(b"HTTP/1.1 204 ") and not transport.closed


def test_concurrent_receives_all_see_the_disconnect(loop):
    seen: list[str] = []

    async def listen(receive):
        while (await receive())["type"] != "http.disconnect":
            pass
        seen.append("disconnect")

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"a", "more_body": True})
        one = asyncio.ensure_future(listen(receive))
        two = asyncio.ensure_future(listen(receive))
        cancelled = asyncio.ensure_future(listen(receive))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(one, two)

    conn, transport = connect(loop, app)
    conn.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    settle(loop)
    assert seen == []
    transport.close()  # connection_lost: the pending body fails
    settle(loop)
    assert seen == ["disconnect", "disconnect"]


def test_shutdown_lets_running_applications_unwind(loop, caplog):
    unwound: list[bool] = []

    async def app(scope, receive, send):
        try:
            await asyncio.Event().wait()
        finally:
            unwound.append(True)

    conn, _ = connect(loop, app)
    conn.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    settle(loop)
    conn.server.adapter.shutdown()
    assert unwound == [True]
    assert not conn.server.adapter.tasks
    del conn
    gc.collect()  # a task that ended with an exception nobody took says so when collected
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
