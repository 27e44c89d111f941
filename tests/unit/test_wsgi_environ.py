"""The connection's part of an environ and the request's environ made from it (no sockets:
the integration side is tests/integration/test_wsgi.py)."""

from __future__ import annotations

from corral.apps.wsgi.environ import ConnectionEnviron, connection_environ, request_environ
from corral.apps.wsgi.input import EMPTY
from corral.http.head import RequestHead, parse_absolute_form

HEADERS = [(b"Host", b"example.com"), (b"User-Agent", b"wrk"), (b"Accept", b"*/*")]


def base(http: bool) -> dict:
    return connection_environ(
        ("127.0.0.1", 8000),
        ("127.0.0.1", 50000),
        multithread=False,
        multiprocess=False,
        file_wrapper=object,
        errors=None,
        http=http,
    )


def test_every_request_sets_each_key_the_connections_part_holds_for_it() -> None:
    part = base(http=True)
    head = RequestHead("GET", b"/a%20b?x=1", "1.1", HEADERS, True, None, False, False)
    environ = request_environ(part, head, "BODY")
    assert [key for key, value in environ.items() if value is None] == []
    assert not [key for key in environ if key.startswith(" ")]  # no filler is left
    assert environ["PATH_INFO"] == "/a b" and environ["QUERY_STRING"] == "x=1"
    assert environ["RAW_URI"] == environ["REQUEST_URI"] == "/a%20b?x=1"
    assert environ["SERVER_PROTOCOL"] == "HTTP/1.1" and environ["wsgi.input"] == "BODY"
    assert environ["HTTP_HOST"] == "example.com" and environ["HTTP_ACCEPT"] == "*/*"
    assert set(environ) - set(part) == {"HTTP_HOST", "HTTP_USER_AGENT", "HTTP_ACCEPT"}
    again = request_environ(part, head, "BODY")  # the part is copied, never changed
    assert again == environ and part["PATH_INFO"] == "" and part["REQUEST_METHOD"] == "GET"


def test_a_request_unlike_the_common_one_has_its_own_values_and_the_next_one_not() -> None:
    """The connection's part holds the common values (GET, HTTP/1.1, no query, no body):
    a request that differs sets its own, and the next one on the connection has the common
    ones again."""
    part = base(http=True)
    post = RequestHead("POST", b"/form", "1.0", HEADERS, False, 3, False, False)
    environ = request_environ(part, post, "BODY")
    assert environ["REQUEST_METHOD"] == "POST" and environ["SERVER_PROTOCOL"] == "HTTP/1.0"
    assert environ["wsgi.input"] == "BODY" and environ["QUERY_STRING"] == ""
    get = RequestHead("GET", b"/", "1.1", HEADERS, True, None, False, False)
    environ = request_environ(part, get, EMPTY)
    assert environ["REQUEST_METHOD"] == "GET" and environ["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert environ["wsgi.input"] is EMPTY and environ["QUERY_STRING"] == ""
    assert environ["PATH_INFO"] == "/" and environ["RAW_URI"] == "/"


def test_repeated_fields_are_joined_also_when_their_values_are_one_character() -> None:
    # one-character strings are shared objects in CPython: a join must not take two equal
    # ones for one field
    head = RequestHead(
        "GET",
        b"/",
        "1.1",
        [(b"Host", b"h"), (b"X-A", b"1"), (b"X-A", b"1"), (b"Cookie", b"a"), (b"Cookie", b"")],
        True,
        None,
        False,
        False,
    )
    environ = request_environ(base(http=True), head, EMPTY)
    assert environ["HTTP_X_A"] == "1, 1" and environ["HTTP_COOKIE"] == "a; "


def test_a_uwsgi_listeners_part_has_no_request_key() -> None:
    # a uwsgi packet's vars give them, or the target does when they are missing
    part = base(http=False)
    assert "PATH_INFO" not in part and "QUERY_STRING" not in part and "wsgi.input" not in part
    assert part["REMOTE_ADDR"] == "127.0.0.1" and part["SERVER_PORT"] == "8000"


def test_a_connections_environs_are_each_the_one_its_request_makes() -> None:
    """ConnectionEnviron reuses the keys of fields that are the same objects as the request
    before's (the compiled parser gives them so): each environ is still request_environ's."""
    part = base(http=True)
    environs = ConnectionEnviron(part, uwsgi=False)
    host, agent, other = HEADERS[0], HEADERS[1], (b"User-Agent", b"curl")
    heads = [
        RequestHead("GET", b"/1", "1.1", [host, agent], True, None, False, False),
        RequestHead("GET", b"http://a.example/2", "1.1", [host, agent], True, None, False, False),
        RequestHead("GET", b"/3?q", "1.1", [host, agent], True, None, False, False),
        RequestHead("GET", b"/4", "1.1", [host, agent], True, None, False, False),
        RequestHead("GET", b"/5", "1.1", [host, agent], True, None, False, False),
        RequestHead("GET", b"/6", "1.1", [host, other], True, None, False, False),
        RequestHead("GET", b"/7", "1.1", [host, agent], True, None, False, False),
        RequestHead("GET", b"/8", "1.1", [host, agent], True, None, False, False),
        RequestHead("PUT", b"/9", "1.0", [host, agent], True, 2, False, False),
        RequestHead("GET", b"/10", "1.1", [agent, host], True, None, False, False),
    ]
    heads[1].absolute = parse_absolute_form(heads[1].target)
    for head in heads:
        body = "BODY" if head.content_length else EMPTY
        environ = environs.request(head, body, None)
        assert environ == request_environ(part, head, body), head.target
        environ["HTTP_USER_AGENT"] = "changed by the application"
