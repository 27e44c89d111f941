"""FastCGI records and the CGI head, without sockets (corral/fastcgi/records.py, answer.py,
params.py): the bytes written, the records read back in any split, every malformed answer
refused with the reason a 502 is logged with."""

from __future__ import annotations

import struct

import pytest

from corral.fastcgi.answer import AnswerError, HeadReader
from corral.fastcgi.params import cgi_params
from corral.fastcgi.records import (
    END_REQUEST,
    HEADER,
    STDERR,
    STDOUT,
    FastCgiError,
    RecordReader,
    begin_request,
    params,
    parse_pairs,
    stdin,
)
from corral.http.head import RequestHead
from corral.php.site import Choice


def record(kind: int, content: bytes, request_id: int = 1, version: int = 1, pad: int = 0) -> bytes:
    return HEADER.pack(version, kind, request_id, len(content), pad) + content + bytes(pad)


def end(app_status: int = 0, protocol_status: int = 0) -> bytes:
    return record(END_REQUEST, struct.pack("!IB3x", app_status, protocol_status))


def records_of(data: bytes) -> list[tuple[int, int, bytes]]:
    out = []
    while data:
        version, kind, request_id, length, padding = HEADER.unpack_from(data)
        assert version == 1 and request_id == 1 and (8 + length + padding) % 8 == 0
        out.append((kind, length, data[8 : 8 + length]))
        data = data[8 + length + padding :]
    return out


def test_begin_request_asks_the_responder_role_and_keep_conn() -> None:
    [(kind, length, content)] = records_of(begin_request())
    assert (kind, length) == (1, 8)
    assert content == b"\x00\x01\x01\x00\x00\x00\x00\x00"  # role 1, FCGI_KEEP_CONN
    assert records_of(begin_request(keep_conn=False))[0][2][2] == 0


def test_params_encode_short_and_long_lengths_and_end_with_an_empty_record() -> None:
    pairs = [(b"A", b"1"), (b"LONG", b"x" * 200), (b"N" * 130, b"")]
    data = params(pairs)
    parts = records_of(data)
    assert parts[-1] == (4, 0, b"")
    assert parse_pairs(b"".join(c for _, _, c in parts)) == pairs
    # a 200-byte value's length takes four bytes with the high bit set
    assert b"\x04\x80\x00\x00\xc8LONG" in data


def test_params_larger_than_one_record_are_split() -> None:
    pairs = [(b"HTTP_COOKIE", b"c" * 100_000)]
    parts = records_of(params(pairs))
    assert [length for _, length, _ in parts] == [
        65535,
        100_016 - 65535,
        0,
    ]  # 1 + 4 length bytes, 11 of name
    assert parse_pairs(b"".join(c for _, _, c in parts)) == pairs


def test_stdin_is_split_at_the_record_size_and_ended_by_an_empty_record() -> None:
    parts = records_of(stdin(b"y" * 70_000) + stdin(b""))
    assert [(k, n) for k, n, _ in parts] == [(5, 65535), (5, 70_000 - 65535), (5, 0)]


ANSWER = (
    record(STDOUT, b"Status: 201 Created\r\nX-A: 1\r\n\r\nhel", pad=5)
    + record(STDERR, b"a warning")
    + record(STDOUT, b"lo")
    + record(STDOUT, b"")
    + end()
)


@pytest.mark.parametrize("size", [1, 3, 7, 8, 9, 64, len(ANSWER)])
def test_the_reader_gives_the_same_events_whatever_the_split(size: int) -> None:
    reader = RecordReader()
    events = []
    for at in range(0, len(ANSWER), size):
        events += reader.feed(ANSWER[at : at + size])
    assert events == [
        (STDOUT, b"Status: 201 Created\r\nX-A: 1\r\n\r\nhel"),
        (STDERR, b"a warning"),
        (STDOUT, b"lo"),
        (END_REQUEST, 0),
    ]
    assert reader.ended and not reader.buffer
    reader.reset()
    assert reader.feed(end(3)) == [(END_REQUEST, 3)]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (record(STDOUT, b"x", version=2), "version 2"),
        (record(STDOUT, b"x", request_id=2), "request 2"),
        (record(9, b""), "type 9"),
        (record(END_REQUEST, b"\x00" * 4), "END_REQUEST of 4 bytes"),
        (end(0, 2), "overloaded"),
        (end() + record(STDOUT, b"more"), "after END_REQUEST"),
        (b"HTTP/1.1 200 OK\r\n\r\n", "version 72"),  # an HTTP server where php-fpm should be
    ],
)
def test_what_a_responder_does_not_send_is_an_error(data: bytes, why: str) -> None:
    with pytest.raises(FastCgiError, match=why):
        RecordReader().feed(data)


def test_a_head_is_parsed_in_pieces_with_crlf_or_lf() -> None:
    reader = HeadReader(1024)
    assert reader.feed(b"Content-Type: text/plain\r\nSet-Cookie: a=1\n") is None
    head, rest = reader.feed(b"Set-Cookie: b=2\r\n\r\nbody")  # type: ignore[misc]
    assert head.status == 200 and rest == b"body"
    assert head.fields == [
        ("Content-Type", "text/plain"),
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
    ]


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"Status: 404 Not Found\r\n\r\n", 404),
        (b"Status: 500\n\n", 500),
        (b"Location: /elsewhere\r\n\r\n", 302),  # no Status: a redirect, as nginx answers it
        (b"Status: 301\r\nLocation: /x\r\n\r\n", 301),
        (b"\r\n", 200),  # an empty head
    ],
)
def test_the_status_comes_from_status_or_location(head: bytes, status: int) -> None:
    got = HeadReader(1024).feed(head)
    assert got is not None and got[0].status == status
    assert all(name.lower() != "status" for name, _ in got[0].fields)


@pytest.mark.parametrize(
    ("head", "why"),
    [
        (b"no colon here\r\n\r\n", "not a header line"),
        (b"Bad Name: x\r\n\r\n", "not a header line"),
        (b"X-A: 1\r\n folded\r\n\r\n", "folded"),
        (b"X-A: a\rInjected: 1\r\n\r\n", "control character"),
        (b"X-A: a\x00b\r\n\r\n", "control character"),
        (b"Status: 99\r\n\r\n", "Status"),
        (b"Status: 600 Too Far\r\n\r\n", "Status"),
        (b"Status: 200\r\nStatus: 404\r\n\r\n", "Status"),
        (b"X-A: " + b"a" * 2000 + b"\r\n\r\n", "longer than 1024"),
    ],
)
def test_a_head_that_is_not_cgi_is_refused(head: bytes, why: str) -> None:
    with pytest.raises(AnswerError, match=why):
        HeadReader(1024).feed(head)


def test_a_head_too_long_is_refused_before_it_ends_and_one_never_ended_too() -> None:
    reader = HeadReader(64)
    with pytest.raises(AnswerError, match="longer than 64"):
        reader.feed(b"X-A: " + b"a" * 100)
    reader = HeadReader(64)
    reader.feed(b"X-A: 1\r\n")
    with pytest.raises(AnswerError, match="inside its head"):
        reader.finish()


def variables(head: RequestHead, **more: object) -> dict[bytes, bytes]:
    choice = Choice(b"/app/index.php", b"/srv/www/app/index.php", "/extra/path")
    given: dict = {
        "peer": ("192.0.2.7", 50123),
        "local": ("127.0.0.1", 8080),
        "scheme": "http",
        "content_length": 0,
        "host": "example.com",
    } | more
    pairs = cgi_params(head, choice, b"/srv/www", **given)
    assert len({name for name, _ in pairs}) == len(pairs)  # each variable once
    return dict(pairs)


def test_the_cgi_variables_are_nginx_fastcgi_params() -> None:
    head = RequestHead(
        "POST",
        b"/app/index.php/extra/path?a=1&b=%20",
        "1.1",
        [
            (b"Host", b"example.com:8080"),
            (b"Content-Type", b"text/plain"),
            (b"Content-Length", b"5"),
            (b"Cookie", b"a=1"),
            (b"Cookie", b"b=2"),
            (b"Accept", b"text/html"),
            (b"Accept", b"*/*"),
            (b"X-Forwarded_For", b"spoofed"),
            (b"Proxy", b"http://evil"),
        ],
        True,
        5,
        False,
        False,
    )
    env = variables(head, content_length=5)
    assert env[b"SCRIPT_FILENAME"] == b"/srv/www/app/index.php"
    assert env[b"SCRIPT_NAME"] == b"/app/index.php"
    assert env[b"PATH_INFO"] == b"/extra/path"
    assert env[b"PATH_TRANSLATED"] == b"/srv/www/extra/path"
    assert env[b"DOCUMENT_ROOT"] == b"/srv/www"
    assert env[b"REQUEST_URI"] == b"/app/index.php/extra/path?a=1&b=%20"
    assert env[b"QUERY_STRING"] == b"a=1&b=%20"
    assert env[b"REQUEST_METHOD"] == b"POST"
    assert env[b"CONTENT_TYPE"] == b"text/plain"
    assert env[b"CONTENT_LENGTH"] == b"5"
    assert env[b"SERVER_PROTOCOL"] == b"HTTP/1.1"
    assert (env[b"REMOTE_ADDR"], env[b"REMOTE_PORT"]) == (b"192.0.2.7", b"50123")
    assert (env[b"SERVER_ADDR"], env[b"SERVER_PORT"]) == (b"127.0.0.1", b"8080")
    assert env[b"SERVER_NAME"] == b"example.com"
    assert env[b"REDIRECT_STATUS"] == b"200" and env[b"GATEWAY_INTERFACE"] == b"CGI/1.1"
    assert env[b"HTTP_HOST"] == b"example.com:8080"
    assert env[b"HTTP_COOKIE"] == b"a=1; b=2"
    assert env[b"HTTP_ACCEPT"] == b"text/html, */*"
    assert b"HTTPS" not in env and env[b"REQUEST_SCHEME"] == b"http"
    # not posing as other variables: an underscore's field, httpoxy's Proxy, the two CGI ones
    assert b"HTTP_X_FORWARDED_FOR" not in env and b"HTTP_PROXY" not in env
    assert b"HTTP_CONTENT_TYPE" not in env and b"HTTP_CONTENT_LENGTH" not in env


def test_https_a_forwarded_client_and_a_request_without_body() -> None:
    head = RequestHead("GET", b"/", "1.0", [], False, None, False, False)

    class Forwarded:
        address, port, scheme = "203.0.113.9", None, "https"

    env = variables(head, scheme="http", forwarded=Forwarded(), host="", local="/run/corral.sock")
    assert env[b"HTTPS"] == b"on" and env[b"REQUEST_SCHEME"] == b"https"
    assert (env[b"REMOTE_ADDR"], env[b"REMOTE_PORT"]) == (b"203.0.113.9", b"")
    assert env[b"SERVER_NAME"] == b"localhost" and env[b"SERVER_PROTOCOL"] == b"HTTP/1.0"
    assert (
        b"CONTENT_LENGTH" not in env and b"CONTENT_TYPE" not in env and env[b"QUERY_STRING"] == b""
    )


def test_the_encoded_variables_are_the_same_with_the_script_part_kept() -> None:
    from corral.fastcgi.params import encoded_params

    head = RequestHead(
        "GET", b"/x?y", "1.1", [(b"Host", b"h"), (b"A", b"b")], True, None, False, False
    )
    choice = Choice(b"/x.php", b"/w/x.php", "/more")
    given = {
        "peer": ("::1", 1),
        "local": ("::1", 2),
        "scheme": "http",
        "content_length": 0,
        "host": "h",
    }
    for _ in range(2):  # the second time from the choice's kept encoding
        encoded = encoded_params(head, choice, b"/w", **given)
        assert dict(parse_pairs(encoded)) == dict(cgi_params(head, choice, b"/w", **given))
    assert choice.encoded is not None
