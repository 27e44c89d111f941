"""NGINX Unit's routes, compiled once, resolved per request.

Owns: validation of a Unit-style ``routes`` value (an array of steps, or an object of named
arrays), its compilation into plain Python checks, and ``Router.resolve(pass_target, request)``,
which walks the steps and returns the :class:`Action` to take. It knows nothing of sockets,
the event loop or WSGI: the worker builds a :class:`RouteRequest` from what it already holds
(method, raw target, header list, peer and local address, scheme) and serves the action.

Semantics are Unit's (its documentation, "Configuration > Routes", and its router sources);
each module's docstring lists the rules it keeps:

- `corral.routing.actions`: what a route decides (`ToApplication`, `Respond`, `Share`);
- `corral.routing.request`: one request's values, normalized as Unit compares them;
- `corral.routing.patterns`: string patterns, each list one predicate;
- `corral.net.addresses`: address patterns (``source``, ``destination``), outside this
  package because a listener's ``forwarded`` and ``proxy_allow_from`` use them too;
- `corral.routing.variables`: ``$name`` in passes, locations, shares and ``if``;
- `corral.routing.conditions`: a step's ``match``, one test per condition;
- `corral.routing.compiler`: the routes value, validated and compiled (`compile_routes`);
- `corral.routing.router`: the walk per request (`Router`);
- `corral.routing.errors`: `RouteError`, naming the JSON path of the first invalid place.

Per-request cost (all lazy, computed on first use and kept on the :class:`RouteRequest`):
a step costs one Python call per condition plus the check itself (`corral.routing.patterns`
says what each kind of pattern costs). The path is decoded and normalized once (a
``'%'``/``'//'``/``'/.'`` scan when clean); the header dict, the arguments and the cookies
are built once, only if a reached step asks for them. bench/routing_micro.py measures a
10-step table.
"""

from corral.net.addresses import address_matcher, socket_address
from corral.routing.actions import (
    BAD_REQUEST,
    NOT_FOUND,
    ROUTING_LOOP,
    Action,
    Limited,
    Proxy,
    Respond,
    Share,
    ToApplication,
)
from corral.routing.compiler import compile_routes
from corral.routing.errors import RouteError
from corral.routing.patterns import pattern_matcher
from corral.routing.request import RouteRequest, normalize_path
from corral.routing.router import KEPT_BY_TARGET, MAX_HOPS, Router

__all__ = [
    "BAD_REQUEST",
    "KEPT_BY_TARGET",
    "MAX_HOPS",
    "NOT_FOUND",
    "ROUTING_LOOP",
    "Action",
    "Limited",
    "Proxy",
    "Respond",
    "RouteError",
    "RouteRequest",
    "Router",
    "Share",
    "ToApplication",
    "address_matcher",
    "compile_routes",
    "normalize_path",
    "pattern_matcher",
    "socket_address",
]
