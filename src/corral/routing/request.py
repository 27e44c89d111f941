"""One request as routing sees it, each value normalized as Unit compares it.

A route condition compares a normalized value (the decoded path, the Host without its
port...), not the bytes sent. This module does that normalization once per request, and only
for what a reached condition reads: the worker builds a :class:`RouteRequest` from values it
already holds, so a table that never looks at a property costs nothing for it.

Unit's values, kept exactly:

- ``uri`` is the percent-decoded path with ``.``/``..`` segments resolved and ``//`` merged (a
  ``..`` above the root, a malformed ``%`` escape or a decoded NUL answers 400, as Unit does);
- ``query`` is the whole query string and ``arguments`` its ``&``-separated pairs, both
  percent-decoded with ``+`` as space (an invalid escape stays as it is);
- ``host`` is the Host field (or the authority of an absolute-form target) lower-cased,
  without its port and one trailing dot; ``method`` is as sent;
- ``cookies`` are the ``name=value`` pairs of every Cookie field; ``source`` and
  ``destination`` the peer's and the listener's address (`corral.net.addresses`);
- request bytes are latin-1 ``str`` throughout, so that a value compares as the bytes sent.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote_to_bytes

from corral.net.addresses import socket_address

__all__ = ["BAD_ESCAPE", "BadTarget", "RouteRequest", "normalize_path"]


# a '%' that starts no %XX escape (a path, a pattern or a pass with one is refused)
BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class BadTarget(Exception):
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

    # Loaders: each fills its slot and returns it; callers test the slot for None first. The
    # compiled conditions and variables (conditions.py, variables.py) read the slots and call
    # the loaders themselves: one attribute test per condition, not a method call.

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
            raise BadTarget from None
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
        except BadTarget:
            raise ValueError("invalid request target") from None

    def query(self) -> str:
        """The query string as sent (``""`` when none); raises ``ValueError`` as :meth:`path`."""
        try:
            return self._query if self._query is not None else self._load_query()
        except BadTarget:
            raise ValueError("invalid request target") from None

    def host(self) -> str:
        return self._host if self._host is not None else self._load_host()

    def remote_addr(self) -> str:
        return str(self.peer[0]) if isinstance(self.peer, tuple) else ""


def normalize_path(path: str) -> str:
    """Percent-decode ``path`` (a latin-1 ``str``) and resolve ``.``, ``..`` and ``//`` as Unit
    does; ``ValueError`` for a malformed escape, a decoded NUL or a ``..`` above the root."""
    if "%" in path:
        if BAD_ESCAPE.search(path):
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


# the last Host field normalized, and what it gave: a server's clients name it in a few
# spellings, and every request that routes by host or names it (php's SERVER_NAME) asks
_last_host: list[Any] = [b"", ""]


def _normalize_host(raw: bytes | None) -> str:
    if not raw:
        return ""
    last = _last_host
    if raw == last[0]:
        return last[1]
    last[1] = found = _normalized_host(raw)
    last[0] = raw
    return found


def _normalized_host(raw: bytes) -> str:
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
