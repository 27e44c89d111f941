"""What a request's route decides: the actions a server takes, as plain values.

The router answers every request with one of these, and only these cross from routing to the
server (`corral.server.routed` serves them), so the server needs nothing else of routing to
act. They compare by value, which lets a dynamic pass cache them and tests compare them.

Unit's actions, as compiled (`corral.routing.compiler`): ``pass`` to an application (and one
of its ``targets``) is a :class:`ToApplication`; ``return`` (000-999, optional ``location``)
a :class:`Respond`; ``share`` a :class:`Share` with its ``fallback``. The answers routing gives
itself are :data:`NOT_FOUND` (no step matched, an unknown target from variables),
:data:`BAD_REQUEST` (a target Unit refuses) and :data:`ROUTING_LOOP` (too many hops).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.static.policy import ShareHeaders

__all__ = [
    "BAD_REQUEST",
    "NOT_FOUND",
    "ROUTING_LOOP",
    "Action",
    "Limited",
    "Proxy",
    "Respond",
    "Share",
    "ToApplication",
]


class Action:
    """What the server does with a request: one of the subclasses below."""

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._fields() == self._fields()

    def __hash__(self) -> int:
        return hash((type(self), self._fields()))

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({args})"


class ToApplication(Action):
    """Serve the request with the application ``name``, its target number ``target`` (the
    position in its ``targets``; 0 for an application without them, and for a pass that names
    no target, as Unit does)."""

    __slots__ = ("name", "target")

    def __init__(self, name: str, target: int = 0) -> None:
        self.name = name
        self.target = target


class Respond(Action):
    """Answer at once. Unit sends 400-599 as its error page, any other status with an empty
    body; ``location`` (already percent-encoded, latin-1) becomes a Location field."""

    __slots__ = ("location", "status")

    def __init__(self, status: int, location: str | None = None) -> None:
        self.status = status
        self.location = location


class Share(Action):
    """Serve a static file: the first of ``paths`` that is a servable file (variables already
    expanded), ``index`` for a directory, only MIME types ``type_allowed``; when none can be
    served, ``Router.resolve_fallback(share, request)`` gives the next action (404 without a
    fallback). ``headers``: corral's ``expires`` and ``immutable`` and Unit's
    ``response_headers``, compiled (`corral.static.policy.ShareHeaders`), None without them.
    `corral.static.files.StaticFiles.serve` serves it."""

    __slots__ = (
        "chroot",
        "fallback",
        "follow_symlinks",
        "headers",
        "index",
        "paths",
        "traverse_mounts",
        "types",
    )

    def __init__(
        self,
        paths: tuple[str, ...],
        index: str = "index.html",
        chroot: str | None = None,
        follow_symlinks: bool = True,
        traverse_mounts: bool = True,
        types: Callable[[str], Any] | None = None,
        fallback: tuple[int, Any] | None = None,
        headers: ShareHeaders | None = None,
    ) -> None:
        self.paths = paths
        self.index = index
        self.chroot = chroot
        self.follow_symlinks = follow_symlinks
        self.traverse_mounts = traverse_mounts
        self.types = types
        self.fallback = fallback
        self.headers = headers

    def type_allowed(self, mime_type: str) -> bool:
        """Whether the ``types`` patterns admit ``mime_type`` (an unknown type is ``""``)."""
        return self.types is None or bool(self.types(mime_type))


class Limited(Action):
    """``action`` under the ``rate_limit`` of the step at ``path`` (corral's key): the worker
    counts the request in that limit's table (its ``routing.limiters[path]``) first."""

    __slots__ = ("action", "path")

    def __init__(self, action: Action, path: str) -> None:
        self.action = action
        self.path = path


class Proxy(Action):
    """Forward to HTTP/1.1 servers (Unit's ``proxy`` action, a ``pass`` to ``upstreams/NAME``):
    ``name`` as the configuration says it, ``servers`` ((address, weight), ...), ``options``
    the ``proxy_*`` settings (`corral.net.upstream.ProxyOptions`). `corral.actions.proxy`
    serves it."""

    __slots__ = ("name", "options", "servers")

    def __init__(self, name: str, servers: tuple[tuple[str, float], ...], options: Any) -> None:
        self.name = name
        self.servers = servers
        self.options = options


NOT_FOUND = Respond(404)
BAD_REQUEST = Respond(400)
ROUTING_LOOP = Respond(500)
