"""Listeners with the PROXY protocol (``proxy_protocol``, ``proxy_allow_from``): the plan and
the connections.

Owns: :class:`ProxyPlan` (one listener's choice: the header versions it takes and the peers
it takes them from, compiled once when the worker starts) and :func:`proxied_factory` (the
connection class of such a listener: a plain, ``forwarded`` or routed connection that reads the
header first). A listener without it keeps its plain class: the choice is made once per
listener, and nothing here runs for it. The header itself is parsed by
:mod:`corral.proxyheader`.

What a proxied connection does:

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
from functools import partial
from typing import Any

import msgspec

from corral.config.settings import ProxyMode, address_list, proxy_mode
from corral.connection import HttpConnection
from corral.forwarded import ForwardedConnection
from corral.proxyheader import ProxyHeaderError, ProxyHeaderParser
from corral.routed import RoutedConnection
from corral.routing import address_matcher, socket_address


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


class _Proxied:
    """Mixin: read the PROXY header before the connection's own ``data_received``; built with
    the plan first, then the arguments of the connection class it is mixed into. ``reader``
    is the header's parser until the header is complete (one attribute test per read after
    that)."""

    __slots__ = ()

    def __init__(self, plan: ProxyPlan, *args: Any, **kwargs: Any) -> None:
        self.proxy = plan
        self.reader: ProxyHeaderParser | None = None
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        if self.closed:  # type: ignore[attr-defined]
            return
        plan = self.proxy  # type: ignore[attr-defined]
        if not plan.allows(self.peer):  # type: ignore[attr-defined]
            plan.log.warning(
                "PROXY protocol: connection from %s refused: not in proxy_allow_from",
                _describe(self.peer),  # type: ignore[attr-defined]
            )
            self.close()  # type: ignore[attr-defined]
            return
        self.reader = plan.parser()

    def data_received(self, data: bytes) -> None:
        reader = self.reader  # type: ignore[attr-defined]
        if reader is None:
            super().data_received(data)  # type: ignore[misc]
            return
        try:
            rest = reader.feed(data)
        except ProxyHeaderError as exc:
            self.proxy.log.warning(  # type: ignore[attr-defined]
                "PROXY protocol: connection from %s closed: %s",
                _describe(self.peer),  # type: ignore[attr-defined]
                exc,
            )
            self.reader = None
            self.close()  # type: ignore[attr-defined]
            return
        if rest is None:
            return
        self.reader = None
        if reader.client is not None:
            self.take_client(reader.client)
        if rest:
            super().data_received(rest)  # type: ignore[misc]

    def take_client(self, client: tuple[str, int]) -> None:
        """The header named the client: it is the peer from now on."""
        self.peer = client  # type: ignore[attr-defined]
        forwarding = getattr(self, "forwarding", None)
        if forwarding is not None:  # a `forwarded` listener trusts, or not, this peer
            self.trusted = forwarding.trusts(client)  # type: ignore[attr-defined]


def _describe(peer: Any) -> str:
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "a unix socket"


class ProxiedConnection(_Proxied, HttpConnection):
    __slots__ = ("proxy", "reader")


class ProxiedForwardedConnection(_Proxied, ForwardedConnection):
    __slots__ = ("proxy", "reader")


class ProxiedRoutedConnection(_Proxied, RoutedConnection):
    __slots__ = ("proxy", "reader")

    def take_client(self, client: tuple[str, int]) -> None:
        super().take_client(client)
        self.given_peer = client  # a hand-off carries it to the receiving worker


_PROXIED = {
    HttpConnection: ProxiedConnection,
    ForwardedConnection: ProxiedForwardedConnection,
    RoutedConnection: ProxiedRoutedConnection,
}


def proxied_factory(base: partial[Any], plan: ProxyPlan) -> partial[Any]:
    """The connection factory of a proxied listener, from the plain one it would have had
    (``partial(CLASS, *args, **kwargs)``, as the worker builds it)."""
    return partial(_PROXIED[base.func], plan, *base.args, **base.keywords)


__all__ = ["ProxyPlan", "proxied_factory", "proxy_choice"]
