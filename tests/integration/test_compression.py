"""Response compression (issue 32, point 6) through real corral processes, for WSGI and ASGI on
each request core: ``settings.http.compression`` from a config file, NGINX Unit's shape.

What is compressed gets ``Content-Encoding``, ``Vary: Accept-Encoding``, a weak ``ETag`` and
the framing of the compressed body (its length when the body is known in full, chunks when it
streams); what could have been and was not (no acceptable coding, HEAD) still says ``Vary``;
what the rules leave alone (small, not listed, already encoded, ``no-transform``, 206, 304,
the application's ``Content-Encoding: identity``) goes as the application gave it. A stream
is compressed piece by piece: each event is read and decompressed before the application is
let to send the next one. The applications: tests/integration/apps/compression_apps.py.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import brotli
import pytest

from tests.integration.server import Server
from tests.integration.test_http import Reader, Response, get

try:
    from compression import zstd  # type: ignore[import-not-found]
except ImportError:  # before Python 3.14
    from backports import zstd  # type: ignore[import-not-found,no-redef]

pytestmark = pytest.mark.usefixtures("each_core")

APPS = {"wsgi": "compression_apps:application", "asgi": "compression_apps:asgi_app"}
TEXT = b"corral compresses what the client accepts. " * 56
# the server's order: gzip, br, zstd (a tie goes to the first)
CONFIG = """
[compression]
types = ["text/*"]
compressors = [{encoding = "gzip"}, {encoding = "br"}, {encoding = "zstd", min_length = 2000}]
"""


@pytest.fixture(scope="module", params=sorted(APPS))
def server(
    request: pytest.FixtureRequest, each_core: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    config = tmp_path_factory.mktemp("compression") / "corral.toml"
    config.write_text(CONFIG)
    with Server(APPS[request.param], "-c", str(config)) as running:
        yield running
        assert running.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in running.stderr, running.stderr


def ask(server: Server, path: str, *lines: str, method: str = "GET") -> Response:
    with server.connect() as sock:
        sock.sendall(get(path, *lines, method=method))
        return Reader(sock).response(method)


def decoded(response: Response) -> bytes:
    coding = response.get("content-encoding")
    if coding == "gzip":
        return zlib.decompress(response.body, wbits=31)
    if coding == "br":
        return brotli.decompress(response.body)
    if coding == "zstd":
        return zstd.decompress(response.body)
    assert coding is None, coding
    return response.body


@pytest.mark.parametrize(
    ("accept", "coding"),
    [
        ("gzip", "gzip"),
        ("br", "br"),
        ("zstd", "zstd"),
        ("gzip, br", "gzip"),  # a tie: the server's order
        ("gzip;q=0.5, br;q=0.9", "br"),
        ("*", "gzip"),
        ("br;q=0, *;q=0.5", "gzip"),
        ("x-gzip", "gzip"),
    ],
)
def test_the_coding_the_client_weighs_highest(server: Server, accept: str, coding: str) -> None:
    response = ask(server, "/text", f"Accept-Encoding: {accept}")
    assert response.status == 200
    assert response.get("content-encoding") == coding
    assert response.get("vary") == "Accept-Encoding"
    assert response.get("etag") == 'W/"v1"'  # the compressed bytes are not the identity's
    assert int(response.get("content-length")) == len(response.body) < len(TEXT) // 4
    assert decoded(response) == TEXT


def test_a_body_in_pieces_is_compressed_in_chunks(server: Server) -> None:
    response = ask(server, "/pieces", "Accept-Encoding: gzip")
    assert response.get("content-encoding") == "gzip"
    assert response.get("transfer-encoding") == "chunked"
    assert response.get("content-length") is None
    assert decoded(response) == TEXT


@pytest.mark.parametrize("accept", [None, "identity", "gzip;q=0", "deflate", "identity;q=0"])
def test_identity_when_no_coding_of_ours_is_acceptable_still_says_vary(
    server: Server, accept: str | None
) -> None:
    response = ask(server, "/text", *([f"Accept-Encoding: {accept}"] if accept else []))
    assert response.get("content-encoding") is None
    assert response.get("vary") == "Accept-Encoding"
    assert response.get("etag") == '"v1"'
    assert response.body == TEXT  # as nginx: never a 406 for an application's answer


def test_a_head_is_never_compressed_but_varies(server: Server) -> None:
    response = ask(server, "/text", "Accept-Encoding: gzip", method="HEAD")
    assert response.status == 200
    assert response.get("content-encoding") is None
    assert response.get("vary") == "Accept-Encoding"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/small", 200),
        ("/png", 200),
        ("/encoded", 200),
        ("/no-transform", 200),
        ("/partial", 206),
    ],
)
def test_what_the_rules_leave_alone_goes_as_given(server: Server, path: str, status: int) -> None:
    response = ask(server, path, "Accept-Encoding: gzip, br, zstd")
    plain = ask(server, path)
    assert response.status == status
    assert response.body == plain.body  # byte for byte what the application sent
    assert response.get("vary") is None
    assert response.get("content-encoding") == plain.get("content-encoding")


def test_a_304_carries_the_validator_the_compressed_200_would(server: Server) -> None:
    response = ask(server, "/not-modified", "Accept-Encoding: gzip")
    assert response.status == 304
    assert response.body == b""
    assert response.get("vary") == "Accept-Encoding"
    assert response.get("etag") == 'W/"v1"'


def test_the_application_turns_it_off_for_one_answer(server: Server) -> None:
    """``Content-Encoding: identity`` (a page that echoes a secret: BREACH): sent as it is,
    the field dropped (RFC 9110 keeps identity out of Content-Encoding)."""
    response = ask(server, "/identity", "Accept-Encoding: gzip")
    assert response.get("content-encoding") is None
    assert response.body == TEXT


def test_each_event_of_a_stream_leaves_when_the_application_sends_it(
    server: Server, tmp_path: Path
) -> None:
    with server.connect() as sock:
        sock.sendall(get(f"/events?flags={tmp_path}", "Accept-Encoding: gzip"))
        reader = Reader(sock)
        status, headers, _ = reader.head()
        assert status == 200
        assert ("Content-Encoding", "gzip") in headers
        assert ("Transfer-Encoding", "chunked") in headers
        inflate = zlib.decompressobj(wbits=31)
        for number in range(3):
            text = b""
            while not text:  # the next chunk: the event, whole once it is decompressed
                text = inflate.decompress(read_chunk(reader))
            assert text == b"data: event %d\n\n" % number
            (tmp_path / f"go{number}").touch()  # only now may the application go on
        rest = b""
        while chunk := read_chunk(reader):
            rest += inflate.decompress(chunk)
        assert rest + inflate.flush() == b""
        assert inflate.eof


def read_chunk(reader: Reader) -> bytes:
    """One chunk of a chunked body (b"" for the last one, its trailer section read)."""
    size = int(reader._line(), 16)
    if size == 0:
        assert reader._line() == b""
        return b""
    data = reader._exactly(size)
    assert reader._exactly(2) == b"\r\n"
    return data


def test_without_compression_configured_nothing_changes(each_core: str) -> None:
    with Server(APPS["wsgi"]) as running, running.connect() as sock:
        sock.sendall(get("/text", "Accept-Encoding: gzip"))
        response = Reader(sock).response()
    assert response.get("content-encoding") is None
    assert response.get("vary") is None
    assert response.body == TEXT


def test_keep_alive_goes_on_after_compressed_answers(server: Server) -> None:
    """Answers of each coding and none on one connection: each framed whole, the connection
    kept."""
    with server.connect() as sock:
        reader = Reader(sock)
        for accept in ("gzip", "br", "zstd", "identity"):
            sock.sendall(get("/pieces", f"Accept-Encoding: {accept}"))
            response = reader.response()
            assert decoded(response) == TEXT
        sock.settimeout(5)
        sock.sendall(get("/small"))
        assert reader.response().body == b"hello"


def test_the_command_line_flag_compresses_text_and_leaves_images(each_core: str) -> None:
    """``--compression gzip:6,br`` (no document): text compressed in the server's order, an
    image type left as it is."""
    with Server(APPS["wsgi"], "--compression", "gzip:6,br") as running, running.connect() as sock:
        reader = Reader(sock)
        sock.sendall(get("/text", "Accept-Encoding: br, gzip"))
        text = reader.response()
        sock.sendall(get("/png", "Accept-Encoding: br, gzip"))
        image = reader.response()
    assert text.get("content-encoding") == "gzip"
    assert decoded(text) == TEXT
    assert image.get("content-encoding") is None
    assert image.body == TEXT
