"""The proxy's heads (corral.actions.proxy_head) through what it keeps between requests: the
lines it adds per client, the fields of an answer head seen before. Whatever is kept, each
request and each answer gets what its own fields say. (Run again on the Python core by
test_python_core.py.)"""

from __future__ import annotations

from corral.actions.proxy_head import answer_of, request_head
from corral.http.head import RequestHead


def head(headers: list[tuple[bytes, bytes]], method: str = "GET") -> RequestHead:
    return RequestHead(method, b"/p?q", "1.1", headers, True, None, False, False)


def fields_of(data: bytes) -> list[bytes]:
    return data.split(b"\r\n")[1:-2]


def test_each_request_of_a_client_gets_its_own_host_in_the_added_lines() -> None:
    first = request_head(head([(b"Host", b"a.example")]), "10.1.2.3", "http", None, False)
    again = request_head(head([(b"Host", b"a.example")]), "10.1.2.3", "http", None, False)
    other = request_head(head([(b"Host", b"b.example")]), "10.1.2.3", "http", None, False)
    assert first == again
    assert fields_of(first) == [
        b"Host: a.example",
        b"Via: 1.1 corral",
        b"X-Forwarded-For: 10.1.2.3",
        b"X-Forwarded-Proto: http",
        b"X-Forwarded-Host: a.example",
        b'Forwarded: for=10.1.2.3;proto=http;host="a.example"',
    ]
    assert b"X-Forwarded-Host: b.example" in fields_of(other)
    assert b'Forwarded: for=10.1.2.3;proto=http;host="b.example"' in fields_of(other)
    # another client, scheme, or no Host at all: lines of their own
    without = request_head(head([]), "::1", "https", None, False)
    assert fields_of(without) == [
        b"Via: 1.1 corral",
        b"X-Forwarded-For: ::1",
        b"X-Forwarded-Proto: https",
        b'Forwarded: for="[::1]";proto=https',
    ]


def test_a_client_that_came_through_proxies_has_its_lists_appended_to() -> None:
    plain = request_head(head([(b"Host", b"h")]), "10.0.0.9", "http", None, False)
    relayed = request_head(
        head([(b"Host", b"h"), (b"X-Forwarded-For", b"1.1.1.1"), (b"Via", b"1.0 edge")]),
        "10.0.0.9",
        "http",
        None,
        False,
    )
    assert b"X-Forwarded-For: 1.1.1.1, 10.0.0.9" in fields_of(relayed)
    assert b"Via: 1.0 edge, 1.1 corral" in fields_of(relayed)
    # ... and the next plain request of the same client is plain again
    assert request_head(head([(b"Host", b"h")]), "10.0.0.9", "http", None, False) == plain


def test_the_framing_lines_follow_the_request() -> None:
    post = request_head(head([], "POST"), "10.0.0.1", "http", None, False)
    assert post.endswith(b"Content-Length: 0\r\n\r\n")
    chunked = request_head(head([], "POST"), "10.0.0.1", "http", None, True)
    assert chunked.endswith(b"Transfer-Encoding: chunked\r\n\r\n")
    upgrade = request_head(head([]), "10.0.0.1", "http", b"websocket", False)
    assert upgrade.endswith(b"Connection: upgrade\r\nUpgrade: websocket\r\n\r\n")
    assert request_head(head([]), "10.0.0.1", "http", None, False).endswith(b"proto=http\r\n\r\n")


def test_an_answer_heads_fields_are_its_own_whatever_came_before() -> None:
    first = [(b"Content-Type", b"text/plain"), (b"Date", b"Sun, 06 Dec 2026 23:00:00 GMT")]
    status, fields = answer_of(200, b"OK", first)
    assert status == "200 OK"
    assert fields == [
        ("Content-Type", "text/plain"),
        ("Date", "Sun, 06 Dec 2026 23:00:00 GMT"),
        ("Via", "1.1 corral"),
    ]
    fields.append(("X-Changed", "by its user"))  # (the response path may change its list)
    assert answer_of(200, b"OK", list(first))[1] == fields[:-1]
    # a second later, another status, another reason: each its own
    later = [first[0], (b"Date", b"Sun, 06 Dec 2026 23:00:01 GMT")]
    assert answer_of(200, b"OK", later)[1][1] == ("Date", "Sun, 06 Dec 2026 23:00:01 GMT")
    assert answer_of(404, b"Not Found", later)[0] == "404 Not Found"
    assert answer_of(404, b"Nope", later)[0] == "404 Nope"
    # hop-by-hop fields, and those Connection names, stay behind; a Via is appended to
    hops = [(b"Connection", b"X-Hop"), (b"X-Hop", b"1"), (b"Via", b"1.1 app"), (b"A", b"b")]
    assert answer_of(200, b"OK", hops)[1] == [("A", "b"), ("Via", "1.1 app, 1.1 corral")]
    assert answer_of(200, b"OK", first)[1] == fields[:-1]
