"""The ASGI adapter's HTTP scope (issue 11, point 2) on real processes and loopback sockets.

The applications live in tests/integration/apps/asgi_apps.py. Every behaviour runs on each
request core (the connection compiled, then its Python twin): the adapter is the same
Python code on both, the connection it drives is not.
"""

from __future__ import annotations

import json
import socket

import pytest

from tests.integration.server import Server, fetch, http_get, read_all, read_response, wait_for
from tests.integration.sockets import server_side, unread_by_server
from tests.integration.test_http import Reader

pytestmark = pytest.mark.usefixtures("each_core")


@pytest.fixture(scope="module")
def server(each_core):
    with Server("asgi_apps:app") as running:
        yield running


def scope_of(server: Server, request: bytes) -> dict:
    status, _, body = fetch(server, request)
    assert status == 200
    return json.loads(body)


def test_the_scope_is_complete(server: Server) -> None:
    scope = scope_of(server, b"GET /scope HTTP/1.1\r\nHost: h\r\n\r\n")
    assert scope["type"] == "http"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert scope["http_version"] == "1.1"
    assert scope["method"] == "GET"
    assert scope["scheme"] == "http"
    assert scope["root_path"] == ""
    assert scope["server"] == ["127.0.0.1", server.port]
    assert scope["client"][0] == "127.0.0.1" and isinstance(scope["client"][1], int)
    assert scope["state"] == {}
    assert scope["extensions"] == {"http.response.pathsend": {}, "http.response.zerocopysend": {}}
    expected = {"type", "asgi", "http_version", "method", "scheme", "path", "raw_path",
                "query_string", "root_path", "headers", "client", "server", "state",
                "extensions"}  # fmt: skip
    assert set(scope) == expected


def test_the_path_is_percent_decoded_utf8_and_raw_path_kept(server: Server) -> None:
    scope = scope_of(
        server, b"GET /scope/a%20b/%C3%A9t%C3%A9%2F?x=1&y=%20 HTTP/1.1\r\nHost: h\r\n\r\n"
    )
    assert scope["path"] == "/scope/a b/\u00e9t\u00e9/"
    assert scope["raw_path"] == "/scope/a%20b/%C3%A9t%C3%A9%2F"
    assert scope["query_string"] == "x=1&y=%20"
    scope = scope_of(server, b"GET /scope HTTP/1.0\r\n\r\n")
    assert scope["query_string"] == "" and scope["http_version"] == "1.0"


def test_headers_are_lower_cased_bytes_in_order(server: Server) -> None:
    scope = scope_of(
        server,
        b"GET /scope HTTP/1.1\r\nHost: h\r\nX-B: 2\r\nX-A: 1\r\nX-b: 3\r\n"
        b"Content-Type: Text/X\r\n\r\n",
    )
    assert scope["headers"] == [["host", "h"], ["x-b", "2"], ["x-a", "1"], ["x-b", "3"],
                                ["content-type", "Text/X"]]  # fmt: skip


def test_a_streamed_request_body_comes_in_several_messages(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        sock.sendall(b"5\r\nhello\r\n")
        # read by the worker: the application takes it before the loop reads again
        wait_for(lambda: unread_by_server(sock) == 0)
        sock.sendall(b"6\r\n world\r\n0\r\n\r\n")
        status, headers, body = read_response(sock)
    assert (status, body) == (200, b"hello world")
    messages = headers["x-messages"].split(",")
    assert len(messages) >= 2, messages
    assert messages[-1].endswith(":0") and all(m.endswith(":1") for m in messages[:-1])


def test_a_large_body_is_read_whole_through_the_bounded_buffer(server: Server) -> None:
    data = bytes(range(256)) * 4096 * 4  # 4 MiB, sixteen times the buffer's high water
    with server.connect(timeout=30) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n" % len(data))
        sock.sendall(data)
        status, headers, body = read_response(sock)
    assert status == 200 and body == data
    assert len(headers["x-messages"].split(",")) > 1


def test_expect_100_continue_is_sent_on_the_first_receive(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(
            b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
        )
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(b"ok")
        status, _, body = read_response(sock)
    assert (status, body) == (200, b"ok")


def test_a_streamed_response_is_chunked(server: Server) -> None:
    status, headers, body = fetch(server, b"GET /stream?n=4 HTTP/1.1\r\nHost: h\r\n\r\n")
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    assert body == b"part0;part1;part2;part3;"


def test_a_streamed_response_to_http_1_0_is_close_delimited(server: Server) -> None:
    reply = server.raw(b"GET /stream?n=2 HTTP/1.0\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding" not in head and b"Connection: close" in head
    assert body == b"part0;part1;"


def test_a_large_response_waits_for_a_slow_reader(server: Server) -> None:
    before = server.stderr.count("big sent 8 MiB")
    with server.connect(timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        sock.sendall(b"GET /big?mb=8 HTTP/1.1\r\nHost: h\r\n\r\n")
        # the client reads nothing: the server's socket fills (bytes wait unacknowledged)
        wait_for(lambda: server_side(sock).send > 0)
        # the loop turns meanwhile; the application waits in send(): its 8 MiB are not all
        # taken (the kernel's buffers hold a few MiB at most)
        assert http_get(server, "/stream?n=1") == (200, b"part0;")
        assert server.stderr.count("big sent 8 MiB") == before
        status, _, body = read_response(sock)
    assert status == 200 and len(body) == 8 << 20
    assert body[:512] == bytes(range(256)) * 2
    server.wait_log("big sent 8 MiB", count=before + 1)


def test_head_answers_without_a_body(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(
            b"HEAD /scope HTTP/1.1\r\nHost: h\r\n\r\nGET /scope HTTP/1.1\r\nHost: h\r\n\r\n"
        )
        data = b""
        while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    first, _, rest = data.partition(b"\r\n\r\n")
    assert b"Content-Length:" in first
    assert rest.startswith(b"HTTP/1.1 200 OK\r\n")  # the HEAD's answer had no body


def test_keep_alive_and_pipelining_keep_the_order(server: Server) -> None:
    with server.connect() as sock:
        reader = Reader(sock)  # keeps what one recv() read past a response for the next
        for round_ in range(3):  # one request at a time on one connection
            sock.sendall(b"GET /stream?n=%d HTTP/1.1\r\nHost: h\r\n\r\n" % (round_ + 1))
            response = reader.response()
            assert response.status == 200 and response.body.count(b"part") == round_ + 1
        # pipelined: answered strictly in order, a body-bearing request among them
        sock.sendall(
            b"GET /stream?n=1 HTTP/1.1\r\nHost: h\r\n\r\n"
            b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
            b"HEAD /scope HTTP/1.1\r\nHost: h\r\n\r\n"
            b"GET /scope?third HTTP/1.1\r\nHost: h\r\n\r\n"
        )
        assert reader.response().body == b"part0;"
        assert reader.response().body == b"abc"
        head = reader.response("HEAD")
        assert head.status == 200 and head.body == b""
        assert json.loads(reader.response().body)["query_string"] == "third"


def test_an_application_exception_is_a_500_and_one_traceback(server: Server) -> None:
    status, headers, _ = fetch(server, b"GET /error HTTP/1.1\r\nHost: h\r\n\r\n")
    assert status == 500 and headers["connection"] == "close"
    server.wait_log(r"error handling GET /error")
    text = server.stderr
    assert "ValueError: boom from the ASGI app" in text
    assert http_get(server, "/stream?n=1") == (200, b"part0;")  # the worker goes on


def test_an_exception_after_the_head_closes_the_connection(server: Server) -> None:
    reply = server.raw(b"GET /after-start HTTP/1.1\r\nHost: h\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"first;" in reply and not reply.endswith(b"0\r\n\r\n")  # cut, not completed
    server.wait_log(r"error handling GET /after-start")


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("/body-first", "http.response.body before http.response.start"),
        ("/double-start", "a second http.response.start"),
        ("/bad-status", "invalid status '200'"),
        ("/crlf", "control character"),
        ("/no-response", "ASGI application returned without a response"),
        ("/not-a-message", "a message is a dict, not list"),
    ],
)
def test_a_protocol_violation_is_a_500_and_a_logged_error(server: Server, path: str, line: str):
    status, _, body = fetch(server, b"GET %s HTTP/1.1\r\nHost: h\r\n\r\n" % path.encode())
    assert status == 500
    assert b"Injected" not in body
    server.wait_log(rf"ERROR\].*{path}.*{line}|ERROR\].*{line}.*{path}")


def test_a_message_may_be_any_mapping(server: Server) -> None:
    assert http_get(server, "/mapping-messages") == (200, b"mapped")


def test_headers_may_be_lists_of_pairs_and_anything_else_is_a_500(server: Server) -> None:
    reply = server.raw(b"GET /header-forms?form=lists HTTP/1.0\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and reply.endswith(b"\r\n\r\nok")
    assert b"\r\nx-form: lists\r\nx-form: tuple\r\n" in reply
    for form, line in [
        ("bytearray", "name and value must be bytes"),
        ("str", "name and value must be bytes"),
        ("triple", r"a header must be a \(name, value\) pair"),
        ("not-pairs", "headers must be an iterable of pairs"),
    ]:
        request = b"GET /header-forms?form=%s HTTP/1.1\r\nHost: h\r\n\r\n" % form.encode()
        assert fetch(server, request)[0] == 500, form
        server.wait_log(rf"ERROR\].*{line}")


def test_what_send_returns_is_a_coroutine_to_asyncio_and_anyio(server: Server) -> None:
    assert http_get(server, "/send-in-tasks") == (200, b"sent by tasks")


def test_each_request_runs_in_its_own_task_and_context(server: Server) -> None:
    # the first step runs before the loop's next turn (the adapter's run): with its task
    # current and in that task's context, which no other request shares
    with server.connect() as sock:
        reader = Reader(sock)
        for query in (b"one", b"two"):  # one after the other on one connection
            sock.sendall(b"GET /task-context?%s HTTP/1.1\r\nHost: h\r\n\r\n" % query)
            facts = json.loads(reader.response().body)
            assert facts == {"seen": None, "kept": query.decode(), "task": "corral-request",
                             "same_task": True, "cancelled": True}  # fmt: skip
        sock.sendall(  # pipelined: the second starts from the first's answer
            b"GET /task-context?three HTTP/1.1\r\nHost: h\r\n\r\n"
            b"GET /task-context?four HTTP/1.1\r\nHost: h\r\n\r\n"
        )
        for query in ("three", "four"):
            facts = json.loads(reader.response().body)
            assert facts["seen"] is None and facts["kept"] == query and facts["same_task"]


def test_a_header_value_with_crlf_never_reaches_the_wire(server: Server) -> None:
    reply = server.raw(b"GET /crlf HTTP/1.1\r\nHost: h\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 500 ")
    assert b"Injected" not in reply and b"x-evil" not in reply


def waiting_for_disconnect(server: Server) -> socket.socket:
    """A connection whose /wait-disconnect answer began: its application awaits receive()."""
    sock = server.connect()
    sock.sendall(b"GET /wait-disconnect HTTP/1.1\r\nHost: h\r\n\r\n")
    data = b""
    while b"waiting;" not in data:
        data += sock.recv(65536)
    return sock


def test_http_disconnect_when_the_client_goes_away(server: Server) -> None:
    before = server.stderr.count("disconnect seen /wait-disconnect")
    sock = waiting_for_disconnect(server)
    sock.close()
    wait_for(lambda: server.stderr.count("disconnect seen /wait-disconnect") > before)
    server.wait_log(r"client went away during GET /wait-disconnect", count=before + 1)
    assert "ERROR] ASGI application returned before the end" not in server.stderr


def test_http_disconnect_after_an_abort(server: Server) -> None:
    before = server.stderr.count("disconnect seen /wait-disconnect")
    sock = waiting_for_disconnect(server)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()  # RST: connection_lost, not an EOF
    wait_for(lambda: server.stderr.count("disconnect seen /wait-disconnect") > before)


def test_limits_are_the_connections(server: Server) -> None:
    reply = server.raw(b"GET /scope HTTP/1.1\r\nHost: h\r\nX: " + b"a" * 10000 + b"\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 431 ")


# -- selecting the interface ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        ((), b"wsgi"),  # auto: a plain function is WSGI
        (("--interface", "asgi"), b"asgi"),
        (("-k", "uvicorn.workers.UvicornWorker"), b"asgi"),
        (("-k", "uvicorn.workers.UvicornWorker", "--interface", "wsgi"), b"wsgi"),
    ],
)
def test_the_interface_setting_chooses(args: tuple[str, ...], answer: bytes) -> None:
    with Server("asgi_apps:both", *args) as running:
        assert http_get(running, "/") == (200, answer)


def test_forcing_wsgi_calls_a_coroutine_function_as_wsgi() -> None:
    with Server("asgi_apps:app", "--interface", "wsgi") as running:
        status, _ = http_get(running, "/scope")
        assert status == 500  # a coroutine is no WSGI iterable
        running.wait_log(r"error handling GET /scope")


def test_raw_reply_is_read_whole(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(b"GET /scope HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        reply = read_all(sock)
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" in reply


def test_the_body_limit_and_the_access_log_apply_to_asgi() -> None:
    with Server("asgi_apps:app", "--limit-request-body", "10", "--access-logfile", "-") as running:
        with running.connect() as sock:
            sock.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n")
            sock.sendall(b"x" * 100)
            assert read_all(sock).startswith(b"HTTP/1.1 413 ")
        with running.connect() as sock:  # chunked: found too long while the application runs
            sock.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
            sock.sendall(b"8\r\n12345678\r\n")
            wait_for(lambda: unread_by_server(sock) == 0)  # the application runs: /echo
            sock.sendall(b"8\r\n12345678\r\n0\r\n\r\n")
            assert read_all(sock).startswith(b"HTTP/1.1 413 ")
        assert http_get(running, "/stream?n=2") == (200, b"part0;part1;")
        wait_for(lambda: '"GET /stream?n=2 HTTP/1.1" 200' in running.stdout + running.stderr)


def test_unit_protocol_asgi_and_prefix_as_root_path(tmp_path) -> None:
    config = {
        "listeners": {"127.0.0.1:0": {"pass": "applications/a"}},
        "applications": {
            "a": {
                "type": "python",
                "protocol": "asgi",
                "module": "asgi_apps",
                "callable": "both",  # WSGI by its look: the protocol makes it ASGI
                "prefix": "/mnt",
            }
        },
    }
    path = tmp_path / "unit.json"
    path.write_text(json.dumps(config))
    with Server(f"--config={path}", bind=None) as running:
        assert http_get(running, "/mnt/x") == (200, b"asgi")
    config["applications"]["a"]["callable"] = "app"
    path.write_text(json.dumps(config))
    with Server(f"--config={path}", bind=None) as running:
        status, body = http_get(running, "/mnt/scope/x")
        assert status == 200
        scope = json.loads(body)
        assert scope["root_path"] == "/mnt" and scope["path"] == "/mnt/scope/x"
        status, body = http_get(running, "/scope")
        assert status == 200
        scope = json.loads(body)
        assert scope["root_path"] == "" and scope["path"] == "/scope"


def test_uvicorns_factory_flag() -> None:
    with Server("conformance_apps:make_asgi", "--factory") as running:
        assert http_get(running, "/") == (200, b"asgi")


# -- the extensions: pathsend, zerocopysend, trailers ------------------------------------------


def test_pathsend_sends_the_file_with_its_length(server: Server, tmp_path) -> None:
    path = tmp_path / "sent.txt"
    path.write_bytes(bytes(range(256)) * 1000)
    request = f"GET /pathsend?path={path} HTTP/1.1\r\nHost: h\r\n\r\n".encode()
    with server.connect() as sock:
        for _ in range(2):  # keep-alive: the same connection serves again after the file
            status, headers, body = (sock.sendall(request), read_response(sock))[1]
            assert status == 200 and headers["content-length"] == "256000"
            assert body == path.read_bytes()
    with server.connect() as sock:
        sock.sendall(
            f"HEAD /pathsend?path={path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode()
        )
        head, _, rest = read_all(sock).partition(b"\r\n\r\n")
    assert b"Content-Length: 256000" in head and rest == b""  # HEAD: the length, no body


def test_pathsend_of_a_missing_file_is_a_500_and_logged(server: Server, tmp_path) -> None:
    status, _, _ = fetch(
        server, f"GET /pathsend?path={tmp_path}/none HTTP/1.1\r\nHost: h\r\n\r\n".encode()
    )
    assert status == 500
    server.wait_log(r"http.response.pathsend cannot open .*/none: No such file")


def test_zerocopysend_sends_ranges_of_a_file_in_a_streamed_answer(server: Server, tmp_path):
    path = tmp_path / "zero.txt"
    path.write_bytes(b"0123456789abcdefghijklmnopqrstuvwxyz")
    status, headers, body = fetch(
        server, f"GET /zerocopy?path={path} HTTP/1.1\r\nHost: h\r\n\r\n".encode()
    )
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    assert body == b"56789abcde" + b"fghijklmnopqrstuvwxyz" + b"[end]"


def chunked_body(server: Server, request: bytes) -> tuple[bytes, bytes]:
    """The head and the raw body (its chunk framing and trailer section) to the close."""
    with server.connect() as sock:
        sock.sendall(request)
        data = read_all(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def test_trailers_are_sent_when_the_client_takes_them(server: Server) -> None:
    head, body = chunked_body(
        server, b"GET /trailers HTTP/1.1\r\nHost: h\r\nTE: trailers\r\nConnection: close\r\n\r\n"
    )
    assert b"Transfer-Encoding: chunked" in head
    assert body == b"5\r\nbody;\r\n4\r\ndone\r\n0\r\nx-checksum: abc\r\nx-late: 1\r\n\r\n"


def test_without_te_trailers_the_extension_is_not_offered(server: Server) -> None:
    _, body = chunked_body(
        server, b"GET /trailers HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
    )
    assert body == b"5\r\nbody;\r\n4\r\ndone\r\n0\r\n\r\n"


def test_a_trailer_with_crlf_is_never_written_and_the_connection_closes(server: Server) -> None:
    _, body = chunked_body(
        server, b"GET /trailers?bad=1 HTTP/1.1\r\nHost: h\r\nTE: trailers\r\n\r\n"
    )
    assert body == b"5\r\nbody;\r\n4\r\ndone\r\n0\r\nx-checksum: abc\r\n"  # cut: no end
    server.wait_log(r"ASGI protocol error in the answer to GET /trailers\?bad=1: control character")
