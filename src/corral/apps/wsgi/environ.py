"""The WSGI environ: a per-connection constant part, a per-request part.

Invariants:
- Only what the client sent appears: no ``HTTP_HOST`` without a Host header, no
  ``CONTENT_TYPE``/``CONTENT_LENGTH`` without those headers.
- Header names are filtered by ``discard_unsafe_fields`` (`set_unsafe_fields`, once per
  worker; the policies are :mod:`corral.http.fieldnames`'): by default a name with ``_`` is
  left out (as a CGI key it would be indistinguishable from the ``-`` spelling, a known
  spoofing vector behind proxies) and any other token name is kept as Gunicorn keeps it
  (``X.Custom|Pipe`` is ``HTTP_X.CUSTOM|PIPE``); ``true`` keeps letters, digits and ``-``
  only (NGINX Unit's); ``false`` keeps every name, and ``X_Foo`` and ``X-Foo`` then share
  ``HTTP_X_FOO``, their values joined. Each name is judged once; the verdict is cached with
  its key.
- An absolute-form target's authority replaces ``Host``; an IPv6 host keeps its brackets
  (``HTTP_HOST`` is ``[::1]:8080``, as the Host field would say it).
- A trusted proxy's client and scheme (``forwarded``) replace ``REMOTE_ADDR``,
  ``REMOTE_PORT`` and ``wsgi.url_scheme`` through `forwarded_environ`, on the connections
  of such listeners only.
- ``PATH_INFO`` is the percent-decoded path as a latin-1 string; ``RAW_URI`` and
  ``REQUEST_URI`` keep the target exactly as sent (``///a`` stays ``///a``).
- Over the uwsgi protocol (`uwsgi_environ`) the environ is the proxy's CGI variables as it sent
  them (nginx's ``uwsgi_params``: its client's address, its ``SERVER_NAME``...), over the
  connection's constant part; the ``wsgi.*`` keys stay the server's, ``wsgi.url_scheme`` is
  the packet's (``UWSGI_SCHEME``, ``HTTPS``, ``REQUEST_SCHEME``), and ``CONTENT_TYPE`` and
  ``CONTENT_LENGTH`` are left out when empty (nginx sends both for every request), as they
  would be over HTTP without those headers, and so are nginx's ``HTTP_CONTENT_TYPE`` and
  ``HTTP_CONTENT_LENGTH`` copies.
- ``SCRIPT_NAME`` is "" unless the application (or target) has NGINX Unit's ``prefix``: then
  `Mounted` moves the prefix from ``PATH_INFO`` to ``SCRIPT_NAME`` when the decoded path is
  the prefix or continues it with "/" (Unit compares the decoded path too; ``/app`` does not
  mount ``/application``); any other path is passed whole, ``SCRIPT_NAME`` "". Without a
  prefix the application is not wrapped: nothing runs per request (chosen at construction).
"""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import unquote_to_bytes

from corral.apps.wsgi.input import EMPTY
from corral.http.fieldnames import discards
from corral.http.head import RequestHead

_KEY_CACHE_MAX = 2048
_KNOWN_KEYS: dict[bytes, str | None] = {
    b"Host": "HTTP_HOST",
    b"Content-Type": "CONTENT_TYPE",
    b"Content-Length": "CONTENT_LENGTH",
}
_header_keys = dict(_KNOWN_KEYS)
_PROTOCOLS = {"1.1": "HTTP/1.1", "1.0": "HTTP/1.0"}
_discarded = discards(None)


def set_unsafe_fields(discard: bool | None) -> None:
    """The worker's ``discard_unsafe_fields`` (None: corral's default, see `discards`).

    Called once per process, before any request; the name cache starts afresh."""
    global _discarded
    _discarded = discards(discard)
    _header_keys.clear()
    _header_keys.update(_KNOWN_KEYS)


def _environ_key(name: bytes) -> str | None:
    if _discarded(name):
        key = None
    else:
        upper = name.decode("latin-1").upper().replace("-", "_")
        key = upper if upper in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + upper
    if len(_header_keys) < _KEY_CACHE_MAX:
        _header_keys[name] = key
    return key


def connection_environ(
    server: tuple[str, int] | str | None,
    peer: tuple[str, int] | str | None,
    *,
    multithread: bool,
    multiprocess: bool,
    file_wrapper: Any,
    errors: Any,
    http: bool,
    scheme: str = "http",
) -> dict[str, Any]:
    """The part of every environ on one connection that does not change (``http``: of HTTP
    requests, which `request_environ` makes; a uwsgi packet's vars are another shape).
    ``scheme``: "https" on a TLS listener, which also sets ``HTTPS`` to "on" as uWSGI and
    mod_wsgi do (Django and Flask read ``wsgi.url_scheme``; older code reads ``HTTPS``)."""
    if isinstance(server, tuple):
        server_name, server_port = str(server[0]), str(server[1])
    else:
        server_name, server_port = "localhost", "0"
    environ: dict[str, Any] = {
        "SERVER_NAME": server_name,
        "SERVER_PORT": server_port,
        "SCRIPT_NAME": "",
        "SERVER_SOFTWARE": "corral",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.errors": errors if errors is not None else sys.stderr,
        "wsgi.multithread": multithread,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
        "wsgi.file_wrapper": file_wrapper,
    }
    if scheme == "https":
        environ["HTTPS"] = "on"
    if isinstance(peer, tuple):
        environ["REMOTE_ADDR"] = str(peer[0])
        environ["REMOTE_PORT"] = str(peer[1])
    else:
        environ["REMOTE_ADDR"] = ""  # unix socket: no address; the key is required by many apps
    if http:
        _make_room(environ)
    return environ


# the keys `request_environ` gives every request, with the values most requests have: it
# sets those only where a request differs (the path and URI always)
_REQUEST_DEFAULTS = {
    "PATH_INFO": "",
    "QUERY_STRING": "",
    "REQUEST_METHOD": "GET",
    "RAW_URI": "",
    "REQUEST_URI": "",
    "SERVER_PROTOCOL": "HTTP/1.1",
    "wsgi.input": EMPTY,
}
_ROOMY = 22  # keys whose insertion grows a dict's table to 64 slots (42 usable)


def _make_room(environ: dict[str, Any]) -> None:
    """Speed only: each request's environ is a copy of this dict, and ``dict.copy`` clones
    its table, size included. With the request's own keys present already, a request
    replaces their values instead of inserting them, and only the values that differ from
    the common ones; and with the table grown (by filler keys, removed at once) its copies
    have room for ~20 header fields without growing it."""
    environ.update(_REQUEST_DEFAULTS)
    fillers = [f" room {index}" for index in range(_ROOMY - len(environ))]
    for key in fillers:
        environ[key] = None
    for key in fillers:
        del environ[key]


# the keys of connection_environ that are the server's own: a proxy's var cannot replace them
_SERVER_KEYS = (
    "wsgi.version",
    "wsgi.errors",
    "wsgi.multithread",
    "wsgi.multiprocess",
    "wsgi.run_once",
    "wsgi.input_terminated",
    "wsgi.file_wrapper",
)


def uwsgi_environ(base: dict[str, Any], head: Any, body: Any) -> dict[str, Any]:
    """A fresh environ for one request read from a uwsgi packet (a ``UwsgiHead``)."""
    environ = base.copy()
    environ.update(head.vars)
    for key in _SERVER_KEYS:
        environ[key] = base[key]
    # nginx also sends the fields as HTTP_CONTENT_TYPE and HTTP_CONTENT_LENGTH, which an HTTP
    # request's environ never has; the body's length is the CONTENT_LENGTH var's, the parser's
    content_type = environ.pop("HTTP_CONTENT_TYPE", None)
    environ.pop("HTTP_CONTENT_LENGTH", None)
    if not environ.get("CONTENT_LENGTH"):
        environ.pop("CONTENT_LENGTH", None)
    if not environ.get("CONTENT_TYPE"):
        if content_type:
            environ["CONTENT_TYPE"] = content_type
        else:
            environ.pop("CONTENT_TYPE", None)
    raw = head.target.decode("latin-1")
    if "PATH_INFO" not in environ:  # a proxy without nginx's uwsgi_params: from the target
        path = raw.partition("?")[0]
        environ["PATH_INFO"] = _decode_path(path) if "%" in path else path
    environ.setdefault("QUERY_STRING", raw.partition("?")[2])
    environ.setdefault("REQUEST_URI", raw)
    environ["RAW_URI"] = environ["REQUEST_URI"]
    environ.setdefault("SERVER_PROTOCOL", head.protocol)
    environ["wsgi.url_scheme"] = head.scheme
    environ["wsgi.input"] = body
    return environ


def forwarded_environ(base: dict[str, Any], forwarded: Any) -> dict[str, Any]:
    """``base`` with a trusted proxy's client and scheme (a ``forwarded.ForwardedClient``).

    Without a port in the forwarded address the client's port is unknown: ``REMOTE_PORT``
    is left out rather than naming the proxy's."""
    environ = base.copy()
    if forwarded.address is not None:
        environ["REMOTE_ADDR"] = forwarded.address
        if forwarded.port is not None:
            environ["REMOTE_PORT"] = str(forwarded.port)
        else:
            environ.pop("REMOTE_PORT", None)
    if forwarded.scheme is not None:
        environ["wsgi.url_scheme"] = forwarded.scheme
    return environ


def _decode_path(path: str) -> str:
    return unquote_to_bytes(path.encode("latin-1")).decode("latin-1")


def _split_target(environ: dict[str, Any], head: RequestHead, raw: str) -> tuple[str, str]:
    """Path and query of a target that is not a plain origin-form one."""
    url = head.absolute
    if url is None:  # origin-form with a fragment, or "*"
        path, _, query = raw.partition("#")[0].partition("?")
        return ("", "") if path == "*" else (path, query)
    if url.host:
        # RFC 9112 3.2.2: the authority of an absolute-form target wins over Host
        host = url.host.decode("latin-1")
        if ":" in host:  # an IPv6 address: the brackets are part of the authority's host
            host = f"[{host}]"
        environ["HTTP_HOST"] = f"{host}:{url.port}" if url.port else host
    return (url.path or b"/").decode("latin-1"), (url.query or b"").decode("latin-1")


class Mounted:
    """A WSGI application mounted at ``prefix`` (NGINX Unit's, one trailing "/" dropped).

    The prefix is matched as the bytes Unit matches (its UTF-8), against ``PATH_INFO`` (the
    decoded path as latin-1): the same form, so a prefix with non-ASCII characters works."""

    __slots__ = ("app", "length", "prefix")

    def __init__(self, app: Any, prefix: str) -> None:
        self.app = app
        self.prefix = prefix.encode("utf-8").decode("latin-1")
        self.length = len(self.prefix)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ["PATH_INFO"]
        length = self.length
        if path.startswith(self.prefix) and (len(path) == length or path[length] == "/"):
            environ["SCRIPT_NAME"] = self.prefix
            environ["PATH_INFO"] = path[length:]
        return self.app(environ, start_response)


_MISSING = object()


def request_environ(base: dict[str, Any], head: RequestHead, body: Any) -> dict[str, Any]:
    """A fresh environ for one request, from the connection's constant part (made by
    `connection_environ` with ``http``: it holds the common values of the request's keys)."""
    environ = base.copy()
    _request_part(environ, head, body)
    target = head.target
    keys = _header_keys
    headers = head.headers
    for name, value in headers:
        key: Any = keys.get(name, _MISSING)
        if key is _MISSING:
            key = _environ_key(name)
        if key is None:
            continue
        text = value.decode("latin-1")
        size = len(environ)
        before = environ.setdefault(key, text)  # one lookup where a key is new, as most are
        if len(environ) == size:  # it was not: a repeated field
            if key == "HTTP_HOST" and target[0] != 47:
                continue
            environ[key] = before + ("; " if key == "HTTP_COOKIE" else ", ") + text
    return environ


def _request_part(environ: dict[str, Any], head: RequestHead, body: Any) -> None:
    """The keys of the request line and body, where they differ from the common values."""
    target = head.target
    raw = target.decode("latin-1")
    if target[0] == 47 and b"#" not in target:  # origin-form, the common case
        mark = raw.find("?")  # not partition: no tuple, and no new string without a query
        if mark < 0:
            path = raw
        else:
            path = raw[:mark]
            environ["QUERY_STRING"] = raw[mark + 1 :]
    else:
        path, query = _split_target(environ, head, raw)
        environ["QUERY_STRING"] = query
    environ["PATH_INFO"] = _decode_path(path) if "%" in path else path
    environ["RAW_URI"] = raw
    environ["REQUEST_URI"] = raw
    # the connection part holds the common values (_REQUEST_DEFAULTS)
    method = head.method
    if method != "GET":
        environ["REQUEST_METHOD"] = method
    version = head.version
    if version != "1.1":
        environ["SERVER_PROTOCOL"] = _PROTOCOLS[version]
    if body is not EMPTY:
        environ["wsgi.input"] = body


class ConnectionEnviron:
    """The environs of one connection's requests, from its constant part (``base``).

    ``uwsgi``: the connection's requests are read from uwsgi packets, and each environ is the
    packet's vars over that part (`uwsgi_environ`). Over HTTP, once two requests in a row sent
    the same header fields, which most clients do on a connection, the part is kept with
    their keys (``template``): a request sending them again copies it, and its fields are
    not looked up or decoded again. The same fields are the same objects: the parser gives a
    field of the request before again when it is byte for byte the same."""

    __slots__ = ("base", "fields", "template", "uwsgi")

    def __init__(self, base: dict[str, Any], uwsgi: bool) -> None:
        self.base = base
        self.uwsgi = uwsgi
        self.fields: list[tuple[bytes, bytes]] | None = None  # the last request's fields
        self.template: dict[str, Any] | None = None

    def request(self, head: RequestHead, body: Any, forwarded: Any) -> dict[str, Any]:
        """A fresh environ for one request; ``forwarded``: the client and scheme a trusted
        proxy's headers named (`Exchange.forwarded`: read on `forwarded` listeners only)."""
        if self.uwsgi:
            return uwsgi_environ(self.base, head, body)
        if forwarded is not None:
            return request_environ(forwarded_environ(self.base, forwarded), head, body)
        fields = head.headers
        last = self.fields
        self.fields = fields
        alike = last is not None and _same_objects(last, fields)
        template = self.template
        if alike and template is not None:
            environ = template.copy()
            _request_part(environ, head, body)
            return environ
        environ = request_environ(self.base, head, body)
        # the second request alike: the part with their keys serves the next ones (not from
        # an absolute-form target, whose authority is its HTTP_HOST rather than a field's)
        if alike and head.target[0] == 47:
            template = self.base.copy()
            for key in environ:
                if key not in template:
                    template[key] = environ[key]
            self.template = template
        else:
            self.template = None
        return environ


def _same_objects(these: list[Any], those: list[Any]) -> bool:
    if len(these) != len(those):
        return False
    for index in range(len(these)):  # noqa: SIM110 (all() would make a generator per call)
        if these[index] is not those[index]:
            return False
    return True
