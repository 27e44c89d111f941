"""The ASGI HTTP connection scope (ASGI spec 2.x), sans I/O: nothing here touches a socket.

Split as the WSGI environ is: `connection_scope` once per connection (the server and client
addresses, the scheme), `request_scope` once per request (a fresh copy the application may
keep or change). The request target's path is percent-decoded to bytes first and then read
as UTF-8, so a multi-byte character written as several escapes decodes as one character;
bytes that are not UTF-8 become U+FFFD (``raw_path`` keeps them exact). ``root_path`` is NGINX
Unit's ``prefix`` for a path at or under it (``path`` keeps it, as the spec says), "" for any
other path, as WSGI's ``SCRIPT_NAME`` is.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_to_bytes

ASGI_VERSION = {"version": "3.0", "spec_version": "2.4"}
# what every HTTP scope offers (http.response.trailers only where the client takes them)
_EXTENSIONS: dict[str, dict[str, Any]] = {
    "http.response.pathsend": {},
    "http.response.zerocopysend": {},
}


def connection_scope(sockname: Any, peer: Any, scheme: str = "http") -> dict[str, Any]:
    """The scope every request's on this connection starts as a copy of: its server, client
    and scheme, and every other key in the spec's order with a placeholder that
    `request_scope` replaces (a copy and replacements cost less than a dict built anew). A
    unix socket's server is ``(path, None)`` and its client None, as the spec says."""
    if isinstance(sockname, tuple):
        server: Any = (str(sockname[0]), int(sockname[1]))
    elif isinstance(sockname, str):
        server = (sockname, None)
    else:
        server = None
    client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
    return {
        "type": "http",
        "asgi": None,
        "http_version": "1.1",
        "method": "",
        "scheme": scheme,
        "path": "",
        "raw_path": b"",
        "query_string": b"",
        "root_path": "",
        "headers": None,
        "client": client,
        "server": server,
        "extensions": None,
    }


# lower-cased header names by the name as sent: the compiled parser gives the same objects for
# the names a client repeats, so a request's names are looked up, not lowered anew (bounded)
_LOWERED: dict[bytes, bytes] = {}


def _lowered(name: bytes) -> bytes:
    lower = name.lower()
    if len(_LOWERED) < 1024:
        _LOWERED[name] = lower
    return lower


def split_target(target: bytes, absolute: Any = None) -> tuple[bytes, bytes]:
    """``(raw_path, query_string)`` of a request target (origin or absolute form)."""
    if absolute is not None:
        return absolute.path or b"/", absolute.query or b""
    path, _, query = target.partition(b"?")
    if b"#" in query:  # a fragment is never the server's (RFC 9110 7.1), not even in a query
        query = query.partition(b"#")[0]
    return path, query


def decode_path(raw_path: bytes) -> str:
    if b"%" not in raw_path:
        try:
            return raw_path.decode("ascii")
        except UnicodeDecodeError:
            pass
    return unquote_to_bytes(raw_path).decode("utf-8", "replace")


def request_scope(
    base: dict[str, Any],
    head: Any,
    root_path: str,
    state: dict[str, Any] | None,
    forwarded: Any = None,
) -> dict[str, Any]:
    """One request's HTTP scope; ``head`` a `corral.http.head.RequestHead`, ``forwarded`` what
    a trusted proxy's headers said (`corral.filters.forwarded.ForwardedClient`) or None."""
    raw_path, query = split_target(head.target, head.absolute)
    scope = base.copy()
    named = head.client
    if named is not None:  # a uwsgi packet names the client and scheme (corral/http/uwsgi.py)
        port = head.vars.get("REMOTE_PORT", "")
        scope["client"] = (named, int(port) if port.isdigit() else 0)
        scope["scheme"] = head.scheme
    if forwarded is not None:
        if forwarded.address is not None:
            scope["client"] = (forwarded.address, forwarded.port or 0)
        if forwarded.scheme is not None:
            scope["scheme"] = forwarded.scheme
    path = decode_path(raw_path)
    if root_path and not (path == root_path or path.startswith(root_path + "/")):
        root_path = ""  # as for WSGI's SCRIPT_NAME: a path outside the prefix is not under it
    # typed locals where compiled (scope.pxd): their .copy() is PyDict_Copy, not a method call
    offered, versions = _EXTENSIONS, ASGI_VERSION
    extensions = offered.copy()
    connection = base["extensions"]  # the connection's own (tls), None on most
    if connection is not None:
        extensions.update(connection)
    headers = []
    lowered = _LOWERED
    for name, value in head.headers:
        lower = lowered.get(name)
        if lower is None:
            lower = _lowered(name)
        if lower == b"te" and b"trailers" in value.lower():
            # RFC 9110 10.1.4: the client takes trailer fields
            extensions["http.response.trailers"] = {}
        headers.append((lower, value))
    scope["asgi"] = versions.copy()
    scope["http_version"] = head.version
    scope["method"] = head.method
    scope["path"] = path  # whole: the spec's path includes root_path
    scope["raw_path"] = raw_path
    scope["query_string"] = query
    scope["root_path"] = root_path
    scope["headers"] = headers
    scope["extensions"] = extensions
    if state is not None:
        # lifespan's state, copied shallowly per request as the spec asks
        scope["state"] = state.copy()
    return scope
