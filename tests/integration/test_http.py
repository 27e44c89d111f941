"""HTTP/1.1 through a real corral process: persistence, pipelining, framing, limits, smuggling.

Every test talks raw bytes over a real socket to ``python -m corral http_apps``
(tests/integration/apps/http_apps.py) and reads the answer with a strict
response reader, so that framing errors on the server's side show up as
failures here rather than being smoothed over by a client library.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime

import pytest

from tests.integration.server import Server, read_all, wait_for
from tests.integration.sockets import send_each_in_its_own_read

# every request here is answered by each core in turn
pytestmark = pytest.mark.usefixtures("each_core")

IMF_FIXDATE = re.compile(
    r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"\d{4} \d\d:\d\d:\d\d GMT\Z"
)
STATUS_LINE = re.compile(rb"HTTP/1\.1 (\d{3}) [^\r\n]*\Z")
LIMIT_FLAGS = (
    "--limit-request-line",
    "100",
    "--limit-request-fields",
    "5",
    "--limit-request-field_size",
    "100",
    "--limit-request-body",
    "10",
    "--header-timeout",
    "1",
)


# -- a strict response reader -------------------------------------------------------------------


class Response:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes, raw_head: bytes):
        self.status = status
        self.headers = headers
        self.body = body
        self.raw_head = raw_head

    def get(self, name: str) -> str | None:
        values = self.all(name)
        assert len(values) <= 1, f"{name} repeated: {self.headers}"
        return values[0] if values else None

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name.lower()]

    def json(self) -> dict:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.headers} {self.body[:200]!r}>"


class Reader:
    """Reads responses one by one from a socket, checking their framing."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError(f"connection closed; unread {self.buffer!r}")
        self.buffer += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            self._more()
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._more()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def head(self) -> tuple[int, list[tuple[str, str]], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        raw, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        match = STATUS_LINE.match(lines[0])
        assert match, f"bad status line {lines[0]!r}"
        headers = []
        for line in lines[1:]:
            assert b"\n" not in line and b"\r" not in line, line
            name, sep, value = line.partition(b":")
            assert sep and re.fullmatch(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name), line
            headers.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
        return int(match.group(1)), headers, raw

    def response(self, method: str = "GET") -> Response:
        """The next final response (1xx are returned too: call again for the final one)."""
        status, headers, raw = self.head()
        response = Response(status, headers, b"", raw)
        if method == "HEAD" or status < 200 or status in (204, 304):
            return response
        if response.get("transfer-encoding") is not None:
            assert response.get("transfer-encoding") == "chunked", headers
            assert response.get("content-length") is None, "both CL and TE sent"
            response.body = self._chunked()
        elif response.get("content-length") is not None:
            response.body = self._exactly(int(response.get("content-length")))
        else:
            assert response.get("connection") == "close", f"unframed body needs close: {headers}"
            response.body = self.buffer + read_all(self.sock)
            self.buffer = b""
        return response

    def _chunked(self) -> bytes:
        body = b""
        while True:
            line = self._line()
            assert re.fullmatch(rb"[0-9a-fA-F]+", line), f"bad chunk size line {line!r}"
            size = int(line, 16)
            if size == 0:
                assert self._line() == b"", "no trailers expected"
                return body
            body += self._exactly(size)
            assert self._exactly(2) == b"\r\n", "chunk data not followed by CRLF"

    def assert_closed(self) -> None:
        """The server closed the connection and sent nothing more."""
        assert self.buffer == b"", f"unexpected bytes {self.buffer!r}"
        try:
            rest = self.sock.recv(65536)
        except ConnectionResetError:
            rest = b""
        assert rest == b"", f"unexpected bytes after the response: {rest!r}"


def get(path: str, *lines: str, version: str = "1.1", method: str = "GET") -> bytes:
    host = ["Host: example.com"] if version == "1.1" else []
    head = [f"{method} {path} HTTP/{version}", *host, *lines]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")


@pytest.fixture(scope="module")
def server(each_core: str) -> Iterator[Server]:
    with Server("http_apps") as running:
        yield running
        assert running.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in running.stderr, running.stderr


@pytest.fixture(scope="module")
def limited(each_core: str) -> Iterator[Server]:
    with Server("http_apps", *LIMIT_FLAGS) as running:
        yield running
        assert running.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in running.stderr, running.stderr


@pytest.fixture(scope="module")
def targets(each_core: str) -> Iterator[Server]:
    """For odd request-targets; its error log is not checked (a 500 logs a traceback)."""
    with Server("http_apps") as running:
        yield running


def connect(server: Server) -> tuple[socket.socket, Reader]:
    sock = server.connect(timeout=5)
    return sock, Reader(sock)


def serves_normally(server: Server) -> None:
    with server.connect(timeout=5) as sock:
        sock.sendall(get("/", "Connection: close"))
        reader = Reader(sock)
        response = reader.response()
        assert (response.status, response.body) == (200, b"hello")
        reader.assert_closed()


# -- persistence --------------------------------------------------------------------------------


def test_keep_alive_several_requests_on_one_socket(server):
    sock, reader = connect(server)
    with sock:
        for n in range(5):
            sock.sendall(get(f"/echo?n={n}"))
            response = reader.response()
            assert response.status == 200
            assert response.json()["QUERY_STRING"] == f"n={n}"
            assert response.get("connection") is None
        sock.sendall(get("/", "Connection: close"))
        response = reader.response()
        assert response.body == b"hello"
        assert response.get("connection") == "close"
        reader.assert_closed()


def test_http10_without_keep_alive_closes(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(get("/echo", version="1.0"))
        response = reader.response()
        assert response.status == 200
        assert response.json()["SERVER_PROTOCOL"] == "HTTP/1.0"
        assert response.get("connection") == "close"
        reader.assert_closed()


def test_http10_with_keep_alive_stays_open(server):
    sock, reader = connect(server)
    with sock:
        for n in range(3):
            sock.sendall(get(f"/echo?n={n}", "Connection: keep-alive", version="1.0"))
            response = reader.response()
            assert response.status == 200
            assert response.json()["QUERY_STRING"] == f"n={n}"
            assert response.get("connection").lower() == "keep-alive"
        sock.sendall(get("/", version="1.0"))
        assert reader.response().body == b"hello"
        reader.assert_closed()


def test_keep_alive_zero_announces_close():
    """--keep-alive 0 closes after each response, so it must say so (RFC 9112 9.6)."""
    with Server("http_apps", "--keep-alive", "0") as running:
        sock, reader = connect(running)
        with sock:
            sock.sendall(get("/"))
            response = reader.response()
            assert response.status == 200
            assert response.get("connection") == "close"
            reader.assert_closed()


# -- pipelining ---------------------------------------------------------------------------------


def test_pipelined_three_in_one_write_answered_in_order(server):
    sock, reader = connect(server)
    with sock:
        # the first is the slowest: answers must still come in request order
        sock.sendall(get("/sleep", "X-N: 0") + get("/echo?n=1") + get("/echo?n=2"))
        sock.sendall(get("/sleep?0.2") + get("/echo?n=3") + get("/echo?n=4", "Connection: close"))
        assert reader.response().json() == {"slept": ""}
        assert reader.response().json()["QUERY_STRING"] == "n=1"
        assert reader.response().json()["QUERY_STRING"] == "n=2"
        assert reader.response().json() == {"slept": "0.2"}
        assert reader.response().json()["QUERY_STRING"] == "n=3"
        assert reader.response().json()["QUERY_STRING"] == "n=4"
        reader.assert_closed()


def test_pipelined_with_bodies(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(
            b"POST /echo?n=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nfirst"
            b"POST /echo?n=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nsec\r\n3\r\nond\r\n0\r\n\r\n"
            b"PUT /echo?n=3 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"
            b"POST /echo?n=4 HTTP/1.1\r\nHost: a\r\nContent-Length: 14\r\nConnection: close\r\n"
            b"\r\nGET / HTTP/1.1"
        )
        bodies = []
        for n in (1, 2, 3, 4):
            data = reader.response().json()
            assert data["QUERY_STRING"] == f"n={n}"
            bodies.append(data["body"])
        # the last body looks like a request line: it must stay a body
        assert bodies == ["first", "second", "", "GET / HTTP/1.1"]
        reader.assert_closed()


def test_connection_close_request_is_answered_even_if_more_bytes_follow(server):
    """RFC 9112 9.6: answer the request with "close", then close; never 400 it."""
    sock, reader = connect(server)
    with sock:
        sock.sendall(get("/echo?n=1", "Connection: close") + get("/echo?n=2"))
        response = reader.response()
        assert response.status == 200
        assert response.json()["QUERY_STRING"] == "n=1"
        reader.assert_closed()


def test_http10_request_is_answered_even_if_more_bytes_follow(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(get("/echo?n=1", version="1.0") + get("/echo?n=2", version="1.0"))
        response = reader.response()
        assert response.status == 200
        assert response.json()["QUERY_STRING"] == "n=1"
        reader.assert_closed()


# -- chunked bodies -----------------------------------------------------------------------------


def test_chunked_request_body_reaches_the_app(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(
            b"POST /echo HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'5;ext=1\r\nhello\r\n1\r\n \r\nA;q="x;y"\r\n0123456789\r\n'
            b"0\r\nX-Trailer: t\r\nHost: evil.example\r\n\r\n"
        )
        data = reader.response().json()
        assert data["body"] == "hello 0123456789"
        assert "CONTENT_LENGTH" not in data
        assert "HTTP_X_TRAILER" not in data["headers"]
        assert data["headers"]["HTTP_HOST"] == "example.com"
        assert data["headers"]["HTTP_TRANSFER_ENCODING"] == "chunked"
        # and the connection is still usable
        sock.sendall(get("/", "Connection: close"))
        assert reader.response().body == b"hello"
        reader.assert_closed()


def test_chunked_request_body_byte_by_byte(server):
    body = b"4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n"
    sock, reader = connect(server)
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(
            b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )
        # each byte read alone (bytes sent one by one may still arrive together)
        send_each_in_its_own_read(sock, [body[i : i + 1] for i in range(len(body))])
        assert reader.response().json()["body"] == "Wikipedia"
        reader.assert_closed()


def test_chunked_response_when_the_app_gives_no_length(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(get("/stream"))
        response = reader.response()  # the reader checks the chunk framing strictly
        assert response.status == 200
        assert response.get("transfer-encoding") == "chunked"
        assert response.get("content-length") is None
        # the app's empty chunk in the middle must not end the body early
        assert response.body == b"onetwothree"
        sock.sendall(get("/", "Connection: close"))
        assert reader.response().body == b"hello"
        reader.assert_closed()


def test_http10_response_without_length_is_close_delimited(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(get("/stream", "Connection: keep-alive", version="1.0"))
        response = reader.response()
        assert response.status == 200
        assert response.get("transfer-encoding") is None
        assert response.get("content-length") is None
        assert response.get("connection") == "close"
        assert response.body == b"onetwothree"  # read until the server closed


# -- 100-continue -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def streaming(each_core: str) -> Iterator[Server]:
    """Bodies streamed to the application (`--no-request-buffering`): ``100 Continue`` waits
    for its first read (with one thread, on the helper thread)."""
    with Server("http_apps", "--no-request-buffering") as running:
        yield running
        assert "Traceback" not in running.stderr, running.stderr


def test_100_continue_arrives_after_the_app_starts_reading(streaming):
    sock, reader = connect(streaming)
    with sock:
        sent = time.time()
        sock.sendall(
            b"POST /slow-read?a HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
            b"Content-Length: 5\r\n\r\n"
        )
        interim = reader.response()
        arrived = time.time()
        assert interim.status == 100
        assert interim.raw_head == b"HTTP/1.1 100 Continue"
        assert reader.buffer == b""
        sock.sendall(b"hello")
        final = reader.response()
        assert final.status == 200
        data = final.json()
        assert data["body"] == "hello"
        # the app slept 0.3 s, then noted the time, then read: 100 can only come after
        assert arrived >= data["read_started"] >= sent
        sock.sendall(get("/", "Connection: close"))
        assert reader.response().body == b"hello"
        reader.assert_closed()


def test_no_100_continue_when_the_app_never_reads(streaming):
    sock, reader = connect(streaming)
    with sock:
        sock.sendall(
            b"POST /no-read HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
            b"Content-Length: 5\r\n\r\n"
        )
        final = reader.response()
        assert final.status == 200, "nothing may come before the final response"
        assert final.body == b"done"
        # the body was never sent: the server cannot reuse the connection
        reader.assert_closed()


def test_100_continue_with_chunked_body(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(
            b"POST /slow-read?c HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        assert reader.response().status == 100
        sock.sendall(b"2\r\nok\r\n0\r\n\r\n")
        assert reader.response().json()["body"] == "ok"
        reader.assert_closed()


def test_no_100_continue_for_http10():
    """RFC 9110 10.1.1: a 100-continue expectation in HTTP/1.0 MUST be ignored.

    With two threads and bodies streamed, the application runs (and reads) before the body
    is sent, whatever the server makes of the expectation.
    """
    with Server("http_apps", "--threads", "2", "--no-request-buffering") as running:
        sock, reader = connect(running)
        with sock:
            sock.sendall(
                b"POST /slow-read?http10 HTTP/1.0\r\nExpect: 100-continue\r\n"
                b"Content-Length: 5\r\n\r\n"
            )
            running.wait_log(r"slow-read http10 reading")  # the app is reading now
            sock.sendall(b"hello")
            final = reader.response()
            assert final.status == 200, "no 100 Continue may be sent to an HTTP/1.0 client"
            assert final.json()["body"] == "hello"
            reader.assert_closed()


def test_100_continue_with_threads():
    with Server("http_apps", "--threads", "2") as running:
        sock, reader = connect(running)
        with sock:
            sock.sendall(
                b"POST /slow-read?t HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                b"Content-Length: 2\r\nConnection: close\r\n\r\n"
            )
            assert reader.response().status == 100
            sock.sendall(b"ok")
            assert reader.response().json()["body"] == "ok"
            reader.assert_closed()


# -- HEAD, Date, Server -------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/gen", "/echo"])
def test_head_never_carries_a_body(server, path):
    sock, reader = connect(server)
    with sock:
        sock.sendall(get(path, method="HEAD") + get("/", "Connection: close"))
        head = reader.response("HEAD")
        assert head.status == 200
        if path == "/":
            assert head.get("content-length") == "5"
        # the next bytes are the next response, not a body
        follow = reader.response()
        assert (follow.status, follow.body) == (200, b"hello")
        reader.assert_closed()


def test_head_http10_generator_sends_no_body(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(get("/gen", version="1.0", method="HEAD"))
        assert reader.response("HEAD").status == 200
        reader.assert_closed()


def test_204_has_no_body_and_keeps_the_connection(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(get("/no-content") + get("/", "Connection: close"))
        response = reader.response()
        assert response.status == 204
        assert response.get("content-length") is None
        assert response.get("transfer-encoding") is None
        assert reader.response().body == b"hello"
        reader.assert_closed()


@pytest.mark.wallclock
def test_date_and_server_headers(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(get("/", "Connection: close"))
        response = reader.response()
        date = response.get("date")
        assert date is not None and IMF_FIXDATE.match(date), date
        assert abs(parsedate_to_datetime(date).timestamp() - time.time()) < 5
        assert response.get("server") == "corral"


def test_server_header_can_be_removed():
    with Server("http_apps", "--server-header=") as running:
        sock, reader = connect(running)
        with sock:
            sock.sendall(get("/", "Connection: close"))
            response = reader.response()
            assert response.status == 200
            assert response.all("server") == []
            assert response.get("date") is not None


def test_server_header_can_be_changed():
    with Server("http_apps", "--server-header=Foo") as running:
        sock, reader = connect(running)
        with sock:
            sock.sendall(get("/", "Connection: close"))
            assert reader.response().all("server") == ["Foo"]


# -- targets ------------------------------------------------------------------------------------


def test_absolute_form_target(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(
            b"GET http://example.com:8080/echo/p%20q?x=1 HTTP/1.1\r\nHost: other.example\r\n"
            b"Connection: close\r\n\r\n"
        )
        data = reader.response().json()
        assert data["PATH_INFO"] == "/echo/p q"
        assert data["QUERY_STRING"] == "x=1"
        assert data["RAW_URI"] == "http://example.com:8080/echo/p%20q?x=1"
        # RFC 9112 3.2.2: the target's authority replaces Host
        assert data["headers"]["HTTP_HOST"] == "example.com:8080"


def test_triple_slash_and_encoded_slash(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(b"GET ///a%2Fb HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        data = reader.response().json()
        assert data["RAW_URI"] == "///a%2Fb"
        assert data["REQUEST_URI"] == "///a%2Fb"
        assert data["PATH_INFO"] == "///a/b"


@pytest.mark.parametrize(
    "target",
    [b"http://[::1/x", b"http://example.com:http/x", b"http:///x", b"http://", b"http://a@b@c/x"],
)
def test_invalid_absolute_form_gets_400_not_500(targets, target):
    """RFC 9112 3.2 / RFC 9110 4.2.1: an invalid request-target is the client's error."""
    sock, reader = connect(targets)
    with sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: a\r\n\r\n")
        assert reader.response().status == 400
        reader.assert_closed()


@pytest.mark.parametrize("target", [b"http://a:/echo", b"http://exattp://example.com/echo"])
def test_absolute_form_with_empty_port_is_served(targets, target):
    """RFC 3986 3.2.3: port = *DIGIT, so "a:" is host a with an empty port; the path of the
    second is "//example.com/echo". Serving it or refusing it are both fine; 500 is not."""
    sock, reader = connect(targets)
    with sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        assert reader.response().status in (200, 400)
        reader.assert_closed()


def test_http11_without_host_is_400_and_closed(server):
    sock, reader = connect(server)
    with sock:
        sock.sendall(b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n")
        assert reader.response().status == 400
        reader.assert_closed()


# -- limits -------------------------------------------------------------------------------------


def refused(server: Server, data: bytes) -> Response:
    """Send ``data``; the answer must be one error response, then the server closes."""
    sock, reader = connect(server)
    with sock:
        sock.sendall(data)
        response = reader.response()
        reader.assert_closed()
    assert response.get("connection") == "close"
    return response


def test_limits_allow_requests_at_the_limit(limited):
    sock, reader = connect(limited)
    with sock:
        target = "/echo?" + "q" * (100 - len("GET /echo? HTTP/1.1"))
        sock.sendall(get(target, "A: 1", "B: 2", "C: 3", "X-Big: " + "v" * 95))
        assert reader.response().status == 200
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789")
        assert reader.response().json()["body"] == "0123456789"
        sock.sendall(
            b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n"
        )
        assert reader.response().json()["body"] == "0123456789"
        reader.assert_closed()


def test_limit_request_line_gives_414(limited):
    # "GET " + target + " HTTP/1.1" is 101 bytes: one over the limit
    assert refused(limited, get("/echo?" + "q" * 82)).status == 414
    assert refused(limited, get("/" + "a" * 5000)).status == 414


def test_limit_request_fields_gives_431(limited):
    assert refused(limited, get("/", "A: 1", "B: 2", "C: 3", "D: 4", "E: 5")).status == 431


def test_limit_request_field_size_gives_431(limited):
    assert refused(limited, get("/", "X-Big: " + "v" * 96)).status == 431


def test_limit_request_body_content_length_gives_413(limited):
    # only the head: the refusal comes before any body byte is read
    data = b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n"
    assert refused(limited, data).status == 413


def test_limit_request_body_chunked_gives_413(limited):
    data = (
        b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"6\r\n012345\r\n5\r\n6789A\r\n"
    )
    assert refused(limited, data).status == 413


def test_trailer_fields_are_limited_too(limited):
    """A trailer field over limit_request_field_size must not be accepted silently."""
    data = (
        b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n0\r\nX-Trailer: " + b"t" * 1000 + b"\r\n\r\n"
    )
    assert refused(limited, data).status in (400, 431)


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n",
        b"GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ],
    ids=["nul-in-value", "ctl-in-target", "obs-fold", "tls-hello", "two-hosts"],
)
def test_malformed_gives_400(limited, data):
    assert refused(limited, data).status == 400


@pytest.mark.wallclock
def test_header_timeout_gives_408(limited):
    sock, reader = connect(limited)
    with sock:
        start = time.monotonic()
        sock.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n")
        sock.settimeout(2.75)
        response = reader.response()
        assert time.monotonic() - start < 2.75
        assert response.status == 408
        reader.assert_closed()


@pytest.mark.wallclock
def test_header_timeout_on_a_silent_connection_closes_quietly(limited):
    with limited.connect(timeout=2.75) as sock:
        start = time.monotonic()
        assert read_all(sock) == b""
        assert time.monotonic() - start < 2.75


@pytest.mark.parametrize(
    "data",
    [
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc",
        b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc",
    ],
    ids=["content-length", "chunked"],
)
def test_half_closed_client_with_incomplete_body_is_closed(data):
    """After the client's FIN the body can never complete (RFC 9112 8): close, maybe 400.

    Its own server: a connection left open would hold up a graceful stop (hence 1 s).
    """
    with Server("http_apps", "--graceful-timeout", "1") as running:
        answer = half_closed(running, data)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400 "), answer


def half_closed(server: Server, data: bytes) -> bytes:
    with server.connect(timeout=2) as sock:
        # if the server keeps it open, our close resets it rather than leave it to linger
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        return read_all(sock)  # TimeoutError if the server keeps the connection


def test_limits_server_still_serves(limited):
    serves_normally(limited)


# -- smuggling ----------------------------------------------------------------------------------

SMUGGLED = b"GET /echo?smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
POST_HEAD = b"POST /echo HTTP/1.1\r\nHost: a\r\n"
SMUGGLING = {
    "cl-te": POST_HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te-cl": POST_HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n0\r\n\r\n",
    "cl-cl": POST_HEAD + b"Content-Length: 0\r\nContent-Length: 40\r\n\r\n",
    "te-gzip": POST_HEAD + b"Transfer-Encoding: gzip\r\n\r\n",
    "te-chunked-gzip": POST_HEAD + b"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
    "te-xchunked": POST_HEAD + b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
    # a coding corral does not implement before chunked: the application would read gzip's
    # bytes as the body (501, as nginx answers; RFC 9112 6.1)
    "te-gzip-chunked": POST_HEAD + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "te-two-lines": POST_HEAD + b"Transfer-Encoding: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\n",
    "te-space-colon": POST_HEAD + b"Transfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\n"
    b"0\r\n\r\n",
    "cl-space-colon": POST_HEAD + b"Content-Length : 5\r\n\r\n0\r\n\r\n",
    "te-obs-fold": POST_HEAD + b"Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n",
    "cl-plus": POST_HEAD + b"Content-Length: +5\r\n\r\n12345",
    "cl-bare-cr": POST_HEAD + b"X-A: b\rContent-Length: 5\r\n\r\n12345",
    "chunk-0x": POST_HEAD + b"Transfer-Encoding: chunked\r\n\r\n0x5\r\n12345\r\n0\r\n\r\n",
    "chunk-overflow": POST_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    b"10000000000000005\r\n12345\r\n0\r\n\r\n",
    "chunk-bare-lf": POST_HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\n12345\n0\n\n",
    "chunk-too-long": POST_HEAD + b"Transfer-Encoding: chunked\r\n\r\n1\r\n12345\r\n0\r\n\r\n",
    "http-2": b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(SMUGGLING))
def test_smuggling_vectors_refused_and_closed(server, name):
    data = SMUGGLING[name] + SMUGGLED
    sock, reader = connect(server)
    with sock:
        sock.sendall(data)
        response = reader.response()
        want = {"http-2": 505, "te-gzip-chunked": 501, "te-two-lines": 501}.get(name, 400)
        assert response.status == want, response
        assert b"smuggled" not in response.body
        reader.assert_closed()
    serves_normally(server)


@pytest.mark.parametrize(
    "host", [b"a b", b"example.com/admin", b"user@example.com", b"example.com:80a", b"[::1"]
)
def test_an_invalid_host_is_refused_and_closed(server, host):
    """RFC 9112 3.2: 400 for a Host that is not ``uri-host [ ":" port ]``: an application
    that builds its links from Host would write what a client put there."""
    sock, reader = connect(server)
    with sock:
        sock.sendall(b"GET /echo HTTP/1.1\r\nHost: " + host + b"\r\n\r\n" + SMUGGLED)
        response = reader.response()
        assert response.status == 400, response
        reader.assert_closed()
    for valid in (b"[::1]:8080", b"", b"my_host.example:"):
        sock, reader = connect(server)
        with sock:
            sock.sendall(b"GET /echo HTTP/1.1\r\nHost: " + valid + b"\r\n\r\n")
            assert reader.response().status == 200, valid
    serves_normally(server)


def test_server_alive_after_everything(server):
    assert server.proc.poll() is None
    serves_normally(server)
    wait_for(lambda: server.worker_pids(), timeout=5)
