"""Conformance gaps an external black-box suite found, and applications as NGINX Unit's samples
and old posts write them, through real corral processes.

- every answer corral writes itself (400, 408, 413, 414, 431, 500, 502, 503, 504, the control
  API's) carries ``Date`` and ``Server`` as the application's answers do;
- a field name of any token character reaches the application as Gunicorn maps it, a name
  with ``_`` does not (it would pose as the ``-`` spelling);
- an absolute-form target with an IPv6 host keeps the brackets in ``HTTP_HOST``;
- Transfer-Encoding in an HTTP/1.0 request, and the asterisk-form with a method other than
  OPTIONS, are 400 and the connection is closed;
- a control API body nested too deep is 400, not 500;
- a bare ``bytes`` return is the whole body; ``str`` is a 500 (or a closed connection once the
  head went out) and one log line; an ASGI application (of each kind asgi_kind tells, from a
  factory or preloaded) is served as ASGI.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest

from tests.integration.control import Control, listening_port, short_dir
from tests.integration.server import Server, http_get
from tests.integration.test_http import IMF_FIXDATE, LIMIT_FLAGS, Reader, Response, get

# every request here is answered by each core in turn
pytestmark = pytest.mark.usefixtures("each_core")

BYTES_RULE = "the response iterable must yield bytes"


def assert_own_fields(response: Response, server: str = "corral") -> None:
    """``Date`` (now, IMF-fixdate) and ``Server``, as on the application's answers."""
    date = response.get("date")
    assert date is not None and IMF_FIXDATE.match(date), response
    assert abs(parsedate_to_datetime(date).timestamp() - time.time()) < 5, date
    assert response.get("server") == server, response


def exchange(server: Server, data: bytes, *, method: str = "GET") -> tuple[Response, Reader]:
    sock = server.connect(timeout=5)
    sock.sendall(data)
    reader = Reader(sock)
    return reader.response(method), reader


def refused(server: Server, data: bytes) -> Response:
    """One error answer, ``Connection: close``, then the server closes."""
    response, reader = exchange(server, data)
    with reader.sock:
        reader.assert_closed()
    assert response.get("connection") == "close", response
    return response


@pytest.fixture(scope="module")
def limited(each_core: str) -> Iterator[Server]:
    """The test_http limits (line 100, 5 fields of 100 bytes, body 10, header timeout 1 s)."""
    with Server("conformance_apps", *LIMIT_FLAGS) as running:
        yield running
        assert running.proc.poll() is None, "the server died during the tests"


@pytest.fixture(scope="module")
def echo(each_core: str) -> Iterator[Server]:
    with Server("http_apps") as running:
        yield running
        assert "Traceback" not in running.stderr, running.stderr


# -- Date and Server on every answer corral writes ------------------------------------------


@pytest.mark.parametrize(
    ("status", "data"),
    [
        (400, b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n"),
        (413, b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n"),
        (414, get("/" + "a" * 200)),
        (431, get("/", "A: 1", "B: 2", "C: 3", "D: 4", "E: 5")),
        (500, get("/raise")),
    ],
)
def test_errors_carry_date_and_server(limited: Server, status: int, data: bytes) -> None:
    response = refused(limited, data)
    assert response.status == status
    assert_own_fields(response)
    # and as the application's own answer does
    answer, reader = exchange(limited, get("/", "Connection: close"))
    with reader.sock:
        assert (answer.status, answer.body) == (200, b"ok")
        assert_own_fields(answer)


def test_408_carries_date_and_server(limited: Server) -> None:
    response = refused(limited, b"GET / HTTP/1.1\r\nHost: a\r\n")  # the head never ends
    assert response.status == 408
    assert_own_fields(response)


def test_504_carries_date_and_server(tmp_path: Path) -> None:
    with Server(
        "deadline_apps", "--request-timeout", "1", env={"DEADLINE_DIR": str(tmp_path)}
    ) as server:
        response = refused(server, get("/busy"))
        assert response.status == 504
        assert_own_fields(response)


def test_route_answers_and_the_control_api_carry_date_and_server() -> None:
    """Unit's ``return`` (502, 503 as a route gives them) and every control API answer, with
    the document's ``server_header``."""
    routes = [
        {"match": {"uri": "/bad-gateway"}, "action": {"return": 502}},
        {"match": {"uri": "/unavailable"}, "action": {"return": 503}},
        {"action": {"pass": "applications/a"}},
    ]
    doc = {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": routes,
        "applications": {"a": {"type": "python", "module": "conformance_apps"}},
        "settings": {"server_header": "edge"},
    }
    with short_dir() as directory:
        config = directory / "unit.json"
        config.write_text(json.dumps(doc))
        control_at = f"unix:{directory}/control.sock"
        with Server(f"--config={config}", f"--control={control_at}", bind=None) as server:
            server.port = listening_port(server, "127.0.0.1:0")
            for path, status in (("/bad-gateway", 502), ("/unavailable", 503), ("/", 200)):
                response, reader = exchange(server, get(path, "Connection: close"))
                with reader.sock:
                    assert response.status == status
                    assert_own_fields(response, "edge")
            control = Control(control_at)
            for answer in (
                control.get("/config"),
                control.get("/nowhere"),
                control.put("/config/settings", b"[" * 100 + b"]" * 100),
            ):
                assert answer.status in (200, 400, 404)
                date = answer.headers["date"]
                assert IMF_FIXDATE.match(date), answer.headers
                assert answer.headers["server"] == "edge"


# -- request conformance ----------------------------------------------------------------------


def test_field_names_of_any_token_character_reach_the_application(echo: Server) -> None:
    response, reader = exchange(
        echo,
        get(
            "/echo",
            "X.Custom|Pipe: pipe",
            "X-!#$%&'*+.^`|~: marks",
            "X_Forwarded_For: 6.6.6.6",
            "X-Forwarded-For: 1.2.3.4",
            "Connection: close",
        ),
    )
    with reader.sock:
        headers = response.json()["headers"]
    assert headers == {
        "HTTP_HOST": "example.com",
        "HTTP_X.CUSTOM|PIPE": "pipe",
        "HTTP_X_!#$%&'*+.^`|~": "marks",
        "HTTP_X_FORWARDED_FOR": "1.2.3.4",  # the "_" spelling cannot pose as it
        "HTTP_CONNECTION": "close",
    }


@pytest.mark.parametrize(
    ("target", "host"),
    [
        (b"http://[::1]:8080/echo", "[::1]:8080"),
        (b"http://[2001:db8::1]/echo", "[2001:db8::1]"),
        (b"http://127.0.0.1:8080/echo", "127.0.0.1:8080"),
    ],
)
def test_absolute_form_ipv6_host_keeps_its_brackets(echo: Server, target: bytes, host: str):
    data = b"GET " + target + b" HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n"
    response, reader = exchange(echo, data)
    with reader.sock:
        assert response.json()["headers"]["HTTP_HOST"] == host


def test_transfer_encoding_in_http10_is_400_and_closed(echo: Server) -> None:
    ok = b"GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
    bad = b"POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
    sock = echo.connect(timeout=5)
    with sock:
        sock.sendall(ok + bad + b"5\r\nhello\r\n0\r\n\r\n")
        reader = Reader(sock)
        assert reader.response().status == 200  # the request before it is answered
        response = reader.response()
        assert response.status == 400 and response.get("connection") == "close"
        assert b"hello" not in response.body
        reader.assert_closed()


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "DELETE"])
def test_asterisk_form_with_another_method_than_options_is_400(echo: Server, method: str):
    data = f"{method} * HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n".encode()
    # read as a GET's: the refusal comes from the parser, before the method is known, and
    # carries its short body whatever the method (the connection closes after it)
    response, reader = exchange(echo, data)
    with reader.sock:
        assert response.status == 400 and response.get("connection") == "close"
        reader.assert_closed()


def test_asterisk_form_options_is_served(echo: Server) -> None:
    response, reader = exchange(echo, b"OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    with reader.sock:
        assert response.status == 200


def test_a_control_body_nested_too_deep_is_400() -> None:
    with (
        short_dir() as directory,
        Server("conformance_apps", f"--control=unix:{directory}/c.sock") as server,
    ):
        control = Control.of(server)
        before = control.get("/config").json
        for depth in (65, 100_000):
            answer = control.put("/config/settings", b"[" * depth + b"]" * depth)
            assert answer.status == 400, answer
            assert answer.json == {
                "error": "Invalid JSON.",
                "detail": "the JSON value is nested deeper than 64 levels",
            }
        deep = {"a": 1}
        for _ in range(63):
            deep = {"a": deep}
        answer = control.put("/config/settings/http", deep)  # deep enough, but not a setting
        assert answer.status == 400 and answer.json["error"] == "Invalid configuration."
        assert control.get("/config").json == before
        assert "Traceback" not in server.stderr
        assert server.stop() == 0


# -- applications as Unit's samples and old posts write them ----------------------------------


@pytest.fixture(scope="module")
def samples(each_core: str) -> Iterator[Server]:
    with Server("conformance_apps") as running:
        yield running


def test_a_bare_bytes_return_is_the_whole_body(samples: Server) -> None:
    logged = samples.stderr.count(BYTES_RULE)  # by the tests of str bodies, if they ran first
    response, reader = exchange(samples, get("/unit-sample"))
    with reader.sock:
        assert (response.status, response.body) == (200, b"Hello, Unit!")
        assert response.get("content-length") == "12"
    response, reader = exchange(samples, get("/bytes-after-write", "Connection: close"))
    with reader.sock:
        assert (response.status, response.body) == (200, b"head;tail")
    assert samples.stderr.count(BYTES_RULE) == logged


@pytest.mark.parametrize("path", ["/str", "/str-list", "/str-write"])
def test_a_str_body_is_500_and_one_log_line(samples: Server, path: str) -> None:
    before = samples.stderr.count(BYTES_RULE)
    response, reader = exchange(samples, get(path))
    with reader.sock:
        assert response.status == 500
        assert_own_fields(response)
        reader.assert_closed()
    line = samples.wait_log(rf"\[ERROR\] .*GET {path}: {BYTES_RULE}.*, not str", count=1)
    assert line
    assert samples.stderr.count(BYTES_RULE) == before + 1  # one line, not a traceback
    assert "Traceback" not in samples.stderr


def test_a_str_after_the_head_closes_the_connection_with_one_log_line(samples: Server) -> None:
    before = samples.stderr.count(BYTES_RULE)
    sock = samples.connect(timeout=5)
    with sock:
        sock.sendall(get("/str-later"))
        reader = Reader(sock)
        with pytest.raises((EOFError, AssertionError)):
            reader.response()  # the chunked body never ends: the connection closes
        assert b"first;" in reader.buffer or reader.buffer == b""
    samples.wait_log(rf"GET /str-later: {BYTES_RULE}")
    assert samples.stderr.count(BYTES_RULE) == before + 1
    assert "Traceback" not in samples.stderr


@pytest.mark.parametrize("callable_", ["asgi_coroutine", "asgi_instance", "AsgiClass"])
def test_an_asgi_application_is_served_as_asgi(callable_: str) -> None:
    with Server(f"conformance_apps:{callable_}") as server:
        status, body = http_get(server, "/")
        assert (status, body) == (200, b"asgi")
        assert "Traceback" not in server.stderr


def test_an_asgi_application_from_a_factory_or_preloaded_is_served_too(tmp_path: Path) -> None:
    config = tmp_path / "corral.toml"
    config.write_text('app = "conformance_apps:make_asgi"\nfactory = true\nbind = ["127.0.0.1:0"]')
    for extra in ((), ("--preload",)):
        with Server(f"--config={config}", *extra, bind=None) as server:
            assert http_get(server, "/") == (200, b"asgi")
            assert "Traceback" not in server.stderr
