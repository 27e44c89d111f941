"""The router: the compiled routes, and the walk that resolves each request through them.

Compilation (`corral.routing.compiler`) leaves each route a list of steps, each step a tuple of
tests and an outcome; this module is the part that runs per request, kept apart so that its
loop stays small and reads only what it needs. It also holds what both halves share: the
outcome kinds and the reading of a pass target, which a pass built from variables does per
request and a static pass once.

Unit's rules, kept exactly: a request walks the steps in order; the first step whose every
``match`` condition holds (or that has no ``match``) wins; no winner is 404. A ``pass`` to
``routes``/``routes/NAME`` walks that list next. A pass built from variables is looked up per
request (an unknown target: 404), and a request may take at most ``MAX_HOPS`` of those to a
route (then 500); a cycle of static passes was already refused by the compiler. A pass's
segments are percent-decoded; ``applications/NAME`` means the application's first target.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from corral.routing.actions import (
    BAD_REQUEST,
    NOT_FOUND,
    ROUTING_LOOP,
    Action,
    Share,
    ToApplication,
)
from corral.routing.request import BAD_ESCAPE, BadTarget, RouteRequest

__all__ = [
    "DYNAMIC",
    "FINAL",
    "GOTO",
    "KEPT_BY_TARGET",
    "MAX_HOPS",
    "DynamicPass",
    "Route",
    "Router",
    "split_pass",
    "target_index",
]

MAX_HOPS = 32  # passes with variables to a route, per request: only they can loop
KEPT_BY_TARGET = 4096  # actions a route whose walk reads only the target keeps (Route.by_target)

FINAL, GOTO, DYNAMIC = 0, 1, 2  # a step's outcome: an Action, a Route, a function of r


class Route:
    """One list of steps (``routes``, or ``routes/NAME``), in order: what a request walks.

    ``by_target``: for a route whose walk reads nothing of a request but its method and its
    target (``uri`` and ``method`` conditions, actions whose variables are of the target: the
    compiler's `_Compiler.of_target`), the action each (method, target) was given, kept so that
    the next request for the same file or endpoint takes one lookup instead of the walk (at
    most ``KEPT_BY_TARGET``: emptied when full, so that a client sending new targets costs a
    walk each, never memory); None for any other route."""

    __slots__ = ("by_target", "label", "steps")

    def __init__(self, label: str) -> None:
        self.label = label  # "routes" or "routes/NAME"
        self.steps: list[tuple[tuple[Callable[[RouteRequest], Any], ...], int, Any]] = []
        self.by_target: dict[tuple[str, bytes], Action] | None = None

    def __repr__(self) -> str:
        return f"<route {self.label}: {len(self.steps)} steps>"


def split_pass(target: str) -> list[str] | None:
    """Unit's pass segments: at most three, none empty, each percent-decoded."""
    segments = target.split("/")
    if len(segments) > 3:
        return None
    decoded = []
    for segment in segments:
        if not segment or BAD_ESCAPE.search(segment):
            return None
        try:
            decoded.append(unquote_to_bytes(segment.encode("utf-8")).decode("utf-8"))
        except UnicodeError:
            return None
    return decoded


def target_index(
    targets: Mapping[str, Sequence[str]] | None, application: str, target: str
) -> int | None:
    """The position of ``target`` in ``application``'s targets; None if it has no such one (or
    the targets are not known: a pass naming one cannot be resolved then)."""
    names = None if targets is None else targets.get(application)
    if not names or target not in names:
        return None
    return list(names).index(target)


class DynamicPass:
    """A pass with variables: expanded, split and looked up per request (unknown: 404)."""

    __slots__ = (
        "applications",
        "array_mode",
        "cache",
        "routes",
        "targets",
        "template",
        "upstreams",
    )

    def __init__(
        self,
        template: Callable[[RouteRequest], str],
        routes: dict[str | None, Route],
        array_mode: bool,
        applications: frozenset[str] | None,
        targets: Mapping[str, Sequence[str]] | None,
        upstreams: Mapping[str, Action] | None = None,
    ) -> None:
        self.template = template
        self.routes = routes
        self.array_mode = array_mode
        self.applications = applications
        self.targets = targets
        # each upstream group's one Proxy action, which the static passes to it share too
        self.upstreams = upstreams or {}
        # bounded by the configuration, not by requests: only known names are cached
        self.cache: dict[str, ToApplication] = {}

    def __call__(self, r: RouteRequest) -> Action | Route:
        target = self.template(r)
        try:
            segments = split_pass(target.encode("latin-1").decode("utf-8"))
        except UnicodeError:
            return NOT_FOUND
        if segments is None:
            return NOT_FOUND
        head = segments[0]
        if head == "applications" and len(segments) == 2:
            name = segments[1]
            if self.applications is None:
                return ToApplication(name)
            if name not in self.applications:
                return NOT_FOUND
            action = self.cache.get(name)
            if action is None:
                action = self.cache[name] = ToApplication(name)
            return action
        if head == "applications" and len(segments) == 3:
            name, target = segments[1], segments[2]
            index = target_index(self.targets, name, target)
            if index is None:
                return NOT_FOUND
            key = f"{name}/{target}"
            action = self.cache.get(key)
            if action is None:
                action = self.cache[key] = ToApplication(name, index)
            return action
        if head == "routes" and len(segments) <= 2:
            route = segments[1] if len(segments) == 2 else None
            if (route is None) == self.array_mode and route in self.routes:
                return self.routes[route]
        if head == "upstreams" and len(segments) == 2:
            return self.upstreams.get(segments[1], NOT_FOUND)
        return NOT_FOUND


def _follow(kind: int, payload: Any, r: RouteRequest) -> Action:
    hops = 0
    try:
        while True:
            if kind == FINAL:
                return payload
            if kind == DYNAMIC:
                payload = payload(r)
                if payload.__class__ is not Route:
                    return payload
                # static cycles are refused at compile time, so every loop has one of these
                hops += 1
                if hops > MAX_HOPS:
                    return ROUTING_LOOP
            for tests, step_kind, step_payload in payload.steps:
                for test in tests:
                    if not test(r):
                        break
                else:
                    kind = step_kind
                    payload = step_payload
                    break
            else:
                return NOT_FOUND
    except BadTarget:
        return BAD_REQUEST


class Router:
    """Compiled routes. ``resolve`` is the per-request entry; the rest runs at configuration
    time."""

    __slots__ = ("_compile_pass", "_entries", "_routes", "kinds", "reached", "reads_destination")

    def __init__(
        self,
        routes: dict[str | None, Route],
        compile_pass: Callable[[str, str], tuple[int, Any]],
        reached: frozenset[str] | None,
        reads_destination: bool = False,
        kinds: set[type] | None = None,
    ) -> None:
        self._routes = routes
        # a listener's pass (target, path) compiled against these routes, by their compiler
        self._compile_pass = compile_pass
        self._entries: dict[str, tuple[int, Any]] = {}
        # the applications the routes may pass a request to (None: any, a pass is built from
        # variables); the master lets their workers accept on the listeners passing to routes
        self.reached = reached
        self.reads_destination = reads_destination  # a step matches on the local address
        # the kinds of action it may give (corral.routing.actions' classes), whose handlers a
        # worker imports before it serves (corral.actions.load); None: any
        self.kinds = kinds

    @property
    def route_names(self) -> list[str]:
        """``routes`` (array form) or each ``routes/NAME``, in configuration order."""
        return [route.label for route in self._routes.values()]

    def check_pass(self, pass_target: str, path: str = "$.pass") -> None:
        """Raise :class:`RouteError` if a listener's ``pass`` names nothing this router (and
        its applications) has; prepares it for :meth:`resolve`."""
        self._entry(pass_target, path)

    def _entry(self, pass_target: str, path: str) -> tuple[int, Any]:
        entry = self._entries.get(pass_target)
        if entry is None:
            entry = self._entries[pass_target] = self._compile_pass(pass_target, path)
        return entry

    def resolve(self, pass_target: str, request: RouteRequest) -> Action:
        """The action for ``request`` arriving on a listener whose pass is ``pass_target``."""
        entry = self._entries.get(pass_target)
        if entry is None:
            entry = self._entry(pass_target, "$.pass")
        kind, payload = entry
        if kind == GOTO:
            route = payload
            kept = route.by_target
            if kept is not None:
                key = (request.method, request.target)
                action = kept.get(key)
                if action is None:
                    action = _follow(kind, payload, request)
                    if len(kept) >= KEPT_BY_TARGET:
                        kept.clear()
                    kept[key] = action
                return action
        return _follow(kind, payload, request)

    def resolve_fallback(self, share: Share, request: RouteRequest) -> Action:
        """The action after ``share`` could not serve a file: its fallback, else 404."""
        if share.fallback is None:
            return NOT_FOUND
        return _follow(share.fallback[0], share.fallback[1], request)
