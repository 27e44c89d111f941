"""What the server does with a request its route decided, one handler per kind of action, in
one table (:data:`HANDLERS`).

Routing (`corral.routing`) gives each request of a routed listener an action, a plain value
(`corral.routing.actions`); the connection's one request path (`HttpConnection.on_request`,
through `RouteState.route`) hands it to the handler of its kind with the request's
`Exchange`, and the handler decides what the
exchange does: answered by the worker's application (the adapter: ``exchange.action`` stays
None), by the handler's own answerer set as ``exchange.action`` (a ``return``, a ``share``),
or taken off this connection (a hand-off to another application's worker). An answerer has
two methods, as an adapter has: ``take_body(conn, exchange)`` (the request body's sink) and
``start(conn, exchange)`` (answer, once the exchange is first in line), and answers through the
one response interface (`corral.server.exchange`).

A new kind of action is a module here and a line in the table (``proxy``: `corral.actions.proxy`,
whose `forward` is also how any other part of the worker sends a request to an HTTP server).
The table names each handler's module, imported when the routes first need that kind
(`load`, for the kinds a route table holds, when a worker's routing is made; else at the
first action of the kind): a worker whose routes never proxy never imports the proxy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

MARK = "external:"  # a hand-off address that is an external application's name, not a socket

# an action's class name (corral.routing.actions) -> the module and name of its handler
KINDS = {
    "ToApplication": ("corral.actions.application", "to_application"),
    "Respond": ("corral.actions.respond", "respond"),
    "Share": ("corral.actions.share", "share"),
    "Limited": ("corral.actions.limited", "limited"),
    "Proxy": ("corral.actions.proxy", "proxy"),
}


class Handlers(dict[type, Callable[[Any, Any, Any], bool]]):
    """The handler of each kind of action by its class, each imported on first use."""

    def __missing__(self, kind: type) -> Callable[[Any, Any, Any], bool]:
        module, name = KINDS[kind.__name__]
        handler: Callable[[Any, Any, Any], bool] = getattr(importlib.import_module(module), name)
        self[kind] = handler
        return handler


# (conn, exchange, action) -> True: the exchange joins the connection's pipeline
HANDLERS = Handlers()


def load(kinds: Iterable[type]) -> None:
    """Import the handlers of ``kinds`` now (a worker's routes', before it serves)."""
    for kind in kinds:
        HANDLERS[kind]
