"""Listeners with the PROXY protocol (``proxy_protocol``, ``proxy_allow_from``).

Owns: :func:`proxy_choice` (in the master: a listener's mode and allowed peers) and
:class:`ProxyPlan` (one listener's choice, compiled once when the worker starts: the header
versions it takes and the peers it takes them from), which a listener's plan
(`corral.server.plan.ListenerPlan.proxy`) holds; the connection (`HttpConnection`) reads the
header before anything else when its plan has one. A listener without it pays one attribute
test per connection. The header itself is parsed by :mod:`corral.http.proxyheader`.

What a connection of such a listener does:

- its peer is checked against ``proxy_allow_from`` in ``connection_made``; a connection on a
  unix socket is always allowed (Gunicorn's rule: it has no address to check);
- its first bytes must be a PROXY header of a version the listener takes; the client it
  names replaces the peer for everything after: ``REMOTE_ADDR``/``REMOTE_PORT``, the access
  log's address, the trust a ``forwarded`` listener gives it and the routes' ``source``; a
  v2 ``LOCAL`` (and v1 ``UNKNOWN``) keeps the socket's peer;
- a disallowed peer, or a missing, malformed or unwanted header, closes the connection with
  nothing written and one warning line. This is what the specification asks ("the receiver
  must not try to guess", an invalid header drops the connection) and what HAProxy's
  ``accept-proxy`` and nginx's ``listen ... proxy_protocol`` do; an HTTP 400 would be bytes
  of HTTP written to a peer that has not yet been shown to speak it. Gunicorn differs: it
  serves a connection without a header as plain HTTP (from anyone) and answers a header from
  a disallowed peer with 403; corral does not let a client that reaches the listener directly
  choose between the two;
- the header must arrive within ``header_timeout`` (the connection's head deadline, which
  runs from its accept): past it the connection is closed quietly, as an idle one.

A request on such a connection handed off to another application's worker (routes) carries
the client in the hand-off frame (``peer``): the receiver adopts it with that peer.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from corral.config.listening import ProxyMode, address_list, proxy_mode
from corral.http.proxyheader import ProxyHeaderError, ProxyHeaderParser
from corral.net.addresses import address_matcher, socket_address


def proxy_choice(listener: Any, settings: Any) -> tuple[ProxyMode, tuple[str, ...]] | None:
    """A document listener's PROXY protocol (its own keys, else the settings'): the mode and
    the peers allowed; None when off. The master gives it to the workers, per listener."""
    mode = listener.proxy_protocol
    mode = proxy_mode(settings.proxy_protocol if mode is msgspec.UNSET else mode)
    if mode is ProxyMode.OFF:
        return None
    allow = listener.proxy_allow_from
    allowed = settings.proxy_allow_from if allow is msgspec.UNSET else address_list(allow)
    return mode, tuple(allowed)


class ProxyPlan:
    """One listener's PROXY protocol: which versions, from which peers (shared by its
    connections)."""

    __slots__ = ("allowed", "any_peer", "log", "v1", "v2")

    def __init__(self, mode: ProxyMode, allow_from: tuple[str, ...], log: logging.Logger):
        self.v1 = mode in (ProxyMode.V1, ProxyMode.AUTO)
        self.v2 = mode in (ProxyMode.V2, ProxyMode.AUTO)
        self.any_peer = "*" in allow_from
        self.allowed = None if self.any_peer else address_matcher(list(allow_from))
        self.log = log

    def allows(self, peer: Any) -> bool:
        if self.any_peer or not isinstance(peer, tuple):
            return True  # a unix socket's peer has no address to check
        try:
            return self.allowed(socket_address(peer))  # type: ignore[misc]
        except (OSError, ValueError):
            return False

    def parser(self) -> ProxyHeaderParser:
        return ProxyHeaderParser(self.v1, self.v2)

    def greet(self, conn: Any) -> None:
        """A new connection (`HttpConnection`): its first bytes are a PROXY header, which
        only an allowed peer may send (another is closed)."""
        if conn.closed:
            return
        if not self.allows(conn.peer):
            self.log.warning(
                "PROXY protocol: connection from %s refused: not in proxy_allow_from",
                describe_peer(conn.peer),
            )
            conn.close()
            return
        conn.reader = self.parser()

    def read(self, conn: Any, data: bytes) -> bytes:
        """Feed ``conn``'s PROXY header parser: what follows the header (b"": nothing yet);
        the client it names is the connection's from then on."""
        reader = conn.reader
        try:
            rest = reader.feed(data)
        except ProxyHeaderError as exc:
            self.log.warning(
                "PROXY protocol: connection from %s closed: %s", describe_peer(conn.peer), exc
            )
            conn.reader = None
            conn.close()
            return b""
        if rest is None:
            return b""
        conn.reader = None
        if reader.client is not None:
            conn.take_client(reader.client)
        return rest


def describe_peer(peer: Any) -> str:
    """A peer for a log line: ``ADDRESS:PORT``, or a unix socket's."""
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "a unix socket"


__all__ = ["ProxyPlan", "describe_peer", "proxy_choice"]
