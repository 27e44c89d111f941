"""corral.http.proxyheader: PROXY protocol headers (v1 text, v2 binary) parsed sans I/O.

Every header is fed whole, split in two at every byte, and one byte at a time; what follows
the header must come back untouched, and a refusal must come at some feed whatever the split.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from corral.http.proxyheader import V1_MAX, V2_SIGNATURE, ProxyHeaderError, ProxyHeaderParser

REQUEST = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"


def v2(command: int, family: int, transport: int, addresses: bytes, tlvs: bytes = b"") -> bytes:
    block = addresses + tlvs
    return (
        V2_SIGNATURE
        + bytes([0x20 | command, family << 4 | transport])
        + (struct.pack(">H", len(block)) + block)
    )


def inet(source: str, destination: str, sport: int, dport: int) -> bytes:
    return (
        socket.inet_aton(source) + socket.inet_aton(destination) + struct.pack(">HH", sport, dport)
    )


def inet6(source: str, destination: str, sport: int, dport: int) -> bytes:
    return (
        socket.inet_pton(socket.AF_INET6, source)
        + socket.inet_pton(socket.AF_INET6, destination)
        + struct.pack(">HH", sport, dport)
    )


def feeds(data: bytes) -> Iterator[tuple[str, list[bytes]]]:
    yield "whole", [data]
    for cut in range(1, len(data)):
        yield f"split at {cut}", [data[:cut], data[cut:]]
    yield "byte by byte", [data[i : i + 1] for i in range(len(data))]


def parse(pieces: list[bytes], **versions: bool) -> tuple[ProxyHeaderParser, bytes]:
    """Feed ``pieces`` until the header is complete; the parser and every byte after it."""
    parser = ProxyHeaderParser(**versions)
    rest = None
    after = []
    for piece in pieces:
        if rest is None:
            rest = parser.feed(piece)
            if rest is not None:
                after.append(rest)
        else:
            after.append(piece)
    assert rest is not None, "the header never completed"
    return parser, b"".join(after)


VALID = {
    "v1-tcp4": (b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\n", ("203.0.113.7", 56324), 1),
    "v1-tcp6": (
        b"PROXY TCP6 2001:db8::7 2001:db8::1 65535 8080\r\n",
        ("2001:db8::7", 65535),
        1,
    ),
    "v1-port-0": (b"PROXY TCP4 10.0.0.1 10.0.0.2 0 0\r\n", ("10.0.0.1", 0), 1),
    "v1-unknown": (b"PROXY UNKNOWN\r\n", None, 1),
    "v1-unknown-with-addresses": (
        b"PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n",
        None,
        1,
    ),
    "v1-longest": (
        b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
        b"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535),
        1,
    ),
    "v2-ipv4": (
        v2(1, 1, 1, inet("198.51.100.9", "127.0.0.1", 4444, 80)),
        ("198.51.100.9", 4444),
        2,
    ),
    "v2-ipv6": (
        v2(1, 2, 1, inet6("2001:db8::9", "::1", 1, 443)),
        ("2001:db8::9", 1),
        2,
    ),
    "v2-ipv4-with-tlvs": (
        v2(1, 1, 1, inet("192.0.2.3", "192.0.2.4", 1000, 80), b"\x04\x00\x03abc\x20\x00\x01x"),
        ("192.0.2.3", 1000),
        2,
    ),
    "v2-local": (v2(0, 0, 0, b""), None, 2),
    "v2-local-with-addresses": (v2(0, 1, 1, inet("10.9.9.9", "10.0.0.1", 1, 2)), None, 2),
    "v2-unspec": (v2(1, 0, 0, b""), None, 2),
    "v2-unix": (
        v2(1, 3, 1, b"/run/client".ljust(108, b"\0") + b"/run/s".ljust(108, b"\0")),
        None,
        2,
    ),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_headers_at_every_split(name: str) -> None:
    header, client, version = VALID[name]
    assert len(header) <= V1_MAX or version == 2
    data = header + REQUEST
    for label, pieces in feeds(data):
        parser, after = parse(pieces)
        assert (parser.client, parser.version, after) == (client, version, REQUEST), label


def test_nothing_after_the_header_is_an_empty_rest() -> None:
    parser = ProxyHeaderParser()
    assert parser.feed(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r") is None
    assert parser.feed(b"\n") == b""
    assert parser.client == ("1.2.3.4", 1)


INVALID = {
    "plain-http": REQUEST,
    "tls-hello": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    "lower-case": b"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
    "v1-no-space": b"PROXYTCP4 1.2.3.4 5.6.7.8 1 2\r\n",
    "v1-udp": b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
    "v1-tcp4-with-ipv6": b"PROXY TCP4 ::1 ::1 1 2\r\n",
    "v1-tcp6-with-ipv4": b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",
    "v1-bad-address": b"PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n",
    "v1-name": b"PROXY TCP4 localhost 5.6.7.8 1 2\r\n",
    "v1-port-too-big": b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
    "v1-port-sign": b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
    "v1-port-hex": b"PROXY TCP4 1.2.3.4 5.6.7.8 0x1 2\r\n",
    "v1-two-spaces": b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
    "v1-missing-port": b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
    "v1-extra-field": b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
    "v1-trailing-space": b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
    "v1-bare-lf": b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n" + REQUEST,
    "v1-oversize": b"PROXY UNKNOWN " + b"x" * 200 + b"\r\n",
    "v1-oversize-by-one": b"PROXY UNKNOWN " + b"x" * (V1_MAX - 15) + b"\r\n",
    "v1-no-crlf-at-all": b"PROXY TCP4 " + b"1" * 300,
    "v2-version-1": V2_SIGNATURE + b"\x11\x11\x00\x0c" + inet("1.2.3.4", "5.6.7.8", 1, 2),
    "v2-version-3": V2_SIGNATURE + b"\x31\x11\x00\x0c" + inet("1.2.3.4", "5.6.7.8", 1, 2),
    "v2-command-2": v2(2, 1, 1, inet("1.2.3.4", "5.6.7.8", 1, 2)),
    "v2-family-4": v2(1, 4, 1, inet("1.2.3.4", "5.6.7.8", 1, 2)),
    "v2-transport-3": v2(1, 1, 3, inet("1.2.3.4", "5.6.7.8", 1, 2)),
    "v2-datagram": v2(1, 1, 2, inet("1.2.3.4", "5.6.7.8", 1, 2)),
    "v2-ipv4-cut-short": v2(1, 1, 1, inet("1.2.3.4", "5.6.7.8", 1, 2)[:11]),
    "v2-ipv6-cut-short": v2(1, 2, 1, inet("1.2.3.4", "5.6.7.8", 1, 2)),
    "v2-bad-signature": b"\r\n\r\n\x00\r\nQUIT\r" + b"\x21\x11\x00\x0c" + b"\0" * 12,
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_headers_are_refused_at_every_split(name: str) -> None:
    data = INVALID[name]
    for label, pieces in feeds(data):
        parser = ProxyHeaderParser()
        with pytest.raises(ProxyHeaderError):
            for piece in pieces:
                if parser.feed(piece) is not None:
                    raise AssertionError(f"{label}: accepted, client {parser.client}")


def test_an_incomplete_header_waits() -> None:
    for partial in (b"", b"P", b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r", V2_SIGNATURE[:5], V2_SIGNATURE):
        assert ProxyHeaderParser().feed(partial) is None
    block = v2(1, 1, 1, inet("1.2.3.4", "5.6.7.8", 1, 2))
    assert ProxyHeaderParser().feed(block[:-1]) is None


def test_the_largest_v2_block_is_taken() -> None:
    """The length field bounds version 2: 16 + 65535 bytes, TLVs skipped."""
    addresses = inet("192.0.2.77", "192.0.2.1", 7, 80)
    tlv = b"\xee" + struct.pack(">H", 65535 - 12 - 3)
    header = v2(1, 1, 1, addresses, tlv + b"\0" * (65535 - 12 - 3))
    assert len(header) == 16 + 65535
    parser = ProxyHeaderParser()
    assert parser.feed(header + REQUEST) == REQUEST
    assert parser.client == ("192.0.2.77", 7)


@pytest.mark.parametrize(
    ("versions", "header", "taken"),
    [
        ({"v2": False}, VALID["v1-tcp4"][0], True),
        ({"v2": False}, VALID["v2-ipv4"][0], False),
        ({"v1": False}, VALID["v1-tcp4"][0], False),
        ({"v1": False}, VALID["v2-ipv4"][0], True),
    ],
)
def test_a_listener_takes_only_its_versions(versions: dict, header: bytes, taken: bool) -> None:
    parser = ProxyHeaderParser(**versions)
    if taken:
        assert parser.feed(header + REQUEST) == REQUEST
    else:
        with pytest.raises(ProxyHeaderError):
            parser.feed(header + REQUEST)
