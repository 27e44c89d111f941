"""corral.http.response: response heads built from what a WSGI application gives, and the
heads of the answers the server writes itself (``server_head``, ``error_response``).

The head must frame the body correctly (Content-Length, chunked, or close) for
the request's version, keep hop-by-hop fields to the server, and never let a
status or header from the application put CR, LF or NUL (or anything outside
latin-1, or a non-token name) on the wire.
"""

from __future__ import annotations

import re

import pytest

from corral.config import docs
from corral.http.errors import error_response
from corral.http.fields import OWNED, http_date, server_fields
from corral.http.response import (
    InvalidResponse,
    build_head,
    make_head,
    server_head,
    switching_head,
    trailer_lines,
)

PREFIX = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: corral\r\n"
IMF_FIXDATE = re.compile(
    r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"\d{4} \d\d:\d\d:\d\d GMT\Z"
)


def head(status="200 OK", headers=(), *, version="1.1", keep_alive=True, body_length=None):
    """build_head as the WSGI layer calls it: chunked allowed for HTTP/1.1 only."""
    return build_head(
        status,
        list(headers),
        PREFIX,
        chunked=version == "1.1",
        keep_alive=keep_alive,
        version=version,
        body_length=body_length,
    )


def fields(data: bytes) -> list[tuple[str, str]]:
    """The header fields of a serialised head, checking its line structure."""
    text = data.decode("latin-1")
    assert text.endswith("\r\n\r\n")
    lines = text[:-4].split("\r\n")
    assert re.fullmatch(r"HTTP/1\.1 \d{3} .*", lines[0]), lines[0]
    result = []
    for line in lines[1:]:
        assert "\r" not in line and "\n" not in line and "\0" not in line
        name, sep, value = line.partition(": ")
        assert sep and re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name), line
        result.append((name, value))
    return result


def names(data: bytes) -> list[str]:
    return [name.lower() for name, _ in fields(data)]


# -- framing ------------------------------------------------------------------------------------


def test_fast_path_exact_bytes():
    result = head("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "13")])
    assert result.data == (
        b"HTTP/1.1 200 OK\r\n"
        b"Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: corral\r\n"
        b"Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n"
    )
    assert (result.status, result.content_length, result.chunked, result.close) == (
        200,
        13,
        False,
        False,
    )


def test_prefix_follows_the_status_line():
    result = head("404 Not Found", [("X-A", "1")], body_length=0)
    assert result.data.startswith(b"HTTP/1.1 404 Not Found\r\n" + PREFIX.encode())
    assert result.status == 404


def test_content_length_added_from_body_length():
    result = head("200 OK", [("Content-Type", "text/plain")], body_length=5)
    assert ("Content-Length", "5") in fields(result.data)
    assert names(result.data).count("content-length") == 1
    assert "transfer-encoding" not in names(result.data)
    assert (result.content_length, result.chunked, result.close) == (5, False, False)


def test_body_length_zero_gives_content_length_zero():
    result = head("200 OK", [], body_length=0)
    assert ("Content-Length", "0") in fields(result.data)
    assert result.content_length == 0


def test_application_content_length_wins_over_body_length():
    result = head("200 OK", [("Content-Length", "7")], body_length=7)
    assert names(result.data).count("content-length") == 1
    assert result.content_length == 7


def test_chunked_for_http11_without_length():
    result = head("200 OK", [("Content-Type", "text/plain")])
    assert ("Transfer-Encoding", "chunked") in fields(result.data)
    assert "content-length" not in names(result.data)
    assert (result.content_length, result.chunked, result.close) == (None, True, False)


def test_close_delimited_for_http10_without_length():
    result = head("200 OK", [("Content-Type", "text/plain")], version="1.0")
    assert "transfer-encoding" not in names(result.data)
    assert "content-length" not in names(result.data)
    assert ("Connection", "close") in fields(result.data)
    assert (result.chunked, result.close) == (False, True)


def test_http10_keep_alive_is_announced():
    result = head("200 OK", [], version="1.0", body_length=2)
    assert ("Connection", "keep-alive") in fields(result.data)
    assert ("Content-Length", "2") in fields(result.data)
    assert result.close is False


def test_http11_keep_alive_is_implicit():
    result = head("200 OK", [], body_length=2)
    assert "connection" not in names(result.data)
    assert result.close is False


def test_keep_alive_false_sends_connection_close():
    result = head("200 OK", [], keep_alive=False, body_length=2)
    assert ("Connection", "close") in fields(result.data)
    assert result.close is True


@pytest.mark.parametrize("status", ["204 No Content", "304 Not Modified"])
def test_no_body_statuses_get_no_framing(status):
    result = head(status, [("ETag", '"x"')])
    assert "transfer-encoding" not in names(result.data)
    assert "content-length" not in names(result.data)
    assert result.chunked is False
    assert result.content_length is None
    assert result.close is False


@pytest.mark.parametrize("status", ["204 No Content", "304 Not Modified"])
def test_no_body_statuses_ignore_body_length(status):
    result = head(status, [], body_length=0)
    assert "content-length" not in names(result.data)
    assert result.chunked is False


def test_204_never_carries_content_length():
    """RFC 9110 8.6: a server MUST NOT send Content-Length in a 204 response."""
    result = head("204 No Content", [("Content-Length", "5")])
    assert "content-length" not in names(result.data)
    assert result.content_length is None


def test_304_may_keep_the_applications_content_length():
    """RFC 9110 8.6 allows it on 304 (the length the 200 would have); no body follows."""
    result = head("304 Not Modified", [("Content-Length", "5")])
    assert names(result.data).count("content-length") <= 1
    assert result.content_length is None
    assert result.chunked is False


# -- hop-by-hop and Connection ------------------------------------------------------------------


def test_connection_close_from_the_app_is_honoured():
    result = head("200 OK", [("Connection", "close")], body_length=1)
    assert result.close is True
    assert names(result.data).count("connection") == 1
    assert ("Connection", "close") in fields(result.data)


def test_connection_close_any_case():
    result = head("200 OK", [("connection", "Close")], body_length=1)
    assert result.close is True
    assert names(result.data).count("connection") == 1


def test_connection_keep_alive_from_the_app_does_not_close():
    result = head("200 OK", [("Connection", "keep-alive")], body_length=1)
    assert result.close is False
    assert "connection" not in names(result.data)


@pytest.mark.parametrize(
    "name", ["Keep-Alive", "Transfer-Encoding", "Upgrade", "Proxy-Connection", "TE", "keep-alive"]
)
def test_hop_by_hop_headers_are_dropped(name):
    value = "chunked" if name == "Transfer-Encoding" else "something"
    result = head("200 OK", [("X-Before", "1"), (name, value), ("X-After", "2")], body_length=3)
    assert name.lower() not in names(result.data)
    assert ("X-Before", "1") in fields(result.data)
    assert ("X-After", "2") in fields(result.data)


def test_app_transfer_encoding_does_not_override_content_length():
    result = head("200 OK", [("Transfer-Encoding", "chunked"), ("Content-Length", "4")])
    assert "transfer-encoding" not in names(result.data)
    assert (result.content_length, result.chunked) == (4, False)


def test_repeated_and_ordinary_headers_kept_in_order():
    given = [("Set-Cookie", "a=1"), ("X-Thing", "v"), ("Set-Cookie", "b=2")]
    result = head("200 OK", given, body_length=0)
    kept = [field for field in fields(result.data) if field[0] in ("Set-Cookie", "X-Thing")]
    assert kept == given


def test_latin1_values_are_sent_as_latin1():
    result = head("200 OK", [("X-Name", "caf\xe9")], body_length=0)
    assert b"X-Name: caf\xe9\r\n" in result.data


def test_reason_phrase_may_be_empty_or_latin1():
    assert head("200 ", [], body_length=0).data.startswith(b"HTTP/1.1 200 \r\n")
    assert head("200 \xd6K", [], body_length=0).data.startswith(b"HTTP/1.1 200 \xd6K\r\n")


def test_http_date_is_imf_fixdate():
    assert http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT"
    assert IMF_FIXDATE.match(http_date(0))
    assert http_date(0) == "Thu, 01 Jan 1970 00:00:00 GMT"


# -- the server's own fields, given by the application ------------------------------------------

APP_DATE = ("Date", "Sat, 01 Jan 2000 00:00:00 GMT")


def values(data: bytes, name: str) -> list[str]:
    return [value for key, value in fields(data) if key.lower() == name]


@pytest.mark.parametrize("body_length", [None, 2])
def test_the_applications_date_is_sent_instead_of_the_servers(body_length):
    """RFC 9110 6.6.1: one Date (Flask's send_file sets its own); the application's wins."""
    result = head("200 OK", [("X-A", "1"), APP_DATE, ("X-B", "2")], body_length=body_length)
    assert values(result.data, "date") == [APP_DATE[1]]
    assert values(result.data, "server") == ["corral"]
    assert names(result.data)[:4] == ["server", "x-a", "date", "x-b"]  # in the app's order


def test_the_applications_server_is_sent_instead_of_the_servers():
    result = head("200 OK", [("server", "gateway/2")], body_length=0)
    assert values(result.data, "server") == ["gateway/2"]
    assert values(result.data, "date") == ["Sun, 06 Nov 1994 08:49:37 GMT"]


def test_both_given_leave_nothing_of_the_prefix():
    result = head("404 Not Found", [("SERVER", "x"), ("DATE", "d")], body_length=0)
    assert fields(result.data) == [("SERVER", "x"), ("DATE", "d"), ("Content-Length", "0")]


@pytest.mark.parametrize(
    ("prefix", "given", "expected"),
    [
        # server_header "": no Server of the server's, the application's alone
        ("Date: D\r\n", [("Server", "app")], [("Date", "D"), ("Server", "app")]),
        ("Date: D\r\n", [("Date", "app")], [("Date", "app")]),
        # a prefix without Date (a setting that would turn it off) keeps working
        ("Server: corral\r\n", [("Date", "app")], [("Server", "corral"), ("Date", "app")]),
        ("", [("Date", "app"), ("Server", "s")], [("Date", "app"), ("Server", "s")]),
    ],
)
def test_any_prefix_loses_only_what_the_application_gave(prefix, given, expected):
    result = build_head("200 OK", list(given), prefix, True, True, "1.1", 0)
    assert fields(result.data)[:-1] == expected
    assert fields(result.data)[-1] == ("Content-Length", "0")


def test_a_head_without_them_after_one_with_them_has_the_servers_again():
    with_date = head("200 OK", [APP_DATE], body_length=0)
    without = head("200 OK", [], body_length=0)
    assert values(with_date.data, "date") == [APP_DATE[1]]
    assert values(without.data, "date") == ["Sun, 06 Nov 1994 08:49:37 GMT"]
    assert head("200 OK", [APP_DATE], body_length=0) is with_date  # cached as any head


def test_the_same_content_length_twice_is_sent_once():
    result = head("200 OK", [("Content-Length", "2"), ("content-length", " 2")])
    assert names(result.data).count("content-length") == 1
    assert (result.content_length, result.chunked) == (2, False)


def test_transfer_encoding_from_the_application_never_makes_a_second_framing():
    chunked = head("200 OK", [("Transfer-Encoding", "chunked")])
    assert values(chunked.data, "transfer-encoding") == ["chunked"]
    assert chunked.chunked is True
    closing = head("200 OK", [("Transfer-Encoding", "chunked")], version="1.0")
    assert "transfer-encoding" not in names(closing.data)
    assert (closing.chunked, closing.close) == (False, True)


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_connection_from_the_application_is_sent_once(version):
    closing = head("200 OK", [("Connection", "close"), ("Connection", "close")], version=version)
    assert values(closing.data, "connection") == ["close"]
    kept = head("200 OK", [("Connection", "keep-alive")], version=version, body_length=1)
    expected = ["keep-alive"] if version == "1.0" else []
    assert values(kept.data, "connection") == expected


def test_a_101_takes_the_applications_date_and_server_and_keeps_its_handshake():
    handshake = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: k\r\n"
    given = [
        ("Date", "d"),
        ("Server", "s"),
        ("Sec-WebSocket-Accept", "forged"),
        ("connection", "close"),
        ("X-A", "1"),
    ]
    data = switching_head(PREFIX, handshake, given)
    assert data.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert fields(data) == [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", "k"),
        ("Date", "d"),
        ("Server", "s"),
        ("X-A", "1"),
    ]
    plain = switching_head(PREFIX, handshake, [("X-A", "1")])
    assert fields(plain)[:2] == [("Date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Server", "corral")]


def test_trailers_keep_date_and_server_and_drop_framing():
    lines = trailer_lines([("Date", "d"), ("Content-Length", "1"), ("X-Sum", "5")])
    assert lines == "Date: d\r\nX-Sum: 5\r\n"


# -- what must be refused -----------------------------------------------------------------------

INJECTED_VALUES = [
    "a\r\nSet-Cookie: evil=1",
    "a\r\n\r\n<html>",
    "a\rb",
    "a\nb",
    "a\r",
    "\nb",
    "a\x00b",
    "\x00",
    "a\r\n",
    "a\u2028b\r\n",
]


@pytest.mark.parametrize("value", INJECTED_VALUES)
def test_injection_in_value_rejected(value):
    with pytest.raises(InvalidResponse):
        head("200 OK", [("X-A", value)], body_length=0)


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "a\x00b", "close\r\nX-A: b"])
@pytest.mark.parametrize("name", ["Connection", "Keep-Alive", "Content-Length", "Set-Cookie"])
def test_injection_in_special_header_values_rejected_or_not_sent(name, value):
    try:
        result = head("200 OK", [(name, value)], body_length=0)
    except InvalidResponse:
        return
    fields(result.data)  # structure intact: nothing injected reached the wire
    assert b"X-A" not in result.data


def test_cr_and_lf_split_across_two_values_rejected():
    """One stray LF in one value and one stray CR in another still differ from CRLF."""
    with pytest.raises(InvalidResponse):
        head("200 OK", [("X-A", "a\n"), ("X-B", "\rb")], body_length=0)


def test_prefix_crlfs_do_not_cover_a_stray_crlf():
    with pytest.raises(InvalidResponse):
        build_head(
            "200 OK",
            [("X-A", "a\r\nX-B: b")],
            "Date: x\r\n",
            chunked=True,
            keep_alive=True,
            version="1.1",
        )


@pytest.mark.parametrize(
    "name",
    [
        "X-A\r\nX-B",
        "X-A\n",
        "X-A\r",
        "X\x00A",
        "X A",
        "X-A:",
        "X-A: b",
        "",
        "X(A)",
        "X\tA",
        "X-\xe9",
        "X-\u20ac",
        "X/A",
        'X"A',
        "X@A",
    ],
)
def test_non_token_names_rejected(name):
    with pytest.raises(InvalidResponse):
        head("200 OK", [(name, "v")], body_length=0)


@pytest.mark.parametrize(
    "status",
    [
        "200 OK\r\nSet-Cookie: evil=1",
        "200 OK\r\n",
        "200 OK\n",
        "200 OK\r",
        "200 O\x00K",
        "200\r\nX-A: b",
        "20 OK",
        "2000 OK",
        "099 Low",
        "abc OK",
        "200OK",
        "",
        "200 \u20ac",
        " 200 OK",
    ],
)
def test_bad_status_rejected(status):
    with pytest.raises(InvalidResponse):
        head(status, [], body_length=0)


@pytest.mark.parametrize("value", ["\u20ac", "\u0100", "caf\u00e9 \U0001f600"])
def test_non_latin1_value_rejected(value):
    with pytest.raises(InvalidResponse):
        head("200 OK", [("X-A", value)], body_length=0)


@pytest.mark.parametrize(
    "value",
    ["-1", "+5", "5.0", "0x5", "5 5", "", "1e3", "five", "\u0663", "\uff15", "\xb2", "5,5"],
)
def test_bad_content_length_rejected(value):
    with pytest.raises(InvalidResponse):
        head("200 OK", [("Content-Length", value)])


def test_differing_duplicate_content_length_rejected():
    with pytest.raises(InvalidResponse):
        head("200 OK", [("Content-Length", "3"), ("content-length", "4")])


@pytest.mark.parametrize(
    "header",
    [("X-A", None), ("X-A", 5), ("X-A", b"v"), (b"X-A", "v"), (None, "v"), (5, "v")],
)
def test_non_str_names_and_values_rejected(header):
    with pytest.raises(InvalidResponse):
        head("200 OK", [header], body_length=0)


@pytest.mark.parametrize("status", [200, b"200 OK", None])
def test_non_str_status_rejected(status):
    with pytest.raises(InvalidResponse):
        head(status, [], body_length=0)


@pytest.mark.parametrize("char", ["\x01", "\x0b", "\x0c", "\x1b", "\x1f", "\x7f"])
def test_other_control_characters_in_values_rejected(char):
    """RFC 9110 5.5: field-vchar excludes CTLs (HTAB aside); 2.2: senders MUST NOT generate them."""
    with pytest.raises(InvalidResponse):
        head("200 OK", [("X-A", f"a{char}b")], body_length=0)


def test_tab_in_value_allowed():
    result = head("200 OK", [("X-A", "a\tb")], body_length=0)
    assert ("X-A", "a\tb") in fields(result.data)


def test_caches_never_let_a_bad_value_through():
    """A name seen (and cached) as valid does not make a later bad value valid."""
    for _ in range(3):
        head("200 OK", [("X-Cached", "fine")], body_length=0)
        with pytest.raises(InvalidResponse):
            head("200 OK", [("X-Cached", "bad\r\nX-B: 1")], body_length=0)
        with pytest.raises(InvalidResponse):
            head("200 OK\r\nX: 1", [], body_length=0)
        with pytest.raises(InvalidResponse):
            head("200 OK", [("X Bad", "v")], body_length=0)


# -- the heads the server writes itself -----------------------------------------------------------


def test_server_fields_are_the_prefix_of_every_head():
    assert server_fields(784111777, "corral") == PREFIX
    assert server_fields(784111777, "") == "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"


def test_server_head_carries_the_prefix_and_frames_the_connection():
    data = server_head(418, PREFIX, "Content-Length: 0\r\n", close=False)
    assert data.startswith(b"HTTP/1.1 418 I'm a Teapot\r\n")
    assert fields(data) == [
        ("Date", "Sun, 06 Nov 1994 08:49:37 GMT"),
        ("Server", "corral"),
        ("Content-Length", "0"),
    ]
    closing = server_head(299, PREFIX, "Content-Length: 0\r\n", close=True)
    assert closing.startswith(b"HTTP/1.1 299 \r\n")  # a code without a reason phrase
    assert fields(closing)[-1] == ("Connection", "close")


@pytest.mark.parametrize("status", [400, 408, 413, 414, 431, 500, 502, 503, 504, 505])
def test_error_response_has_date_server_and_its_body(status):
    data = error_response(status, PREFIX)
    head_bytes, _, body = data.partition(b"\r\n\r\n")
    found = dict(fields(head_bytes + b"\r\n\r\n"))
    assert found["Date"] == "Sun, 06 Nov 1994 08:49:37 GMT" and found["Server"] == "corral"
    assert found["Connection"] == "close"
    assert int(found["Content-Length"]) == len(body) and body.startswith(str(status).encode())
    # the prefix of each second, not the first one cached
    later = error_response(status, "Date: Mon, 07 Nov 1994 08:49:37 GMT\r\n")
    assert b"Mon, 07 Nov 1994" in later and b"Server:" not in later


def test_a_head_made_alike_again_is_the_same_head_until_the_date_changes() -> None:
    fields_given = [("Content-Type", "text/plain"), ("Content-Length", "13")]
    first = build_head("200 OK", list(fields_given), PREFIX, True, True, "1.1", 13)
    again = build_head("200 OK", list(fields_given), PREFIX, True, True, "1.1", 13)
    assert again is first
    # anything it is made of differs: another head
    assert build_head("200 OK", list(fields_given), PREFIX, True, False, "1.1", 13) is not first
    assert (
        b"Connection: close"
        in build_head("200 OK", list(fields_given), PREFIX, True, False, "1.1", 13).data
    )
    later = PREFIX.replace("08:49:37", "08:49:38")
    newer = build_head("200 OK", list(fields_given), later, True, True, "1.1", 13)
    assert newer is not first and b"08:49:38" in newer.data and b"08:49:37" not in newer.data


def test_a_head_asked_right_after_another_differing_in_one_part_is_its_own() -> None:
    """The last head is compared with the next ask before the cache is: each part it is
    made of, changed alone right after it, gives the head of that part."""
    fields_given = [("Content-Type", "text/plain"), ("Content-Length", "2")]
    base = ("200 OK", fields_given, PREFIX, True, True, "1.1", 2)

    def changed(index: int, value: object) -> tuple:
        return tuple(value if at == index else part for at, part in enumerate(base))

    variants = {
        "status": changed(0, "201 Created"),
        "a field's value": changed(1, [("Content-Type", "text/html"), fields_given[1]]),
        "one field more": changed(1, [*fields_given, ("X-Id", "1")]),
        "one field less": changed(1, fields_given[1:]),
        "the prefix": changed(2, PREFIX.replace("Nov", "Dec")),
        "chunking": changed(3, False),
        "keep-alive": changed(4, False),
        "the version": changed(5, "1.0"),
        "the body's length": changed(6, None),
    }
    for part, variant in variants.items():
        first = build_head(*base)
        other = build_head(*variant)
        assert other is not first, part
        assert other.data == make_head(*variant).data, part
        assert build_head(*base) is first, part
    # equal parts that are other objects: the same head
    equal = ("".join(["200", " OK"]), list(fields_given), "".join(PREFIX), True, True, "1.1", 2)
    assert build_head(*equal) is build_head(*base)


def test_a_cached_head_lets_no_bad_field_through() -> None:
    good = [("Content-Type", "text/plain"), ("X-Id", "1")]
    build_head("200 OK", list(good), PREFIX, True, True, "1.1", 2)
    for bad in (
        [("Content-Type", "text/plain"), ("X-Id", "1\r\nSet-Cookie: x=1")],
        [("Content-Type", "text/plain"), ["X-Id", "1"]],  # unhashable: not cached either
        [("Content-Type", "text/plain"), ("X Id", "1")],
    ):
        for _ in range(2):
            with pytest.raises(InvalidResponse):
                build_head("200 OK", bad, PREFIX, True, True, "1.1", 2)


def test_docs_list_every_field_the_server_owns():
    """docs/settings.md ("Responses") says what becomes of an application's field of each name
    the server owns, the one list (corral.http.fields.OWNED) the heads and --header follow."""
    listed = {
        name.strip(" `").lower()
        for names, _, _ in docs._FIELDS
        for name in names.split(",")
        if name.strip().startswith("`")
    }
    assert set(OWNED) - listed == set(), "add to corral.config.docs._FIELDS"
