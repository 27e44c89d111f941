"""Routes the command line writes in front of the application: nginx's ``allow`` and ``deny``
(`client_gate`, NGINX Unit's ``source`` match) and the plain listeners' redirect to HTTPS
(`https_redirect`, Unit's ``return`` with a ``location``). A document writes the same itself.
`gate_of` reads the first kind back, for the master (corral/filters/gate.py: decided once per
client in the workers rather than routed per request)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.config.errors import ConfigError
from corral.config.given import Given
from corral.config.listening import BindAddress

__all__ = ["REDIRECT", "SERVED", "GateSteps", "client_gate", "gate_of", "https_redirect"]


def client_gate(resolved: dict[str, Any], given: Mapping[str, Given]) -> list[dict[str, Any]]:
    """The steps of `deny_from` and `allow_from` (taken out of `resolved`, with
    `deny_status`): a denied client, or one outside the allowed, answered the status."""
    deny, allow = resolved.pop("deny_from", None) or [], resolved.pop("allow_from", None) or []
    status = resolved.pop("deny_status", None) or 403
    if not deny and not allow:
        if "deny_status" in given:
            raise ConfigError(
                f"{given['deny_status'].where}: applies to denied clients: give allow_from or "
                "deny_from"
            )
        return []
    from corral.routing.conditions import compile_match
    from corral.routing.errors import RouteError

    steps = []
    for name, sources in (("deny_from", deny), ("allow_from", [f"!{a}" for a in allow])):
        if not sources:
            continue
        try:
            compile_match({"source": sources}, name)
        except RouteError as exc:  # said of the flag, not of the route it makes
            words = str(exc).partition(": ")[2]
            raise ConfigError(f"{given[name].where}: {words}") from None
        steps.append({"match": {"source": sources}, "action": {"return": status}})
    return steps


SERVED, REDIRECT = "served", "https_redirect"  # the route names `https_redirect` makes


def https_redirect(
    binds: list[BindAddress], resolved: dict[str, Any], given: Mapping[str, Given]
) -> list[dict[str, Any]]:
    """With `https_redirect` (taken out of `resolved`), the route of the `insecure_bind`
    listeners: every request sent to the first bind address over HTTPS, its method kept."""
    if not resolved.pop("https_redirect", False):
        return []
    where = given["https_redirect"].where
    if not resolved.get("insecure_bind"):
        raise ConfigError(
            f"{where}: redirects the plain listeners of insecure_bind to HTTPS: give one "
            "(--insecure-bind ADDRESS)"
        )
    if resolved.get("certfile") is None:
        raise ConfigError(f"{where}: redirects to HTTPS: give certfile and keyfile for the binds")
    tcp = next((bind for bind in binds if bind.kind == "tcp"), None)
    if tcp is None or tcp.port == 0:
        raise ConfigError(
            f"{where}: redirects to the port of the first bind address, which needs one "
            f"(a TCP address with a port other than 0), not {binds[0] if binds else 'none'}"
        )
    port = "" if tcp.port == 443 else f":{tcp.port}"
    location = f"https://$host{port}$request_uri"
    return [  # 308 keeps a POST a POST (RFC 9110 15.4.9); 301 is what every client knows
        {"match": {"method": ["GET", "HEAD"]}, "action": {"return": 301, "location": location}},
        {"action": {"return": 308, "location": location}},
    ]


# a gate as the master hands it to the workers: each step's sources and status, in order
GateSteps = tuple[tuple[tuple[str, ...], int], ...]


def gate_of(routes: Any, pass_target: str, application: str) -> GateSteps | None:
    """The steps of the routes ``pass_target`` names when they only answer clients by their
    ``source`` and then pass every other request to ``application`` (its default target), in
    the shape `client_gate` writes; None for any other table."""
    if pass_target == "routes":
        steps = routes
    elif pass_target.startswith("routes/") and isinstance(routes, Mapping):
        steps = routes.get(pass_target[len("routes/") :])
    else:
        return None
    if not isinstance(steps, list) or len(steps) < 2:
        return None
    *gates, last = steps
    if last != {"action": {"pass": f"applications/{application}"}}:
        return None
    found = []
    for step in gates:
        if not isinstance(step, Mapping) or step.keys() != {"match", "action"}:
            return None
        match, action = step["match"], step["action"]
        if not isinstance(match, Mapping) or match.keys() != {"source"}:
            return None
        if not isinstance(action, Mapping) or action.keys() != {"return"}:
            return None
        sources, status = match["source"], action["return"]
        sources = [sources] if isinstance(sources, str) else sources
        if not isinstance(status, int) or not 400 <= status <= 599:
            return None  # a redirect or a success is a route's to answer, with its fields
        found.append((tuple(sources), status))
    return tuple(found)
