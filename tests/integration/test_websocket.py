"""WebSocket for ASGI applications (issue 11, point 4) on real processes and loopback sockets.

The handshake, the ASGI side (accept, denial, the application's close and crash, the
disconnect codes it receives), the limits and timers of the ``ws_*`` settings, compression
turned off, and the worker's graceful stop. The protocol's cases, case for case, are
test_websocket_autobahn.py's. Sent by the tests' own frame-level client
(tests/integration/wsclient.py) where a real client would never send them, and by the
``websockets`` library's client otherwise. The applications are
tests/integration/apps/websocket_apps.py. Every case runs on each request core.
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from tests.integration import wsclient
from tests.integration.server import Server, http_get, wait_for
from tests.integration.wsclient import BINARY, CLOSE, CONT, PING, PONG, TEXT, frame

pytestmark = pytest.mark.usefixtures("each_core")


@pytest.fixture(scope="module")
def server(each_core):
    with Server("websocket_apps:app", "--access-logfile", "-") as running:
        yield running


@pytest.fixture(scope="module")
def strict(each_core):
    """Small limits and fast pings."""
    with Server(
        "websocket_apps:app",
        "--ws-max-size", "1000",
        "--ws-max-queue", "2",
        "--ws-ping-interval", "0.3",
        "--ws-ping-timeout", "0.3",
        "--ws-close-timeout", "0.5",
    ) as running:  # fmt: skip
        yield running


@pytest.fixture(autouse=True)
def _close_sockets():
    yield
    wsclient.close_all()


def url(server: Server, path: str) -> str:
    return f"ws://127.0.0.1:{server.port}{path}"


def address(server: Server) -> tuple[str, int]:
    return ("127.0.0.1", server.port)


def last_disconnect(server: Server) -> dict:
    return json.loads(http_get(server, "/last")[1])


# -- the handshake (RFC 6455 4.2) -------------------------------------------------------------


def test_the_handshake_answers_101_with_the_accept_key_subprotocol_and_headers(server) -> None:
    ws = wsclient.open_socket(address(server))
    request, key = wsclient.handshake_request(
        "/echo", extra=b"Sec-WebSocket-Protocol: chat, superchat\r\n"
    )
    ws.handshake(request)
    assert ws.status == 101
    assert ws.headers["upgrade"] == "websocket"
    assert ws.headers["connection"] == "Upgrade"
    assert ws.headers["sec-websocket-accept"] == wsclient.accept_key(key).decode()
    assert ws.headers["sec-websocket-protocol"] == "chat"
    assert ws.headers["x-session"] == "1"
    assert ws.headers["server"] == "corral" and "date" in ws.headers
    assert "content-length" not in ws.headers and "transfer-encoding" not in ws.headers
    ws.send(frame(TEXT, b"hi"))
    assert ws.read_message() == (TEXT, b"hi")
    ws.close()


def test_the_scope_is_the_websocket_scope(server) -> None:
    with ws_connect(url(server, "/scope?a=1"), subprotocols=["p1", "p2"]) as ws:
        scope = json.loads(ws.recv())
    assert scope["type"] == "websocket"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert scope["scheme"] == "ws" and scope["http_version"] == "1.1"
    assert scope["path"] == "/scope" and scope["raw_path"] == "/scope"
    assert scope["query_string"] == "a=1" and scope["root_path"] == ""
    assert scope["subprotocols"] == ["p1", "p2"]
    assert scope["server"] == ["127.0.0.1", server.port]
    assert scope["client"][0] == "127.0.0.1"
    assert "websocket.http.response" in scope["extensions"]
    assert "method" not in scope
    assert ["upgrade", "websocket"] in scope["headers"]


@pytest.mark.parametrize(
    ("key", "extra", "version", "status"),
    [
        # a version it does not speak: 426 naming its own (RFC 6455 4.2.2)
        (None, b"", b"8", 426),
        (None, b"Sec-WebSocket-Key: second\r\n", b"13", 400),  # two keys
        (b"abc", b"", b"13", 400),  # a key that is not 16 bytes in base64
    ],
)
def test_a_bad_handshake_is_refused_without_calling_the_application(
    server, key, extra, version, status
) -> None:
    ws = wsclient.open_socket(address(server))
    request, _ = wsclient.handshake_request("/echo", key=key, extra=extra, version=version)
    ws.handshake(request)
    assert ws.status == status
    if status == 426:
        assert ws.headers["sec-websocket-version"] == "13"
        assert ws.headers["upgrade"] == "websocket"
    assert ws.closed_by_server()


def test_a_handshake_with_another_method_is_405_and_a_second_protocol_426(server) -> None:
    ws = wsclient.open_socket(address(server))
    request, _ = wsclient.handshake_request("/echo")
    ws.handshake(request.replace(b"GET ", b"POST ", 1))
    assert ws.status == 405 and ws.headers["allow"] == "GET"
    assert ws.closed_by_server()
    ws = wsclient.open_socket(address(server))
    request, _ = wsclient.handshake_request("/echo")
    ws.handshake(request.replace(b"Upgrade: websocket", b"Upgrade: websocket, h2c", 1))
    assert ws.status == 426 and ws.headers["upgrade"] == "websocket"
    assert ws.closed_by_server()


def test_a_handshake_without_a_key_is_400(server) -> None:
    ws = wsclient.open_socket(address(server))
    ws.handshake(
        b"GET /echo HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n"
    )
    assert ws.status == 400
    assert ws.closed_by_server()


def test_a_frame_sent_with_the_handshake_is_not_lost(server) -> None:
    ws = wsclient.open_socket(address(server))
    request, _ = wsclient.handshake_request("/echo")
    ws.handshake(request + frame(TEXT, b"early"))
    assert ws.status == 101
    assert ws.read_message() == (TEXT, b"early")
    ws.close()


def test_plain_http_still_answers_beside_websockets(server) -> None:
    assert http_get(server, "/anything") == (200, b"http")


def test_with_ws_none_an_upgrade_request_is_a_plain_http_request(each_core) -> None:
    with Server("websocket_apps:app", "--ws", "none") as plain:
        ws = wsclient.open_socket(address(plain))
        request, _ = wsclient.handshake_request("/echo")
        ws.handshake(request)
        assert ws.status == 200 and ws.headers["connection"] == "close"
        assert ws.read_body() == b"http"


def test_a_wsgi_application_answers_an_upgrade_request_as_http(each_core) -> None:
    with Server("basic:application") as wsgi:
        ws = wsclient.open_socket(address(wsgi))
        request, _ = wsclient.handshake_request("/")
        ws.handshake(request)
        assert ws.status == 200 and ws.headers["connection"] == "close"
        assert ws.closed_by_server()


# -- refusing and denying (ASGI: websocket.close before accept, websocket.http.response) --------


def test_a_close_before_the_accept_is_403(server) -> None:
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(url(server, "/reject"))
    assert refused.value.response.status_code == 403


def test_an_application_that_returns_without_accepting_is_403(server) -> None:
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(url(server, "/return"))
    assert refused.value.response.status_code == 403


def test_an_application_that_raises_before_accepting_is_500_and_logged(server) -> None:
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(url(server, "/raise"))
    assert refused.value.response.status_code == 500
    server.wait_log(r"RuntimeError: refusing before the accept")


def test_the_denial_response_extension_sends_the_applications_answer(server) -> None:
    ws = wsclient.open_socket(address(server))
    request, _ = wsclient.handshake_request("/deny")
    ws.handshake(request)
    assert ws.status == 401
    assert ws.headers["x-denied"] == "yes"
    assert ws.read_body() == b"not you"


def test_a_denial_with_crlf_in_a_header_is_a_500_and_never_reaches_the_wire(server) -> None:
    ws = wsclient.open_socket(address(server))
    request, _ = wsclient.handshake_request("/deny-bad")
    ws.handshake(request)
    assert ws.status == 500
    assert "injected" not in ws.headers
    server.wait_log(r"ASGI protocol error in the answer to GET /deny-bad")


def test_a_header_with_crlf_in_the_accept_never_reaches_the_wire(server) -> None:
    ws = wsclient.open_socket(address(server))
    request, _ = wsclient.handshake_request("/bad-header")
    ws.handshake(request)
    assert ws.status == 500
    assert "injected" not in ws.headers
    server.wait_log(r"ASGI protocol error in WebSocket /bad-header")


# -- 1: framing ------------------------------------------------------------------------------


def test_1_the_websockets_client_round_trips_text_and_bytes(server) -> None:
    with ws_connect(url(server, "/echo"), compression=None) as ws:
        ws.send("h\u00e9llo \u2603")
        assert ws.recv() == "h\u00e9llo \u2603"
        ws.send(b"\x00\xff" * 1000)
        assert ws.recv() == b"\x00\xff" * 1000


# -- 2: pings and pongs ------------------------------------------------------------------------


def test_2_a_ping_is_answered_with_a_pong_of_the_same_payload(server) -> None:
    ws = wsclient.connect(address(server))
    ws.send(frame(PING, b"payload \x00\xff"))
    assert ws.read_frame() == (True, 0, PONG, b"payload \x00\xff")
    ws.send(frame(PONG, b"unsolicited"))  # 2.9: ignored
    ws.send(frame(TEXT, b"after"))
    assert ws.read_message() == (TEXT, b"after")
    ws.close()


# -- 4: what a client's frames must be ---------------------------------------------------------


def test_4_an_unmasked_client_frame_closes_with_1002(server) -> None:
    ws = wsclient.connect(address(server))
    ws.send(b"\x81\x02hi")  # RFC 6455 5.1: a client masks every frame
    assert ws.read_close()[0] == 1002


# -- 7: closing ------------------------------------------------------------------------------------


def test_7_a_close_from_the_client_is_echoed_and_the_server_closes_tcp(server) -> None:
    ws = wsclient.connect(address(server))
    ws.send(wsclient.close_frame(1000, b"done"))
    assert ws.read_close() == (1000, "done")
    assert ws.closed_by_server()
    assert wait_for(lambda: last_disconnect(server).get("code") == 1000)
    assert last_disconnect(server) == {
        "type": "websocket.disconnect",
        "code": 1000,
        "reason": "done",
    }


def test_7_an_empty_close_gives_the_application_1005(server) -> None:
    ws = wsclient.connect(address(server))
    ws.send(wsclient.close_frame(None))
    assert ws.read_frame()[2] == CLOSE
    assert wait_for(lambda: last_disconnect(server).get("code") == 1005)


def test_7_the_application_closes_with_its_code_and_reason(server) -> None:
    ws = wsclient.connect(address(server), "/close")
    assert ws.read_close() == (4000, "bye")
    ws.send(wsclient.close_frame(4000))
    assert ws.closed_by_server()


def test_7_an_application_that_raises_after_the_accept_closes_with_1011(server) -> None:
    ws = wsclient.connect(address(server), "/crash")
    assert ws.read_close()[0] == 1011
    server.wait_log(r"RuntimeError: crashing after the accept")


def test_7_a_client_that_goes_away_is_a_1006_disconnect_and_send_then_raises(server) -> None:
    ws = wsclient.connect(address(server), "/send-after-close")
    ws.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    ws.close()  # a reset, no close frame
    assert wait_for(lambda: last_disconnect(server).get("code") == 1006)
    assert wait_for(lambda: json.loads(http_get(server, "/raised")[1]) == ["ClientDisconnected"])


def test_7_the_access_log_has_the_session_as_one_101_line(server) -> None:
    with ws_connect(url(server, "/echo?logged=1")) as ws:
        ws.send("x")
        ws.recv()
    assert wait_for(lambda: '"GET /echo?logged=1 HTTP/1.1" 101' in server.stdout, timeout=5)


@pytest.mark.wallclock
def test_7_the_close_timeout_drops_a_client_that_never_answers_the_close(strict) -> None:
    ws = wsclient.connect(address(strict), "/close")
    assert ws.read_close() == (4000, "bye")
    started = time.monotonic()
    assert ws.closed_by_server(timeout=5)  # no close sent back: ws_close_timeout 0.5
    assert time.monotonic() - started < 3


# -- 9: limits -------------------------------------------------------------------------------


def test_9_a_message_over_ws_max_size_closes_with_1009(strict) -> None:
    ws = wsclient.connect(address(strict))
    ws.send(frame(BINARY, b"x" * 1000))
    assert ws.read_message() == (BINARY, b"x" * 1000)
    ws.send(frame(BINARY, b"x" * 1001))
    assert ws.read_close()[0] == 1009


def test_9_fragments_count_together_against_ws_max_size(strict) -> None:
    ws = wsclient.connect(address(strict))
    ws.send(frame(TEXT, b"x" * 600, fin=False))
    ws.send(frame(CONT, b"x" * 600))
    assert ws.read_close()[0] == 1009


def test_9_past_ws_max_queue_the_socket_is_not_read_until_the_application_takes(
    each_core,
) -> None:
    with Server("websocket_apps:app", "--ws-max-queue", "2") as held:
        ws = wsclient.connect(address(held), "/hold")
        ws.sock.setblocking(False)
        message = frame(BINARY, b"m" * 900)
        sent = 0  # whole messages
        partial = b""
        for _ in range(200_000):  # up to ~180 MB: far beyond what the kernel's buffers hold
            try:
                written = ws.sock.send(message)
            except BlockingIOError:
                break
            if written < len(message):
                partial = message[written:]
                break
            sent += 1
        else:
            pytest.fail("the server kept reading messages its application did not receive")
        assert sent < 20_000  # a few MB of socket buffers, not the whole stream
        ws.sock.setblocking(True)
        assert http_get(held, "/release") == (200, b"released")
        # every message arrives, in order, once the application receives them
        ws.send(partial + frame(TEXT, b"done"))
        count = sent + (1 if partial else 0)
        assert ws.read_message() == (TEXT, f"{count + 1} {count * 900}".encode())


@pytest.mark.wallclock
def test_9_an_unanswered_ping_closes_with_1011(strict) -> None:
    ws = wsclient.connect(address(strict))
    started = time.monotonic()
    _, _, opcode, _ = ws.read_frame()
    assert opcode == PING
    assert ws.read_close()[0] == 1011  # never answered
    assert time.monotonic() - started < 3


def test_9_a_client_that_answers_pings_stays_open(strict) -> None:
    with ws_connect(url(strict, "/echo")) as ws:  # its pongs are automatic
        time.sleep(1.2)  # four ping intervals
        ws.send("still here")
        assert ws.recv() == "still here"


# -- 12/13: permessage-deflate (RFC 7692) ---------------------------------------------------------


def test_12_permessage_deflate_is_negotiated_and_round_trips(server) -> None:
    with ws_connect(url(server, "/echo")) as ws:  # the client offers it by default
        assert "permessage-deflate" in ws.response.headers["Sec-WebSocket-Extensions"]
        for size in (10, 1000, 50_000):
            message = "compressible " * size
            ws.send(message)
            assert ws.recv() == message
        ws.send(b"\x00" * 50_000)
        assert ws.recv() == b"\x00" * 50_000


def test_12_permessage_deflate_can_be_turned_off(each_core) -> None:
    with (
        Server("websocket_apps:app", "--ws-per-message-deflate", "false") as off,
        ws_connect(url(off, "/echo")) as ws,
    ):
        assert "Sec-WebSocket-Extensions" not in ws.response.headers
        ws.send("plain")
        assert ws.recv() == "plain"


def test_12_a_compressed_frame_without_the_extension_closes_with_1002(server) -> None:
    ws = wsclient.connect(address(server))  # no extension offered
    ws.send(frame(TEXT, b"\xf2\x48\xcd\xc9\xc9\x07\x00", rsv=4))  # RSV1: "compressed"
    assert ws.read_close()[0] == 1002


# -- the worker's graceful stop ------------------------------------------------------------------


def test_a_graceful_stop_closes_open_websockets_with_1001(each_core) -> None:
    with Server("websocket_apps:app") as running:
        with ws_connect(url(running, "/echo")) as ws:
            ws.send("before")
            assert ws.recv() == "before"
            running.send(signal.SIGTERM)
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        assert running.proc.wait(timeout=15) == 0
