"""``pass`` to an application (`ToApplication`): the worker's own is answered here by its
adapter, with the target the action names (NGINX Unit's ``targets``: the exchange carries its
position; a pass that names none, or an application without targets, is target 0); another
application's request is handed off with its connection to a worker of that application
(the mechanism: `corral.server.routed.RouteState`, `corral.server.handoff`); that of an
application a supervised pool runs (an external one, a ``"php"`` one) is sent to one of its
processes (`corral.actions.external`), with the target the action names (php's ``targets``).

What a hand-off cannot do is answered here instead: 502 when no hand-off address is known,
503 when the request's start in the bytes read is lost (routed.py's boundary rule), 508 when
the request went round more than ``MAX_HANDOFFS`` workers (they disagree on the routes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.actions import MARK
from corral.actions.respond import respond
from corral.routing import Respond

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange

MAX_HANDOFFS = 4  # hand-offs of one request: more means the workers disagree on the routes
LOOP = Respond(508)
NO_ADDRESS = Respond(502)
START_LOST = Respond(503)
_EXTERNAL: Any = None  # corral.actions.external.to_external, once a request needed it


class HandOff:
    """The answerer of a request handed to another application (``exchange.action``): the
    bytes from its start go with it."""

    __slots__ = ("address", "application", "carried", "index")

    def __init__(self, index: int, application: str, address: str) -> None:
        self.index = index  # among the requests begun on the connection
        self.application = application
        self.address = address
        self.carried = 0  # bytes read from its start that go with it (the frame's payload)

    def take_body(self, conn: HttpConnection, exchange: Exchange) -> Any:  # pragma: no cover
        raise AssertionError("a hand-off's body is the receiver's")

    def start(self, conn: HttpConnection, exchange: Exchange) -> None:
        # the exchange stays active: nothing after it is dispatched here
        conn.route.hand_off()  # type: ignore[union-attr]  # a routed connection has one


def to_application(conn: HttpConnection, exchange: Exchange, action: Any) -> bool:
    route = conn.route
    assert route is not None  # only routed connections have actions
    routing = conn.plan.routing
    name = action.name
    if name == routing.application:
        exchange.target = action.target
        return True
    address = routing.addresses.get(name)
    if address is not None and address.startswith(MARK):  # a program's: sent to it
        exchange.target = action.target
        speak = _EXTERNAL
        if speak is None:
            speak = _to_external()
        result: bool = speak(conn, exchange, name)
        return result
    if address is None:
        routing.log.warning("no hand-off address for application %r", name)
        return respond(conn, exchange, NO_ADDRESS)
    if route.raw_first is None:
        exchange.head.keep_alive = False  # see the boundary rule in routed.py
        return respond(conn, exchange, START_LOST)
    index = route.begun - 1
    if index == 0 and route.hops >= MAX_HANDOFFS:
        routing.log.warning("request handed off %d times: answered 508", route.hops)
        return respond(conn, exchange, LOOP)
    # the receiving worker reads the forwarded headers again (adopt_factory)
    exchange.action = HandOff(index, name, address)
    exchange.complete = True  # its body is the receiver's: nothing to wait for here
    route.begin_handoff(exchange)
    return False


def _to_external() -> Any:
    """`corral.actions.external.to_external`, imported at the first request to a program (the
    master imported it already when the configuration has any: `reach`), and kept."""
    global _EXTERNAL
    from corral.actions.external import to_external

    _EXTERNAL = to_external
    return to_external
