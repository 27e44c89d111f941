"""The CGI variables of a request (RFC 3875 section 4.1), as nginx's ``fastcgi_params`` and
NGINX Unit's php module give them to php: what ``$_SERVER`` holds.

``SCRIPT_FILENAME``, ``SCRIPT_NAME``, ``PATH_INFO`` (and ``PATH_TRANSLATED`` with it),
``DOCUMENT_ROOT`` and ``DOCUMENT_URI`` come from the script chosen (`corral.php.site`);
``REQUEST_URI`` is the target as sent, ``QUERY_STRING`` the part after its ``?``;
``CONTENT_LENGTH`` is the body's length (a chunked body's once it is whole: php reads no more
than it says), ``CONTENT_TYPE`` the field's; ``REMOTE_ADDR``/``REMOTE_PORT`` the client's (a
trusted proxy's ``forwarded`` client when the listener has one), ``SERVER_ADDR``,
``SERVER_PORT``, ``SERVER_NAME`` (the Host without its port, else the listener's address),
``SERVER_PROTOCOL``, ``REQUEST_SCHEME`` and ``HTTPS`` (``on`` over TLS); ``GATEWAY_INTERFACE``,
``SERVER_SOFTWARE`` and ``REDIRECT_STATUS`` (200: php's ``cgi.force_redirect`` wants it);
each header field as ``HTTP_NAME`` (dashes made underscores, repeated fields joined by ``, ``,
cookies by ``; ``). A field whose name has an underscore is left out, as nginx does, so that
``X-Forwarded_For`` cannot pose as ``X-Forwarded-For``; so are ``Proxy`` (httpoxy: php would
take it as ``HTTP_PROXY``) and the two fields that are CGI variables of their own.
Values are bytes as received (latin-1 strings made bytes again).
"""

from __future__ import annotations

from typing import Any

from corral.fastcgi.records import append_pair, encode_pairs, parse_pairs

__all__ = ["cgi_params", "encoded_params", "request_params", "script_params"]

_SKIPPED = frozenset((b"content-type", b"content-length", b"proxy"))
_keys: dict[bytes, bytes | None] = {}  # a field's name -> its variable (None: left out)
_KEYS_KEPT = 256


def _key(name: bytes) -> bytes | None:
    key = _keys.get(name)
    if key is None and name not in _keys:
        lower = name.lower()
        key = (
            None
            if lower in _SKIPPED or b"_" in name
            else b"HTTP_" + name.upper().replace(b"-", b"_")
        )
        if len(_keys) < _KEYS_KEPT:
            _keys[name] = key
    return key


def _address(address: Any) -> tuple[bytes, bytes]:
    """An asyncio socket address as (host, port) bytes; a unix socket's has neither."""
    if isinstance(address, tuple):
        return str(address[0]).encode(), str(address[1]).encode()
    return b"", b""


# the listeners' addresses as `_address` gives them (``SERVER_ADDR``, ``SERVER_PORT``): a
# worker has a few, and every request asks
_locals: dict[Any, tuple[bytes, bytes]] = {}
_LOCALS_KEPT = 64


def _local(address: Any) -> tuple[bytes, bytes]:
    found = _locals.get(address)
    if found is None:
        found = _address(address)
        if len(_locals) < _LOCALS_KEPT:
            _locals[address] = found
    return found


# the last client's address as `_address` gave it, by the address object's identity (a
# connection's requests share one: a kept-alive client's next request asks again)
_last_peer: list[Any] = [None, (b"", b"")]


def _remote(peer: Any) -> tuple[bytes, bytes]:
    if peer is not _last_peer[0]:
        _last_peer[1] = _address(peer)
        _last_peer[0] = peer
    return _last_peer[1]


_PROTOCOLS = {"1.1": b"HTTP/1.1", "1.0": b"HTTP/1.0"}
_SCHEMES = {"http": b"http", "https": b"https"}
_METHODS: dict[str, bytes] = {}  # a method's bytes by its string (a few, every request's)
_METHODS_KEPT = 64


def _method(method: str) -> bytes:
    found = _METHODS.get(method)
    if found is None:
        found = method.encode("latin-1")
        if len(_METHODS) < _METHODS_KEPT:
            _METHODS[method] = found
    return found


# the same for every request
_CONSTANT = [
    (b"GATEWAY_INTERFACE", b"CGI/1.1"),
    (b"SERVER_SOFTWARE", b"corral"),
    (b"REDIRECT_STATUS", b"200"),
]
_CONSTANT_ENCODED = encode_pairs(_CONSTANT)


def cgi_params(
    head: Any, choice: Any, document_root: bytes, **connection: Any
) -> list[tuple[bytes, bytes]]:
    """The variables of the request ``head`` (a `RequestHead`) answered by ``choice`` (a
    `corral.php.site.Choice`) under ``document_root``, on a connection (`request_params`'s
    keywords), as pairs."""
    return [
        *script_params(choice, document_root),
        *_CONSTANT,
        *request_params(head, **connection),
    ]


def encoded_params(
    head: Any,
    choice: Any,
    document_root: bytes,
    peer: Any,
    local: Any,
    scheme: str,
    content_length: int,
    host: str,
    forwarded: Any = None,
) -> bytes:
    """`cgi_params` encoded for ``PARAMS`` (`corral.fastcgi.records.params_of`): the
    script's part encoded once per choice (a `Choice` is kept per path a while). (Every php
    request's: its arguments are positional, as keywords cost a dictionary per call.)"""
    script = choice.encoded
    if script is None:
        script = choice.encoded = encode_pairs(script_params(choice, document_root)) + (
            _CONSTANT_ENCODED
        )
    out = [script]
    _add_request_params(out, head, peer, local, scheme, content_length, host, forwarded)
    return b"".join(out)


def script_params(choice: Any, document_root: bytes) -> list[tuple[bytes, bytes]]:
    """The variables of the script chosen, ``DOCUMENT_ROOT`` with them."""
    path_info = choice.path_info.encode("latin-1")
    params = [
        (b"SCRIPT_FILENAME", choice.filename),
        (b"SCRIPT_NAME", choice.script_name),
        (b"PATH_INFO", path_info),
        (b"DOCUMENT_ROOT", document_root),
        (b"DOCUMENT_URI", choice.script_name + path_info),
    ]
    if path_info:
        params.append((b"PATH_TRANSLATED", document_root + path_info))
    return params


def request_params(
    head: Any,
    peer: Any,
    local: Any,
    scheme: str,
    content_length: int,
    host: str,
    forwarded: Any = None,
) -> list[tuple[bytes, bytes]]:
    """The variables of the request ``head`` on a connection from ``peer`` to ``local``;
    ``host``: routing's (the Host field's name without its port, "" for none)."""
    out: list[bytes] = []
    _add_request_params(out, head, peer, local, scheme, content_length, host, forwarded)
    return parse_pairs(b"".join(out))


def _add_request_params(
    out: list[bytes],
    head: Any,
    peer: Any,
    local: Any,
    scheme: str,
    content_length: int,
    host: str,
    forwarded: Any,
) -> None:
    """`request_params`, encoded onto ``out`` (pieces) as they are found (no pair made)."""
    target = head.target
    remote_addr, remote_port = _remote(peer)
    server_addr, server_port = _local(local)
    if forwarded is not None:  # a trusted proxy's client (filters/forwarded.py)
        if forwarded.address is not None:
            remote_addr = forwarded.address.encode()
            remote_port = b"" if forwarded.port is None else str(forwarded.port).encode()
        if forwarded.scheme is not None:
            scheme = forwarded.scheme
    version = head.version
    append_pair(out, b"REQUEST_URI", target)
    append_pair(out, b"QUERY_STRING", target.partition(b"?")[2])
    append_pair(out, b"REQUEST_METHOD", _method(head.method))
    append_pair(out, b"SERVER_PROTOCOL", _PROTOCOLS.get(version) or b"HTTP/" + version.encode())
    append_pair(out, b"REQUEST_SCHEME", _SCHEMES.get(scheme) or scheme.encode())
    append_pair(out, b"REMOTE_ADDR", remote_addr)
    append_pair(out, b"REMOTE_PORT", remote_port)
    append_pair(out, b"SERVER_ADDR", server_addr)
    append_pair(out, b"SERVER_PORT", server_port)
    append_pair(
        out, b"SERVER_NAME", host.encode("latin-1") if host else server_addr or b"localhost"
    )
    if scheme == "https":
        append_pair(out, b"HTTPS", b"on")
    if content_length or head.content_length is not None or head.chunked:
        append_pair(out, b"CONTENT_LENGTH", str(content_length).encode())
    fields: dict[bytes, bytes] = {}
    content_type = None
    for name, value in head.headers:
        key = _key(name)
        if key is None:
            if content_type is None and name.lower() == b"content-type":
                content_type = value
            continue
        if key in fields:
            separator = b"; " if key == b"HTTP_COOKIE" else b", "
            fields[key] += separator + value
        else:
            fields[key] = value
    if content_type is not None:
        append_pair(out, b"CONTENT_TYPE", content_type)
    for key, value in fields.items():
        append_pair(out, key, value)
