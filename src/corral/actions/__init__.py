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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.actions.application import to_application
from corral.actions.limited import limited
from corral.actions.proxy import proxy
from corral.actions.respond import respond
from corral.actions.share import share
from corral.routing import Limited, Proxy, Respond, Share, ToApplication

# (conn, exchange, action) -> True: the exchange joins the connection's pipeline
HANDLERS: dict[type, Callable[[Any, Any, Any], bool]] = {
    ToApplication: to_application,
    Respond: respond,
    Share: share,
    Limited: limited,
    Proxy: proxy,
}
