"""NGINX Unit's listener ``forwarded``: the client address and scheme a trusted proxy reports.

Owns: :class:`Forwarding` (one listener's ``forwarded`` object, compiled once per worker),
:class:`ForwardedClient` (what it found in one request). A listener's plan holds its
`Forwarding` (`corral.server.plan.ListenerPlan.forwarding`): the connection decides once whether
its peer is trusted, and reads each request's headers only then. A listener without it pays
one attribute test per request.

Unit's rules, kept exactly (its ``nxt_http_request_forward``):

- the headers count only when the connection's peer matches ``source`` (address patterns,
  ``"unix"``): checked once per connection, since the peer cannot change;
- ``client_ip``: every field of that name with a non-empty value, the last field first, each
  read from right to left over addresses separated by commas or spaces. Without
  ``recursive`` the rightmost address of the last field is the client. With it, the walk
  goes on while the address read also matches ``source`` (another trusted proxy); the first
  one that does not is the client, and so is the leftmost one when every address is trusted;
- an address is IPv4 or IPv6, with an optional port (``1.2.3.4:80``, ``[::1]:80``); the
  unspecified addresses (``0.0.0.0``, ``::``) are invalid. An invalid one ends the walk: the
  client is the last valid address read before it, or the peer when there is none;
- ``protocol``: the first field of that name with a non-empty value; ``http`` makes the
  request plain, ``https`` or ``on`` (any case) makes it https; any other value changes
  nothing;
- the result replaces the peer for everything after: ``REMOTE_ADDR``, the access log's
  address, and the routes' ``source`` and ``$remote_addr`` (Unit replaces the request's remote
  address before routing); ``scheme`` routes and ``wsgi.url_scheme`` see the protocol.

A header whose name ``discard_unsafe_fields`` drops (:mod:`corral.http.fieldnames`) is never
read, as in Unit, where such a field does not exist.
"""

from __future__ import annotations

import socket
from typing import Any

from corral.http.fieldnames import discards
from corral.net.addresses import address_matcher, address_ports_matter, socket_address

_SCHEMES = {b"http": "http", b"https": "https", b"on": "https"}
_VERDICTS_KEPT = 4096  # peer hosts whose verdict is remembered; forgotten all at once past it


def parse_address(text: bytes) -> tuple[str, int | None, tuple[int, int, int]] | None:
    """``(address, port or None, matcher key)`` of one ``client_ip`` item, or None if invalid."""
    try:
        value = text.decode("ascii")
    except UnicodeDecodeError:
        return None
    port_text = None
    if value.startswith("["):
        address, sep, rest = value[1:].partition("]")
        if not sep:
            return None
        if rest:
            if not rest.startswith(":"):
                return None
            port_text = rest[1:]
        family = socket.AF_INET6
    elif value.count(":") >= 2:
        address, family = value, socket.AF_INET6
    else:
        address, colon, port_text = value.partition(":")
        if not colon:
            port_text = None
        family = socket.AF_INET
    port = None
    if port_text is not None:
        if not (port_text.isdigit() and port_text.isascii() and 0 < int(port_text) <= 65535):
            return None
        port = int(port_text)
    try:
        packed = socket.inet_pton(family, address)
    except OSError:
        return None
    number = int.from_bytes(packed, "big")
    if number == 0:
        return None  # 0.0.0.0 and :: name no client
    return address, port, (6 if family == socket.AF_INET6 else 4, number, port or 0)


class ForwardedClient:
    """What the trusted headers of one request say: the client and/or the scheme.

    ``address`` is None when ``client_ip`` gave nothing valid (the peer stays); ``port`` is
    None when the address came without one; ``scheme`` is None when ``protocol`` said
    nothing usable.
    """

    __slots__ = ("address", "port", "scheme")

    def __init__(self, address: str | None, port: int | None, scheme: str | None) -> None:
        self.address = address
        self.port = port
        self.scheme = scheme

    def __repr__(self) -> str:
        return f"ForwardedClient({self.address!r}, {self.port!r}, {self.scheme!r})"


class Forwarding:
    """One listener's ``forwarded`` object, compiled; shared by its connections."""

    def __init__(
        self,
        source: str | list[str],
        *,
        client_ip: str | None = None,
        protocol: str | None = None,
        recursive: bool = False,
        discard_unsafe_fields: bool | None = None,
    ) -> None:
        self.trusted = address_matcher(source, "forwarded.source")
        # the verdict by peer host, when ports do not count in `source` (the usual case): a
        # proxy's connections come from one host, each from another port
        self._verdicts: dict[str, bool] | None = None if address_ports_matter(source) else {}
        self.recursive = recursive
        discarded = discards(discard_unsafe_fields)

        def lookup(name: str | None) -> bytes | None:
            if name is None:
                return None
            raw = name.encode("latin-1")
            if discarded(raw):
                return None  # Unit drops such a field before anything reads it
            return raw.lower()

        self.client_ip = lookup(client_ip)
        self.protocol = lookup(protocol)
        # the lengths of the names read (-1: none): a field of another length is passed over
        # without lower-casing it (most requests, when the proxy sends nothing or this is no
        # proxy); two numbers, not a set, so that compiled it is two comparisons in C
        self._ip_length = len(self.client_ip) if self.client_ip else -1
        self._protocol_length = len(self.protocol) if self.protocol else -1

    @classmethod
    def from_document(cls, forwarded: Any, discard_unsafe_fields: bool | None) -> Forwarding:
        """From the document's ``Forwarded`` (``client_ip``/``protocol`` may be UNSET)."""
        client_ip = forwarded.client_ip
        protocol = forwarded.protocol
        return cls(
            forwarded.source,
            client_ip=client_ip if isinstance(client_ip, str) else None,
            protocol=protocol if isinstance(protocol, str) else None,
            recursive=forwarded.recursive,
            discard_unsafe_fields=discard_unsafe_fields,
        )

    def trusts(self, peer: Any) -> bool:
        """Whether the headers of a connection from ``peer`` count (once per connection)."""
        verdicts = self._verdicts
        if verdicts is None or not isinstance(peer, tuple):
            return self._trusts(peer)
        verdict = verdicts.get(peer[0])
        if verdict is None:
            if len(verdicts) >= _VERDICTS_KEPT:
                verdicts.clear()
            verdict = verdicts[peer[0]] = self._trusts(peer)
        return verdict

    def _trusts(self, peer: Any) -> bool:
        try:
            return self.trusted(socket_address(peer))
        except (OSError, ValueError, TypeError):
            return False

    def resolve(self, headers: list[tuple[bytes, bytes]]) -> ForwardedClient | None:
        """The client and scheme the headers of one request give; None if they give nothing."""
        wanted_ip = self.client_ip
        wanted_protocol = self.protocol
        ip_length = self._ip_length
        protocol_length = self._protocol_length
        values: list[bytes] = []
        protocol = None
        for name, value in headers:
            length = len(name)
            if (length != ip_length and length != protocol_length) or not value:
                continue
            lowered = name.lower()
            if lowered == wanted_ip:
                values.append(value)
            elif lowered == wanted_protocol and protocol is None:
                protocol = value
        scheme = _SCHEMES.get(protocol.lower()) if protocol is not None else None
        found = self._client(values) if values else None
        if found is None and scheme is None:
            return None
        if found is None:
            return ForwardedClient(None, None, scheme)
        return ForwardedClient(found[0], found[1], scheme)

    def _client(self, values: list[bytes]) -> tuple[str, int | None] | None:
        previous: tuple[str, int | None] | None = None
        last_field = len(values) - 1
        for index in range(last_field, -1, -1):
            items = values[index].replace(b",", b" ").split()
            for position in range(len(items) - 1, -1, -1):
                parsed = parse_address(items[position])
                if parsed is None:
                    return previous  # Unit: the last valid address read, or the peer
                address, port, key = parsed
                if not self.recursive:
                    return address, port
                if not self.trusted(key) or (index == 0 and position == 0):
                    return address, port
                previous = address, port
        return previous


def client_address(peer: Any, exchange: Any) -> str:
    """The client of ``exchange``'s request from ``peer`` (its connection's), as nginx's
    ``$remote_addr``: what a trusted proxy's headers name (read into ``exchange.forwarded``),
    else the peer's address (a PROXY header's client, once read); "" for a unix socket's."""
    forwarded = exchange.forwarded
    if forwarded is not None and forwarded.address is not None:
        return forwarded.address
    return peer[0] if isinstance(peer, tuple) else ""


__all__ = [
    "ForwardedClient",
    "Forwarding",
    "client_address",
    "parse_address",
]
