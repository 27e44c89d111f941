"""PEP 3333 conformance of the WSGI adapter, on real processes and sockets.

Most behaviours run in both execution modes: ``--threads 1`` (the application runs
inline on the event loop once the body has fully arrived) and ``--threads 4`` (the
application runs on a thread pool while the body streams). The applications live in
tests/integration/apps/wsgi_apps.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import select
import socket
import threading
import uuid
from pathlib import Path

import pytest

from tests.integration.apps.wsgi_apps import apply_ops  # the app's own, run on BytesIO
from tests.integration.server import Server, fetch, read_all, read_response, wait_for
from tests.integration.sockets import unread_by_server

# every request here is answered by each core in turn
pytestmark = pytest.mark.usefixtures("each_core")

MODES = ["1", "4"]
INJECTED = b"INJECTED-by-the-app"
FILE_SIZE = 5 * 1024 * 1024


# -- fixtures ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def test_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("wsgi")
    block = hashlib.sha256(b"corral").digest() * 2048  # 64 KiB, not one repeated byte
    with open(path / "big.bin", "wb") as stream:
        for index in range(FILE_SIZE // len(block)):
            stream.write(index.to_bytes(4, "big") + block[4:])
    return path


@pytest.fixture(scope="module", params=MODES, ids=["threads1", "threads4"])
def server(request, test_dir, each_core):
    with Server(
        "wsgi_apps", "--threads", request.param, "-e", f"WSGI_TEST_DIR={test_dir}"
    ) as running:
        running.threads = int(request.param)
        yield running


def token() -> str:
    return uuid.uuid4().hex


# -- raw HTTP helpers ----------------------------------------------------------------


def build(
    method: str,
    target: str,
    headers: list[tuple[str, str]] | None = None,
    body: bytes = b"",
    *,
    version: str = "HTTP/1.1",
    host: bool = True,
    chunks: list[bytes] | None = None,
) -> bytes:
    """A raw request. ``chunks`` sends the body chunked, in exactly those chunks."""
    lines = [f"{method} {target} {version}"]
    if host:
        lines.append("Host: test.example")
    for name, value in headers or []:
        lines.append(f"{name}: {value}")
    if chunks is not None:
        lines.append("Transfer-Encoding: chunked")
        payload = b"".join(b"%x\r\n%b\r\n" % (len(chunk), chunk) for chunk in chunks if chunk)
        payload += b"0\r\n\r\n"
    elif any(name.lower() == "content-length" for name, _ in headers or []):
        payload = body  # the caller framed it
    elif body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    else:
        payload = b""
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


class Reader:
    """Reads responses from one socket, keeping what follows a response for the next."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def fill(self) -> bool:
        try:
            chunk = self.sock.recv(262144)
        except ConnectionResetError:
            chunk = b""
        self.buffer += chunk
        return bool(chunk)

    def head(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            if not self.fill():
                raise AssertionError(f"connection closed mid-head: {bytes(self.buffer)!r}")
        end = self.buffer.index(b"\r\n\r\n") + 4
        raw = bytes(self.buffer[:end])
        del self.buffer[:end]
        lines = raw.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        return int(lines[0].split()[1]), headers, raw

    def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self.fill():
                raise AssertionError("connection closed mid-body")
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def body(self, headers: dict[str, str], sink=None) -> bytes:
        """The body framed by ``headers``; with ``sink`` each piece goes there instead."""
        parts: list[bytes] = []
        put = sink or parts.append
        if "content-length" in headers:
            left = int(headers["content-length"])
            while left:
                if not self.buffer and not self.fill():
                    raise AssertionError("connection closed mid-body")
                piece = bytes(self.buffer[:left])
                del self.buffer[: len(piece)]
                left -= len(piece)
                put(piece)
        elif headers.get("transfer-encoding") == "chunked":
            while True:
                while b"\r\n" not in self.buffer:
                    if not self.fill():
                        raise AssertionError("connection closed mid-chunk")
                end = self.buffer.index(b"\r\n")
                size = int(bytes(self.buffer[:end]), 16)
                del self.buffer[: end + 2]
                if size == 0:
                    assert self._take(2) == b"\r\n"
                    break
                put(self._take(size))
                assert self._take(2) == b"\r\n"
        else:
            put(self.rest())
        return b"".join(parts)

    def rest(self) -> bytes:
        """Everything until the server closes."""
        while self.fill():
            pass
        data = bytes(self.buffer)
        self.buffer.clear()
        return data


def fetch_closed(server: Server, data: bytes) -> bytes:
    """Send ``data`` (which should ask for ``Connection: close``); every byte until close."""
    with server.connect() as sock:
        sock.sendall(data)
        return read_all(sock)


def environ_of(server: Server, data: bytes) -> dict:
    status, _, body = fetch(server, data)
    assert status == 200, body
    return json.loads(body)


def log_has(server: Server, *fragments: str, timeout: float = 10.0) -> str:
    """Wait until one error-log line holds every fragment; return that line."""

    def find():
        for line in server.stderr.splitlines():
            if all(fragment in line for fragment in fragments):
                return line
        return None

    return wait_for(find, timeout)


def traceback_logged(server: Server, message: str, timeout: float = 10.0) -> None:
    """Wait until the log holds ``RuntimeError: <message>`` ending a traceback."""
    last = f"RuntimeError: {message}"

    def found():
        lines = server.stderr.splitlines()
        for index, line in enumerate(lines):
            if line.startswith(last):
                earlier = lines[max(0, index - 60) : index]
                return any(text.startswith("Traceback (most recent call last)") for text in earlier)
        return False

    wait_for(found, timeout)


def events(test_dir: Path, name: str) -> list[str]:
    try:
        return (test_dir / name).read_text().split()
    except FileNotFoundError:
        return []


def worker_pid(server: Server) -> int:
    status, _, body = fetch(server, build("GET", "/pid"))
    assert status == 200
    return int(body)


# -- the environ -------------------------------------------------------------------


CGI_KEYS = [
    "REQUEST_METHOD",
    "SCRIPT_NAME",
    "PATH_INFO",
    "QUERY_STRING",
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_PROTOCOL",
    "REMOTE_ADDR",
]


def test_required_environ_keys_and_types(server):
    env = environ_of(server, build("GET", "/some/where?x=1&y=2", [("X-Thing", "v")]))
    for key in CGI_KEYS:
        assert env[key]["type"] == "str", (key, env.get(key))
    assert env["REQUEST_METHOD"]["value"] == "GET"
    assert env["SCRIPT_NAME"]["value"] == ""
    assert env["PATH_INFO"]["value"] == "/some/where"
    assert env["QUERY_STRING"]["value"] == "x=1&y=2"
    assert env["SERVER_NAME"]["value"] == "127.0.0.1"
    assert env["SERVER_PORT"]["value"] == str(server.port)
    assert env["SERVER_PROTOCOL"]["value"] == "HTTP/1.1"
    assert env["REMOTE_ADDR"]["value"] == "127.0.0.1"
    assert env["wsgi.version"] == {"type": "tuple", "value": [1, 0]}
    assert env["wsgi.url_scheme"] == {"type": "str", "value": "http"}
    assert env["wsgi.input"]["methods"] == ["read", "readline", "readlines", "__iter__"]
    assert env["wsgi.errors"]["methods"] == ["write", "writelines", "flush"]
    for key in ("wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once"):
        assert env[key]["type"] == "bool", key
    assert env["wsgi.run_once"]["value"] is False
    assert env["wsgi.file_wrapper"]["callable"] is True
    assert env["HTTP_HOST"] == {"type": "str", "value": "test.example"}
    assert env["HTTP_X_THING"] == {"type": "str", "value": "v"}
    # a GET without a body gets neither key
    assert "CONTENT_TYPE" not in env
    assert "CONTENT_LENGTH" not in env
    # every CGI-style key is a str (PEP 3333: "native strings")
    for key, described in env.items():
        if "." not in key:
            assert described["type"] == "str", key


def test_content_type_and_length_only_when_sent(server):
    env = environ_of(
        server, build("POST", "/e", [("Content-Type", "text/plain; charset=utf-8")], b"hello")
    )
    assert env["CONTENT_TYPE"] == {"type": "str", "value": "text/plain; charset=utf-8"}
    assert env["CONTENT_LENGTH"] == {"type": "str", "value": "5"}
    assert "HTTP_CONTENT_TYPE" not in env
    assert "HTTP_CONTENT_LENGTH" not in env

    env = environ_of(server, build("POST", "/e", [("Content-Type", "a/b")], chunks=[b"xy"]))
    assert env["CONTENT_TYPE"]["value"] == "a/b"
    assert "CONTENT_LENGTH" not in env  # the client sent none
    assert env["HTTP_TRANSFER_ENCODING"]["value"] == "chunked"
    assert "HTTP_CONTENT_TYPE" not in env
    assert "HTTP_CONTENT_LENGTH" not in env

    env = environ_of(server, build("POST", "/e", [("content-length", "0")]))
    assert env["CONTENT_LENGTH"]["value"] == "0"
    assert "CONTENT_TYPE" not in env
    assert "HTTP_CONTENT_LENGTH" not in env


def test_no_http_host_without_host_header(server):
    raw = fetch_closed(server, b"GET /no-host HTTP/1.0\r\nX-A: 1\r\n\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") or head.startswith(b"HTTP/1.1 200"), raw
    env = json.loads(body)
    assert "HTTP_HOST" not in env
    assert env["SERVER_PROTOCOL"]["value"] == "HTTP/1.0"
    assert env["HTTP_X_A"]["value"] == "1"
    assert env["SERVER_NAME"]["value"]  # still required, from the socket
    phantom = [k for k in env if k.startswith("HTTP_") and k != "HTTP_X_A"]
    assert phantom == []


def test_each_request_on_a_connection_has_its_own_fields_when_they_repeat_and_change(server):
    """Requests on one connection sending the same fields share the work of their keys
    (environ.ConnectionEnviron): each still gets exactly its own fields and request line,
    also after one that differs, and what an application changes in its environ stays in
    its request."""
    alike = [("X-A", "1"), ("Cookie", "c=1")]
    steps = [
        (build("GET", "/one", alike), {"HTTP_X_A": "1", "HTTP_COOKIE": "c=1"}),
        (build("GET", "/two", alike), {"HTTP_X_A": "1", "HTTP_COOKIE": "c=1"}),
        (build("GET", "/three?q=1", alike), {"HTTP_X_A": "1", "HTTP_COOKIE": "c=1"}),
        (build("POST", "/four", alike, b"body"), {"HTTP_X_A": "1", "CONTENT_LENGTH": "4"}),
        (build("GET", "/five", [("X-A", "2"), ("Cookie", "c=1")]), {"HTTP_X_A": "2"}),
        (build("GET", "/six", [("Cookie", "c=1")]), {"HTTP_X_A": None, "HTTP_COOKIE": "c=1"}),
        (build("GET", "/seven", alike), {"HTTP_X_A": "1", "CONTENT_LENGTH": None}),
        (build("GET", "/eight", alike), {"HTTP_X_A": "1", "HTTP_COOKIE": "c=1"}),
        (build("GET", "/changing", alike), {"HTTP_X_A": "changed", "HTTP_X_ADDED": "added"}),
        (build("GET", "/nine", alike), {"HTTP_X_A": "1", "HTTP_X_ADDED": None}),
        (build("GET", "/eleven", [("X-A", "3"), ("Cookie", "c=1")]), {"HTTP_X_A": "3"}),
        (build("GET", "/twelve", [("X-A", "1"), ("Cookie", "c=2")]), {"HTTP_COOKIE": "c=2"}),
        (build("GET", "/thirteen", alike), {"HTTP_X_A": "1", "HTTP_COOKIE": "c=1"}),
        (
            build("GET", "/last", alike, version="HTTP/1.0"),
            {"SERVER_PROTOCOL": "HTTP/1.0"},
        ),  # closes
    ]
    with server.connect() as sock:
        for data, expected in steps:
            sock.sendall(data)
            status, _, body = read_response(sock)
            assert status == 200, body
            env = json.loads(body)
            method, target, _ = data.split(b"\r\n", 1)[0].decode().split(" ")
            path, _, query = target.partition("?")
            assert env["REQUEST_METHOD"]["value"] == method, target
            assert env["PATH_INFO"]["value"] == path and env["QUERY_STRING"]["value"] == query
            assert env["RAW_URI"]["value"] == target
            expected.setdefault("SERVER_PROTOCOL", "HTTP/1.1")
            for key, value in expected.items():
                assert env.get(key, {}).get("value") == value, (target, key)
            assert env["HTTP_HOST"]["value"] == "test.example"


def test_header_names_with_underscores_are_dropped(server):
    env = environ_of(
        server,
        build(
            "GET",
            "/underscore",
            [("X_Forwarded_For", "6.6.6.6"), ("X-Forwarded-For", "1.2.3.4"), ("Foo_Bar", "x")],
        ),
    )
    assert env["HTTP_X_FORWARDED_FOR"]["value"] == "1.2.3.4"
    assert "HTTP_FOO_BAR" not in env
    assert not any("6.6.6.6" in str(v["value"]) for v in env.values())


def test_repeated_headers_are_joined(server):
    env = environ_of(
        server,
        build(
            "GET",
            "/repeat",
            [
                ("X-Multi", "a"),
                ("Cookie", "a=1"),
                ("x-multi", "b"),
                ("Cookie", "b=2"),
                ("X-MULTI", "c, d"),
            ],
        ),
    )
    assert env["HTTP_X_MULTI"]["value"] == "a, b, c, d"
    assert env["HTTP_COOKIE"]["value"] == "a=1; b=2"


@pytest.mark.parametrize(
    ("target", "path", "query"),
    [
        ("/caf%C3%A9", "/caf\xc3\xa9", ""),
        ("/a%2Fb%2fc", "/a/b/c", ""),
        ("///a", "///a", ""),
        ("//x//y/", "//x//y/", ""),
        ("/sp%20ace?q=%20x&r=%2F", "/sp ace", "q=%20x&r=%2F"),
        ("/plus+sign", "/plus+sign", ""),
        ("/%7Euser/%FF", "/~user/\xff", ""),
        ("/pct%25encoded", "/pct%encoded", ""),
        ("/q?", "/q", ""),
        ("/q?a=1?b=2", "/q", "a=1?b=2"),
    ],
)
def test_path_info_decoded_latin1_raw_uri_exact(server, target, path, query):
    env = environ_of(server, build("GET", target))
    assert env["PATH_INFO"]["value"] == path
    assert env["QUERY_STRING"]["value"] == query
    assert env["RAW_URI"]["value"] == target
    assert env["REQUEST_URI"]["value"] == target


def test_multithread_flag_follows_threads(server):
    env = environ_of(server, build("GET", "/flags"))
    assert env["wsgi.multithread"]["value"] is (server.threads > 1)
    assert env["wsgi.multiprocess"]["value"] is False  # -w 1


def test_application_sees_no_running_event_loop(server):
    """Synchronous code, even inline on the loop thread: Django's ORM depends on it."""
    status, _, body = fetch(server, build("GET", "/running-loop"))
    assert (status, body) == (200, b"none")


def test_application_threads_run_under_batch_scheduling(server):
    """--threads N > 1: the pool's threads are SCHED_BATCH (a thread handed a request does not
    preempt the loop thread that holds the GIL); with one thread the loop runs it, unchanged."""
    status, _, body = fetch(server, build("GET", "/scheduling"))
    expected = os.SCHED_BATCH if server.threads > 1 else os.SCHED_OTHER
    assert (status, int(body)) == (200, expected)


def test_thread_scheduling_normal_keeps_the_systems_policy():
    with Server("wsgi_apps", "--threads", "2", "--thread-scheduling", "normal") as server:
        status, _, body = fetch(server, build("GET", "/scheduling"))
        assert (status, int(body)) == (200, os.SCHED_OTHER)


def test_a_closed_connection_leaves_no_reference_cycle(server):
    """A connection, its parser and its output point at each other while it is open; once
    closed, reference counting must free them, or the cycle collector runs every few dozen
    connections under close-per-request traffic (~12 objects each, before it was fixed)."""
    assert fetch(server, build("GET", "/garbage?start"))[2] == b"started"
    for _ in range(40):
        answer = fetch_closed(server, build("GET", "/", [("Connection", "close")]))
        assert answer.startswith(b"HTTP/1.1 200 ")
    status, _, found = fetch(server, build("GET", "/garbage"))
    assert status == 200
    # the requests of the test's own connections (the one open now among them) leave a few
    assert int(found) < 40, f"{int(found)} objects in cycles after 40 closed connections"


def test_multiprocess_true_with_two_workers():
    with Server("wsgi_apps", workers=2) as server:
        env = environ_of(server, build("GET", "/flags"))
        assert env["wsgi.multiprocess"]["value"] is True
        assert env["wsgi.multithread"]["value"] is False


# -- wsgi.input ----------------------------------------------------------------------


LONG_LINE = bytes(range(256)).replace(b"\n", b"") * 300  # ~76 KB without a newline
BODIES = {
    "empty": b"",
    "lines": b"line one\nline two\n\nlast line without newline",
    "trailing-newline": b"a\nbb\nccc\n",
    "large": b"".join(b"%05d " % i + LONG_LINE[: i * 97 % 3000] + b"\n" for i in range(120))
    + LONG_LINE
    + b"\nend",
}
OPS = [
    "read",
    "readnone",
    "read:5,read:3,read:0,read,read,read:10",
    "read:1,read:70000,read:-1,read:1",
    "readline,readline,readline,readline,readline,readline",
    "readline:3,readline:100,readline:1,readline,readline:0,read",
    "readlines,readlines,read",
    "readline,readlines",
    "iter,iter,readline,read",
    "read:4,iter,read,readline",
]


@pytest.mark.parametrize("framing", ["length", "chunked"])
@pytest.mark.parametrize("ops", OPS)
def test_input_methods(server, framing, ops):
    for name, body in BODIES.items():
        query = f"/input?ops={ops}"
        if framing == "length":
            data = build("POST", query, body=body)
        else:
            pieces = [body[i : i + 7] for i in range(0, min(len(body), 700), 7)]
            pieces.append(body[700:])
            data = build("POST", query, chunks=pieces)
        status, _, answer = fetch(server, data)
        assert status == 200, answer
        result = json.loads(answer)
        assert result["results"] == apply_ops(io.BytesIO(body), ops), name
        assert result["input_terminated"] is True


@pytest.mark.parametrize("how", ["read", "readline"])
def test_input_read_n_waits_for_n_bytes(server, how):
    """read(n) and readline(n) return short only at the end of the body (file semantics).

    The body arrives in two packets; with a thread pool the application already
    reads while the second is on its way. ``read(CONTENT_LENGTH)`` is the idiom of
    countless applications and must return the whole body.
    """
    first, second = b"0123456789" * 100, b"abcdefghij" * 100
    body = first + second
    ops = f"read:{len(body)}" if how == "read" else f"readline:{len(body)}"
    with server.connect() as sock:
        sock.sendall(build("POST", f"/input?ops={ops},read", body=body)[: -len(second)])
        # the worker read the first part; give a wrongly short read the chance to answer
        wait_for(lambda: unread_by_server(sock) == 0)
        select.select([sock], [], [], 0.5)
        sock.sendall(second)
        status, _, answer = read_response(sock)
    assert status == 200
    results = json.loads(answer)["results"]
    assert [len(result) for result in results] == [len(body), 0], "short read before the end"
    assert results == [body.decode(), ""]


# -- large bodies: streamed, spilled, never held whole --------------------------------


def _memory(pid: int) -> dict[str, int]:
    values = {}
    with open(f"/proc/{pid}/status") as stream:
        for line in stream:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                values[name] = int(rest.split()[0]) * 1024
    return values


@pytest.mark.parametrize("threads", MODES)
def test_large_body_echoed_with_bounded_memory(threads):
    size = 30 * 1024 * 1024
    payload = os.urandom(size)
    expected = hashlib.sha256(payload).hexdigest()
    with Server(
        "wsgi_apps", "--threads", threads, "--body-buffer-size", "65536", "-t", "60"
    ) as server:
        [pid] = server.worker_pids()
        # warm up the paths the big request takes
        status, _, answer = fetch(server, build("POST", "/echo", body=b"x" * 200000))
        assert (status, answer) == (200, b"x" * 200000)
        base = _memory(pid)["VmRSS"]
        samples = [base]
        errors: list[BaseException] = []
        with server.connect(timeout=60) as sock:

            def send():
                try:
                    sock.sendall(build("POST", "/echo", [("Content-Length", str(size))]))
                    view = memoryview(payload)
                    for start in range(0, size, 1 << 18):
                        sock.sendall(view[start : start + (1 << 18)])
                except OSError as exc:
                    errors.append(exc)

            sender = threading.Thread(target=send)
            sender.start()
            reader = Reader(sock)
            status, headers, _ = reader.head()
            assert status == 200
            digest = hashlib.sha256()
            received = 0

            def sink(piece: bytes) -> None:
                nonlocal received
                digest.update(piece)
                received += len(piece)
                if received // (1 << 20) != (received - len(piece)) // (1 << 20):
                    samples.append(_memory(pid)["VmRSS"])

            reader.body(headers, sink)
            sender.join(30)
        assert not sender.is_alive()
        assert errors == []
        assert received == size
        assert digest.hexdigest() == expected
        after = _memory(pid)
        growth = max([*samples, after["VmHWM"]]) - base
        assert growth < 20 * 1024 * 1024, f"worker grew by {growth >> 20} MB for a 30 MB body"


def test_buffered_body_spills_to_temp_file_above_limit(tmp_path):
    """With one thread the body is buffered: in memory up to the limit, in a temp file above."""
    spool = tmp_path / "spool"
    spool.mkdir()
    with Server(
        "wsgi_apps", "--threads", "1", "--body-buffer-size", "65536", env={"TMPDIR": str(spool)}
    ) as server:
        for size, spills in [(1000, False), (65536, False), (65537, True), (3 << 20, True)]:
            body = os.urandom(size)
            status, _, answer = fetch(server, build("POST", "/spill", body=body))
            assert status == 200
            result = json.loads(answer)
            assert result["length"] == size
            assert result["sha256"] == hashlib.sha256(body).hexdigest()
            assert bool(result["spilled"]) is spills, (size, result["spilled"])
            # chunked bodies are buffered under the same limit
            pieces = [body[i : i + 50000] for i in range(0, size, 50000)]
            status, _, answer = fetch(server, build("POST", "/spill", chunks=pieces))
            result = json.loads(answer)
            assert result["sha256"] == hashlib.sha256(body).hexdigest()
            assert bool(result["spilled"]) is spills, ("chunked", size, result["spilled"])


# -- wsgi.errors ---------------------------------------------------------------------


def test_wsgi_errors_reach_the_error_log(server):
    mark = token()
    status, _, _ = fetch(server, build("GET", f"/errors?token={mark}"))
    assert status == 200
    for suffix in ("write", "lines-1", "lines-2", "flushed"):
        log_has(server, f"{mark}-{suffix}")


# -- wsgi.file_wrapper -----------------------------------------------------------------


def test_file_wrapper_real_file(server, test_dir):
    expected = (test_dir / "big.bin").read_bytes()
    mark = token()
    with server.connect() as sock:
        sock.sendall(build("GET", f"/filewrapper?file=big.bin&token={mark}"))
        reader = Reader(sock)
        status, headers, _ = reader.head()
        assert status == 200
        assert headers.get("content-length") == str(FILE_SIZE)
        assert "transfer-encoding" not in headers
        body = reader.body(headers)
        assert len(body) == FILE_SIZE
        assert body == expected
        # the connection is still usable: the framing was exact
        sock.sendall(build("GET", "/pid"))
        status, _, _ = reader.head()
        assert status == 200
    wait_for(lambda: events(test_dir, mark) == ["close"])


def test_file_wrapper_file_like_without_fileno(server, test_dir):
    expected = (test_dir / "big.bin").read_bytes()
    mark = token()
    target = f"/filewrapper?file=big.bin&kind=bytesio&token={mark}"
    status, _, body = fetch(server, build("GET", target))
    assert status == 200
    assert body == expected
    wait_for(lambda: events(test_dir, mark) == ["close"])


@pytest.mark.parametrize("kind", ["file", "bytesio"])
def test_file_wrapper_head_has_no_body(server, test_dir, kind):
    mark = token()
    with server.connect() as sock:
        sock.sendall(build("HEAD", f"/filewrapper?file=big.bin&kind={kind}&token={mark}"))
        reader = Reader(sock)
        status, headers, _ = reader.head()
        assert status == 200
        if "content-length" in headers:
            assert headers["content-length"] == str(FILE_SIZE)
        # the next response must follow the HEAD head directly: no body bytes between
        sock.sendall(build("GET", "/pid"))
        status, headers, raw = reader.head()
        assert raw.startswith(b"HTTP/1.1 200"), raw[:80]
        assert reader.body(headers).isdigit()
    wait_for(lambda: events(test_dir, mark) == ["close"])


# -- write() -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("only", b"written-1;written-2;"),
        ("mixed", b"written-1;written-2;iterated-1;iterated-2;"),
    ],
)
def test_write_callable(server, mode, expected):
    with server.connect() as sock:
        for _ in range(2):  # twice on one connection: the framing is right
            sock.sendall(build("GET", f"/write?mode={mode}"))
            status, _, body = read_response(sock)
            assert status == 200
            assert body == expected


# -- start_response and exc_info -------------------------------------------------------


@pytest.mark.parametrize("case", ["replace", "replace-after-empty-write"])
def test_exc_info_before_head_replaces_status(server, case):
    raw = fetch_closed(server, build("GET", f"/exc?case={case}", [("Connection", "close")]))
    assert raw.startswith(b"HTTP/1.1 503 Unavailable\r\n"), raw[:200]
    assert raw.count(b"HTTP/1.1 ") == 1
    assert INJECTED not in raw
    assert b"X-First" not in raw
    assert raw.partition(b"\r\n\r\n")[2] == b"second answer"


def test_start_response_twice_without_exc_info_is_an_error(server):
    raw = fetch_closed(server, build("GET", "/exc?case=again", [("Connection", "close")]))
    assert raw.startswith(b"HTTP/1.1 500 "), raw[:200]
    assert raw.count(b"HTTP/1.1 ") == 1
    assert INJECTED not in raw
    assert b"201" not in raw.split(b"\r\n", 1)[0]
    log_has(server, "GET /exc?case=again")


def test_exc_info_after_head_propagates_and_closes(server):
    with server.connect() as sock:
        sock.sendall(build("GET", "/exc?case=after"))
        reader = Reader(sock)
        status, _, _ = reader.head()
        assert status == 200
        rest = reader.rest()  # the server must close: no more response follows
    assert b"first part;" in rest
    assert b"HTTP/1.1" not in rest  # no second head
    assert INJECTED not in rest
    assert not rest.endswith(b"0\r\n\r\n")  # the body is not declared complete
    traceback_logged(server, "exc-info-after-head")


# -- close() of the iterable -----------------------------------------------------------


@pytest.mark.parametrize("path", ["/close", "/close-generator"])
def test_close_called_after_normal_completion(server, test_dir, path):
    mark = token()
    status, _, body = fetch(server, build("GET", f"{path}?case=normal&token={mark}"))
    assert status == 200
    assert body in (b"%016d%016d%016d" % (0, 1, 2), b"one;two;")
    wait_for(lambda: "close" in events(test_dir, mark))
    assert events(test_dir, mark).count("close") == 1


def test_close_called_when_iteration_raises(server, test_dir):
    mark = token()
    with server.connect() as sock:
        sock.sendall(build("GET", f"/close?case=raise&token={mark}"))
        reader = Reader(sock)
        status, _, _ = reader.head()
        assert status == 200
        rest = reader.rest()
    assert b"%016d" % 1 in rest
    assert not rest.endswith(b"0\r\n\r\n")
    wait_for(lambda: "close" in events(test_dir, mark))
    assert "exhausted" not in events(test_dir, mark)
    traceback_logged(server, f"{mark}: failed mid-iteration")


@pytest.mark.wallclock
@pytest.mark.parametrize("threads", MODES)
def test_close_called_when_client_disconnects(threads, test_dir):
    """A slow stream whose client goes away: close() is called long before it would end."""
    with Server("wsgi_apps", "--threads", threads, "-e", f"WSGI_TEST_DIR={test_dir}") as server:
        mark = token()
        with server.connect() as sock:
            sock.sendall(build("GET", f"/close?case=slow&token={mark}"))
            reader = Reader(sock)
            status, _, _ = reader.head()
            assert status == 200
            while len(reader.buffer) < 4096:
                assert reader.fill()
        # the stream would last 6 s; a prompt close() proves the disconnect was seen
        wait_for(lambda: "close" in events(test_dir, mark), timeout=4)
        assert "exhausted" not in events(test_dir, mark)
        # and the worker still answers
        assert fetch(server, build("GET", "/pid"))[0] == 200


# -- invalid status and headers from the application -----------------------------------

# what the error-log line must name, per case (a case-insensitive regex)
CONTROL = r"\b(CR|LF|NUL)\b|control char"
PROBLEM = {
    "value-crlf": CONTROL,
    "value-lf": CONTROL,
    "value-cr": CONTROL,
    "value-nul": CONTROL,
    "value-not-latin1": r"latin-?1",
    "value-not-str": r"not a str",
    "name-space": r"header name",
    "name-colon": r"header name",
    "name-nul": r"header name",
    "name-empty": r"header name",
    "status-letters": r"status",
    "status-two-digits": r"status",
    "status-four-digits": r"status",
    "status-crlf": r"status",
    "status-not-latin1": r"status",
}


@pytest.mark.parametrize("how", ["list", "write", "generator"])
@pytest.mark.parametrize("case", sorted(PROBLEM))
def test_invalid_status_or_header_gives_500(server, case, how):
    mark = token()
    target = f"/bad?case={case}&how={how}&token={mark}"
    raw = fetch_closed(server, build("GET", target, [("Connection", "close")]))
    assert raw.startswith(b"HTTP/1.1 500 "), raw[:300]
    assert raw.count(b"HTTP/1.1 ") == 1
    assert INJECTED not in raw, raw
    assert b"X-Ok" not in raw  # nothing of the rejected head went out
    line = log_has(server, mark)
    assert re.search(PROBLEM[case], line, re.IGNORECASE), line


# -- exceptions in the application -------------------------------------------------------


@pytest.mark.parametrize("when", ["before", "after-start", "empty-chunk"])
def test_exception_before_body_gives_500(server, when):
    pid = worker_pid(server)
    mark = token()
    raw = fetch_closed(
        server, build("GET", f"/raise?when={when}&token={mark}", [("Connection", "close")])
    )
    assert raw.startswith(b"HTTP/1.1 500 "), raw[:300]
    assert raw.count(b"HTTP/1.1 ") == 1
    assert INJECTED not in raw
    message = {
        "before": "before start_response",
        "after-start": "after start_response",
        "empty-chunk": "after an empty chunk",
    }[when]
    traceback_logged(server, f"{mark}: {message}")
    assert worker_pid(server) == pid
    assert server.worker_pids() == [pid]


def test_exception_after_first_chunk_closes_connection(server):
    pid = worker_pid(server)
    mark = token()
    with server.connect() as sock:
        sock.sendall(build("GET", f"/raise?when=after-body&token={mark}"))
        reader = Reader(sock)
        status, _, _ = reader.head()
        assert status == 200
        rest = reader.rest()
    assert b"first chunk;" in rest
    assert b"HTTP/1.1" not in rest
    assert not rest.endswith(b"0\r\n\r\n")
    traceback_logged(server, f"{mark}: after the first chunk")
    assert worker_pid(server) == pid


# -- wsgiref.validate ------------------------------------------------------------------


@pytest.mark.parametrize("threads", MODES)
def test_validated_application_runs_without_warnings(threads):
    body = b"first line\nsecond line\n\nthird line without newline"
    with Server("wsgi_apps:validated", "--threads", threads) as server:
        with server.connect() as sock:
            reader = Reader(sock)
            requests = [
                (build("GET", "/hello?x=1"), b"hello /hello"),
                (build("HEAD", "/hello"), b""),
                (build("GET", "/write"), b"written;iterated"),
                (build("GET", "/filewrapper"), b"wrapped bytes"),
            ]
            for path in ("/read", "/readline", "/readlines", "/iter"):
                requests.append((build("POST", path, body=body), body))
                requests.append((build("POST", path, chunks=[body[:9], body[9:]]), body))
                requests.append((build("POST", path, body=b""), b""))
            for data, expected in requests:
                sock.sendall(data)
                status, headers, _ = reader.head()
                assert status == 200, data
                got = b"" if data.startswith(b"HEAD") else reader.body(headers)
                assert got == expected, data
        assert server.stop() == 0
        log = server.stderr
    assert "Warning" not in log
    assert "AssertionError" not in log
    assert "without being closed" not in log
    assert "Traceback" not in log


@pytest.mark.parametrize("threads", MODES)
def test_sendfile_to_a_client_that_stopped_reading_is_dropped(test_dir, threads):
    """--send-timeout ends a sendfile that waits on the client, and frees its descriptors."""
    with open(test_dir / "huge.bin", "wb") as stream:
        stream.truncate(64 * 1024 * 1024)  # more than the socket buffers can take
    with Server(
        "wsgi_apps", "--threads", threads, "--send-timeout", "1", "-e", f"WSGI_TEST_DIR={test_dir}"
    ) as server:
        pid = worker_pid(server)
        baseline = len(os.listdir(f"/proc/{pid}/fd"))
        mark = token()
        with server.connect(timeout=30) as sock:
            sock.sendall(build("GET", f"/filewrapper?file=huge.bin&token={mark}"))
            wait_for(lambda: len(os.listdir(f"/proc/{pid}/fd")) > baseline)
            # reading nothing: past the timeout and its sweep, the worker lets go of the
            # socket and the file
            wait_for(lambda: len(os.listdir(f"/proc/{pid}/fd")) <= baseline)
            received = 0
            with contextlib.suppress(ConnectionResetError):
                while chunk := sock.recv(1 << 20):
                    received += len(chunk)
            assert 0 < received < 64 * 1024 * 1024
        wait_for(lambda: events(test_dir, mark) == ["close"])
        assert fetch(server, build("GET", "/pid"))[0] == 200
