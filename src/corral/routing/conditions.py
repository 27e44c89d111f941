"""A step's ``match``: its conditions, each compiled into one test of the request.

The router calls a step's tests in turn and stops at the first that fails, so each condition
is a single function of the :class:`~corral.routing.request.RouteRequest`, built here once per
configuration: it reads the request's value (normalized on first use, then kept) and applies
the predicate its patterns compiled to (`corral.routing.patterns`; addresses,
`corral.net.addresses`). The tests come cheapest property first: all must hold, so the order
changes only the cost.

Unit's rules, kept exactly: ``scheme`` is ``http`` or ``https`` (any case); ``headers``,
``arguments`` and ``cookies`` are an object of names and patterns, which needs all its names,
or an array of such objects, any one of which is enough (an empty array: anything); a name
absent from the request fails whatever its patterns (even ``"!x"``), and every occurrence of
a repeated name must match; ``if`` is a string with variables that holds unless it is empty,
``0``, ``false``, ``null`` or ``undefined`` (``!`` negates it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.jsonpath import describe_value, member
from corral.net.addresses import AddressError, address_matcher
from corral.routing.errors import RouteError, check_options
from corral.routing.patterns import (
    ARGUMENT_PATTERNS,
    COOKIE_PATTERNS,
    HEADER_PATTERNS,
    HOST_PATTERNS,
    METHOD_PATTERNS,
    PLUS_DECODE,
    QUERY_PATTERNS,
    URI_PATTERNS,
    PatternCompiler,
    always,
    as_bytes_str,
    decode_pattern,
)
from corral.routing.request import RouteRequest
from corral.routing.variables import compile_template

__all__ = ["compile_match"]

_FALSE_CONDITIONS = frozenset(("", "0", "false", "null", "undefined"))


def compile_match(match: dict[str, Any], path: str) -> tuple[Callable[[RouteRequest], Any], ...]:
    """The tests of a step's ``match`` object at ``path``, cheapest first; all must hold."""
    check_options(match, _CONDITIONS, path, "match")
    return tuple(
        condition(match[key], f"{path}.{key}")
        for key, condition in _CONDITIONS.items()
        if key in match
    )


def _addresses(value: Any, path: str) -> Callable[[tuple[int, int, int]], bool]:
    """A ``source``/``destination`` test; an invalid pattern is a :class:`RouteError`."""
    try:
        return address_matcher(value, path)
    except AddressError as exc:
        raise RouteError(exc.path, exc.detail) from None


def _match_scheme(value: Any, path: str) -> Callable[[RouteRequest], bool]:
    if not isinstance(value, str) or value.lower() not in ("http", "https"):
        raise RouteError(path, f'expected "http" or "https", got {describe_value(value)}')
    scheme = value.lower()
    return lambda r: r.scheme == scheme


def _match_method(value: Any, path: str) -> Callable[[RouteRequest], Any]:
    rule = METHOD_PATTERNS.rule(value, path)
    return lambda r: rule(r.method)


def _match_host(value: Any, path: str) -> Callable[[RouteRequest], Any]:
    rule = HOST_PATTERNS.rule(value, path)

    def host(r: RouteRequest) -> Any:
        value = r._host
        return rule(value if value is not None else r._load_host())

    return host


def _match_uri(value: Any, path: str) -> Callable[[RouteRequest], Any]:
    rule = URI_PATTERNS.rule(value, path)

    def uri(r: RouteRequest) -> Any:
        value = r._path
        return rule(value if value is not None else r._load_path())

    return uri


def _match_query(value: Any, path: str) -> Callable[[RouteRequest], Any]:
    rule = QUERY_PATTERNS.rule(value, path)

    def query(r: RouteRequest) -> Any:
        value = r._decoded_query
        return rule(value if value is not None else r._load_decoded_query())

    return query


def _table(
    value: Any,
    path: str,
    what: str,
    names: Callable[[str, str], Any],
    patterns: PatternCompiler,
) -> list[list[tuple[Any, Callable[[str], Any]]]]:
    """An object or an array of objects of name → patterns: [[(key, rule), ...], ...]."""
    objects = value if isinstance(value, list) else [value]
    table = []
    for i, entry in enumerate(objects):
        entry_path = f"{path}[{i}]" if isinstance(value, list) else path
        if not isinstance(entry, dict):
            raise RouteError(
                entry_path,
                f"expected an object of {what} names and patterns"
                f"{' or an array of them' if entry is value else ''}, "
                f"got {describe_value(entry)}",
            )
        rules = []
        for name, pats in entry.items():
            name_path = f"{entry_path}{member(name)}"
            if not name:
                raise RouteError(entry_path, f"a {what} name must not be empty")
            rules.append((names(name, name_path), patterns.rule(pats, name_path)))
        table.append(rules)
    return table


def _table_test(
    table: list[list[tuple[Any, Callable[[str], Any]]]],
    load: Callable[[RouteRequest], dict[Any, list[Any]]],
    decode: bool,
) -> Callable[[RouteRequest], bool]:
    def entry_holds(found: dict[Any, list[Any]], rules: list[tuple[Any, Any]]) -> bool:
        for key, rule in rules:
            values = found.get(key)
            if not values:
                return False  # absent: no pattern, not even a negation, matches
            for value in values:
                if not rule(value.decode("latin-1") if decode else value):
                    return False
        return True

    if not table:
        return always  # Unit: an empty array of objects matches anything
    if len(table) == 1:
        only = table[0]
        return lambda r: entry_holds(load(r), only)
    entries = tuple(table)

    def any_entry(r: RouteRequest) -> bool:
        found = load(r)
        return any(entry_holds(found, rules) for rules in entries)

    return any_entry


def _match_headers(value: Any, path: str) -> Callable[[RouteRequest], bool]:
    if not isinstance(value, dict | list):
        raise RouteError(
            path, f"expected an object or an array of objects, got {describe_value(value)}"
        )
    table = _table(
        value, path, "header", lambda name, p: name.encode("utf-8").lower(), HEADER_PATTERNS
    )
    return _table_test(
        table, lambda r: r._fields if r._fields is not None else r._load_fields(), True
    )


def _match_arguments(value: Any, path: str) -> Callable[[RouteRequest], bool]:
    if not isinstance(value, dict | list):
        raise RouteError(
            path, f"expected an object or an array of objects, got {describe_value(value)}"
        )

    def name_of(name: str, name_path: str) -> str:
        try:
            return decode_pattern(as_bytes_str(name), PLUS_DECODE)
        except ValueError as exc:
            raise RouteError(name_path, f"argument name {name!r}: {exc}") from None

    table = _table(value, path, "argument", name_of, ARGUMENT_PATTERNS)
    return _table_test(table, lambda r: r._args if r._args is not None else r._load_args(), False)


def _match_cookies(value: Any, path: str) -> Callable[[RouteRequest], bool]:
    if not isinstance(value, dict | list):
        raise RouteError(
            path, f"expected an object or an array of objects, got {describe_value(value)}"
        )
    table = _table(value, path, "cookie", lambda name, p: as_bytes_str(name), COOKIE_PATTERNS)
    return _table_test(
        table, lambda r: r._cookies if r._cookies is not None else r._load_cookies(), False
    )


def _match_source(value: Any, path: str) -> Callable[[RouteRequest], bool]:
    rule = _addresses(value, path)
    return lambda r: rule(r._src if r._src is not None else r._load_src())


def _match_destination(value: Any, path: str) -> Callable[[RouteRequest], bool]:
    rule = _addresses(value, path)
    return lambda r: rule(r._dst if r._dst is not None else r._load_dst())


def _match_if(value: Any, path: str) -> Callable[[RouteRequest], bool]:
    if not isinstance(value, str):
        raise RouteError(path, f"expected a string, got {describe_value(value)}")
    negate = value.startswith("!")
    expression = compile_template(value[1:] if negate else value, path)
    if isinstance(expression, tuple):
        result = (expression[0] not in _FALSE_CONDITIONS) != negate
        return lambda r: result
    return lambda r: (expression(r) not in _FALSE_CONDITIONS) != negate


# each property's compiler, cheapest first: the order of a step's tests
_CONDITIONS: dict[str, Callable[[Any, str], Callable[[RouteRequest], Any]]] = {
    "scheme": _match_scheme,
    "method": _match_method,
    "host": _match_host,
    "uri": _match_uri,
    "query": _match_query,
    "arguments": _match_arguments,
    "headers": _match_headers,
    "cookies": _match_cookies,
    "source": _match_source,
    "destination": _match_destination,
    "if": _match_if,
}
