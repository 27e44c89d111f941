"""NGINX Unit's routes, compiled once, resolved per request.

Owns: validation of a Unit-style ``routes`` value (an array of steps, or an object of named
arrays), its compilation into plain Python checks, and ``Router.resolve(pass_target, request)``,
which walks the steps and returns the :class:`Action` to take. It knows nothing of sockets,
the event loop or WSGI: the worker builds a :class:`RouteRequest` from what it already holds
(method, raw target, header list, peer and local address, scheme) and serves the action.

Semantics are Unit's (its documentation, "Configuration > Routes", and its router sources):

- A request walks the steps in order; the first step whose every ``match`` condition holds
  (or that has no ``match``) wins; no winner is 404. A ``pass`` to ``routes``/``routes/NAME``
  walks that list next. A cycle of static passes is rejected at compile time; a pass built
  from variables is looked up per request (unknown target: 404), and a request may take at
  most ``MAX_HOPS`` of those to a route (then 500).
- A property with a list of patterns matches when no negated (``!``) pattern matches and, if
  there are non-negated ones, at least one of them does: a list of negations only is "none
  of these". An empty list matches everything (an empty ``source``/``destination`` list,
  nothing: Unit's own asymmetry). ``headers``, ``arguments``, ``cookies``: an object needs
  all its names, an array of objects any one object; a name absent from the request fails
  whatever its patterns (even ``"!x"``), and every occurrence of a repeated name must match.
- A pattern is exact; or has ``*`` wildcards anywhere (``**`` is refused); or starts with
  ``~`` and is a regular expression searched (not anchored) in the value, with Python's
  ``re`` in ASCII mode standing in for PCRE (case-sensitive, like Unit's). ``""`` matches
  the empty value only, ``"!"`` any non-empty one.
- Values: ``uri`` is the percent-decoded path with ``.``/``..`` segments resolved and ``//``
  merged (a ``..`` above the root, a malformed ``%`` escape or a decoded NUL answers 400, as
  Unit does); ``query`` the whole query string and ``arguments`` its ``&``-separated pairs,
  both percent-decoded with ``+`` as space; ``host`` the Host field (or the authority of an
  absolute-form target) lower-cased, without its port and one trailing dot; ``method`` as
  sent. Patterns for ``uri``, ``query`` and ``arguments`` (names too) are percent-decoded
  like the values, after the split on ``*`` (so ``%2A`` is a literal star).
- Case: ``method`` patterns are upper-cased and ``host`` patterns lower-cased (so both match
  regardless of case); header names and values compare case-insensitively (ASCII);
  ``uri``, ``query``, ``arguments`` and ``cookies`` are case-sensitive. Regexes never fold.
- Strings are compared as bytes: JSON text is UTF-8, request bytes are latin-1 ``str``.
- ``source``/``destination``: ``!``, ``unix``, IPv4 and IPv6 addresses, CIDR blocks and
  ``A-B`` ranges, each with an optional ``:PORT`` or ``:LOW-HIGH`` (IPv6: ``[...]:PORT``),
  and ``*:PORT`` for any IP. An IPv4-mapped IPv6 peer is IPv6, as in Unit.
- Actions: ``pass`` (``applications/NAME``, ``applications/NAME/TARGET``, ``routes``,
  ``routes/NAME``, percent-decoded segments; a target is resolved to its position in the
  application's ``targets``, ``applications/NAME`` meaning its first), ``return`` (000-999,
  optional ``location``, percent-encoded where a URI needs it), ``share`` (a :class:`Share`
  marker with its ``fallback``). ``proxy``, ``rewrite``, ``response_headers`` and upstreams
  are refused with a clear error.
- Variables in ``pass``, ``location``, ``share``, ``chroot`` and ``match.if``: ``$uri``,
  ``$host``, ``$request_uri`` (the target as sent), ``$method``, ``$remote_addr``,
  ``$dollar``, ``$arg_NAME`` (last occurrence), ``$header_NAME`` (first; case-insensitive,
  ``_`` for ``-``), ``$cookie_NAME`` (first); ``${name}`` delimits. Unit's response-time
  variables (``$status``, ``$request_time``...) do not exist before a response: refused.

Per-request cost (all lazy, computed on first use and kept on the :class:`RouteRequest`):
a step costs one Python call per condition plus the check itself; an exact pattern is one
``==``, a list of exact ones one ``frozenset`` lookup, ``x*``/``*x`` one ``startswith``/
``endswith`` (a list of them one call with a tuple), ``*x*`` one ``in``, other wildcards a
``startswith``/``endswith`` and one ``find`` per inner piece (linear: no backtracking), a
regex one ``search``. The path is decoded and normalized once (a ``'%'``/``'//'``/``'/.'``
scan when clean); the header dict, the arguments and the cookies are built once, only if a
reached step asks for them. bench/routing_micro.py measures a 10-step table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from corral.jsonpath import PathError, describe_value, member
from corral.net.addresses import AddressError, address_matcher, socket_address

__all__ = [
    "BAD_REQUEST",
    "MAX_HOPS",
    "NOT_FOUND",
    "ROUTING_LOOP",
    "Action",
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

MAX_HOPS = 32  # passes with variables to a route, per request: only they can loop


class RouteError(PathError):
    """An invalid routes value: ``str()`` is one line, ``PATH: what was expected``."""


# -- actions ------------------------------------------------------------------------------------


class Action:
    """What the server does with a request: one of the subclasses below."""

    __slots__ = ()

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._fields() == self._fields()  # type: ignore[attr-defined]

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
    fallback). corral has no static server yet: a server may answer 501."""

    __slots__ = (
        "chroot",
        "fallback",
        "follow_symlinks",
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
    ) -> None:
        self.paths = paths
        self.index = index
        self.chroot = chroot
        self.follow_symlinks = follow_symlinks
        self.traverse_mounts = traverse_mounts
        self.types = types
        self.fallback = fallback

    def type_allowed(self, mime_type: str) -> bool:
        """Whether the ``types`` patterns admit ``mime_type`` (an unknown type is ``""``)."""
        return self.types is None or bool(self.types(mime_type))


NOT_FOUND = Respond(404)
BAD_REQUEST = Respond(400)
ROUTING_LOOP = Respond(500)


# -- the request --------------------------------------------------------------------------------


class _BadTarget(Exception):
    """The request target cannot be normalized: Unit answers 400."""


class RouteRequest:
    """What routing reads of one request. Built from values the worker already has; every
    derived value (path, host, header dict, arguments, cookies, addresses) is computed on
    first use and kept, so a table that never looks at a property costs nothing for it.

    ``target``: the request target as received; ``headers``: ``(name, value)`` pairs as the
    parser gives them; ``peer``/``local``: socket addresses as asyncio reports them (a tuple
    for IP, anything else for a unix socket); ``absolute``: the parsed absolute-form target
    (``RequestHead.absolute``), whose authority then replaces the Host field.
    """

    __slots__ = (
        "_args",
        "_cookies",
        "_decoded_query",
        "_dst",
        "_fields",
        "_host",
        "_path",
        "_query",
        "_src",
        "absolute",
        "headers",
        "local",
        "method",
        "peer",
        "scheme",
        "target",
    )

    def __init__(
        self,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        peer: Any = None,
        local: Any = None,
        scheme: str = "http",
        absolute: Any = None,
    ) -> None:
        self.method = method
        self.target = target
        self.headers = headers
        self.peer = peer
        self.local = local
        self.scheme = scheme
        self.absolute = absolute
        self._path: str | None = None
        self._query: str | None = None
        self._decoded_query: str | None = None
        self._host: str | None = None
        self._fields: dict[bytes, list[bytes]] | None = None
        self._args: dict[str, list[str]] | None = None
        self._cookies: dict[str, list[str]] | None = None
        self._src: tuple[int, int, int] | None = None
        self._dst: tuple[int, int, int] | None = None

    @classmethod
    def from_head(cls, head: Any, peer: Any, local: Any, scheme: str = "http") -> RouteRequest:
        """From a parsed ``RequestHead``."""
        return cls(head.method, head.target, head.headers, peer, local, scheme, head.absolute)

    # Loaders: each fills its slot and returns it; callers test the slot for None first.

    def _load_path(self) -> str:
        absolute = self.absolute
        if absolute is None:
            raw = self.target.decode("latin-1")
            if "#" in raw:
                raw = raw.partition("#")[0]
            path, _, query = raw.partition("?")
            if path == "*":
                path = ""
        else:
            path = (absolute.path or b"/").decode("latin-1")
            query = (absolute.query or b"").decode("latin-1")
        self._query = query
        try:
            self._path = normalize_path(path)
        except ValueError:
            raise _BadTarget from None
        return self._path

    def _load_query(self) -> str:
        if self._query is None:
            self._load_path()
        return self._query  # type: ignore[return-value]

    def _load_host(self) -> str:
        absolute = self.absolute
        raw: bytes | None = None
        if absolute is not None and absolute.host:
            raw = absolute.host
        else:
            for name, value in self.headers:
                if len(name) == 4 and name.lower() == b"host":
                    raw = value
                    break
        self._host = host = _normalize_host(raw)
        return host

    def _load_fields(self) -> dict[bytes, list[bytes]]:
        fields: dict[bytes, list[bytes]] = {}
        for name, value in self.headers:
            key = name.lower()
            values = fields.get(key)
            if values is None:
                fields[key] = [value]
            else:
                values.append(value)
        self._fields = fields
        return fields

    def _load_decoded_query(self) -> str:
        query = self._query if self._query is not None else self._load_query()
        self._decoded_query = decoded = _decode_lenient(query)
        return decoded

    def _load_args(self) -> dict[str, list[str]]:
        query = self._query if self._query is not None else self._load_query()
        args: dict[str, list[str]] = {}
        for part in query.split("&"):
            if not part:
                continue
            name, eq, value = part.partition("=")
            if not eq:
                name, value = part, ""
            elif not name and not value:
                continue
            name = _decode_lenient(name)
            value = _decode_lenient(value)
            values = args.get(name)
            if values is None:
                args[name] = [value]
            else:
                values.append(value)
        self._args = args
        return args

    def _load_cookies(self) -> dict[str, list[str]]:
        fields = self._fields if self._fields is not None else self._load_fields()
        cookies: dict[str, list[str]] = {}
        for header in fields.get(b"cookie", ()):
            for part in header.decode("latin-1").split(";"):
                name, eq, value = part.partition("=")
                if not eq:
                    continue
                name = name.lstrip(" ")
                value = value.rstrip(" ")
                values = cookies.get(name)
                if values is None:
                    cookies[name] = [value]
                else:
                    values.append(value)
        self._cookies = cookies
        return cookies

    def _load_src(self) -> tuple[int, int, int]:
        self._src = address = socket_address(self.peer)
        return address

    def _load_dst(self) -> tuple[int, int, int]:
        self._dst = address = socket_address(self.local)
        return address

    # Values for the variables (not on the matching path).

    def path(self) -> str:
        """The decoded, normalized path; raises ``ValueError`` where Unit answers 400."""
        try:
            return self._path if self._path is not None else self._load_path()
        except _BadTarget:
            raise ValueError("invalid request target") from None

    def host(self) -> str:
        return self._host if self._host is not None else self._load_host()

    def remote_addr(self) -> str:
        return str(self.peer[0]) if isinstance(self.peer, tuple) else ""


_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def normalize_path(path: str) -> str:
    """Percent-decode ``path`` (a latin-1 ``str``) and resolve ``.``, ``..`` and ``//`` as Unit
    does; ``ValueError`` for a malformed escape, a decoded NUL or a ``..`` above the root."""
    if "%" in path:
        if _BAD_ESCAPE.search(path):
            raise ValueError("malformed percent-encoding")
        path = unquote_to_bytes(path.encode("latin-1")).decode("latin-1")
        if "\x00" in path:
            raise ValueError("NUL in path")
    if ("//" in path or "/." in path) and path.startswith("/"):
        path = _remove_dot_segments(path)
    return path


def _remove_dot_segments(path: str) -> str:
    segments = path.split("/")
    kept: list[str] = []
    for segment in segments[1:-1]:
        if segment == ".." and kept:
            kept.pop()
        elif segment == "..":
            raise ValueError("'..' above the root")
        elif segment and segment != ".":
            kept.append(segment)
    last = segments[-1]
    trailing = True
    if last == "..":
        if not kept:
            raise ValueError("'..' above the root")
        kept.pop()
    elif last and last != ".":
        kept.append(last)
        trailing = False
    if not kept:
        return "/"
    return "/" + "/".join(kept) + ("/" if trailing else "")


def _normalize_host(raw: bytes | None) -> str:
    if not raw:
        return ""
    host = raw.lower()
    if host[:1] == b"[":
        end = host.find(b"]")
        if end >= 0:
            host = host[: end + 1]
    else:
        host = host.partition(b":")[0]
    if host[-1:] == b".":
        host = host[:-1]
    return host.decode("latin-1")


def _decode_lenient(text: str) -> str:
    """A query component as Unit reads it: ``+`` is a space, a valid ``%XX`` its byte, any
    other ``%`` itself."""
    if "+" in text:
        text = text.replace("+", " ")
    if "%" in text:
        text = unquote_to_bytes(text.encode("latin-1")).decode("latin-1")
    return text


# -- string patterns ----------------------------------------------------------------------------

_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _ascii_lower(text: str) -> str:
    # str.lower() would also fold latin-1 letters, which Unit (bytes) does not
    return text.lower() if text.isascii() else text.translate(_LOWER)


def _ascii_upper(text: str) -> str:
    return text.upper() if text.isascii() else text.translate(_UPPER)


def _as_bytes_str(text: str) -> str:
    """JSON text as the bytes Unit compares (UTF-8), in corral's latin-1 ``str`` form."""
    return text if text.isascii() else text.encode("utf-8").decode("latin-1")


# How pattern text is decoded before comparing: Unit decodes uri patterns, and query and
# argument patterns with '+' as a space; an invalid escape is a configuration error.
_NO_DECODE, _URI_DECODE, _PLUS_DECODE = 0, 1, 2


def _decode_pattern(text: str, decode: int) -> str:
    if decode == _NO_DECODE:
        return text
    if decode == _PLUS_DECODE and "+" in text:
        text = text.replace("+", " ")
    if "%" in text:
        if _BAD_ESCAPE.search(text):
            raise ValueError("'%' must be followed by two hex digits (write %25 for '%')")
        text = unquote_to_bytes(text.encode("latin-1")).decode("latin-1")
    return text


def _always(_value: Any) -> bool:
    return True


def _glob(pieces: list[str]) -> tuple[str, Any]:
    """A wildcard pattern split on ``*``, as (kind, data) for :func:`_any_of`."""
    if len(pieces) == 1:
        return ("exact", pieces[0])
    if len(pieces) == 2:
        head, tail = pieces
        if not head and not tail:
            return ("any", None)
        if not tail:
            return ("prefix", head)
        if not head:
            return ("suffix", tail)
        least = len(head) + len(tail)
        return ("fn", lambda v: len(v) >= least and v.startswith(head) and v.endswith(tail))
    head, *middle, tail = pieces
    if len(pieces) == 3 and not head and not tail:
        return ("contains", middle[0])
    least = sum(map(len, pieces))
    start = len(head)
    cut = len(tail)

    def glob(value: str) -> bool:
        # Unit's algorithm: fixed ends, then each inner piece at its leftmost place; greedy
        # leftmost is exact for '*'-only patterns and never backtracks.
        if len(value) < least or not value.startswith(head) or not value.endswith(tail):
            return False
        position = start
        end = len(value) - cut
        for piece in middle:
            found = value.find(piece, position, end)
            if found < 0:
                return False
            position = found + len(piece)
        return True

    return ("fn", glob)


def _any_of(matchers: list[tuple[str, Any]]) -> Callable[[str], Any] | None:
    """One predicate for "any of these matches", each kind in its cheapest form."""
    if not matchers:
        return None
    if any(kind == "any" for kind, _ in matchers):
        return _always
    exact = frozenset(data for kind, data in matchers if kind == "exact")
    prefixes = tuple(data for kind, data in matchers if kind == "prefix")
    suffixes = tuple(data for kind, data in matchers if kind == "suffix")
    checks: list[Callable[[str], Any]] = []
    if len(exact) == 1:
        checks.append(next(iter(exact)).__eq__)
    elif exact:
        checks.append(exact.__contains__)
    if prefixes and suffixes:
        checks.append(lambda v: v.startswith(prefixes) or v.endswith(suffixes))
    elif prefixes:
        checks.append(lambda v: v.startswith(prefixes))
    elif suffixes:
        checks.append(lambda v: v.endswith(suffixes))
    for kind, data in matchers:
        if kind == "contains":
            checks.append(lambda v, part=data: part in v)
        elif kind == "fn":
            checks.append(data)
    if len(checks) == 1:
        return checks[0]
    every = tuple(checks)

    def any_check(value: str) -> bool:
        for check in every:  # noqa: SIM110 (any() over a generator costs a frame per call)
            if check(value):
                return True
        return False

    return any_check


class _Patterns:
    """Compiles pattern strings for one kind of property."""

    __slots__ = ("case", "decode", "folded")

    def __init__(self, *, decode: int = _NO_DECODE, case: str = "", folded: bool = False):
        self.decode = decode
        self.case = case  # "upper"/"lower": how non-regex patterns are stored
        self.folded = folded  # values compare case-insensitively (lowered before matching)

    def one(self, raw: Any, path: str) -> tuple[bool, bool, Any]:
        """(negative, is_regex, matcher) of one pattern string."""
        if not isinstance(raw, str):
            raise RouteError(path, f"expected a pattern string, got {describe_value(raw)}")
        text = _as_bytes_str(raw)
        negative = text.startswith("!")
        if negative:
            text = text[1:]
        if text.startswith("~"):
            try:
                return negative, True, re.compile(text[1:], re.ASCII).search
            except re.error as exc:
                raise RouteError(path, f"invalid regular expression {raw!r}: {exc}") from None
        if "**" in text:
            raise RouteError(path, f"pattern {raw!r} has '**'; one '*' already matches any run")
        pieces = []
        for piece in text.split("*"):
            try:
                piece = _decode_pattern(piece, self.decode)
            except ValueError as exc:
                raise RouteError(path, f"pattern {raw!r}: {exc}") from None
            if self.case == "upper":
                piece = _ascii_upper(piece)
            elif self.case == "lower" or self.folded:
                piece = _ascii_lower(piece)
            pieces.append(piece)
        return negative, False, _glob(pieces)

    def rule(self, value: Any, path: str) -> Callable[[str], Any]:
        """The predicate of a pattern string or an array of them."""
        if isinstance(value, str):
            compiled = [self.one(value, path)]
        elif isinstance(value, list):
            compiled = [self.one(item, f"{path}[{i}]") for i, item in enumerate(value)]
        else:
            raise RouteError(
                path, f"expected a pattern string or an array of them, got {describe_value(value)}"
            )
        if not compiled:
            return _always  # Unit: an empty list of patterns matches anything
        positive = self._side([(r, m) for neg, r, m in compiled if not neg])
        negative = self._side([(r, m) for neg, r, m in compiled if neg])
        if negative is None:
            return positive  # type: ignore[return-value]
        if positive is None:
            return lambda v: not negative(v)
        return lambda v: not negative(v) and positive(v)

    def _side(self, items: list[tuple[bool, Any]]) -> Callable[[str], Any] | None:
        plain = _any_of([m for is_regex, m in items if not is_regex])
        regexes = _any_of([("fn", m) for is_regex, m in items if is_regex])
        if plain is not None and self.folded:
            folded = plain

            def plain(value: str) -> Any:
                return folded(_ascii_lower(value))

        if plain is None:
            return regexes
        if regexes is None:
            return plain
        return lambda v: plain(v) or regexes(v)


def pattern_matcher(patterns: str | list[str]) -> Callable[[str], bool]:
    """Unit's string-pattern semantics over plain values (case-sensitive, no decoding), for
    filters outside routes and for tests."""
    rule = _Patterns().rule(patterns, "$")
    return lambda value: bool(rule(value))


_METHOD = _Patterns(case="upper")
_HOST = _Patterns(case="lower")
_URI = _Patterns(decode=_URI_DECODE)
_QUERY = _Patterns(decode=_PLUS_DECODE)
_ARGUMENT = _Patterns(decode=_PLUS_DECODE)
_HEADER = _Patterns(folded=True)
_COOKIE = _Patterns()
_MIME_TYPE = _Patterns(case="lower", folded=True)


# -- variables ----------------------------------------------------------------------------------

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_RESPONSE_TIME_VARIABLES = frozenset(
    ("status", "body_bytes_sent", "request_time", "time_local", "request_line", "request_id")
)
_VARIABLES_HELP = (
    "uri, host, request_uri, method, remote_addr, dollar, arg_NAME, header_NAME, cookie_NAME"
)


def _uri_variable(r: RouteRequest) -> str:
    return r._path if r._path is not None else r._load_path()


def _host_variable(r: RouteRequest) -> str:
    return r._host if r._host is not None else r._load_host()


def _variable(name: str, path: str) -> Callable[[RouteRequest], str] | str:
    if name == "uri":
        return _uri_variable
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
            arg = _decode_pattern(_as_bytes_str(name[4:]), _PLUS_DECODE)
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
        cookie = _as_bytes_str(name[7:])

        def cookie_value(r: RouteRequest) -> str:
            cookies = r._cookies if r._cookies is not None else r._load_cookies()
            values = cookies.get(cookie)
            return values[0] if values else ""

        return cookie_value
    if name in _RESPONSE_TIME_VARIABLES or name.startswith("response_header_"):
        raise RouteError(path, f"variable ${name} has no value before a response exists")
    raise RouteError(path, f"unknown variable ${name} (routes know {_VARIABLES_HELP})")


def _template(raw: str, path: str) -> tuple[str, ...] | Callable[[RouteRequest], str]:
    """A string with ``$name``/``${name}`` variables: a constant (1-tuple), or a function of
    the request. Text is in the latin-1-bytes form."""
    if raw.startswith("`") and raw.endswith("`") and len(raw) > 1:
        raise RouteError(path, "template literals (njs) are not supported")
    text = _as_bytes_str(raw)
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
    frozen = tuple(parts)

    def expand(r: RouteRequest) -> str:
        return "".join(part if part.__class__ is str else part(r) for part in frozen)  # type: ignore[operator, misc]

    return expand


# RFC 3986 characters a Location may carry as they are; '%' too when it starts an escape.
_URI_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;="
)
_GOOD_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def _encode_location(location: str) -> str:
    """Percent-encode what a URI cannot hold (Unit keeps an already encoded location)."""
    if all(c in _URI_SAFE or c == "%" for c in location) and not _BAD_ESCAPE.search(location):
        return location
    out = []
    for i, char in enumerate(location):
        if char in _URI_SAFE or (char == "%" and _GOOD_ESCAPE.match(location, i)):
            out.append(char)
        else:
            out.append("".join(f"%{b:02X}" for b in char.encode("latin-1")))
    return "".join(out)


# -- compilation --------------------------------------------------------------------------------

_FINAL, _GOTO, _DYNAMIC = 0, 1, 2  # a step's outcome: an Action, a _Route, a function of r


class _Route:
    __slots__ = ("label", "steps")

    def __init__(self, label: str) -> None:
        self.label = label  # "routes" or "routes/NAME"
        self.steps: list[tuple[tuple[Callable[[RouteRequest], Any], ...], int, Any]] = []

    def __repr__(self) -> str:
        return f"<route {self.label}: {len(self.steps)} steps>"


def _object(value: Any, path: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RouteError(path, f"expected {what} (an object), got {describe_value(value)}")
    return value


def _known_keys(value: dict[str, Any], allowed: Iterable[str], path: str, what: str) -> None:
    allowed = tuple(allowed)
    for key in value:
        if key not in allowed:
            raise RouteError(
                f"{path}{member(key)}",
                f"unknown {what} option (expected one of {', '.join(allowed)})",
            )


_MATCH_KEYS = (
    "scheme",
    "method",
    "host",
    "uri",
    "query",
    "arguments",
    "headers",
    "cookies",
    "source",
    "destination",
    "if",
)
_UNSUPPORTED_ACTION_OPTIONS = {
    "proxy": "proxy actions are not supported by corral",
    "rewrite": "'rewrite' is not supported by corral",
    "response_headers": "'response_headers' is not supported by corral",
}
_FALSE_CONDITIONS = frozenset(("", "0", "false", "null", "undefined"))


_LISTENER = object()  # a pass compiled for a listener, outside any route


def _addresses(value: Any, path: str) -> Callable[[tuple[int, int, int]], bool]:
    """A ``source``/``destination`` test; an invalid pattern is a :class:`RouteError`."""
    try:
        return address_matcher(value, path)
    except AddressError as exc:
        raise RouteError(exc.path, exc.detail) from None


def _split_pass(target: str) -> list[str] | None:
    """Unit's pass segments: at most three, none empty, each percent-decoded."""
    segments = target.split("/")
    if len(segments) > 3:
        return None
    decoded = []
    for segment in segments:
        if not segment or _BAD_ESCAPE.search(segment):
            return None
        try:
            decoded.append(unquote_to_bytes(segment.encode("utf-8")).decode("utf-8"))
        except UnicodeError:
            return None
    return decoded


def _target_index(
    targets: Mapping[str, Sequence[str]] | None, application: str, target: str
) -> int | None:
    """The position of ``target`` in ``application``'s targets; None if it has no such one (or
    the targets are not known: a pass naming one cannot be resolved then)."""
    names = None if targets is None else targets.get(application)
    if not names or target not in names:
        return None
    return list(names).index(target)


class _Compiler:
    def __init__(self, routes: Any, applications: Collection[str] | None, path: str) -> None:
        self.path = path
        self.applications = None if applications is None else frozenset(applications)
        # each application's target names, in order, when ``applications`` maps them
        self.targets: Mapping[str, Sequence[str]] | None = (
            dict(applications) if isinstance(applications, Mapping) else None
        )
        self.array_mode = isinstance(routes, list)
        self.routes: dict[str | None, _Route] = {}  # None: the array-mode list
        self.sources: dict[str | None, tuple[Any, str]] = {}
        self.edges: dict[str | None, list[tuple[str | None, str]]] = {}  # static passes
        self.current: Any = _LISTENER  # the route whose steps are being compiled
        # the applications a static pass names; None once a pass built from variables could
        # name any
        self.reached: set[str] | None = set()
        if routes is None:
            return
        if isinstance(routes, list):
            self.routes[None] = _Route("routes")
            self.sources[None] = (routes, path)
        elif isinstance(routes, dict):
            for name, steps in routes.items():
                route_path = f"{path}{member(name)}"
                if not isinstance(steps, list):
                    raise RouteError(
                        route_path, f"expected an array of route steps, got {describe_value(steps)}"
                    )
                self.routes[name] = _Route(f"routes/{name}")
                self.sources[name] = (steps, route_path)
        else:
            raise RouteError(
                path,
                "expected an array of route steps or an object of named arrays, "
                f"got {describe_value(routes)}",
            )

    def compile(self) -> Router:
        for name, route in self.routes.items():
            steps, route_path = self.sources[name]
            self.current = name
            for i, step in enumerate(steps):
                route.steps.append(self.step(step, f"{route_path}[{i}]"))
        self.check_loops()
        router = Router(self.routes, self.array_mode, self.applications, self.path)
        router._targets = self.targets
        router.reached = None if self.reached is None else frozenset(self.reached)
        return router

    # -- a step

    def step(
        self, step: Any, path: str
    ) -> tuple[tuple[Callable[[RouteRequest], Any], ...], int, Any]:
        step = _object(step, path, "a route step")
        _known_keys(step, ("match", "action"), path, "route step")
        if "action" not in step:
            raise RouteError(path, "a route step needs an 'action'")
        tests: tuple[Callable[[RouteRequest], Any], ...] = ()
        if "match" in step:
            tests = self.match(
                _object(step["match"], f"{path}.match", "match conditions"), f"{path}.match"
            )
        kind, payload = self.action(step["action"], f"{path}.action")
        return tests, kind, payload

    def match(self, match: dict[str, Any], path: str) -> tuple[Callable[[RouteRequest], Any], ...]:
        _known_keys(match, _MATCH_KEYS, path, "match")
        tests = []
        # cheapest first; all must hold, so the order changes only the cost
        for key in _MATCH_KEYS:
            if key in match:
                tests.append(getattr(self, f"match_{key}")(match[key], f"{path}.{key}"))
        return tuple(tests)

    def match_scheme(self, value: Any, path: str) -> Callable[[RouteRequest], bool]:
        if not isinstance(value, str) or value.lower() not in ("http", "https"):
            raise RouteError(path, f'expected "http" or "https", got {describe_value(value)}')
        scheme = value.lower()
        return lambda r: r.scheme == scheme

    def match_method(self, value: Any, path: str) -> Callable[[RouteRequest], Any]:
        rule = _METHOD.rule(value, path)
        return lambda r: rule(r.method)

    def match_host(self, value: Any, path: str) -> Callable[[RouteRequest], Any]:
        rule = _HOST.rule(value, path)

        def host(r: RouteRequest) -> Any:
            value = r._host
            return rule(value if value is not None else r._load_host())

        return host

    def match_uri(self, value: Any, path: str) -> Callable[[RouteRequest], Any]:
        rule = _URI.rule(value, path)

        def uri(r: RouteRequest) -> Any:
            value = r._path
            return rule(value if value is not None else r._load_path())

        return uri

    def match_query(self, value: Any, path: str) -> Callable[[RouteRequest], Any]:
        rule = _QUERY.rule(value, path)

        def query(r: RouteRequest) -> Any:
            value = r._decoded_query
            return rule(value if value is not None else r._load_decoded_query())

        return query

    def table(
        self,
        value: Any,
        path: str,
        what: str,
        names: Callable[[str, str], Any],
        patterns: _Patterns,
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

    @staticmethod
    def table_test(
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
            return _always  # Unit: an empty array of objects matches anything
        if len(table) == 1:
            only = table[0]
            return lambda r: entry_holds(load(r), only)
        entries = tuple(table)

        def any_entry(r: RouteRequest) -> bool:
            found = load(r)
            return any(entry_holds(found, rules) for rules in entries)

        return any_entry

    def match_headers(self, value: Any, path: str) -> Callable[[RouteRequest], bool]:
        if not isinstance(value, dict | list):
            raise RouteError(
                path, f"expected an object or an array of objects, got {describe_value(value)}"
            )
        table = self.table(
            value, path, "header", lambda name, p: name.encode("utf-8").lower(), _HEADER
        )
        return self.table_test(
            table, lambda r: r._fields if r._fields is not None else r._load_fields(), True
        )

    def match_arguments(self, value: Any, path: str) -> Callable[[RouteRequest], bool]:
        if not isinstance(value, dict | list):
            raise RouteError(
                path, f"expected an object or an array of objects, got {describe_value(value)}"
            )

        def name_of(name: str, name_path: str) -> str:
            try:
                return _decode_pattern(_as_bytes_str(name), _PLUS_DECODE)
            except ValueError as exc:
                raise RouteError(name_path, f"argument name {name!r}: {exc}") from None

        table = self.table(value, path, "argument", name_of, _ARGUMENT)
        return self.table_test(
            table, lambda r: r._args if r._args is not None else r._load_args(), False
        )

    def match_cookies(self, value: Any, path: str) -> Callable[[RouteRequest], bool]:
        if not isinstance(value, dict | list):
            raise RouteError(
                path, f"expected an object or an array of objects, got {describe_value(value)}"
            )
        table = self.table(value, path, "cookie", lambda name, p: _as_bytes_str(name), _COOKIE)
        return self.table_test(
            table, lambda r: r._cookies if r._cookies is not None else r._load_cookies(), False
        )

    def match_source(self, value: Any, path: str) -> Callable[[RouteRequest], bool]:
        rule = _addresses(value, path)
        return lambda r: rule(r._src if r._src is not None else r._load_src())

    def match_destination(self, value: Any, path: str) -> Callable[[RouteRequest], bool]:
        rule = _addresses(value, path)
        return lambda r: rule(r._dst if r._dst is not None else r._load_dst())

    def match_if(self, value: Any, path: str) -> Callable[[RouteRequest], bool]:
        if not isinstance(value, str):
            raise RouteError(path, f"expected a string, got {describe_value(value)}")
        negate = value.startswith("!")
        expression = _template(value[1:] if negate else value, path)
        if isinstance(expression, tuple):
            result = (expression[0] not in _FALSE_CONDITIONS) != negate
            return lambda r: result
        return lambda r: (expression(r) not in _FALSE_CONDITIONS) != negate

    # -- actions

    def action(self, action: Any, path: str) -> tuple[int, Any]:
        action = _object(action, path, "an action")
        for option, why in _UNSUPPORTED_ACTION_OPTIONS.items():
            if option in action:
                raise RouteError(f"{path}{member(option)}", why)
        kinds = [k for k in ("pass", "return", "share") if k in action]
        if len(kinds) != 1:
            found = "none" if not kinds else " and ".join(kinds)
            raise RouteError(
                path, f"an action needs exactly one of pass, return, share; got {found}"
            )
        kind = kinds[0]
        if kind == "pass":
            _known_keys(action, ("pass",), path, "pass action")
            return self.pass_action(action["pass"], f"{path}.pass")
        if kind == "return":
            _known_keys(action, ("return", "location"), path, "return action")
            return self.return_action(action, path)
        _known_keys(
            action,
            ("share", "index", "fallback", "types", "chroot", "follow_symlinks", "traverse_mounts"),
            path,
            "share action",
        )
        return self.share_action(action, path)

    def pass_action(self, value: Any, path: str) -> tuple[int, Any]:
        if not isinstance(value, str):
            raise RouteError(path, f"expected a pass target string, got {describe_value(value)}")
        template = _template(value, path)
        if isinstance(template, tuple):
            return self.static_pass(value, path)
        self.reached = None
        return _DYNAMIC, _DynamicPass(template, self)

    def static_pass(self, target: str, path: str) -> tuple[int, Any]:
        segments = _split_pass(target)
        if segments is None:
            raise RouteError(path, f"invalid pass target {target!r}")
        head = segments[0]
        if head == "applications":
            if len(segments) < 2:
                raise RouteError(path, f"invalid pass target {target!r}: 'applications/NAME'")
            name = segments[1]
            if self.applications is not None and name not in self.applications:
                raise RouteError(path, f"{target!r} names no application of the configuration")
            index = 0
            if len(segments) == 3:
                index = _target_index(self.targets, name, segments[2])
                if index is None:
                    raise RouteError(path, f"{target!r} names no target of application {name!r}")
            if self.reached is not None:
                self.reached.add(name)
            return _FINAL, ToApplication(name, index)
        if head == "routes":
            name = segments[1] if len(segments) == 2 else None
            if len(segments) == 3 or name not in self.routes or (name is None) != self.array_mode:
                raise RouteError(path, f"{target!r} names no route of the configuration")
            if self.current is not _LISTENER:
                self.edges.setdefault(self.current, []).append((name, path))
            return _GOTO, self.routes[name]
        if head == "upstreams":
            raise RouteError(path, f"{target!r}: upstreams are not supported")
        raise RouteError(
            path,
            f"invalid pass target {target!r} (expected applications/NAME, routes or routes/NAME)",
        )

    def return_action(self, action: dict[str, Any], path: str) -> tuple[int, Any]:
        status = action["return"]
        if not isinstance(status, int) or isinstance(status, bool) or not 0 <= status <= 999:
            raise RouteError(
                f"{path}.return", f"expected a status code 0-999, got {describe_value(status)}"
            )
        if "location" not in action:
            return _FINAL, Respond(status)
        location = action["location"]
        if not isinstance(location, str):
            raise RouteError(
                f"{path}.location", f"expected a URI string, got {describe_value(location)}"
            )
        template = _template(location, f"{path}.location")
        if isinstance(template, tuple):
            return _FINAL, Respond(status, _encode_location(template[0]))
        return _DYNAMIC, lambda r: Respond(status, _encode_location(template(r)))

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
            templates.append(_template(item, item_path))
        options: dict[str, Any] = {}
        index = action.get("index", "index.html")
        if not isinstance(index, str):
            raise RouteError(f"{path}.index", f"expected a file name, got {describe_value(index)}")
        options["index"] = _as_bytes_str(index)
        for flag in ("follow_symlinks", "traverse_mounts"):
            if flag in action:
                if not isinstance(action[flag], bool):
                    raise RouteError(
                        f"{path}.{flag}",
                        f"expected true or false, got {describe_value(action[flag])}",
                    )
                options[flag] = action[flag]
        if "types" in action:
            options["types"] = _MIME_TYPE.rule(action["types"], f"{path}.types")
        chroot: Any = None
        if "chroot" in action:
            if not isinstance(action["chroot"], str):
                raise RouteError(
                    f"{path}.chroot",
                    f"expected a directory path, got {describe_value(action['chroot'])}",
                )
            chroot = _template(action["chroot"], f"{path}.chroot")
        if "fallback" in action:
            options["fallback"] = self.action(action["fallback"], f"{path}.fallback")
        dynamic = any(not isinstance(t, tuple) for t in templates) or (
            chroot is not None and not isinstance(chroot, tuple)
        )
        if not dynamic:
            return _FINAL, Share(
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
        root: Any = (lambda r: None) if chroot is None else chroot
        if isinstance(root, tuple):
            root = lambda r, text=chroot[0]: text  # noqa: E731

        def expand(r: RouteRequest) -> Share:
            paths = tuple([expander(r) for expander in expanders])
            return Share(paths, index, root(r), follow, traverse, types, fallback)

        return _DYNAMIC, expand

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


class _DynamicPass:
    """A pass with variables: expanded, split and looked up per request (unknown: 404)."""

    __slots__ = ("applications", "array_mode", "cache", "routes", "targets", "template")

    def __init__(self, template: Callable[[RouteRequest], str], compiler: _Compiler) -> None:
        self.template = template
        self.routes = compiler.routes
        self.array_mode = compiler.array_mode
        self.applications = compiler.applications
        self.targets = compiler.targets
        # bounded by the configuration, not by requests: only known names are cached
        self.cache: dict[str, ToApplication] = {}

    def __call__(self, r: RouteRequest) -> Action | _Route:
        target = self.template(r)
        try:
            segments = _split_pass(target.encode("latin-1").decode("utf-8"))
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
            index = _target_index(self.targets, name, target)
            if index is None:
                return NOT_FOUND
            key = f"{name}/{target}"
            action = self.cache.get(key)
            if action is None:
                action = self.cache[key] = ToApplication(name, index)
            return action
        if head == "routes" and len(segments) <= 2:
            name = segments[1] if len(segments) == 2 else None
            if (name is None) == self.array_mode and name in self.routes:
                return self.routes[name]
        return NOT_FOUND


def _follow(kind: int, payload: Any, r: RouteRequest) -> Action:
    hops = 0
    try:
        while True:
            if kind == _FINAL:
                return payload
            if kind == _DYNAMIC:
                payload = payload(r)
                if payload.__class__ is not _Route:
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
    except _BadTarget:
        return BAD_REQUEST


class Router:
    """Compiled routes. ``resolve`` is the per-request entry; the rest runs at configuration
    time."""

    __slots__ = (
        "_applications",
        "_array_mode",
        "_entries",
        "_path",
        "_routes",
        "_targets",
        "reached",
    )

    def __init__(
        self,
        routes: dict[str | None, _Route],
        array_mode: bool,
        applications: frozenset[str] | None,
        path: str,
    ) -> None:
        self._routes = routes
        self._array_mode = array_mode
        self._applications = applications
        self._path = path
        self._entries: dict[str, tuple[int, Any]] = {}
        self._targets: Mapping[str, Sequence[str]] | None = None
        # the applications the routes may pass a request to (None: any, a pass is built from
        # variables); the master lets their workers accept on the listeners passing to routes
        self.reached: frozenset[str] | None = frozenset()

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
            compiler = _Compiler(None, self._applications, self._path)
            compiler.routes = self._routes
            compiler.array_mode = self._array_mode
            compiler.targets = self._targets
            entry = compiler.pass_action(pass_target, path)
            self._entries[pass_target] = entry
        return entry

    def resolve(self, pass_target: str, request: RouteRequest) -> Action:
        """The action for ``request`` arriving on a listener whose pass is ``pass_target``."""
        entry = self._entries.get(pass_target)
        if entry is None:
            entry = self._entry(pass_target, "$.pass")
        return _follow(entry[0], entry[1], request)

    def resolve_fallback(self, share: Share, request: RouteRequest) -> Action:
        """The action after ``share`` could not serve a file: its fallback, else 404."""
        if share.fallback is None:
            return NOT_FOUND
        return _follow(share.fallback[0], share.fallback[1], request)


def compile_routes(
    routes: Any,
    *,
    applications: Collection[str] | None = None,
    path: str = "$.routes",
) -> Router:
    """Validate and compile a Unit ``routes`` value (parsed JSON; ``None`` for none).

    ``applications``: the names a static ``applications/NAME`` pass may use (``None``: any); a
    mapping gives each one's target names too, in order (empty: no targets), which an
    ``applications/NAME/TARGET`` pass needs.
    ``path``: where ``routes`` sits in the document, for error messages.
    Raises :class:`RouteError` naming the first invalid place.
    """
    return _Compiler(routes, applications, path).compile()
