"""NGINX Unit's address patterns, parsed in one place for every part that matches a peer.

The routes' ``source`` and ``destination`` (`corral.routing`), a listener's
``forwarded.source`` (`corral.filters.forwarded`) and ``proxy_allow_from`` (the PROXY protocol,
`corral.server.proxied`) accept the same patterns, and the configuration checks them
(`corral.config`): one parser means one meaning and one set of error messages. This module
imports nothing of `corral.routing`, so the workers' filters and the configuration's checks
do not load the route compiler (a module inside the routing package would: importing it runs
the package's ``__init__``).

Unit's rules, kept exactly (its documentation, "Configuration > Routes", and its router):

- a pattern is ``unix``, an IPv4 or IPv6 address, a CIDR block (host bits ignored) or an
  ``A-B`` range, each with an optional ``:PORT`` or ``:LOW-HIGH`` (IPv6: ``[...]:PORT``), or
  ``*:PORT`` for any IP; a leading ``!`` negates it;
- a list matches when no negated pattern matches and, if there are others, one of them does;
  an empty list matches nothing (where an empty list of string patterns matches anything:
  Unit's own asymmetry);
- an address is tested as ``(family, number, port)`` (`socket_address`); an IPv4-mapped IPv6
  peer is IPv6, as in Unit.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from corral.jsonpath import PathError, describe_value

__all__ = ["AddressError", "address_matcher", "address_ports_matter", "socket_address"]

_UNIX = (1, 0, 0)  # (family, address, port) of a unix socket peer; 4 and 6 are IP families
_ANY_PORT = (0, 65535)
_IPV6_MAX = (1 << 128) - 1


class AddressError(PathError):
    """An invalid address pattern: ``str()`` is one line, ``PATH: what was expected``."""


def socket_address(address: Any) -> tuple[int, int, int]:
    """A peer or local address as ``(family, address, port)``: what address patterns test."""
    if not isinstance(address, tuple):
        return _UNIX
    host, port = address[0], address[1]
    if ":" in host:
        packed = socket.inet_pton(socket.AF_INET6, host.partition("%")[0])
        return (6, int.from_bytes(packed, "big"), port)
    return (4, int.from_bytes(socket.inet_aton(host), "big"), port)


def _ipv4(text: str) -> int | None:
    parts = text.split(".")
    if len(parts) != 4:
        return None
    value = 0
    for part in parts:
        if not (part.isdigit() and part.isascii() and len(part) <= 3 and int(part) <= 255):
            return None
        value = value << 8 | int(part)
    return value


def _ipv6(text: str) -> int | None:
    # Unit also refuses a group of more than four digits (inet_pton does too).
    try:
        return int.from_bytes(socket.inet_pton(socket.AF_INET6, text), "big")
    except (OSError, ValueError):
        return None


def _ports(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return _ANY_PORT
    low, dash, high = text.partition("-")
    if not dash:
        high = low
    if not (low.isdigit() and high.isdigit() and low.isascii() and high.isascii()):
        return None
    first, last = int(low), int(high)
    if first > 65535 or last > 65535 or last < first:
        return None
    return first, last


def _pattern(raw: Any, path: str) -> tuple[bool, int, int, int, int, int]:
    """(negative, family, low, high, first port, last port): family 0 is any IP, 1 unix."""
    if not isinstance(raw, str):
        raise AddressError(path, f"expected an address pattern string, got {describe_value(raw)}")
    negative = raw.startswith("!")
    text = raw[1:] if negative else raw

    def bad(why: str) -> AddressError:
        return AddressError(path, f"address pattern {raw!r}: {why}")

    if text == "unix":
        return negative, 1, 0, 0, 0, 0
    if text == "*":
        raise bad("'*' needs a port ('*:80'); any IPv4 address is '0.0.0.0/0', IPv6 '::/0'")
    port_text: str | None = None
    if text.startswith("*:"):
        ports = _ports(text[2:])
        if ports is None:
            raise bad("expected a port or a port range (0-65535) after '*:'")
        return negative, 0, 0, _IPV6_MAX, *ports
    if text.startswith("[") or text.count(":") >= 2:
        family, parse, bits = 6, _ipv6, 128
        if text.startswith("["):
            address, sep, port_text = text[1:].rpartition("]:")
            if not sep:
                raise bad("a bracketed IPv6 address needs a port: '[ADDRESS]:PORT'")
        else:
            address = text
    else:
        family, parse, bits = 4, _ipv4, 32
        address, colon, port_text = text.partition(":")
        if not colon:
            port_text = None
    ports = _ports(port_text)
    if ports is None:
        raise bad("expected a port (0-65535) or a range LOW-HIGH after ':'")
    top = (1 << bits) - 1
    if "-" in address:
        first_text, _, last_text = address.partition("-")
        low, high = parse(first_text), parse(last_text)
        if low is None or high is None:
            raise bad(f"expected a range of two IPv{family} addresses 'A-B'")
        if low > high:
            raise bad("the range starts above its end")
    elif "/" in address:
        base_text, _, prefix_text = address.partition("/")
        base = parse(base_text)
        if base is None:
            raise bad(f"expected an IPv{family} address before '/'")
        if not (prefix_text.isdigit() and prefix_text.isascii() and int(prefix_text) <= bits):
            raise bad(f"expected a CIDR prefix length 0-{bits} after '/'")
        host_bits = bits - int(prefix_text)
        low = base >> host_bits << host_bits  # host bits are ignored, as in Unit
        high = low | ((1 << host_bits) - 1)
    else:
        single = parse(address)
        if single is None:
            raise bad(f"expected an IPv{family} address, a CIDR block or a range")
        low = high = single
    assert 0 <= low <= high <= top
    return negative, family, low, high, *ports


def address_matcher(
    patterns: str | list[str], path: str = "$"
) -> Callable[[tuple[int, int, int]], bool]:
    """The test of an address (`socket_address`'s form) against ``patterns``, a pattern or a
    list of them; raises :class:`AddressError` naming the first invalid one at `path`."""
    if isinstance(patterns, str):
        compiled = [_pattern(patterns, path)]
    elif isinstance(patterns, list):
        compiled = [_pattern(item, f"{path}[{i}]") for i, item in enumerate(patterns)]
    else:
        raise AddressError(
            path,
            f"expected an address pattern or an array of them, got {describe_value(patterns)}",
        )
    positive = tuple(p[1:] for p in compiled if not p[0])
    negative = tuple(p[1:] for p in compiled if p[0])

    def hit(wanted: tuple[tuple[int, ...], ...], address: tuple[int, int, int]) -> bool:
        family, number, port = address
        for want, low, high, first, last in wanted:
            if want == 1 or family == 1:
                if want == family:
                    return True
            elif (want == 0 or want == family) and low <= number <= high and first <= port <= last:
                return True
        return False

    if not compiled:
        return lambda address: False  # Unit: an empty address list matches nothing

    def rule(address: tuple[int, int, int]) -> bool:
        if negative and hit(negative, address):
            return False
        return not positive or hit(positive, address)

    return rule


def address_ports_matter(patterns: str | list[str]) -> bool:
    """Whether the port of an address can change what ``address_matcher(patterns)`` answers
    (some pattern names a port or a range of them); ``patterns`` are valid ones."""
    items = [patterns] if isinstance(patterns, str) else patterns
    compiled = [_pattern(item, "$") for item in items]
    return any(pattern[4:] != _ANY_PORT for pattern in compiled if pattern[1] != 1)
