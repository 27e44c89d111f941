"""The route compiler: a Unit ``routes`` value, validated and made into a :class:`Router`.

Everything a request would otherwise look up or parse per request is done here once per
configuration: each step becomes its tests (`corral.routing.conditions`) and its outcome, a
prebuilt action, the next route, or a function of the request when variables are involved
(`corral.routing.variables`). Validation is the same walk: the first invalid place is a
:class:`RouteError` naming its JSON path, which the configuration reports as it is.

Unit's rules, kept exactly: a step is ``{"match": ..., "action": ...}``; an action is one of
``pass`` (``applications/NAME``, ``applications/NAME/TARGET``, ``routes``, ``routes/NAME``; a
target is resolved to its position in the application's ``targets``), ``return`` (000-999,
optional ``location``) or ``share`` (paths, ``index``, ``types``, ``chroot``,
``follow_symlinks``, ``traverse_mounts``, ``fallback``, ``response_headers``, and corral's
``expires`` and ``immutable``: `corral.static.policy`) or ``proxy`` (``http://ADDRESS``; a
pass to ``upstreams/NAME`` proxies too: both a `Proxy`, `corral.routing.upstreams` checks
their addresses). ``rewrite`` and
``response_headers`` on another action are refused with a clear error, and so is a cycle of
static passes (`_Compiler.check_loops`). A share path's text may not hold a ``..`` segment:
only its variables could then be told from it, and the server refuses one they bring.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from corral.jsonpath import describe_value, member
from corral.net.upstream import DEFAULT_OPTIONS
from corral.routing.actions import Limited, Proxy, Respond, Share, ToApplication
from corral.routing.conditions import compile_match
from corral.routing.errors import RouteError, check_options, expect_object
from corral.routing.patterns import MIME_TYPE_PATTERNS, as_bytes_str
from corral.routing.request import RouteRequest
from corral.routing.router import (
    DYNAMIC,
    FINAL,
    GOTO,
    DynamicPass,
    Route,
    Router,
    split_pass,
    target_index,
)
from corral.routing.upstreams import compile_upstreams, proxy_address
from corral.routing.variables import compile_template, encode_location, of_target
from corral.static.policy import (
    ShareHeaders,
    check_response_headers,
    parse_expires,
    parse_immutable,
)

__all__ = ["compile_routes", "route_tables"]

_UNSUPPORTED_ACTION_OPTIONS = {
    "rewrite": "'rewrite' is not supported by corral",
}
_SHARES_KEPT = 1024  # a one-path share's actions kept per share, by their path
_SHARE_OPTIONS = (
    "share",
    "index",
    "fallback",
    "types",
    "chroot",
    "follow_symlinks",
    "traverse_mounts",
    "response_headers",
    "expires",
    "immutable",
)


_LISTENER = object()  # a pass compiled for a listener, outside any route
# the conditions that read nothing of a request but its method and target (Route.by_target)
_OF_TARGET_CONDITIONS = frozenset({"uri", "method"})


def compile_routes(
    routes: Any,
    *,
    applications: Collection[str] | None = None,
    path: str = "$.routes",
    upstreams: Any = None,
    proxy: Any = None,
) -> Router:
    """Validate and compile a Unit ``routes`` value (parsed JSON; ``None`` for none).

    ``applications``: the names a static ``applications/NAME`` pass may use (``None``: any); a
    mapping gives each one's target names too, in order (empty: no targets), which an
    ``applications/NAME/TARGET`` pass needs.
    ``path``: where ``routes`` sits in the document, for error messages.
    ``upstreams``: the document's ``upstreams`` object (None: none), which ``upstreams/NAME``
    passes name; ``proxy``: the ``proxy_*`` settings of their `Proxy` actions
    (`corral.net.upstream.ProxyOptions`; None: the defaults).
    Raises :class:`RouteError` naming the first invalid place.
    """
    compiler = _Compiler(routes, applications, path)
    compiler.upstreams = compile_upstreams(upstreams)
    if proxy is not None:
        compiler.proxy = proxy
    return compiler.compile()


def route_tables(
    routes: Any, path: str = "$.routes"
) -> Iterator[tuple[str | None, str, list[Any]]]:
    """Each route table of a ``routes`` value (``None`` for none), in order, as (its name, its
    JSON path, its steps): the one array (named None), or each of the named arrays. Raises
    :class:`RouteError` at a value that is neither, or a named table that is no array."""
    if routes is None:
        return
    if isinstance(routes, list):
        yield None, path, routes
    elif isinstance(routes, dict):
        for name, steps in routes.items():
            route_path = f"{path}{member(name)}"
            if not isinstance(steps, list):
                raise RouteError(
                    route_path, f"expected an array of route steps, got {describe_value(steps)}"
                )
            yield name, route_path, steps
    else:
        raise RouteError(
            path,
            "expected an array of route steps or an object of named arrays, "
            f"got {describe_value(routes)}",
        )


class _Compiler:
    """One routes value being compiled; the router it makes keeps it for listeners' passes."""

    def __init__(self, routes: Any, applications: Collection[str] | None, path: str) -> None:
        self.applications = None if applications is None else frozenset(applications)
        # each application's target names, in order, when ``applications`` maps them
        self.targets: Mapping[str, Sequence[str]] | None = (
            dict(applications) if isinstance(applications, Mapping) else None
        )
        self.array_mode = isinstance(routes, list)
        self.routes: dict[str | None, Route] = {}  # None: the array-mode list
        self.sources: dict[str | None, tuple[Any, str]] = {}
        self.edges: dict[str | None, list[tuple[str | None, str]]] = {}  # static passes
        self.current: Any = _LISTENER  # the route whose steps are being compiled
        # the applications a static pass names; None once a pass built from variables could
        # name any
        self.reached: set[str] | None = set()
        # whether the step being compiled reads more of a request than its method and target,
        # and the routes that have such a step (the others keep their actions by target)
        self.reads_more = False
        self.reading_more: set[str | None] = set()
        # whether a step matches on ``destination``: only then does a connection look up its
        # local address (a system call and an address formatted, per connection)
        self.reads_destination = False
        self.upstreams: dict[str, Any] = {}  # each upstream group's servers
        self.upstream_actions: dict[str, Proxy] = {}
        self.proxy: Any = DEFAULT_OPTIONS  # the proxy's settings, in every Proxy action
        # the kinds of action the routes may give (a worker imports their handlers: Respond
        # and ToApplication come of any table, from its own misses and listeners' passes)
        self.kinds: set[type] = {Respond, ToApplication}
        for name, route_path, steps in route_tables(routes, path):
            self.routes[name] = Route("routes" if name is None else f"routes/{name}")
            self.sources[name] = (steps, route_path)

    def compile(self) -> Router:
        for name, route in self.routes.items():
            steps, route_path = self.sources[name]
            self.current = name
            for i, step in enumerate(steps):
                route.steps.append(self.step(step, f"{route_path}[{i}]"))
        self.check_loops()
        for name, route in self.routes.items():
            if self.of_target(name, set()):
                route.by_target = {}
        reached = None if self.reached is None else frozenset(self.reached)
        return Router(self.routes, self.listener_pass, reached, self.reads_destination, self.kinds)

    def of_target(self, name: str | None, seen: set[str | None]) -> bool:
        """Whether walking route ``name`` reads nothing of a request but its method and
        target: its steps' conditions and actions, and the routes its static passes reach."""
        if name in self.reading_more:
            return False
        seen.add(name)
        return all(
            self.of_target(other, seen)
            for other, _ in self.edges.get(name, ())
            if other not in seen
        )

    def template(self, raw: str, path: str) -> tuple[str, ...] | Callable[[RouteRequest], str]:
        """``compile_template``, noting a variable that reads more than the target."""
        names: set[str] = set()
        template = compile_template(raw, path, names)
        if not all(of_target(name) for name in names):
            self.reads_more = True
        return template

    def listener_pass(self, target: str, path: str) -> tuple[int, Any]:
        """A listener's ``pass`` (`Router.check_pass`): compiled as a step's, but outside any
        route, so that it is no edge of a loop."""
        self.current = _LISTENER
        return self.pass_action(target, path)

    # -- a step

    def step(
        self, step: Any, path: str
    ) -> tuple[tuple[Callable[[RouteRequest], Any], ...], int, Any]:
        step = expect_object(step, path, "a route step")
        check_options(step, ("match", "action"), path, "route step")
        if "action" not in step:
            raise RouteError(path, "a route step needs an 'action'")
        tests: tuple[Callable[[RouteRequest], Any], ...] = ()
        self.reads_more = False
        if "match" in step:
            match = expect_object(step["match"], f"{path}.match", "match conditions")
            tests = compile_match(match, f"{path}.match")
            self.reads_more = not match.keys() <= _OF_TARGET_CONDITIONS
            self.reads_destination = self.reads_destination or "destination" in match
        kind, payload = self.action(step["action"], f"{path}.action")
        if self.reads_more:
            self.reading_more.add(self.current)
        return tests, kind, payload

    # -- actions

    def action(self, action: Any, path: str) -> tuple[int, Any]:
        action = expect_object(action, path, "an action")
        if "rate_limit" in action:
            self.kinds.add(Limited)
            return self.limited_action(action, path)
        for option, why in _UNSUPPORTED_ACTION_OPTIONS.items():
            if option in action:
                raise RouteError(f"{path}{member(option)}", why)
        kinds = [k for k in ("pass", "return", "share", "proxy") if k in action]
        if len(kinds) != 1:
            found = "none" if not kinds else " and ".join(kinds)
            raise RouteError(
                path, f"an action needs exactly one of pass, return, share, proxy; got {found}"
            )
        kind = kinds[0]
        if kind != "share" and "response_headers" in action:
            raise RouteError(
                f"{path}.response_headers",
                "'response_headers' is supported on share actions only, by corral",
            )
        if kind == "pass":
            check_options(action, ("pass",), path, "pass action")
            return self.pass_action(action["pass"], f"{path}.pass")
        if kind == "return":
            check_options(action, ("return", "location"), path, "return action")
            return self.return_action(action, path)
        if kind == "proxy":
            self.kinds.add(Proxy)
            check_options(action, ("proxy",), path, "proxy action")
            address = proxy_address(action["proxy"], f"{path}.proxy")
            return FINAL, Proxy(action["proxy"], ((address, 1.0),), self.proxy)
        check_options(action, _SHARE_OPTIONS, path, "share action")
        self.kinds.add(Share)
        return self.share_action(action, path)

    def limited_action(self, action: dict[str, Any], path: str) -> tuple[int, Any]:
        """An action with corral's ``rate_limit`` (nginx's ``limit_req`` in a ``location``):
        the action itself, marked to be counted in the step's limit first."""
        import msgspec  # (routing alone imports neither: the workers' routes never need them)

        from corral.config.listener_limits import RateLimit

        where = f"{path}.rate_limit"
        try:
            msgspec.convert(action["rate_limit"], RateLimit)
        except msgspec.ValidationError as exc:
            raise RouteError(where, str(exc)) from None
        rest = {key: value for key, value in action.items() if key != "rate_limit"}
        kind, payload = self.action(rest, path)
        if kind == FINAL:
            return FINAL, Limited(payload, where)
        if kind == DYNAMIC and not isinstance(payload, DynamicPass):  # a share's paths

            def limited(r: RouteRequest) -> Limited:
                return Limited(payload(r), where)

            return DYNAMIC, limited
        raise RouteError(
            where,
            "on a pass to routes (or one built from variables): put it on the steps it reaches",
        )

    def pass_action(self, value: Any, path: str) -> tuple[int, Any]:
        if not isinstance(value, str):
            raise RouteError(path, f"expected a pass target string, got {describe_value(value)}")
        template = compile_template(value, path)
        if isinstance(template, tuple):
            return self.static_pass(value, path)
        self.reached = None
        self.reads_more = True  # it may lead to any route
        upstreams = {name: self.upstream_action(name) for name in self.upstreams}
        dynamic = DynamicPass(
            template, self.routes, self.array_mode, self.applications, self.targets, upstreams
        )
        return DYNAMIC, dynamic

    def upstream_action(self, name: str) -> Proxy:
        """The one action of the upstream group ``name``: every pass to it shares the group's
        kept connections and its servers' failures (as one nginx ``upstream`` block does)."""
        action = self.upstream_actions.get(name)
        if action is None:
            self.kinds.add(Proxy)
            action = Proxy(f"upstreams/{name}", self.upstreams[name], self.proxy)
            self.upstream_actions[name] = action
        return action

    def static_pass(self, target: str, path: str) -> tuple[int, Any]:
        segments = split_pass(target)
        if segments is None:
            raise RouteError(path, f"invalid pass target {target!r}")
        head = segments[0]
        if head == "applications":
            if len(segments) < 2:
                raise RouteError(path, f"invalid pass target {target!r}: 'applications/NAME'")
            name = segments[1]
            if self.applications is not None and name not in self.applications:
                raise RouteError(path, f"{target!r} names no application of the configuration")
            index: int | None = 0
            if len(segments) == 3:
                index = target_index(self.targets, name, segments[2])
                if index is None:
                    raise RouteError(path, f"{target!r} names no target of application {name!r}")
            if self.reached is not None:
                self.reached.add(name)
            return FINAL, ToApplication(name, index or 0)
        if head == "routes":
            route = segments[1] if len(segments) == 2 else None
            if len(segments) == 3 or route not in self.routes or (route is None) != self.array_mode:
                raise RouteError(path, f"{target!r} names no route of the configuration")
            if self.current is not _LISTENER:
                self.edges.setdefault(self.current, []).append((route, path))
            return GOTO, self.routes[route]
        if head == "upstreams":
            if len(segments) != 2 or segments[1] not in self.upstreams:
                raise RouteError(path, f"{target!r} names no upstream of the configuration")
            return FINAL, self.upstream_action(segments[1])
        raise RouteError(
            path,
            f"invalid pass target {target!r} "
            "(expected applications/NAME, routes, routes/NAME or upstreams/NAME)",
        )

    def return_action(self, action: dict[str, Any], path: str) -> tuple[int, Any]:
        status = action["return"]
        if not isinstance(status, int) or isinstance(status, bool) or not 0 <= status <= 999:
            raise RouteError(
                f"{path}.return", f"expected a status code 0-999, got {describe_value(status)}"
            )
        if "location" not in action:
            return FINAL, Respond(status)
        location = action["location"]
        if not isinstance(location, str):
            raise RouteError(
                f"{path}.location", f"expected a URI string, got {describe_value(location)}"
            )
        template = self.template(location, f"{path}.location")
        if isinstance(template, tuple):
            return FINAL, Respond(status, encode_location(template[0]))
        return DYNAMIC, lambda r: Respond(status, encode_location(template(r)))

    def share_action(self, action: dict[str, Any], path: str) -> tuple[int, Any]:
        share = action["share"]
        share_path = f"{path}.share"
        if isinstance(share, str):
            share = [share]
        elif not isinstance(share, list) or not share:
            raise RouteError(
                share_path,
                f"expected a path or a non-empty array of paths, got {describe_value(share)}",
            )
        templates = []
        for i, item in enumerate(share):
            item_path = f"{share_path}[{i}]" if isinstance(action["share"], list) else share_path
            if not isinstance(item, str):
                raise RouteError(item_path, f"expected a path string, got {describe_value(item)}")
            if ".." in item.split("/"):
                raise RouteError(item_path, "a share path may not hold a '..' segment")
            templates.append(self.template(item, item_path))
        options: dict[str, Any] = {}
        index = action.get("index", "index.html")
        if not isinstance(index, str):
            raise RouteError(f"{path}.index", f"expected a file name, got {describe_value(index)}")
        options["index"] = as_bytes_str(index)
        for flag in ("follow_symlinks", "traverse_mounts"):
            if flag in action:
                if not isinstance(action[flag], bool):
                    raise RouteError(
                        f"{path}.{flag}",
                        f"expected true or false, got {describe_value(action[flag])}",
                    )
                options[flag] = action[flag]
        if "types" in action:
            options["types"] = MIME_TYPE_PATTERNS.rule(action["types"], f"{path}.types")
        chroot: Any = None
        if "chroot" in action:
            if not isinstance(action["chroot"], str):
                raise RouteError(
                    f"{path}.chroot",
                    f"expected a directory path, got {describe_value(action['chroot'])}",
                )
            chroot = self.template(action["chroot"], f"{path}.chroot")
        if "fallback" in action:
            options["fallback"] = self.action(action["fallback"], f"{path}.fallback")
        headers = share_headers(action, path)
        if headers is not None:
            options["headers"] = headers
        dynamic = any(not isinstance(t, tuple) for t in templates) or (
            chroot is not None and not isinstance(chroot, tuple)
        )
        if not dynamic:
            return FINAL, Share(
                tuple(t[0] for t in templates),  # type: ignore[index]
                chroot=None if chroot is None else chroot[0],
                **options,
            )
        index = options.pop("index")
        follow = options.pop("follow_symlinks", True)
        traverse = options.pop("traverse_mounts", True)
        types = options.pop("types", None)
        fallback = options.pop("fallback", None)
        expanders = tuple(
            (lambda r, text=t[0]: text) if isinstance(t, tuple) else t for t in templates
        )
        if chroot is None or isinstance(chroot, tuple):
            root = None if chroot is None else chroot[0]
            if len(expanders) == 1:
                # the common share ("/www$uri"): one call per request, and the action of a
                # path asked for before (actions are values: the same path, the same share)
                only = expanders[0]
                made: dict[str, Share] = {}

                def expand(r: RouteRequest) -> Share:
                    path = only(r)
                    share = made.get(path)
                    if share is None:
                        if len(made) >= _SHARES_KEPT:
                            made.clear()
                        share = made[path] = Share(
                            (path,), index, root, follow, traverse, types, fallback, headers
                        )
                    return share

                return DYNAMIC, expand

            def expand_each(r: RouteRequest) -> Share:
                paths = tuple([expander(r) for expander in expanders])
                return Share(paths, index, root, follow, traverse, types, fallback, headers)

            return DYNAMIC, expand_each

        def expand_root(r: RouteRequest) -> Share:
            paths = tuple([expander(r) for expander in expanders])
            return Share(paths, index, chroot(r), follow, traverse, types, fallback, headers)

        return DYNAMIC, expand_root

    # -- loops

    def check_loops(self) -> None:
        """Refuse a cycle of static passes: without rewrite the request is the same each time
        round, so any request that enters the cycle would loop forever."""
        done: set[str | None] = set()
        walk: list[str | None] = []

        def label(name: str | None) -> str:
            return "routes" if name is None else f"routes/{name}"

        def visit(name: str | None) -> None:
            walk.append(name)
            for target, where in self.edges.get(name, ()):
                if target in walk:
                    cycle = [*walk[walk.index(target) :], target]
                    raise RouteError(where, "passes loop: " + " -> ".join(map(label, cycle)))
                if target not in done:
                    visit(target)
            walk.pop()
            done.add(name)

        for name in self.routes:
            if name not in done:
                visit(name)


def share_headers(action: dict[str, Any], path: str) -> ShareHeaders | None:
    """A share's ``expires``, ``immutable`` and ``response_headers``, compiled; None when it
    has none of them."""
    if not any(key in action for key in ("expires", "immutable", "response_headers")):
        return None
    try:
        expires = parse_expires(action.get("expires", "off"))
    except ValueError as exc:
        raise RouteError(f"{path}.expires", str(exc)) from None
    try:
        immutable = parse_immutable(action.get("immutable", False))
    except ValueError as exc:
        raise RouteError(f"{path}.immutable", str(exc)) from None
    rules: list[tuple[str, str | None]] = []
    if "response_headers" in action:
        where = f"{path}.response_headers"
        try:
            given = check_response_headers(action["response_headers"])
        except ValueError as exc:
            raise RouteError(where, str(exc)) from None
        for name, value in given:
            if value is not None:
                template = compile_template(value, f"{where}{member(name)}")
                if not isinstance(template, tuple):
                    raise RouteError(
                        f"{where}{member(name)}",
                        "variables in response_headers are not supported by corral "
                        "(a '$' is written $dollar)",
                    )
                value = template[0]
            rules.append((name, value))
    if expires is None and not immutable and not rules:
        return None
    return ShareHeaders(expires, immutable, rules)
