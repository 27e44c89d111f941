"""The share action on a connection, without a server (the integration tests, test_static*.py,
serve files for real): the answer's framing for each kind of answer, the fallback through the
handler table, the file's descriptor closed on every path (sent, copied through a body step,
the connection gone before or while its answer is written).

Run on both cores: tests/unit/test_python_core.py runs this module on the Python one."""

from __future__ import annotations

import asyncio
import gzip
import logging
import os
import socket
import zlib
from pathlib import Path

import pytest

from corral.compression import build_rules
from corral.config.document import validate_document
from corral.routing import compile_routes
from corral.server.connection import HttpConnection
from corral.server.plan import ListenerPlan
from corral.server.routed import Routing
from corral.server.steps import Compress
from tests.unit.test_connection import RecordingTransport, connect, statuses
from tests.unit.test_routed_connection import SocketTransport

SMALL = b"body of a small file\n"
PAGE = b"".join(b"<p>line %d of a page that compresses well</p>\n" % i for i in range(400))  # 18 KB
BIG = os.urandom(3 * 1024 * 1024 + 17)  # above the engine's memory_file: sent from the file


@pytest.fixture
def loop():
    # a WSGI application answered inline, outside a running loop (test_connection.py's), leaves
    # its connection's loop as the running one, as it is in a worker: these tests run theirs
    asyncio.events._set_running_loop(None)
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "small.txt").write_bytes(SMALL)
    (tmp_path / "page.html").write_bytes(PAGE)
    (tmp_path / "big.bin").write_bytes(BIG)
    (tmp_path / "dir").mkdir()
    return tmp_path


def compress() -> Compress:
    document = {
        "listeners": {"127.0.0.1:8000": {"pass": "routes"}},
        "routes": [{"action": {"return": 204}}],
        "settings": {"http": {"compression": {"compressors": [{"encoding": "gzip"}]}}},
    }
    rules = build_rules(validate_document(document).settings.http.compression)
    assert rules is not None
    return Compress(rules)


def share_connection(
    loop,
    root: Path,
    routes: list | dict | None = None,
    steps=None,
    transport=RecordingTransport,
    pass_target: str = "routes",
) -> tuple[HttpConnection, RecordingTransport]:
    """A connection of a listener passing to ``routes`` (by default: /app/* to this worker's
    application, everything else shared from ``root``)."""
    plain, _ = connect(loop)
    routes = routes or [
        {"match": {"uri": "/app/*"}, "action": {"pass": "applications/a"}},
        {"action": {"share": f"{root}$uri"}},
    ]
    log = logging.getLogger("corral_test_share")
    routing = Routing(compile_routes(routes), "a", {}, timeout=1.0, log=log)
    plan = ListenerPlan(("127.0.0.1", 8000), routing=routing, pass_target=pass_target, steps=steps)
    conn = HttpConnection(plain.server, plan)
    made = transport(conn)
    conn.connection_made(made)
    return conn, made


def head_and_body(data: bytes) -> tuple[dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {
        name.lower(): value for name, _, value in (line.partition(": ") for line in lines)
    }, body


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_small_file_from_memory_head_and_304(loop, site: Path) -> None:
    conn, transport = share_connection(loop, site)
    conn.data_received(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    fields, body = head_and_body(transport.data)
    assert statuses(transport.data) == [b"200"] and body == SMALL
    assert fields["content-length"] == str(len(SMALL)) and fields["content-type"] == "text/plain"
    transport.data = b""
    conn.data_received(b"HEAD /small.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    head_fields, body = head_and_body(transport.data)
    assert head_fields == fields and body == b""  # the same head, the same Content-Length
    transport.data = b""
    etag = fields["etag"].encode()
    conn.data_received(
        b"GET /small.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: " + etag + b"\r\n\r\n"
    )
    fields, body = head_and_body(transport.data)
    assert statuses(transport.data) == [b"304"] and body == b"" and "content-length" not in fields
    assert fields["etag"] == etag.decode() and not transport.closed


def test_no_file_and_no_fallback_is_units_page_and_another_method_405(loop, site: Path) -> None:
    conn, transport = share_connection(loop, site)
    conn.data_received(b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n")
    fields, body = head_and_body(transport.data)
    assert statuses(transport.data) == [b"404"] and b"Error 404" in body
    assert fields["content-length"] == str(len(body)) and fields["content-type"] == "text/html"
    transport.data = b""
    # a body the share does not read is read and dropped: the connection stays open
    conn.data_received(b"POST /small.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd")
    fields, body = head_and_body(transport.data)
    assert statuses(transport.data) == [b"405"] and fields["allow"] == "GET, HEAD"
    assert not transport.closed
    transport.data = b""
    conn.data_received(b"GET /dir?q=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    fields, body = head_and_body(transport.data)
    assert statuses(transport.data) == [b"301"] and fields["location"] == "/dir/?q=1"
    assert fields["content-length"] == "0" and body == b""


def test_a_fallback_to_the_application_is_a_pass(loop, site: Path) -> None:
    routes = [{"action": {"share": f"{site}$uri", "fallback": {"pass": "applications/a"}}}]
    conn, transport = share_connection(loop, site, routes)
    # from a callback of the loop, as a worker's reads come (the application runs inline)
    loop.call_soon(conn.data_received, b"GET /not/a/file HTTP/1.1\r\nHost: x\r\n\r\n")
    loop.run_until_complete(asyncio.sleep(0))
    assert statuses(transport.data) == [b"200"]
    assert head_and_body(transport.data)[1] == b"/not/a/file|"  # the application's echo


def test_fallbacks_that_loop_are_one_500(loop, site: Path, caplog) -> None:
    # share -> a pass built from a variable -> routes -> the same share: only a bound stops it
    routes = {
        "main": [{"action": {"share": f"{site}/none$uri", "fallback": {"pass": "routes/$arg_to"}}}],
    }
    conn, transport = share_connection(loop, site, routes, pass_target="routes/main")
    conn.data_received(b"GET /x?to=main HTTP/1.1\r\nHost: x\r\n\r\n")
    assert statuses(transport.data) == [b"500"]
    assert "the shares' fallbacks loop" in caplog.text


def test_a_large_file_by_sendfile_then_its_descriptor_closed(loop, site: Path) -> None:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    with ours, theirs:
        conn, transport = share_connection(
            loop, site, transport=lambda conn: SocketTransport(conn, ours)
        )
        before = open_descriptors()
        conn.data_received(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while len(received) < len(BIG):
            loop.run_until_complete(asyncio.sleep(0))  # the sendfile job's writer callback
            received += theirs.recv(1 << 20)
        fields, head_bytes = head_and_body(transport.data)
        assert fields["content-length"] == str(len(BIG)) and head_bytes == b""
        assert received == BIG
        loop.run_until_complete(asyncio.sleep(0))
        assert conn.active is None and open_descriptors() == before


def test_a_file_a_body_step_encodes_is_copied_piece_by_piece(loop, site: Path) -> None:
    """A large text file and compression: no sendfile, the file read while the client takes
    it (the transport pausing writes holds the copy until it resumes)."""
    (site / "big.txt").write_bytes(PAGE * 40)  # 740 KB of text: from the file, not memory
    conn, transport = share_connection(loop, site, steps=compress())
    before = open_descriptors()
    conn.pause_writing()  # the client reads slowly: nothing is copied until it resumes
    conn.data_received(b"GET /big.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
    fields, chunked = head_and_body(transport.data)
    assert fields["content-encoding"] == "gzip" and fields["transfer-encoding"] == "chunked"
    assert chunked == b"" and conn.on_writable is not None
    while conn.active is not None:
        conn.resume_writing()
        loop.run_until_complete(asyncio.sleep(0))  # the copy yields to the loop between turns
    body = b""
    rest = transport.data.partition(b"\r\n\r\n")[2]
    while True:
        size, _, rest = rest.partition(b"\r\n")
        body, rest = body + rest[: int(size, 16)], rest[int(size, 16) + 2 :]
        if size == b"0":
            break
    assert gzip.decompress(body) == PAGE * 40 and open_descriptors() == before


def test_a_small_file_a_body_step_compresses_whole_and_head_has_its_vary(loop, site) -> None:
    conn, transport = share_connection(loop, site, steps=compress())
    conn.data_received(b"GET /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
    fields, body = head_and_body(transport.data)
    assert fields["content-encoding"] == "gzip" and fields["vary"] == "Accept-Encoding"
    assert zlib.decompress(body, 31) == PAGE and fields["content-length"] == str(len(body))
    transport.data = b""
    conn.data_received(b"HEAD /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
    fields, body = head_and_body(transport.data)
    assert fields["vary"] == "Accept-Encoding" and "content-encoding" not in fields
    assert fields["content-length"] == str(len(PAGE)) and body == b""


@pytest.mark.parametrize("when", ["queued", "sending", "copying"])
def test_the_descriptor_closes_when_the_connection_goes(loop, site: Path, when: str) -> None:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    with ours, theirs:
        steps = compress() if when == "copying" else None
        conn, transport = share_connection(
            loop, site, steps=steps, transport=lambda conn: SocketTransport(conn, ours)
        )
        (site / "big.txt").write_bytes(PAGE * 40)
        target = b"/big.txt" if when == "copying" else b"/big.bin"
        request = b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n"
        before = open_descriptors()
        if when == "copying":
            conn.pause_writing()  # the client does not read
        # sending: the file fills the socket's buffer, its client does not read; queued: two
        # more requests pipelined behind it hold their files' descriptors, never started
        conn.data_received(request * (3 if when == "queued" else 1))
        assert open_descriptors() > before  # a file is open for the answer under way
        transport.close()  # the client is gone
        loop.run_until_complete(asyncio.sleep(0))
        assert open_descriptors() == before and conn.closed
