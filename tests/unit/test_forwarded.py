"""`Forwarding` against NGINX Unit's own expectations (its test_forwarded_header.py cases),
and the environ's header-name rule for each `discard_unsafe_fields` value. No sockets: the
integration side is tests/integration/test_forwarded.py."""

from __future__ import annotations

import pytest

from corral.apps.wsgi.environ import request_environ, set_unsafe_fields
from corral.filters.forwarded import Forwarding, parse_address
from corral.http.head import RequestHead

XFF = b"X-Forwarded-For"


def client(forwarding: Forwarding, *values: str) -> str | None:
    found = forwarding.resolve([(XFF, value.encode()) for value in values])
    return None if found is None else found.address


def test_the_rightmost_address_of_the_last_field() -> None:
    plain = Forwarding("127.0.0.1", client_ip="X-Forwarded-For")
    assert client(plain, "8.8.8.8, 84.23.23.11") == "84.23.23.11"
    assert client(plain, "8.8.8.8, 84.23.23.11, 127.0.0.1") == "127.0.0.1"
    assert client(plain, "8.8.8.8", "127.0.0.1, 10.0.1.1") == "10.0.1.1"
    assert client(plain, "blah") is None
    for address in ("2001:db8:3c4d:15::1a2f:1a2b", "2001::3c4d:15:1a2f:1a2b", "::11.22.33.44"):
        assert client(plain, address) == address


def test_recursive_as_unit() -> None:
    recursive = Forwarding(
        ["127.0.0.1", "10.50.0.17", "10.5.2.1"], client_ip="X-Forwarded-For", recursive=True
    )
    assert client(recursive, "1.1.1.1") == "1.1.1.1"
    assert client(recursive, "1.1.1.1, 10.5.2.1") == "1.1.1.1"
    assert client(recursive, "8.8.8.8, 1.1.1.1, 10.5.2.1") == "1.1.1.1"
    assert client(recursive, "10.50.0.17, 10.5.2.1, 10.5.2.1") == "10.50.0.17"
    assert client(recursive, "8.8.8.8", "1.1.1.1, 127.0.0.1") == "1.1.1.1"
    assert client(recursive, "8.8.8.8", "1.1.1.1, 127.0.0.1", "10.5.2.1") == "1.1.1.1"
    assert client(recursive, "10.5.2.1", "10.50.0.17, 1.1.1.1", "10.5.2.1") == "1.1.1.1"
    chain = "8.8.8.8, 2001:db8:3c4d:15::1a2f:1a2b, 127.0.0.1"
    assert client(recursive, chain) == "2001:db8:3c4d:15::1a2f:1a2b"


@pytest.mark.parametrize(
    ("value", "scheme"),
    [("https", "https"), ("oN", "https"), ("HTTP", "http"), ("http, https", None), ("x", None)],
)
def test_the_protocol_values(value: str, scheme: str | None) -> None:
    forwarding = Forwarding("127.0.0.1", protocol="x-forwarded-proto")
    found = forwarding.resolve([(b"X-Forwarded-Proto", value.encode())])
    assert (found.scheme if found is not None else None) == scheme


def test_trust_is_the_peer_against_source() -> None:
    forwarding = Forwarding(["127.0.0.0-127.0.0.1", "unix"], client_ip="X-Forwarded-For")
    assert forwarding.trusts(("127.0.0.1", 4000))
    assert not forwarding.trusts(("127.0.0.2", 4000))
    assert not forwarding.trusts(("::1", 4000, 0, 0))
    assert forwarding.trusts("/run/corral.sock")
    assert not Forwarding([], client_ip="X").trusts(("127.0.0.1", 1))  # Unit: matches nothing


def test_trust_remembered_by_host_only_while_ports_do_not_count() -> None:
    by_host = Forwarding(["10.0.0.0/8", "!10.0.0.9"], client_ip="X-Forwarded-For")
    for port in (4000, 4001, 4000):  # asked again: the remembered verdict, the same
        assert by_host.trusts(("10.1.2.3", port))
        assert not by_host.trusts(("10.0.0.9", port))
    by_port = Forwarding(["127.0.0.1:1000-2000"], client_ip="X-Forwarded-For")
    assert by_port.trusts(("127.0.0.1", 1500))
    assert not by_port.trusts(("127.0.0.1", 4000))  # same host, another port: not trusted
    assert by_port.trusts(("127.0.0.1", 2000))


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("1.2.3.4", ("1.2.3.4", None)),
        ("1.2.3.4:80", ("1.2.3.4", 80)),
        ("[::1]:443", ("::1", 443)),
        ("[::1]", ("::1", None)),
        ("0.0.0.0", None),
        ("::", None),
        ("1.2.3.4:0", None),
        ("1.2.3.4:x", None),
        ("[::1]x", None),
        ("unix:/tmp/s", None),
    ],
)
def test_parse_address(text: str, parsed: tuple | None) -> None:
    result = parse_address(text.encode())
    assert (result[:2] if result is not None else None) == parsed


def test_an_unsafe_header_name_is_never_read_when_unit_discards_it() -> None:
    headers = [(b"X_Real_IP", b"192.0.2.1"), (b"X.Real.IP", b"192.0.2.2")]
    assert Forwarding("127.0.0.1", client_ip="X_Real_IP").resolve(headers) is None
    kept = Forwarding("127.0.0.1", client_ip="X_Real_IP", discard_unsafe_fields=False)
    assert kept.resolve(headers).address == "192.0.2.1"  # type: ignore[union-attr]
    # the default keeps a name without "_"; Unit's true does not
    dotted = Forwarding("127.0.0.1", client_ip="X.Real.IP")
    assert dotted.resolve(headers).address == "192.0.2.2"  # type: ignore[union-attr]
    unit = Forwarding("127.0.0.1", client_ip="X.Real.IP", discard_unsafe_fields=True)
    assert unit.resolve(headers) is None


HEADERS = [(b"X_Foo", b"u"), (b"X.Foo", b"d"), (b"X-Foo", b"h"), (b"Host", b"h")]


@pytest.mark.parametrize(
    ("discard", "expected"),
    [
        (True, {"HTTP_X_FOO": "h"}),  # Unit's: letters, digits and "-" only
        (None, {"HTTP_X_FOO": "h", "HTTP_X.FOO": "d"}),  # Gunicorn's: every name without "_"
        (False, {"HTTP_X_FOO": "u, h", "HTTP_X.FOO": "d"}),
    ],
)
def test_discard_unsafe_fields_in_the_environ(discard: bool | None, expected: dict) -> None:
    head = RequestHead("GET", b"/", "1.1", HEADERS, True, None, False, False)
    set_unsafe_fields(discard)
    try:
        environ = request_environ({}, head, None)
        # twice: the second time from the name cache
        assert request_environ({}, head, None) == environ
    finally:
        set_unsafe_fields(None)
    found = {k: v for k, v in environ.items() if k.startswith("HTTP_") and k != "HTTP_HOST"}
    assert found == expected
