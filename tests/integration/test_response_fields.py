"""The fields corral writes itself, when the application gives them too (issue 31, point 2),
through real corral processes, for WSGI and ASGI on each request core.

- ``Date`` and ``Server``: the application's is sent instead of corral's, never beside it
  (RFC 9110 6.6.1: one ``Date``; Flask's ``send_file`` sets one), whether the body's length
  is known or not, in a WebSocket 101 too; an answer without them on the same connection
  has corral's again; with ``--server-header=`` the application's ``Server`` alone.
- ``Content-Length`` frames the body, sent once (given twice alike, too).
- ``Transfer-Encoding``: corral frames the body itself, one framing (Content-Length, chunked
  or the close), never two.
- ``Connection: close`` closes after the answer and is sent once; ``keep-alive`` is never
  repeated.

The applications are tests/integration/apps/field_apps.py: each answers ``ok`` with the
fields its query string names. docs/settings.md ("Responses") lists what corral does with
each field.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from urllib.parse import quote, urlencode

import pytest

from corral.http.uwsgi import packet
from tests.integration import wsclient
from tests.integration.server import Server
from tests.integration.test_http import IMF_FIXDATE, Reader, Response, get
from tests.integration.test_uwsgi import UWSGI_LISTENING, exchange, nginx_vars

pytestmark = pytest.mark.usefixtures("each_core")

APPS = {"wsgi": "field_apps:application", "asgi": "field_apps:asgi_app"}
APP_DATE = "Sat, 01 Jan 2000 00:00:00 GMT"
APP_SERVER = "app-server/1.0"


@pytest.fixture(scope="module", params=sorted(APPS))
def server(request: pytest.FixtureRequest, each_core: str) -> Iterator[Server]:
    with Server(APPS[request.param]) as running:
        yield running
        assert running.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in running.stderr, running.stderr


@pytest.fixture(scope="module", params=sorted(APPS))
def uwsgi(request: pytest.FixtureRequest, each_core: str) -> Iterator[tuple[str, int]]:
    """The address of a listener of the uwsgi protocol (nginx's ``uwsgi_pass``)."""
    with Server(APPS[request.param], "--uwsgi-socket", "127.0.0.2:0") as running:
        match = UWSGI_LISTENING.search(running.stderr)
        assert match, running.stderr
        yield match[1], int(match[2])


@pytest.fixture(scope="module", params=sorted(APPS))
def serverless(request: pytest.FixtureRequest, each_core: str) -> Iterator[Server]:
    """``--server-header=``: corral sends no ``Server`` of its own."""
    with Server(APPS[request.param], "--server-header=") as running:
        yield running


@pytest.fixture(scope="module")
def asgi(each_core: str) -> Iterator[Server]:
    with Server(APPS["asgi"]) as running:
        yield running


def target(path: str, *fields: tuple[str, str]) -> str:
    return f"{path}?{urlencode(fields, quote_via=quote)}" if fields else path


def ask(reader: Reader, path: str, *fields: tuple[str, str], version: str = "1.1",
        lines: tuple[str, ...] = ()) -> Response:  # fmt: skip
    """One request on ``reader``'s connection, answered ``ok``."""
    reader.sock.sendall(get(target(path, *fields), *lines, version=version))
    response = reader.response()
    assert (response.status, response.body) == (200, b"ok"), response
    return response


def connect(server: Server) -> Reader:
    return Reader(server.connect(timeout=5))


def assert_corrals_date(response: Response) -> None:
    (date,) = response.all("date")
    assert IMF_FIXDATE.match(date), response
    assert abs(parsedate_to_datetime(date).timestamp() - time.time()) < 5, date


# -- Date and Server --------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/one", "/stream"])
def test_the_applications_date_and_server_are_sent_instead_of_corrals(server, path):
    with connect(server).sock as sock:
        response = ask(Reader(sock), path, ("Date", APP_DATE), ("Server", APP_SERVER))
    assert response.all("date") == [APP_DATE], response
    assert response.all("server") == [APP_SERVER], response


def test_each_alone_leaves_corrals_other(server):
    reader = connect(server)
    with reader.sock:
        dated = ask(reader, "/one", ("date", APP_DATE))
        named = ask(reader, "/stream", ("SERVER", APP_SERVER))
    assert dated.all("date") == [APP_DATE] and dated.all("server") == ["corral"], dated
    assert named.all("server") == [APP_SERVER], named
    assert_corrals_date(named)


def test_an_answer_without_them_has_corrals_again(server):
    """Heads are cached: the one with the application's fields is not the next one's."""
    reader = connect(server)
    with reader.sock:
        for _ in range(2):
            given = ask(reader, "/one", ("Date", APP_DATE), ("Server", APP_SERVER))
            assert given.all("date") == [APP_DATE] and given.all("server") == [APP_SERVER]
            plain = ask(reader, "/one")
            assert plain.all("server") == ["corral"], plain
            assert_corrals_date(plain)


def test_without_corrals_server_the_applications_is_sent_alone(serverless):
    reader = connect(serverless)
    with reader.sock:
        given = ask(reader, "/one", ("Server", APP_SERVER), ("Date", APP_DATE))
        plain = ask(reader, "/stream")
    assert given.all("server") == [APP_SERVER] and given.all("date") == [APP_DATE], given
    assert plain.all("server") == [], plain
    assert_corrals_date(plain)


@pytest.mark.parametrize("path", ["/one", "/stream"])
def test_over_the_uwsgi_protocol_too(uwsgi, path):
    answer = exchange(uwsgi, packet(nginx_vars("GET", target(path, ("Date", APP_DATE)))))
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").lower().split("\r\n")[1:]
    assert [line for line in lines if line.startswith("date:")] == [f"date: {APP_DATE}".lower()]
    assert [line for line in lines if line.startswith("server:")] == ["server: corral"]
    assert body == b"ok"


def test_a_websocket_101_takes_them_too_and_keeps_its_handshake(asgi):
    """The handshake's fields are the server's: the application's go; Date and Server are
    the application's when it gives them, as in any head."""
    path = target(
        "/ws",
        ("Date", APP_DATE),
        ("Server", APP_SERVER),
        ("Sec-WebSocket-Accept", "forged"),
        ("Connection", "close"),
        ("X-App", "1"),
    )
    request, key = wsclient.handshake_request(path)
    with socket.create_connection((asgi.host, asgi.port), timeout=5) as sock:
        sock.sendall(request)
        status, headers, _ = Reader(sock).head()
    answer = Response(status, headers, b"", b"")
    assert status == 101, headers
    assert answer.all("date") == [APP_DATE] and answer.all("server") == [APP_SERVER], headers
    assert answer.all("sec-websocket-accept") == [wsclient.accept_key(key).decode()], headers
    assert answer.all("connection") == ["Upgrade"] and answer.all("x-app") == ["1"], headers


# -- Content-Length, Transfer-Encoding, Connection ----------------------------------------------


@pytest.mark.parametrize("path", ["/one", "/stream"])
def test_the_applications_content_length_frames_the_body_once(server, path):
    reader = connect(server)
    with reader.sock:
        given = ask(reader, path, ("Content-Length", "2"), ("content-length", "2"))
        assert given.all("content-length") == ["2"], given
        assert given.all("transfer-encoding") == [], given
        ask(reader, path)  # the connection goes on: the body was framed right


def test_transfer_encoding_from_the_application_is_never_a_second_framing(server):
    reader = connect(server)
    with reader.sock:
        streamed = ask(reader, "/stream", ("Transfer-Encoding", "chunked"))
        assert streamed.all("transfer-encoding") == ["chunked"], streamed
        assert streamed.all("content-length") == [], streamed
        known = ask(reader, "/one", ("Transfer-Encoding", "chunked"))
        assert known.all("transfer-encoding") == [] and known.all("content-length") == ["2"]
        framed = ask(reader, "/stream", ("Transfer-Encoding", "chunked"), ("Content-Length", "2"))
        assert framed.all("transfer-encoding") == [] and framed.all("content-length") == ["2"]
    # HTTP/1.0 has no chunked coding: the close delimits the body
    reader = connect(server)
    with reader.sock:
        old = ask(reader, "/stream", ("Transfer-Encoding", "chunked"), version="1.0")
        assert old.all("transfer-encoding") == [] and old.all("connection") == ["close"], old


@pytest.mark.parametrize("version", ["1.1", "1.0"])
def test_connection_close_from_the_application_is_sent_once_and_closes(server, version):
    reader = connect(server)
    with reader.sock:
        lines = ("Connection: keep-alive",) if version == "1.0" else ()
        given = ("Connection", "close")
        response = ask(reader, "/one", given, given, version=version, lines=lines)
        assert response.all("connection") == ["close"], response
        reader.assert_closed()


@pytest.mark.parametrize("version", ["1.1", "1.0"])
def test_connection_keep_alive_from_the_application_is_not_repeated(server, version):
    reader = connect(server)
    with reader.sock:
        lines = ("Connection: keep-alive",) if version == "1.0" else ()
        for _ in range(2):  # the connection stays open
            response = ask(
                reader, "/one", ("Connection", "keep-alive"), version=version, lines=lines
            )
            expected = ["keep-alive"] if version == "1.0" else []
            assert response.all("connection") == expected, response
