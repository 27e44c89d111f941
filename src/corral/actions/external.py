"""``pass`` to an application a supervised pool runs (`corral.external`): the request goes to
one of its ready processes, in turn, in the protocol its kind speaks (`SPEAKERS`): HTTP
through the proxy's entry point (`corral.actions.proxy.forward`), FastCGI to php-fpm
(`corral.actions.fastcgi.to_fpm`).

Which processes are ready is the master's board (`corral.external.board`), read at each
request: a program that has not answered yet, or is being stopped, gets none; with none ready
the answer is 503. The proxy's options are the document's ``proxy_*`` settings, the read
timeout the application's ``limits.timeout`` when it has one, the cap on a worker's
connections its kind's (`Kind.connections`: ruby's and perl's) when ``proxy_max_conns`` is
0; the master sets them (`reach`) before it forks the workers that route there, which keep
them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.actions import MARK
from corral.actions.proxy import forward
from corral.actions.respond import respond
from corral.external.board import board
from corral.net.upstream import DEFAULT_OPTIONS, ProxyOptions
from corral.routing import Respond

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange

__all__ = ["MARK", "SPEAKERS", "reach", "speaker", "to_external"]

NOT_READY = Respond(503)
# (conn, exchange, application, address, options) -> an action handler's result: True
Speaker = Callable[[Any, Any, str, str, ProxyOptions], bool]


def _http(conn: Any, exchange: Any, name: str, address: str, options: ProxyOptions) -> bool:
    del name  # the proxy needs no more than the address
    return forward(conn, exchange, address, options)


# How a worker talks to a kind's processes, by its `Kind.speaks`: HTTP through the proxy,
# FastCGI to php-fpm (which needs the application's scripts: the worker's, by name), each the
# module and name of its function, imported by `reach` for the kinds the document has.
SPEAKERS: dict[str, tuple[str, str]] = {
    "http": (__name__, "_http"),
    "fastcgi": ("corral.actions.fastcgi", "to_fpm"),
}


def speaker(speaks: str) -> Speaker:
    """The function that speaks ``speaks`` (`SPEAKERS`), imported now."""
    module, name = SPEAKERS[speaks]
    function: Speaker = getattr(importlib.import_module(module), name)
    return function


_ROUTES: dict[str, tuple[Speaker, ProxyOptions]] = {}  # by application: what `reach` set


def reach(doc: Any) -> dict[str, str]:
    """In the master, before a generation's workers fork: how each of ``doc``'s external
    applications is spoken to, with the proxy's options (the ``proxy_*`` settings, Unit's
    ``limits.timeout`` as the read timeout); their hand-off addresses (``MARK`` + name)."""
    from corral.external.kinds import kind_of

    _ROUTES.clear()
    for name, app in doc.applications.items():
        kind = kind_of(app)
        if kind is None:
            continue
        options = ProxyOptions.of(doc.settings)
        if app.request_timeout:  # how long its answer may take
            options.read_timeout = app.request_timeout
        if not options.max_conns and kind.connections is not None:  # its server's capacity
            options.max_conns = kind.connections(app)
        _ROUTES[name] = (speaker(kind.speaks), options)
    return {name: MARK + name for name in _ROUTES}


def to_external(conn: HttpConnection, exchange: Exchange, name: str) -> bool:
    """An action handler's answer for a request passed to the external application ``name``."""
    address = board().next_address(name)
    if address is None:
        return respond(conn, exchange, NOT_READY)
    speak, options = _ROUTES.get(name, (_http, DEFAULT_OPTIONS))
    return speak(conn, exchange, name, address, options)
