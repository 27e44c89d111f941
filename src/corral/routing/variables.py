"""Unit's variables: strings of a routes value that are filled in from each request.

A ``pass``, a ``location``, a ``share`` path, a ``chroot`` and a ``match.if`` may name values
of the request. Such a string is compiled once into a constant, when it has no variable, or
into one function of the :class:`~corral.routing.request.RouteRequest`, so a request pays
only for the variables it uses, and an unknown name is refused when the configuration is
loaded rather than when a request meets it.

Unit's variables, kept exactly: ``$uri``, ``$host``, ``$request_uri`` (the target as sent),
``$method``, ``$remote_addr``, ``$dollar``, ``$arg_NAME`` (last occurrence),
``$header_NAME`` (first; case-insensitive, ``_`` for ``-``), ``$cookie_NAME`` (first);
``${name}`` delimits. Unit's response-time variables (``$status``, ``$request_time``...) do
not exist before a response: refused. A ``location`` is percent-encoded where a URI needs it
(:func:`encode_location`), after its variables are filled in.

corral's own, for a share that serves a URL prefix from a directory of another name (nginx's
``alias``, uWSGI's ``static-map``), which Unit writes with an njs template literal:
``${uri_after:/PREFIX}`` is ``$uri`` without PREFIX when ``$uri`` is PREFIX or continues it
with ``/`` (``/static/a.css`` gives ``/a.css``, ``/static`` gives ``""``), else ``$uri`` whole;
a trailing ``/`` of PREFIX is ignored, so the rest is empty or starts with ``/`` and a share
``"/srv/files${uri_after:/static}"`` with ``"chroot": "/srv/files"`` stays in its directory.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from corral.routing.errors import RouteError
from corral.routing.patterns import PLUS_DECODE, as_bytes_str, decode_pattern
from corral.routing.request import BAD_ESCAPE, RouteRequest

__all__ = ["compile_template", "encode_location", "of_target"]


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_RESPONSE_TIME_VARIABLES = frozenset(
    ("status", "body_bytes_sent", "request_time", "time_local", "request_line", "request_id")
)
_VARIABLES_HELP = (
    "uri, host, request_uri, method, remote_addr, dollar, arg_NAME, header_NAME, cookie_NAME, "
    "uri_after:/PREFIX"
)
_URI_AFTER = "uri_after:"
_OF_TARGET = frozenset({"uri", "request_uri", "method", "dollar"})


def _uri_variable(r: RouteRequest) -> str:
    return r._path if r._path is not None else r._load_path()


def _host_variable(r: RouteRequest) -> str:
    return r._host if r._host is not None else r._load_host()


def _uri_after(prefix: str, path: str) -> Callable[[RouteRequest], str]:
    """``${uri_after:PREFIX}``: ``$uri`` without PREFIX at a segment boundary, else whole."""
    if not prefix.startswith("/"):
        raise RouteError(path, f"${{uri_after:{prefix}}}: the prefix is a path starting with '/'")
    prefix = prefix.rstrip("/")
    size = len(prefix)

    def uri_after(r: RouteRequest) -> str:
        uri = r._path if r._path is not None else r._load_path()
        if uri.startswith(prefix) and (len(uri) == size or uri[size] == "/"):
            return uri[size:]
        return uri

    return uri_after


def of_target(name: str) -> bool:
    """Whether variable ``name`` is a function of the request's method and target alone (no
    field, address or argument of it): a route that reads only these gives every request with
    the same method and target the same action (`corral.routing.router.Route.by_target`)."""
    return name in _OF_TARGET or name.startswith(_URI_AFTER)


def _variable(name: str, path: str) -> Callable[[RouteRequest], str] | str:
    if name == "uri":
        return _uri_variable
    if name.startswith(_URI_AFTER):
        return _uri_after(name[len(_URI_AFTER) :], path)
    if name == "host":
        return _host_variable
    if name == "request_uri":
        return lambda r: r.target.decode("latin-1")
    if name == "method":
        return lambda r: r.method
    if name == "remote_addr":
        return RouteRequest.remote_addr
    if name == "dollar":
        return "$"
    if name.startswith("arg_") and len(name) > 4:
        try:
            arg = decode_pattern(as_bytes_str(name[4:]), PLUS_DECODE)
        except ValueError as exc:
            raise RouteError(path, f"variable ${name}: {exc}") from None

        def argument(r: RouteRequest) -> str:
            args = r._args if r._args is not None else r._load_args()
            values = args.get(arg)
            return values[-1] if values else ""

        return argument
    if name.startswith("header_") and len(name) > 7:
        field = name[7:].replace("_", "-").lower().encode("utf-8")

        def header(r: RouteRequest) -> str:
            fields = r._fields if r._fields is not None else r._load_fields()
            values = fields.get(field)
            return values[0].decode("latin-1") if values else ""

        return header
    if name.startswith("cookie_") and len(name) > 7:
        cookie = as_bytes_str(name[7:])

        def cookie_value(r: RouteRequest) -> str:
            cookies = r._cookies if r._cookies is not None else r._load_cookies()
            values = cookies.get(cookie)
            return values[0] if values else ""

        return cookie_value
    if name == "uri_after":
        raise RouteError(path, "$uri_after needs its prefix: ${uri_after:/PREFIX}")
    if name in _RESPONSE_TIME_VARIABLES or name.startswith("response_header_"):
        raise RouteError(path, f"variable ${name} has no value before a response exists")
    raise RouteError(path, f"unknown variable ${name} (routes know {_VARIABLES_HELP})")


def compile_template(
    raw: str, path: str, names: set[str] | None = None
) -> tuple[str, ...] | Callable[[RouteRequest], str]:
    """A string with ``$name``/``${name}`` variables: a constant (1-tuple), or a function of
    the request. Text is in the latin-1-bytes form. ``names``, when given, gets the name of
    each variable the template reads."""
    if raw.startswith("`") and raw.endswith("`") and len(raw) > 1:
        raise RouteError(path, "template literals (njs) are not supported")
    text = as_bytes_str(raw)
    if "$" not in text:
        return (text,)
    parts: list[str | Callable[[RouteRequest], str]] = []
    literal = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$":
            literal.append(char)
            i += 1
            continue
        if text.startswith("{", i + 1):
            end = text.find("}", i + 2)
            if end < 0:
                raise RouteError(path, f"unclosed '${{' in {raw!r}")
            name = text[i + 2 : end]
            i = end + 1
        else:
            end = i + 1
            while end < len(text) and text[end] in _NAME_CHARS:
                end += 1
            name = text[i + 1 : end]
            i = end
        if not name:
            raise RouteError(
                path, f"'$' without a variable name in {raw!r} (a literal '$' is $dollar)"
            )
        getter = _variable(name, path)
        if names is not None:
            names.add(name)
        if isinstance(getter, str):
            literal.append(getter)
            continue
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(getter)
    if literal:
        parts.append("".join(literal))
    if all(isinstance(part, str) for part in parts):
        return ("".join(parts),)  # type: ignore[arg-type]
    if len(parts) == 1:
        return parts[0]  # type: ignore[return-value]
    if len(parts) == 2:
        # the common shapes ("/www$uri", "$host/"): one concatenation, no generator
        first, second = parts
        if isinstance(first, str) and callable(second):
            return lambda r: first + second(r)
        if callable(first) and isinstance(second, str):
            return lambda r: first(r) + second
    frozen = tuple(parts)

    def expand(r: RouteRequest) -> str:
        return "".join(part if part.__class__ is str else part(r) for part in frozen)  # type: ignore[operator]  # part is a str or a getter

    return expand


# RFC 3986 characters a Location may carry as they are; '%' too when it starts an escape.
_URI_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;="
)
_GOOD_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def encode_location(location: str) -> str:
    """Percent-encode what a URI cannot hold (Unit keeps an already encoded location)."""
    if all(c in _URI_SAFE or c == "%" for c in location) and not BAD_ESCAPE.search(location):
        return location
    out = []
    for i, char in enumerate(location):
        if char in _URI_SAFE or (char == "%" and _GOOD_ESCAPE.match(location, i)):
            out.append(char)
        else:
            out.append("".join(f"%{b:02X}" for b in char.encode("latin-1")))
    return "".join(out)
