"""corral.routing: Unit's route matching, actions, variables and errors, table-driven."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.http.head import Limits, RequestSink
from corral.http.parser import RequestParser
from corral.net.addresses import AddressError, address_matcher
from corral.routing import (
    BAD_REQUEST,
    KEPT_BY_TARGET,
    MAX_HOPS,
    NOT_FOUND,
    ROUTING_LOOP,
    Respond,
    RouteError,
    RouteRequest,
    Share,
    ToApplication,
    compile_routes,
    normalize_path,
    pattern_matcher,
)

ROOT = Path(__file__).resolve().parents[2]
HIT = Respond(200)


def request(
    target: str | bytes = "/",
    method: str = "GET",
    headers: list[tuple[bytes, bytes]] | None = None,
    host: str | None = "example.com",
    peer: Any = ("192.0.2.10", 50000),
    local: Any = ("192.0.2.1", 8000),
    scheme: str = "http",
    absolute: Any = None,
) -> RouteRequest:
    if isinstance(target, str):
        target = target.encode("latin-1")
    fields = list(headers or [])
    if host is not None:
        fields.insert(0, (b"Host", host.encode("latin-1")))
    return RouteRequest(method, target, fields, peer, local, scheme, absolute)


def outcome(match: dict[str, Any], **req: Any) -> Any:
    """HIT when a one-step table with ``match`` takes the request, else the action it got."""
    router = compile_routes([{"match": match, "action": {"return": 200}}])
    return router.resolve("routes", request(**req))


def matches(match: dict[str, Any], **req: Any) -> bool:
    action = outcome(match, **req)
    assert action in (HIT, NOT_FOUND), action
    return action == HIT


def error_of(routes: Any, **kwargs: Any) -> str:
    with pytest.raises(RouteError) as info:
        compile_routes(routes, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


# -- uri ------------------------------------------------------------------------------------------

URI_CASES = [
    # exact, case-sensitive, query not part of it
    ("/a", "/a", True),
    ("/a", "/a/", False),
    ("/a", "/A", False),
    ("/a", "/a?x=1", True),
    ("/a", "/a#frag", True),
    # wildcards
    ("/api/*", "/api/", True),
    ("/api/*", "/api", False),
    ("/api/*", "/api/x/y", True),
    ("*.php", "/x.php", True),
    ("*.php", "/x.php/", False),
    ("*/api/*", "/v1/api/x", True),
    ("*/api/*", "/v1/apix", False),
    ("/a*b", "/ab", True),
    ("/a*b", "/aXYb", True),
    ("/a*b", "/a", False),
    ("/a*b", "/ba", False),
    ("/admin/*/*.php", "/admin/x/y.php", True),
    ("/admin/*/*.php", "/admin/x.php", False),
    ("/admin/*/*.php", "/admin//x.php", False),  # '//' merged before matching
    ("/a*a*a", "/aaa", True),
    ("/a*a*a", "/aa", False),
    ("*a*b*c*", "/cba", False),
    ("*a*b*c*", "/xaybzc", True),
    ("*", "/anything", True),
    ("/How*s*that*to*you", "/How's that to you", True),
    # negation, negation-only lists, mixed lists
    ("!/admin/*", "/admin/x", False),
    ("!/admin/*", "/x", True),
    (["!/a", "!/b"], "/c", True),
    (["!/a", "!/b"], "/a", False),
    (["/x*", "!/xy"], "/xz", True),
    (["/x*", "!/xy"], "/xy", False),
    (["/x*", "!/xy"], "/y", False),
    (["!/xy", "/x*"], "/xz", True),  # order does not matter
    (["/a", "/b", "/c"], "/b", True),
    (["/a", "/b", "/c"], "/d", False),
    (["/s/*", "*.css", "*.js"], "/app.js", True),
    (["/s/*", "*.css", "*.js"], "/s/x", True),
    (["/s/*", "*.css", "*.js"], "/x.png", False),
    ([], "/anything", True),  # Unit: an empty list matches
    ("!*", "/x", False),
    # percent-encoding: values decoded, patterns too (after the split on '*')
    ("/café", "/caf%C3%A9", True),
    ("/caf%C3%A9", "/café".encode().decode("latin-1"), True),
    ("/a b", "/a%20b", True),
    ("/a%20b", "/a%20b", True),
    ("/a+b", "/a+b", True),  # no '+' decoding in the uri
    ("/a b", "/a+b", False),
    ("/a%2Ab", "/a*b", True),
    ("/a%2Ab", "/axb", False),
    ("/a/b", "/a%2Fb", True),
    ("/a%25", "/a%25", True),
    # normalization
    ("/b", "/a/../b", True),
    ("/b", "/a/%2e%2E/b", True),
    ("/a/b", "/a//b", True),
    ("/a", "/./a", True),
    ("/a/", "/a/b/..", True),
    ("/a/b/", "/a/b/.", True),
    ("/", "//", True),
    ("/.hidden", "/.hidden", True),
    ("/a/..b", "/a/..b", True),
    # regular expressions: searched, case-sensitive, not decoded
    ("~^/data/.*\\.php$", "/data/x/y.php", True),
    ("~^/data/.*\\.php$", "/data/x/y.php5", False),
    ("~php", "/x.php5", True),
    ("~^/A", "/a", False),
    ("!~^/articles/\\d{4}-\\d{2}-\\d{2}", "/articles/2024-01-02", False),
    (["/articles/*", "!~/articles/\\d{4}-\\d{2}-\\d{2}"], "/articles/new", True),
    ("~%41", "/%41", False),
    ("~^/\\w+$", "/caf%C3%A9", False),  # ASCII classes, as PCRE without UTF
]


@pytest.mark.parametrize(("pattern", "target", "expected"), URI_CASES)
def test_uri(pattern: Any, target: str, expected: bool) -> None:
    assert matches({"uri": pattern}, target=target) is expected


@pytest.mark.parametrize(
    "target", ["/../x", "/a/../../x", "/..", "/%zz", "/a%2", "/a%00b", "/a/%2e%2e/.."]
)
def test_a_target_unit_refuses_is_400_when_the_uri_is_looked_at(target: str) -> None:
    assert outcome({"uri": "*"}, target=target) == BAD_REQUEST
    # a table that never reads the path routes the request all the same
    assert outcome({"method": "GET"}, target=target) == HIT


def test_absolute_form_and_asterisk_targets() -> None:
    class Url:
        host, port, path, query = b"Other.ORG.", 8080, b"/p/../q", b"x=1"

    assert matches({"uri": "/q", "host": "other.org", "query": "x=1"}, absolute=Url())
    assert matches({"uri": ""}, target="*", method="OPTIONS")


# -- method, host, scheme ------------------------------------------------------------------------

METHOD_CASES = [
    ("GET", "GET", True),
    ("GET", "POST", False),
    ("get", "GET", True),  # patterns are upper-cased
    (["!HEAD", "!GET"], "POST", True),
    (["!HEAD", "!GET"], "GET", False),
    ("P*", "PUT", True),
    ("P*", "GET", False),
    (["POST", "PUT", "PATCH"], "PATCH", True),
    ("~^(GET|HEAD)$", "HEAD", True),
    ("~^get$", "GET", False),  # a regex does not fold
]


@pytest.mark.parametrize(("pattern", "method", "expected"), METHOD_CASES)
def test_method(pattern: Any, method: str, expected: bool) -> None:
    assert matches({"method": pattern}, method=method) is expected


HOST_CASES = [
    ("example.com", "example.com", True),
    ("example.com", "Example.COM:8080", True),
    ("example.com", "example.com.", True),
    ("example.com", "example.com.:80", True),
    ("EXAMPLE.com", "example.com", True),  # patterns are lower-cased
    ("example.com", "example.co", False),
    ("*.example.com", "a.example.com", True),
    ("*.example.com", "example.com", False),
    (["eu-*.example.com", "!eu-5.example.com"], "eu-1.example.com", True),
    (["eu-*.example.com", "!eu-5.example.com"], "eu-5.example.com", False),
    ("[::1]", "[::1]:8000", True),
    ("[::1]", "[::1]", True),
    ("", None, True),  # no Host field (HTTP/1.0): the empty host
    ("!", None, False),
    ("!", "a", True),
    ("~^[a-z]+\\.example\\.com$", "WWW.example.com", True),  # the host is lowered first
]


@pytest.mark.parametrize(("pattern", "host", "expected"), HOST_CASES)
def test_host(pattern: Any, host: str | None, expected: bool) -> None:
    assert matches({"host": pattern}, host=host) is expected


@pytest.mark.parametrize(
    ("pattern", "scheme", "expected"),
    [("https", "https", True), ("https", "http", False), ("HTTP", "http", True)],
)
def test_scheme(pattern: str, scheme: str, expected: bool) -> None:
    assert matches({"scheme": pattern}, scheme=scheme) is expected


# -- query and arguments -------------------------------------------------------------------------

QUERY_CASES = [
    ("utf8", "/?utf8", True),
    ("utf8", "/?utf16", False),
    (["utf8", "utf16"], "/?utf16", True),
    ("%7Efuzzy word search", "/?~fuzzy%20word%20search", True),
    ("a b", "/?a+b", True),  # '+' is a space in values...
    ("a+b", "/?a+b", True),  # ...and in patterns
    ("a%2Bb", "/?a%2Bb", True),
    ("a%2Bb", "/?a+b", False),
    ("a%25zz", "/?a%zz", True),  # a malformed escape in the request stays as it is
    ("x=1&*", "/?x=1&y=2", True),
    ("", "/", True),  # no query is the empty query
    ("*", "/", True),
    ("!", "/", False),
    ("!", "/?x", True),
    ("", "/?", True),
    ("~^id=\\d+$", "/?id=42", True),
]


@pytest.mark.parametrize(("pattern", "target", "expected"), QUERY_CASES)
def test_query(pattern: Any, target: str, expected: bool) -> None:
    assert matches({"query": pattern}, target=target) is expected


ARGUMENT_CASES = [
    ({"mode": "strict", "access": "!full"}, "/?mode=strict&access=part", True),
    ({"mode": "strict", "access": "!full"}, "/?access=part&mode=strict", True),
    ({"mode": "strict", "access": "!full"}, "/?mode=strict&access=full", False),
    ({"mode": "strict", "access": "!full"}, "/?mode=strict", False),  # absent fails a negation
    ({"key": "*"}, "/?key=4861&key=a4f3", True),
    ({"key": "a*"}, "/?key=4861&key=a4f3", False),  # every occurrence must match
    ({"key": "4*"}, "/?key=4861&key=4f", True),
    ([{"a": "1"}, {"b": "2"}], "/?b=2", True),
    ([{"a": "1"}, {"b": "2"}], "/?c=3", False),
    ([{"a": "1", "b": "2"}, {"c": "3"}], "/?a=1", False),
    ({"flag": ""}, "/?flag", True),  # no '=': the empty value
    ({"flag": ""}, "/?flag=", True),
    ({"flag": "!"}, "/?flag", False),
    ({"a b": "c d"}, "/?a+b=c%20d", True),
    ({"a%20b": "c+d"}, "/?a%20b=c+d", True),
    ({"a": "1"}, "/?&&a=1&", True),
    ({"a": "b=c"}, "/?a=b=c", True),
    ({"a": "x&b=y"}, "/?a=x%26b=y", True),  # a decoded '&' does not split
    ({"b": "*"}, "/?a=x%26b=y", False),
    ({"A": "1"}, "/?a=1", False),  # names are case-sensitive
    ({"a": "X"}, "/?a=x", False),  # values too
    ({"a": "~^\\d+$"}, "/?a=12", True),
    ([], "/", True),
    ({}, "/", True),
]


@pytest.mark.parametrize(("pattern", "target", "expected"), ARGUMENT_CASES)
def test_arguments(pattern: Any, target: str, expected: bool) -> None:
    assert matches({"arguments": pattern}, target=target) is expected


# -- headers and cookies -------------------------------------------------------------------------

HEADER_CASES = [
    ({"User-Agent": "curl*"}, [(b"user-agent", b"curl/8.5")], True),  # names fold
    ({"user-agent": "curl*"}, [(b"User-Agent", b"curl/8.5")], True),
    ({"Accept-Encoding": "*GZIP*"}, [(b"Accept-Encoding", b"gzip, br")], True),  # values fold
    ({"X-Foo": "!bar"}, [], False),  # absent fails whatever the pattern
    ({"X-Foo": "!bar"}, [(b"X-Foo", b"baz")], True),
    ({"X-Foo": "!bar"}, [(b"X-Foo", b"BAR")], False),
    ({"X-Foo": "!bar"}, [(b"X-Foo", b"")], True),  # present but empty
    ({"X-Foo": ""}, [(b"X-Foo", b"")], True),
    ({"X-Foo": "*"}, [], False),
    ({"X-Foo": "*"}, [(b"X-Foo", b"")], True),
    ({"X-A": "1*"}, [(b"X-A", b"10"), (b"X-A", b"2")], False),  # every occurrence
    ({"X-A": "1*"}, [(b"X-A", b"10"), (b"x-a", b"1x")], True),
    (
        [{"Accept-Encoding": "*gzip*", "User-Agent": "Mozilla/5.0*"}, {"User-Agent": "curl*"}],
        [(b"User-Agent", b"Mozilla/5.0 (X11)")],
        False,
    ),
    (
        [{"Accept-Encoding": "*gzip*", "User-Agent": "Mozilla/5.0*"}, {"User-Agent": "curl*"}],
        [(b"User-Agent", b"Mozilla/5.0 (X11)"), (b"Accept-Encoding", b"gzip")],
        True,
    ),
    (
        [{"Accept-Encoding": "*gzip*", "User-Agent": "Mozilla/5.0*"}, {"User-Agent": "curl*"}],
        [(b"User-Agent", b"curl/8")],
        True,
    ),
    ({"X": "~^abc$"}, [(b"X", b"ABC")], False),  # a regex does not fold
    ({"X": "~^abc$"}, [(b"X", b"abc")], True),
    ({"X": ["~^abc$", "DEF"]}, [(b"X", b"def")], True),
    ({"X": "é"}, [(b"X", "é".encode())], True),  # UTF-8 pattern, bytes compared
    ({"X": "é"}, [(b"X", "É".encode())], False),  # only ASCII folds
    ({"X": "*À*"}, [(b"X", "xàx".encode())], False),
    ({"Host": "example.com"}, [], True),  # the Host field is a header too
]


@pytest.mark.parametrize(("pattern", "headers", "expected"), HEADER_CASES)
def test_headers(pattern: Any, headers: list[tuple[bytes, bytes]], expected: bool) -> None:
    assert matches({"headers": pattern}, headers=headers) is expected


COOKIE_CASES = [
    ({"session": "abc*"}, [b"a=1; session=abcdef"], True),
    ({"Session": "abc*"}, [b"session=abcdef"], False),  # names are case-sensitive
    ({"session": "ABC*"}, [b"session=abcdef"], False),
    ({"session": "*"}, [b"other=1"], False),
    ({"session": "*"}, [], False),
    ({"session": ""}, [b"session="], True),
    ({"s": "x"}, [b"s=x  ; t=y"], True),  # trailing spaces of a value dropped
    ({"s": "x"}, [b"flag; s=x"], True),  # a part without '=' is ignored
    ({"s": "x"}, [b"a=1", b"s=x"], True),  # every Cookie field is read
    ({"s": "x*"}, [b"s=x1", b"s=y"], False),
    ({"s": "a=b"}, [b"s=a=b"], True),
    ([{"c1": "1"}, {"c2": "2"}], [b"c2=2"], True),
]


@pytest.mark.parametrize(("pattern", "cookies", "expected"), COOKIE_CASES)
def test_cookies(pattern: Any, cookies: list[bytes], expected: bool) -> None:
    headers = [(b"Cookie", value) for value in cookies]
    assert matches({"cookies": pattern}, headers=headers) is expected


# -- source and destination ----------------------------------------------------------------------

V6 = ("2001:db8:1::5", 4000, 0, 0)
ADDRESS_CASES = [
    ("192.0.2.10", ("192.0.2.10", 1), True),
    ("192.0.2.10", ("192.0.2.11", 1), False),
    ("10.0.0.0/8", ("10.200.0.1", 1), True),
    ("10.0.0.0/8", ("11.0.0.1", 1), False),
    ("10.1.1.0/16", ("10.1.200.3", 1), True),  # host bits ignored
    ("10.1.1.0/16", ("10.1.0.5", 1), True),
    ("2001:db8::1/32", ("2001:db8::", 1, 0, 0), True),
    ("0.0.0.0/0", ("203.0.113.9", 1), True),
    ("0.0.0.0/0", V6, False),
    ("192.0.2.1/32", ("192.0.2.1", 1), True),
    (["192.0.2.1-192.0.2.10", "!192.0.2.9"], ("192.0.2.5", 1), True),
    (["192.0.2.1-192.0.2.10", "!192.0.2.9"], ("192.0.2.9", 1), False),
    (["192.0.2.1-192.0.2.10", "!192.0.2.9"], ("192.0.2.11", 1), False),
    ("*:80", ("198.51.100.1", 80), True),
    ("*:80", ("198.51.100.1", 81), False),
    ("*:80", ("::1", 80, 0, 0), True),
    ("*:8000-8080", ("198.51.100.1", 8080), True),
    ("*:8000-8080", ("198.51.100.1", 8081), False),
    ("198.51.100.0/24:8000", ("198.51.100.7", 8000), True),
    ("198.51.100.0/24:8000", ("198.51.100.7", 8001), False),
    ("203.0.113.1-203.0.113.200:8080-8090", ("203.0.113.100", 8085), True),
    (["!10.0.0.0/8"], ("192.168.1.1", 1), True),  # negations only
    (["!10.0.0.0/8"], ("10.1.1.1", 1), False),
    ([], ("192.0.2.10", 1), False),  # Unit: an empty address list matches nothing
    ("2001:db8::/32", V6, True),
    ("2001:db8::/32", ("2001:db9::1", 1, 0, 0), False),
    ("2001:db8::/32", ("192.0.2.1", 1), False),  # IPv6 pattern, IPv4 peer
    ("192.0.2.1", ("::ffff:192.0.2.1", 1, 0, 0), False),  # mapped: an IPv6 peer, as in Unit
    ("::/0", V6, True),
    ("::1", ("::1", 5, 0, 0), True),
    ("[2001:db8:1::5]:4000", V6, True),
    ("[2001:db8:1::5]:4001", V6, False),
    ("[2001:db8::/48]:4000-4010", V6, False),
    ("[2001:db8::/32]:4000-4010", V6, True),
    ("2001:db8::-2001:db8:0:ffff::", V6, False),
    ("2001:db8::-2001:db8:1:ffff::", V6, True),
    ("fe80::/10", ("fe80::1%eth0", 1, 0, 2), True),  # a scope is not part of the address
    ("unix", "", True),
    ("unix", None, True),
    ("unix", ("127.0.0.1", 1), False),
    ("!unix", "", False),
    ("10.0.0.0/8", "", False),
    ("!10.0.0.0/8", "", True),
    ("*:80", "", False),
]


@pytest.mark.parametrize(("pattern", "peer", "expected"), ADDRESS_CASES)
def test_source(pattern: Any, peer: Any, expected: bool) -> None:
    assert matches({"source": pattern}, peer=peer) is expected


@pytest.mark.parametrize(("pattern", "local", "expected"), ADDRESS_CASES)
def test_destination(pattern: Any, local: Any, expected: bool) -> None:
    assert matches({"destination": pattern}, local=local, peer=("1.1.1.1", 1)) is expected


# -- conditions together; 'if' -----------------------------------------------------------------


def test_every_condition_must_hold() -> None:
    match = {"host": "example.com", "method": "GET", "uri": "/a", "headers": {"X": "1"}}
    assert matches(match, target="/a", headers=[(b"X", b"1")])
    assert not matches(match, target="/a", headers=[(b"X", b"2")])
    assert not matches(match, target="/b", headers=[(b"X", b"1")])
    assert not matches(match, target="/a", method="POST", headers=[(b"X", b"1")])
    assert matches({}, target="/anything")  # an empty match object holds


IF_CASES = [
    ("$arg_debug", "/?debug=1", True),
    ("$arg_debug", "/?debug=0", False),
    ("$arg_debug", "/?debug=false", False),
    ("$arg_debug", "/", False),
    ("!$arg_debug", "/", True),
    ("1", "/", True),
    ("null", "/", False),
    ("!", "/", True),
    ("${arg_a}${arg_b}", "/?a=0", False),
    ("${arg_a}${arg_b}", "/?a=0&b=1", True),
]


@pytest.mark.parametrize(("condition", "target", "expected"), IF_CASES)
def test_if(condition: str, target: str, expected: bool) -> None:
    assert matches({"if": condition}, target=target) is expected


# -- steps, named routes, passes ------------------------------------------------------------------


def test_first_matching_step_wins_and_no_match_is_404() -> None:
    router = compile_routes(
        [
            {"match": {"uri": "/a*"}, "action": {"return": 201}},
            {"match": {"uri": "/ab"}, "action": {"return": 202}},
            {"match": {"method": "POST"}, "action": {"pass": "applications/app"}},
        ]
    )
    assert router.resolve("routes", request("/ab")) == Respond(201)
    assert router.resolve("routes", request("/x", method="POST")) == ToApplication("app")
    assert router.resolve("routes", request("/x")) is NOT_FOUND
    assert compile_routes([]).resolve("routes", request("/")) is NOT_FOUND
    assert compile_routes({"e": []}).resolve("routes/e", request("/")) is NOT_FOUND


def test_named_routes_pass_to_each_other_and_to_applications() -> None:
    router = compile_routes(
        {
            "main": [
                {"match": {"scheme": "http"}, "action": {"pass": "routes/http_site"}},
                {"match": {"host": "blog.example.com"}, "action": {"pass": "applications/blog"}},
            ],
            "http_site": [
                {"match": {"uri": "/v2_site/*"}, "action": {"pass": "applications/v2"}},
                {"action": {"return": 403}},
            ],
            "slashes/in/name": [{"action": {"return": 204}}],
        },
        applications=["blog", "v2"],
    )
    assert router.route_names == ["routes/main", "routes/http_site", "routes/slashes/in/name"]
    assert router.resolve("routes/main", request("/v2_site/x")) == ToApplication("v2")
    assert router.resolve("routes/main", request("/x")) == Respond(403)
    blog = request("/x", host="blog.example.com", scheme="https")
    assert router.resolve("routes/main", blog) == ToApplication("blog")
    assert router.resolve("routes/main", request("/x", scheme="https")) is NOT_FOUND
    assert router.resolve("applications/blog", request("/")) == ToApplication("blog")
    assert router.resolve("routes/slashes%2Fin%2Fname", request("/")) == Respond(204)
    router.check_pass("routes/http_site")
    with pytest.raises(RouteError, match=r"^\$\.listeners\.x\.pass: 'routes/nope' names no route"):
        router.check_pass("routes/nope", "$.listeners.x.pass")
    with pytest.raises(RouteError, match="names no application"):
        router.check_pass("applications/other")
    with pytest.raises(RouteError, match="names no route"):
        router.check_pass("routes")  # the object form has no unnamed list


def test_variable_passes_are_looked_up_per_request() -> None:
    router = compile_routes(
        {
            "main": [{"action": {"pass": "routes/${method}_route"}}],
            "GET_route": [{"action": {"return": 201}}],
            "PUT_route": [{"action": {"pass": "applications/$arg_app"}}],
        },
        applications=["a", "b"],
    )
    assert router.resolve("routes/main", request("/")) == Respond(201)
    assert router.resolve("routes/main", request("/", method="HEAD")) is NOT_FOUND
    assert router.resolve("routes/main", request("/?app=b", method="PUT")) == ToApplication("b")
    assert router.resolve("routes/main", request("/?app=zz", method="PUT")) is NOT_FOUND
    assert router.resolve("routes/main", request("/?app=a/t", method="PUT")) is NOT_FOUND
    assert router.resolve("routes/main", request("/?app=", method="PUT")) is NOT_FOUND
    assert router.resolve("applications/$host", request("/", host="a")) == ToApplication("a")
    any_app = compile_routes([{"action": {"pass": "applications/$host"}}])
    assert any_app.resolve("routes", request("/", host="x.org")) == ToApplication("x.org")


def test_static_pass_loops_are_refused_with_the_place_and_the_cycle() -> None:
    message = error_of(
        {
            "a": [{"match": {"uri": "/x"}, "action": {"pass": "routes/b"}}],
            "b": [{"action": {"pass": "applications/app"}}, {"action": {"pass": "routes/c"}}],
            "c": [{"action": {"pass": "routes/a"}}],
        }
    )
    assert message == (
        "$.routes.c[0].action.pass: passes loop: routes/a -> routes/b -> routes/c -> routes/a"
    )
    assert error_of([{"action": {"pass": "routes"}}]) == (
        "$.routes[0].action.pass: passes loop: routes -> routes"
    )
    looping_fallback = {"s": [{"action": {"share": "/x", "fallback": {"pass": "routes/s"}}}]}
    assert error_of(looping_fallback) == (
        "$.routes.s[0].action.fallback.pass: passes loop: routes/s -> routes/s"
    )
    # a chain without a cycle is fine, whatever its length
    chain = {f"r{i}": [{"action": {"pass": f"routes/r{i + 1}"}}] for i in range(50)}
    chain["r50"] = [{"action": {"return": 200}}]
    assert compile_routes(chain).resolve("routes/r0", request()) == HIT


def test_variable_pass_loops_stop_after_max_hops() -> None:
    router = compile_routes({"a": [{"action": {"pass": "routes/$arg_next"}}]})
    assert router.resolve("routes/a", request("/?next=a")) is ROUTING_LOOP

    def chain(length: int) -> dict[str, Any]:
        # "$arg_none" expands to "": each pass is looked up per request
        routes = {
            f"r{i}": [{"action": {"pass": f"routes/r{i + 1}$arg_none"}}] for i in range(length)
        }
        routes[f"r{length}"] = [{"action": {"return": 200}}]
        return routes

    assert compile_routes(chain(MAX_HOPS)).resolve("routes/r0", request()) == HIT
    assert compile_routes(chain(MAX_HOPS + 1)).resolve("routes/r0", request()) is ROUTING_LOOP


# -- actions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "target", "expected"),
    [
        ({"return": 0}, "/", Respond(0)),
        ({"return": 999}, "/", Respond(999)),
        ({"return": 403}, "/", Respond(403)),
        (
            {"return": 301, "location": "https://example.com"},
            "/",
            Respond(301, "https://example.com"),
        ),
        ({"return": 302, "location": "/a b/ü"}, "/", Respond(302, "/a%20b/%C3%BC")),
        (
            {"return": 302, "location": "/already%20encoded"},
            "/",
            Respond(302, "/already%20encoded"),
        ),
        ({"return": 302, "location": "/50%"}, "/", Respond(302, "/50%25")),
        (
            {"return": 301, "location": "https://$host$request_uri"},
            "/p%20q?x=1",
            Respond(301, "https://example.com/p%20q?x=1"),
        ),
        (
            {"return": 301, "location": "https://$host$uri"},
            "/p%20q",
            Respond(301, "https://example.com/p%20q"),
        ),
        ({"return": 200, "location": "$arg_to"}, "/?to=", Respond(200, "")),
    ],
)
def test_return(action: dict[str, Any], target: str, expected: Respond) -> None:
    assert compile_routes([{"action": action}]).resolve("routes", request(target)) == expected


def test_constant_actions_are_built_once() -> None:
    router = compile_routes([{"action": {"return": 301, "location": "/x"}}])
    assert router.resolve("routes", request()) is router.resolve("routes", request("/y"))


def test_share_is_a_marker_with_its_options_and_fallback() -> None:
    router = compile_routes(
        {
            "main": [
                {
                    "match": {"uri": "*.css"},
                    "action": {
                        "share": ["/www/$host$uri", "/www/common$uri"],
                        "chroot": "/www/",
                        "index": "default.html",
                        "types": ["!text/javascript", "text/*", "~video/3gpp2?"],
                        "follow_symlinks": False,
                        "fallback": {"share": "/cache$uri", "fallback": {"pass": "routes/app"}},
                    },
                },
                {"action": {"share": "/static/index.html"}},
            ],
            "app": [{"action": {"pass": "applications/app"}}],
        }
    )
    share = router.resolve("routes/main", request("/a/b.css", host="Site.ORG"))
    assert isinstance(share, Share)
    assert share.paths == ("/www/site.org/a/b.css", "/www/common/a/b.css")
    assert (share.chroot, share.index, share.follow_symlinks, share.traverse_mounts) == (
        "/www/",
        "default.html",
        False,
        True,
    )
    assert share.type_allowed("text/css") and share.type_allowed("TEXT/HTML")
    assert not share.type_allowed("text/javascript")
    assert share.type_allowed("video/3gpp") and not share.type_allowed("image/png")
    second = router.resolve_fallback(share, request("/a/b.css"))
    assert isinstance(second, Share) and second.paths == ("/cache/a/b.css",)
    assert router.resolve_fallback(second, request("/a/b.css")) == ToApplication("app")
    plain = router.resolve("routes/main", request("/x"))
    assert plain == Share(("/static/index.html",))
    assert plain.type_allowed("anything") and plain.index == "index.html"
    assert router.resolve_fallback(plain, request("/x")) is NOT_FOUND


def test_unknown_mime_type_is_the_empty_string() -> None:
    router = compile_routes([{"action": {"share": "/x$uri", "types": ["!"]}}])
    share = router.resolve("routes", request("/f"))
    assert isinstance(share, Share)
    assert share.type_allowed("text/plain") and not share.type_allowed("")


# -- variables -------------------------------------------------------------------------------------

VARIABLE_CASES = [
    ("$uri", "/a/./b/../c%20d?x=1", [], "/a/c d"),
    ("$request_uri", "/a/./b?x=%20", [], "/a/./b?x=%20"),
    ("$host|${host}", "/", [], "example.com|example.com"),
    ("$method", "/", [], "GET"),
    ("$remote_addr", "/", [], "192.0.2.10"),
    ("${dollar}x$dollar", "/", [], "$x$"),
    ("$arg_a", "/?a=1&a=2+3", [], "2 3"),  # the last occurrence
    ("$arg_missing.", "/", [], "."),
    ("$arg_a%20b", "/?a=v", [], "v%20b"),  # a name ends at the first other character
    ("${arg_a%20b}", "/?a+b=v", [], "v"),  # argument names are decoded
    (
        "$header_x_forwarded_for",
        "/",
        [(b"X-Forwarded-For", b"1.1.1.1"), (b"x-forwarded-for", b"2")],
        "1.1.1.1",
    ),
    ("${header_accept-encoding}", "/", [(b"Accept-Encoding", b"gzip")], "gzip"),
    ("$header_User_Agent", "/", [(b"user-agent", b"ua")], "ua"),
    ("$cookie_s", "/", [(b"Cookie", b"s=1; s=2")], "1"),
    ("$cookie_S", "/", [(b"Cookie", b"s=1")], ""),
    ("pre${uri}post", "/x", [], "pre/xpost"),
    ("$uri_", "/x", [], None),  # '$uri_' is one name: unknown
]


@pytest.mark.parametrize(("template", "target", "headers", "expected"), VARIABLE_CASES)
def test_variables(
    template: str, target: str, headers: list[tuple[bytes, bytes]], expected: str | None
) -> None:
    routes = [{"action": {"share": template}}]
    if expected is None:
        assert "unknown variable $uri_" in error_of(routes)
        return
    share = compile_routes(routes).resolve("routes", request(target, headers=headers))
    assert isinstance(share, Share)
    assert share.paths == (expected,)


def test_remote_addr_of_a_unix_peer_is_empty() -> None:
    router = compile_routes([{"action": {"share": "[$remote_addr]"}}])
    share = router.resolve("routes", request(peer=""))
    assert isinstance(share, Share) and share.paths == ("[]",)


def test_uri_variable_of_a_refused_target_is_400() -> None:
    router = compile_routes([{"action": {"return": 301, "location": "$uri"}}])
    assert router.resolve("routes", request("/../x")) == BAD_REQUEST


# -- errors ----------------------------------------------------------------------------------------


def when(match: Any) -> list[dict[str, Any]]:
    """Routes of one step that returns 200 when ``match`` holds."""
    return [{"match": match, "action": {"return": 200}}]


def doing(action: Any) -> list[dict[str, Any]]:
    """Routes of one step that always takes ``action``."""
    return [{"action": action}]


ERROR_CASES = [
    (5, "$.routes: expected an array of route steps or an object of named arrays, got 5"),
    ("x", "$.routes: expected an array of route steps or an object of named arrays, got 'x'"),
    ({"main": {}}, "$.routes.main: expected an array of route steps, got an object"),
    ({"a b": [5]}, '$.routes["a b"][0]: expected a route step (an object), got 5'),
    ({"café": [5]}, '$.routes["café"][0]: expected a route step (an object), got 5'),
    ([None], "$.routes[0]: expected a route step (an object), got null"),
    ([{}], "$.routes[0]: a route step needs an 'action'"),
    ([{"match": {}}], "$.routes[0]: a route step needs an 'action'"),
    (
        [{"action": {"return": 200}, "x": 1}],
        "$.routes[0].x: unknown route step option (expected one of match, action)",
    ),
    (
        [{"match": [], "action": {"return": 200}}],
        "$.routes[0].match: expected match conditions (an object), got an array",
    ),
    (when({"url": "/"}), "$.routes[0].match.url: unknown match option"),
    (
        {"main": [{"action": {"return": 200}}, {"match": {"uri": 5}, "action": {"return": 200}}]},
        "$.routes.main[1].match.uri: expected a pattern string or an array of them, got 5",
    ),
    (when({"uri": ["/a", 5]}), "$.routes[0].match.uri[1]: expected a pattern string, got 5"),
    (when({"uri": "/a**"}), "$.routes[0].match.uri: pattern '/a**' has '**'"),
    (when({"uri": "!**"}), "has '**'"),
    (when({"uri": "~("}), "$.routes[0].match.uri: invalid regular expression '~(': "),
    (
        when({"uri": "/a%zz"}),
        "$.routes[0].match.uri: pattern '/a%zz': '%' must be followed by two hex digits",
    ),
    (when({"query": ["%"]}), "$.routes[0].match.query[0]: pattern '%': '%' must be"),
    (when({"scheme": "ftp"}), '$.routes[0].match.scheme: expected "http" or "https", got \'ftp\''),
    (
        when({"scheme": ["http"]}),
        '$.routes[0].match.scheme: expected "http" or "https", got an array',
    ),
    (
        when({"headers": 5}),
        "$.routes[0].match.headers: expected an object or an array of objects, got 5",
    ),
    (
        when({"headers": [{"a": "b"}, 5]}),
        "$.routes[0].match.headers[1]: expected an object of header names and patterns, got 5",
    ),
    (when({"headers": {"": "x"}}), "$.routes[0].match.headers: a header name must not be empty"),
    (
        when({"headers": {"X": 1}}),
        "$.routes[0].match.headers.X: expected a pattern string or an array of them, got 1",
    ),
    (
        when({"cookies": {"a-b": [True]}}),
        '$.routes[0].match.cookies["a-b"][0]: expected a pattern string, got true',
    ),
    (
        when({"arguments": {"a%zz": "x"}}),
        "$.routes[0].match.arguments[\"a%zz\"]: argument name 'a%zz': '%' must be",
    ),
    (
        when({"source": 5}),
        "$.routes[0].match.source: expected an address pattern or an array of them, got 5",
    ),
    (when({"source": "*"}), "$.routes[0].match.source: address pattern '*': '*' needs a port"),
    (
        when({"source": ["10.0.0.0/33"]}),
        "$.routes[0].match.source[0]: address pattern '10.0.0.0/33': expected a CIDR prefix",
    ),
    (when({"source": "1.2.3.4:99999"}), "expected a port (0-65535)"),
    (when({"source": "1.2.3.4:"}), "expected a port (0-65535)"),
    (when({"source": "*:90-80"}), "after '*:'"),
    (when({"source": "[::1]"}), "a bracketed IPv6 address needs a port"),
    (when({"source": "1.2.3.4-1.2.3.1"}), "the range starts above its end"),
    (when({"source": "300.1.1.1"}), "expected an IPv4 address, a CIDR block or a range"),
    (when({"source": "1.2.3"}), "expected an IPv4 address"),
    (when({"source": "2001:db8::12345"}), "expected an IPv6 address"),
    (
        when({"destination": "::1/129"}),
        "$.routes[0].match.destination: address pattern '::1/129': expected a CIDR prefix",
    ),
    (when({"if": 1}), "$.routes[0].match.if: expected a string, got 1"),
    (when({"if": "`${uri}`"}), "template literals (njs) are not supported"),
    (
        doing({}),
        "$.routes[0].action: an action needs exactly one of pass, return, share, proxy; got none",
    ),
    ([{"action": 5}], "$.routes[0].action: expected an action (an object), got 5"),
    (doing({"pass": "applications/a", "return": 200}), "got pass and return"),
    (
        doing({"proxy": "http://localhost:8080"}),
        "$.routes[0].action.proxy: expected an IP address (not a name), got 'localhost'",
    ),
    (
        doing({"proxy": "https://127.0.0.1:8080"}),
        '$.routes[0].action.proxy: expected "http://ADDRESS" (only http is proxied)',
    ),
    (doing({"proxy": "http://127.0.0.1"}), "expected host:port with a port from 1 to 65535"),
    (doing({"proxy": "http://unix:run/a.sock"}), "expected an absolute unix socket path"),
    (doing({"proxy": 8080}), '$.routes[0].action.proxy: expected "http://ADDRESS", got 8080'),
    (
        doing({"pass": "applications/a", "rewrite": "/x"}),
        "$.routes[0].action.rewrite: 'rewrite' is not supported",
    ),
    (
        doing({"return": 200, "response_headers": {}}),
        "$.routes[0].action.response_headers: 'response_headers' is supported on share actions",
    ),
    (doing({"return": 1000}), "$.routes[0].action.return: expected a status code 0-999, got 1000"),
    (doing({"return": -1}), "expected a status code 0-999, got -1"),
    (doing({"return": "301"}), "expected a status code 0-999, got '301'"),
    (doing({"return": True}), "expected a status code 0-999, got true"),
    (doing({"return": 301.0}), "expected a status code 0-999, got 301.0"),
    (
        doing({"return": 301, "location": 5}),
        "$.routes[0].action.location: expected a URI string, got 5",
    ),
    (doing({"return": 301, "pass": "x"}), "got pass and return"),
    (
        doing({"return": 301, "index": "x"}),
        "$.routes[0].action.index: unknown return action option",
    ),
    (
        doing({"pass": "applications/a", "location": "/"}),
        "$.routes[0].action.location: unknown pass action option",
    ),
    (
        doing({"share": []}),
        "$.routes[0].action.share: expected a path or a non-empty array of paths, got an array",
    ),
    (doing({"share": ["/a", 5]}), "$.routes[0].action.share[1]: expected a path string, got 5"),
    (
        doing({"share": "/a", "fallback": 5}),
        "$.routes[0].action.fallback: expected an action (an object), got 5",
    ),
    (
        doing({"share": "/a", "fallback": {"proxy": "x"}}),
        '$.routes[0].action.fallback.proxy: expected "http://ADDRESS"',
    ),
    (doing({"share": "/a", "index": 5}), "$.routes[0].action.index: expected a file name, got 5"),
    (
        doing({"share": "/a", "follow_symlinks": "yes"}),
        "$.routes[0].action.follow_symlinks: expected true or false",
    ),
    (
        doing({"share": "/a", "chroot": 5}),
        "$.routes[0].action.chroot: expected a directory path, got 5",
    ),
    (
        doing({"share": "/a", "types": [5]}),
        "$.routes[0].action.types[0]: expected a pattern string, got 5",
    ),
    (doing({"share": "/a", "foo": 1}), "$.routes[0].action.foo: unknown share action option"),
    (doing({"pass": 5}), "$.routes[0].action.pass: expected a pass target string, got 5"),
    (
        doing({"pass": "routes/missing"}),
        "$.routes[0].action.pass: 'routes/missing' names no route of the configuration",
    ),
    ({"r": [{"action": {"pass": "routes"}}]}, "$.routes.r[0].action.pass: 'routes' names no route"),
    (
        doing({"pass": "applications"}),
        "$.routes[0].action.pass: invalid pass target 'applications': 'applications/NAME'",
    ),
    (
        doing({"pass": "applications/a/target"}),
        "$.routes[0].action.pass: 'applications/a/target' names no target of application 'a'",
    ),
    (doing({"pass": "upstreams/u"}), "'upstreams/u' names no upstream of the configuration"),
    (doing({"pass": "applications//"}), "invalid pass target 'applications//'"),
    (doing({"pass": "routes/a/b/c"}), "invalid pass target"),
    (doing({"pass": "apps/x"}), "expected applications/NAME, routes, routes/NAME or upstreams"),
    (doing({"pass": "applications/a%zz"}), "invalid pass target"),
    (
        doing({"return": 301, "location": "/$nope"}),
        "$.routes[0].action.location: unknown variable $nope (routes know uri, host",
    ),
    (
        doing({"return": 301, "location": "/$status"}),
        "variable $status has no value before a response exists",
    ),
    (doing({"return": 301, "location": "/$response_header_x"}), "has no value before a response"),
    (
        doing({"return": 301, "location": "/$"}),
        "'$' without a variable name in '/$' (a literal '$' is $dollar)",
    ),
    (doing({"return": 301, "location": "/${uri"}), "unclosed '${' in '/${uri'"),
    (doing({"share": "/${}"}), "'$' without a variable name"),
]


@pytest.mark.parametrize(("routes", "expected"), ERROR_CASES)
def test_errors_name_the_place_and_what_was_expected(routes: Any, expected: str) -> None:
    message = error_of(routes)
    if expected.startswith("$."):
        assert message.startswith(expected), message
    else:
        assert expected in message, message


def test_unknown_application_is_an_error_only_when_applications_are_known() -> None:
    routes = [{"action": {"pass": "applications/zz"}}]
    assert compile_routes(routes).resolve("routes", request()) == ToApplication("zz")
    assert error_of(routes, applications=["a"]) == (
        "$.routes[0].action.pass: 'applications/zz' names no application of the configuration"
    )
    assert error_of(5, path="config.json: $.routes").startswith("config.json: $.routes: expected")
    with pytest.raises(RouteError) as info:
        compile_routes([{"action": 1}])
    assert (info.value.path, info.value.detail) == (
        "$.routes[0].action",
        "expected an action (an object), got 1",
    )


def test_no_routes_at_all() -> None:
    router = compile_routes(None)
    assert router.route_names == []
    assert router.resolve("applications/a", request()) == ToApplication("a")
    with pytest.raises(RouteError, match="names no route"):
        router.check_pass("routes")


# -- properties (hypothesis) -------------------------------------------------------------------


def reference_glob(pattern: str, value: str) -> bool:
    """'*' is any run of characters, everything else itself."""
    regex = ".*".join(re.escape(piece) for piece in pattern.split("*"))
    return re.fullmatch(regex, value, re.DOTALL) is not None


wildcards = st.text(alphabet="ab*", max_size=8).filter(lambda p: "**" not in p)
values = st.text(alphabet="abc", max_size=10)


@settings(max_examples=500, deadline=None)
@given(wildcards, values)
def test_a_wildcard_agrees_with_glob_semantics(pattern: str, value: str) -> None:
    assert pattern_matcher(pattern)(value) is reference_glob(pattern, value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), wildcards), max_size=5), values)
def test_a_pattern_list_is_any_positive_and_no_negative(
    patterns: list[tuple[bool, str]], value: str
) -> None:
    positive = [p for negated, p in patterns if not negated]
    negative = [p for negated, p in patterns if negated]
    expected = not any(reference_glob(p, value) for p in negative) and (
        not positive or any(reference_glob(p, value) for p in positive)
    )
    listed = [("!" if negated else "") + p for negated, p in patterns]
    assert pattern_matcher(listed)(value) is expected


path_segments = st.lists(
    st.sampled_from(["a", "b", ".", "..", "", "%2e", "%2F", "x%20y"]), max_size=8
)


@settings(max_examples=300, deadline=None)
@given(path_segments)
def test_normalized_paths_are_clean_and_stable(segments: list[str]) -> None:
    raw = "/" + "/".join(segments)
    try:
        path = normalize_path(raw)
    except ValueError:
        return  # above the root
    assert path.startswith("/")
    assert "//" not in path
    assert all(part not in (".", "..") for part in path.split("/"))
    assert normalize_path(path.replace("%", "%25")) == path


# -- the request as the worker builds it ----------------------------------------------------------


class Heads(RequestSink):
    def __init__(self) -> None:
        self.heads: list[Any] = []

    def on_request(self, head: Any) -> None:
        self.heads.append(head)

    def on_body(self, chunk: bytes) -> None:
        pass

    def on_request_end(self) -> None:
        pass


def parse(raw: bytes) -> Any:
    sink = Heads()
    RequestParser(sink, Limits()).feed(raw)
    return sink.heads[0]


def test_from_a_parsed_head() -> None:
    router = compile_routes(
        [
            {
                "match": {
                    "host": "api.example.com",
                    "uri": "/v1/*",
                    "headers": {"Authorization": "Bearer *"},
                    "arguments": {"page": "~^\\d+$"},
                    "cookies": {"s": "*"},
                    "source": "127.0.0.0/8",
                    "destination": "*:8000",
                },
                "action": {"pass": "applications/api"},
            },
        ]
    )
    head = parse(
        b"GET /v1/../v1/items?page=2 HTTP/1.1\r\nHost: API.example.com:8000\r\n"
        b"Authorization: bearer xyz\r\nCookie: s=1\r\n\r\n"
    )
    req = RouteRequest.from_head(head, ("127.0.0.1", 40000), ("127.0.0.1", 8000))
    assert router.resolve("routes", req) == ToApplication("api")
    absolute = parse(b"GET http://api.example.com/v1/x?page=1 HTTP/1.1\r\nHost: other\r\n\r\n")
    plain = RouteRequest.from_head(absolute, ("127.0.0.1", 1), ("127.0.0.1", 8000))
    assert router.resolve("routes", plain) is NOT_FOUND  # no Authorization, no cookie
    assert plain.host() == "api.example.com" and plain.path() == "/v1/x"


def test_the_module_stays_out_of_asyncio_and_sockets() -> None:
    code = (
        "import sys, corral.routing\n"
        "bad = {'asyncio', 'uvloop', 'httptools', 'msgspec'} & set(sys.modules)\n"
        "assert not bad, bad\n"
    )
    env_path = str(ROOT / "src")
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": env_path})


def test_address_patterns_load_without_the_route_compiler() -> None:
    """A listener's ``forwarded`` and the configuration's checks parse address patterns with
    corral.net.addresses alone: the routes are not loaded for them."""
    code = (
        "import sys, corral.net.addresses, corral.filters.forwarded, corral.server.proxied\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('corral.routing'))\n"
        "assert not loaded, loaded\n"
    )
    env_path = str(ROOT / "src")
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": env_path})


def test_an_address_pattern_outside_routes_is_an_address_error() -> None:
    with pytest.raises(AddressError) as info:
        address_matcher(["10.0.0.1", "10.0.0.0/40"], '$.listeners["*:80"].forwarded.source')
    assert str(info.value) == (
        "$.listeners[\"*:80\"].forwarded.source[1]: address pattern '10.0.0.0/40': "
        "expected a CIDR prefix length 0-32 after '/'"
    )
    assert not isinstance(info.value, RouteError)  # the routes' own errors stay theirs


def test_application_targets() -> None:
    """A pass to applications/NAME/TARGET resolves to the target's position in NAME's
    targets; applications/NAME to the first (Unit's default target); an unknown target from
    variables is 404."""
    routes = [
        {"match": {"uri": "/two"}, "action": {"pass": "applications/a/t2"}},
        {"match": {"uri": "/var/*"}, "action": {"pass": "applications/a/$arg_t"}},
        {"action": {"pass": "applications/a"}},
    ]
    router = compile_routes(routes, applications={"a": ("t1", "t2"), "b": ()})
    assert router.resolve("routes", request("/two")) == ToApplication("a", 1)
    assert router.resolve("routes", request("/")) == ToApplication("a", 0)
    assert router.resolve("routes", request("/var/x?t=t2")) == ToApplication("a", 1)
    assert router.resolve("routes", request("/var/x?t=t9")).status == 404
    assert router.resolve("applications/a/t2", request("/")) == ToApplication("a", 1)
    with pytest.raises(RouteError, match="names no target of application 'b'"):
        router.check_pass("applications/b/t1")


# -- actions kept by target (Route.by_target)


def test_a_route_of_uri_and_method_keeps_each_targets_action() -> None:
    router = compile_routes(
        {
            "main": [
                {"match": {"method": "POST"}, "action": {"return": 405}},
                {"match": {"uri": "/static/*"}, "action": {"share": "/srv$uri"}},
                {"action": {"pass": "routes/rest"}},
            ],
            "rest": [{"match": {"uri": "/old"}, "action": {"return": 301, "location": "/new$uri"}}],
        }
    )
    kept = router._routes["main"].by_target
    assert kept == {}
    first = router.resolve("routes/main", request("/static/a.css"))
    assert first.paths == ("/srv/static/a.css",)
    # the same method and target: the action kept, whatever else the request holds
    assert router.resolve("routes/main", request("/static/a.css", host="other")) is first
    assert router.resolve("routes/main", request("/static/b.css")).paths == ("/srv/static/b.css",)
    assert router.resolve("routes/main", request("/static/a.css", method="POST")) == Respond(405)
    assert router.resolve("routes/main", request("/old")) == Respond(301, "/new/old")
    assert router.resolve("routes/main", request("/%zz")) is BAD_REQUEST
    assert set(kept) == {
        ("GET", b"/static/a.css"),
        ("GET", b"/static/b.css"),
        ("POST", b"/static/a.css"),
        ("GET", b"/old"),
        ("GET", b"/%zz"),
    }


@pytest.mark.parametrize(
    "routes",
    [
        # a condition on more than the method and target
        [{"match": {"host": "a.example"}, "action": {"return": 200}}, {"action": {"return": 404}}],
        [{"match": {"arguments": {"x": "1"}}, "action": {"return": 200}}],
        [{"match": {"headers": {"accept": "*json*"}}, "action": {"return": 200}}],
        [{"match": {"source": "10.0.0.0/8"}, "action": {"return": 200}}],
        [{"match": {"if": "$arg_debug"}, "action": {"return": 200}}],
        # an action reading more than the target
        [{"action": {"share": "/srv/$host$uri"}}],
        [{"action": {"share": "/srv$uri", "chroot": "/srv/$cookie_site"}}],
        [{"action": {"return": 301, "location": "https://$host$request_uri"}}],
        [{"action": {"pass": "applications/$header_app"}}],
    ],
)
def test_a_route_reading_more_than_the_target_walks_each_request(routes: list) -> None:
    router = compile_routes(routes)
    assert router._routes[None].by_target is None


def test_a_route_passing_to_one_that_reads_more_keeps_nothing() -> None:
    router = compile_routes(
        {
            "main": [{"match": {"uri": "/api/*"}, "action": {"pass": "routes/api"}}],
            "api": [
                {"match": {"host": "a.example"}, "action": {"return": 200}},
                {"action": {"return": 404}},
            ],
        }
    )
    assert router._routes["main"].by_target is None
    assert router.resolve("routes/main", request("/api/x", host="a.example")) == Respond(200)
    assert router.resolve("routes/main", request("/api/x", host="b.example")) == Respond(404)


def test_the_actions_kept_by_target_are_bounded() -> None:
    router = compile_routes([{"action": {"share": "/srv$uri"}}])
    kept = router._routes[None].by_target
    assert kept is not None
    for i in range(KEPT_BY_TARGET + 10):
        action = router.resolve("routes", request(f"/f{i}"))
        assert action.paths == (f"/srv/f{i}",)
        assert len(kept) <= KEPT_BY_TARGET
    assert router.resolve("routes", request("/f1")).paths == ("/srv/f1",)
