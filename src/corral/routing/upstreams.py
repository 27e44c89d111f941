"""NGINX Unit's ``upstreams`` object and ``proxy`` addresses, validated: each error names its
JSON path, as the rest of the routes' do (`corral.routing.errors.RouteError`).

Unit's shapes, kept: ``"upstreams": {"NAME": {"servers": {"ADDRESS": {"weight": N}}}}``, an
address being ``IPv4:port``, ``[IPv6]:port`` or ``unix:/path``, the weight a number from 0 to
1000000 (1 when not given; 0: never chosen); a ``proxy`` action's value ``"http://ADDRESS"``.
Host names are refused, as Unit refuses them: an upstream is an address.
"""

from __future__ import annotations

from typing import Any

from corral.jsonpath import describe_value, member
from corral.net.upstream import parse_address
from corral.routing.errors import RouteError, check_options, expect_object

__all__ = ["Servers", "compile_upstreams", "proxy_address"]

Servers = tuple[tuple[str, float], ...]  # (address, weight), in the configuration's order
_MAX_WEIGHT = 1_000_000


def proxy_address(value: Any, path: str) -> str:
    """A ``proxy`` action's value: the address after ``http://``."""
    if not isinstance(value, str):
        raise RouteError(path, f'expected "http://ADDRESS", got {describe_value(value)}')
    if not value.startswith("http://"):
        raise RouteError(path, f'expected "http://ADDRESS" (only http is proxied), got {value!r}')
    address = value.removeprefix("http://").removesuffix("/")
    try:
        parse_address(address)
    except ValueError as exc:
        raise RouteError(path, str(exc)) from None
    return address


def compile_upstreams(raw: Any, path: str = "$.upstreams") -> dict[str, Servers]:
    """The ``upstreams`` object (None: none) as each group's servers. Raises `RouteError`."""
    if raw is None:
        return {}
    groups: dict[str, Servers] = {}
    for name, group in expect_object(raw, path, "an object of upstream groups").items():
        where = f"{path}{member(name)}"
        group = expect_object(group, where, "an upstream group")
        check_options(group, ("servers",), where, "upstream group")
        if "servers" not in group:
            raise RouteError(where, "an upstream group needs 'servers'")
        servers_path = f"{where}.servers"
        servers = expect_object(group["servers"], servers_path, "an object of servers")
        if not servers:
            raise RouteError(servers_path, "expected at least one server, got {}")
        entries = []
        for address, options in servers.items():
            at = f"{servers_path}{member(address)}"
            try:
                parse_address(address)
            except ValueError as exc:
                raise RouteError(at, str(exc)) from None
            options = expect_object(options, at, "a server's options")
            check_options(options, ("weight",), at, "upstream server")
            weight = options.get("weight", 1)
            if (
                isinstance(weight, bool)
                or not isinstance(weight, int | float)
                or not 0 <= weight <= _MAX_WEIGHT
            ):
                raise RouteError(
                    f"{at}.weight",
                    f"expected a number from 0 to {_MAX_WEIGHT}, got {describe_value(weight)}",
                )
            entries.append((address, float(weight)))
        groups[name] = tuple(entries)
    return groups
