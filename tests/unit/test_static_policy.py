"""The share's parts that need no file: nginx's expires values, hashed names, entity-tag lists,
HTTP dates, Range values, the MIME table, and the routes compiler's share keys."""

from __future__ import annotations

from typing import Any

import pytest

from corral.http.fields import http_date
from corral.routing import RouteError, RouteRequest, Share, compile_routes
from corral.static.mime import MimeTypes, extension_of
from corral.static.policy import (
    IMMUTABLE_ALL,
    IMMUTABLE_HASHED,
    ShareHeaders,
    is_hashed_name,
    parse_expires,
)
from corral.static.preconditions import (
    ALL,
    UNSATISFIABLE,
    byte_range,
    etag_matches,
    parse_http_date,
)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("off", None),
        ("epoch", "epoch"),
        ("max", "max"),
        ("30s", 30),
        ("30", 30),
        (30, 30),
        (-1, -1),
        ("-1", -1),
        ("10m", 600),
        ("24h", 86400),
        ("7d", 604800),
        ("2w", 1209600),
        ("1M", 2592000),
        ("1y", 31536000),
        ("1h 30m", 5400),
        ("1h30m", 5400),
        (" 5m ", 300),
    ],
)
def test_expires_values(value: Any, parsed: Any) -> None:
    assert parse_expires(value) == parsed


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("modified +24h", "'modified' form is not supported"),
        ("@15h30m", "'@15h30m' form is not supported"),
        ("10x", "invalid time '10x'"),
        ("", "expected a time"),
        ("-", "expected a time"),
        ("1.5h", "invalid time"),
        (1.5, "expected a time"),
        (True, "expected a time"),
        (None, "expected a time"),
    ],
)
def test_expires_errors(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_expires(value)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("name", "hashed"),
    [
        ("/static/admin/css/base.5af66c1b1797.css", True),  # Django's manifest storage
        ("app.3f2a9c81b7de.css", True),
        ("chunk-3f2a9c81.js", True),
        ("/x/index.3f2a9c81.js.gz", True),
        ("app.css", False),
        ("jquery-3.7.1.min.js", False),
        ("app.3f2a9c8.css", False),  # seven digits: no hash
        ("app.3F2A9C81B7DE.css", False),  # hashes are written lower-case
        ("3f2a9c81b7de.css", False),
        ("report-20240101.csv", False),  # a date: digits only
        ("app.12345678.css", False),
        ("/static.3f2a9c81b7de/app.css", False),  # the directory's name does not count
    ],
)
def test_hashed_names(name: str, hashed: bool) -> None:
    assert is_hashed_name(name) is hashed


def test_share_headers_compare_by_value() -> None:
    one = ShareHeaders(60, IMMUTABLE_HASHED, (("X-A", "1"),))
    assert one == ShareHeaders(60, IMMUTABLE_HASHED, [("X-A", "1")])
    assert hash(one) == hash(ShareHeaders(60, IMMUTABLE_HASHED, (("X-A", "1"),)))
    assert one != ShareHeaders(61, IMMUTABLE_HASHED, (("X-A", "1"),))
    assert ShareHeaders(None, IMMUTABLE_ALL).caching(False, 0) == (
        ("Cache-Control", "max-age=31536000, immutable"),
    )
    assert ShareHeaders(10).caching(False, 1000) == (
        ("Expires", http_date(1010)),
        ("Cache-Control", "max-age=10"),
    )


TAG = b'"5f-64-1a"'


@pytest.mark.parametrize(
    ("value", "weak", "matches"),
    [
        (TAG, False, True),
        (b"*", False, True),
        (b" * ", True, True),
        (b'"a", "5f-64-1a"', False, True),
        (b'"a","5f-64-1a" ', False, True),
        (b'W/"5f-64-1a"', True, True),
        (b'W/"5f-64-1a"', False, False),
        (b'"a", W/"5f-64-1a"', True, True),
        (b'"5f-64-1b"', True, False),
        (b"5f-64-1a", True, False),  # unquoted: no entity tag
        (b'junk, "5f-64-1a"', True, True),  # an element that is none is skipped
        (b'"5f-64-1a', True, False),
        (b"", True, False),
        (b'"a" "5f-64-1a"', True, False),
    ],
)
def test_entity_tag_lists(value: bytes, weak: bool, matches: bool) -> None:
    assert etag_matches(value, TAG, weak) is matches


@pytest.mark.parametrize(
    ("value", "stamp"),
    [
        (b"Sun, 06 Nov 1994 08:49:37 GMT", 784111777),
        (b"Sunday, 06-Nov-94 08:49:37 GMT", 784111777),
        (b"Sun Nov  6 08:49:37 1994", 784111777),
        (b"Thu, 01 Jan 1970 00:00:00 GMT", 0),
        (b"Sat, 29 Feb 2020 12:00:00 GMT", 1582977600),
        (b"Sun, 06 Nov 1994 08:49:37 UTC", None),
        (b"Sun, 06 Nov 1994 08:49:37 +0000", None),
        (b"sun, 06 nov 1994 08:49:37 GMT", None),
        (b"Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT", None),
        (b"Sun, 06 Foo 1994 08:49:37 GMT", None),
        (b"Sun, 06 Nov 1994 25:49:37 GMT", None),
        (b"784111777", None),
        (b"", None),
    ],
)
def test_http_dates(value: bytes, stamp: int | None) -> None:
    assert parse_http_date(value) == stamp
    if stamp is not None and value.endswith(b"GMT") and b"-" not in value:
        assert http_date(stamp).encode() == value


@pytest.mark.parametrize(
    ("value", "size", "span"),
    [
        (b"bytes=0-0", 10, (0, 0)),
        (b"bytes=0-", 10, (0, 9)),
        (b"bytes=-1", 10, (9, 9)),
        (b"bytes=-10", 10, (0, 9)),
        (b"bytes=3-100", 10, (3, 9)),
        (b"bytes=10-", 10, UNSATISFIABLE),
        (b"bytes=-0", 10, UNSATISFIABLE),
        (b"bytes=-5", 0, UNSATISFIABLE),
        (b"bytes=0-", 0, UNSATISFIABLE),
        (b"bytes=3-2", 10, ALL),
        (b"bytes=1-2,4-5", 10, ALL),
        (b"bytes=1-2,", 10, ALL),
        (b"bits=1-2", 10, ALL),
        (b"bytes=x", 10, ALL),
        (b"bytes=" + b"9" * 5000 + b"-", 10, UNSATISFIABLE),
        (b"bytes=-" + b"9" * 5000, 10, (0, 9)),
        (b"bytes=0-" + b"9" * 5000, 10, (0, 9)),
        (b"bytes=\xff", 10, ALL),
    ],
)
def test_byte_ranges(value: bytes, size: int, span: Any) -> None:
    assert byte_range(value, size) == span


def test_mime_table() -> None:
    table = MimeTypes({"text/x-changes": ["CHANGES", ".Log"], "image/x-own": ".png"})
    assert table.type_of("/a/b.css") == "text/css"
    assert table.type_of("/a/B.CSS") == "text/css"
    assert table.type_of("/a/b.js") == "text/javascript"
    assert table.type_of("/w/app.wasm") == "application/wasm"
    assert table.type_of("/a/x.log") == "text/x-changes"
    assert table.type_of("/a/CHANGES") == "text/x-changes"
    assert table.type_of("/a/changes") == "text/x-changes"
    assert table.type_of("/a/p.png") == "image/x-own"  # the document's win
    assert table.type_of("/a/unknown.zzz") == ""
    assert table.type_of("/a.d/noext") == ""
    assert table.type_of("/a/x.tar") == "application/x-tar"  # the stdlib's defaults
    assert table.type_of("/a/x.tar.gz") == ""  # a coding, not a type: the stdlib's too
    assert extension_of("/a/.hidden") == ".hidden"
    assert extension_of("/a.b/c") == "c"


# -- the routes compiler's share keys


def share_of(action: dict[str, Any], target: bytes = b"/x") -> Share:
    resolved = compile_routes([{"action": action}]).resolve(
        "routes", RouteRequest("GET", target, [])
    )
    assert isinstance(resolved, Share)
    return resolved


def test_the_compiled_share_keys() -> None:
    plain = share_of({"share": "/www$uri"})
    assert plain.headers is None and plain.paths == ("/www/x",)
    full = share_of(
        {
            "share": "/www$uri",
            "expires": "1h",
            "immutable": "hashed",
            "response_headers": {"X-A": "b", "Server": None},
        }
    )
    assert full.headers == ShareHeaders(3600, IMMUTABLE_HASHED, (("X-A", "b"), ("Server", None)))
    assert share_of({"share": "/www/f", "expires": "max"}).headers == ShareHeaders("max")
    assert share_of({"share": "/www/f", "expires": "off"}).headers is None
    # a constant share and one made per request carry the same
    assert share_of({"share": ["/a$uri", "/b$uri"], "immutable": True}).headers == ShareHeaders(
        None, IMMUTABLE_ALL
    )
    chrooted = share_of({"share": "/w/$host$uri", "chroot": "/w/$host", "expires": 5})
    assert chrooted.headers == ShareHeaders(5) and chrooted.chroot == "/w/"


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({"share": "/a", "expires": "10x"}, "$.routes[0].action.expires: invalid time '10x'"),
        ({"share": "/a", "expires": None}, "$.routes[0].action.expires: expected a time"),
        ({"share": "/a", "immutable": "yes"}, "$.routes[0].action.immutable: expected true, false"),
        ({"share": "/a", "response_headers": []}, "$.routes[0].action.response_headers: expected"),
        (
            {"share": "/a", "response_headers": {"Bad Name": "x"}},
            "$.routes[0].action.response_headers: 'Bad Name' is not a field name",
        ),
        (
            {"share": "/a", "response_headers": {"Content-Length": "1"}},
            "'Content-Length' is the server's own field",
        ),
        (
            {"share": "/a", "response_headers": {"Transfer-Encoding": "chunked"}},
            "the server's own field",
        ),
        ({"share": "/a", "response_headers": {"X": 5}}, "X: expected a string, or null"),
        ({"share": "/a", "response_headers": {"X": "a\r\nB: c"}}, "control characters"),
        (
            {"share": "/a", "response_headers": {"X": "$uri"}},
            "$.routes[0].action.response_headers.X: variables in response_headers are not",
        ),
        ({"share": "/www/../etc$uri"}, "$.routes[0].action.share: a share path may not hold"),
        ({"share": ["/a", "../b"]}, "$.routes[0].action.share[1]: a share path may not hold"),
        (
            {"pass": "applications/a", "response_headers": {}},
            "'response_headers' is supported on share actions only",
        ),
    ],
)
def test_share_key_errors(action: dict[str, Any], message: str) -> None:
    with pytest.raises(RouteError) as error:
        compile_routes([{"action": action}])
    assert message in str(error.value)
