"""One listener of a worker: what the master gives it (`ListenerSpec`) and what the worker makes
of it once, when it starts (`ListenerPlan`).

A listener's features are data in its plan, not subclasses of the connection: the wire protocol
(its parser: HTTP/1.1 or uwsgi packets), a trusted proxy's ``forwarded`` headers, the PROXY
protocol, and routes (with the hand-off to other applications' workers: ``routing`` gives each
connection its own ``route``, `corral.server.routed.RouteState`, which is its parser's sink).
There is one connection class, `corral.server.connection.HttpConnection`; every connection of
the listener runs its plan, and a feature the listener does not have costs its connections one
attribute test, where that feature would act.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from corral.core import RequestParser


@dataclass(frozen=True, eq=True)
class ListenerSpec:
    """One listening socket of a pool and what its document listener says, as the master
    hands it to a worker at the fork (compared, socket by identity, to carry a pool over)."""

    socket: socket.socket
    pass_target: str | None = None  # "applications/NAME", "routes", "routes/NAME"; None: own
    forwarded: Any = None  # the listener's `forwarded` (config Forwarded), None without one
    proxy: Any = None  # the PROXY protocol (proxied.proxy_choice: mode, peers), None: off
    protocol: str = "http"  # or "uwsgi" (http/uwsgi.py)


class ListenerPlan:
    """What one listener's connections do beyond plain HTTP/1.1, decided once per worker.

    ``routing`` (routed.Routing) is set (with ``pass_target``) only on a listener whose pass is
    not the worker's own application, and also on the plan of a connection adopted from a
    hand-off; ``forwarding`` (forwarded.Forwarding) only with ``forwarded``; ``proxy``
    (proxied.ProxyPlan) only with the PROXY protocol."""

    __slots__ = ("forwarding", "parser", "pass_target", "proxy", "routing", "sockname")

    def __init__(
        self,
        sockname: Any = None,
        *,
        parser: Any = RequestParser,
        forwarding: Any = None,
        proxy: Any = None,
        routing: Any = None,
        pass_target: str | None = None,
    ) -> None:
        self.sockname = sockname  # the listener's address, known once per listener
        self.parser = parser  # the wire protocol's parser class
        self.forwarding = forwarding
        self.proxy = proxy
        self.routing = routing
        self.pass_target = pass_target


PLAIN = ListenerPlan()  # a listener with none of it, its address read from each connection
