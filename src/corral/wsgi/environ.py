"""The WSGI environ: a per-connection constant part, a per-request part.

Invariants:
- Only what the client sent appears: no ``HTTP_HOST`` without a Host header, no
  ``CONTENT_TYPE``/``CONTENT_LENGTH`` without those headers.
- Header names holding ``_`` are dropped: as CGI keys they would be
  indistinguishable from the ``-`` spelling, a known spoofing vector (nginx and
  Gunicorn drop them too).
- ``PATH_INFO`` is the percent-decoded path as a latin-1 string; ``RAW_URI`` and
  ``REQUEST_URI`` keep the target exactly as sent (``///a`` stays ``///a``).
"""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import unquote_to_bytes

import httptools

from corral.http.parser import RequestHead

_KEY_CACHE_MAX = 2048
_header_keys: dict[bytes, str | None] = {
    b"Host": "HTTP_HOST",
    b"Content-Type": "CONTENT_TYPE",
    b"Content-Length": "CONTENT_LENGTH",
}
_PROTOCOLS = {"1.1": "HTTP/1.1", "1.0": "HTTP/1.0"}


def _environ_key(name: bytes) -> str | None:
    if b"_" in name:
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
) -> dict[str, Any]:
    """The part of every environ on one connection that does not change."""
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
        "wsgi.url_scheme": "http",
        "wsgi.errors": errors if errors is not None else sys.stderr,
        "wsgi.multithread": multithread,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
        "wsgi.file_wrapper": file_wrapper,
    }
    if isinstance(peer, tuple):
        environ["REMOTE_ADDR"] = str(peer[0])
        environ["REMOTE_PORT"] = str(peer[1])
    else:
        environ["REMOTE_ADDR"] = ""  # unix socket: no address; the key is required by many apps
    return environ


def request_environ(base: dict[str, Any], head: RequestHead, body: Any) -> dict[str, Any]:
    """A fresh environ for one request, from the connection's constant part."""
    environ = base.copy()
    target = head.target
    raw = target.decode("latin-1")
    if target[:1] == b"/":
        path, _, query = target.partition(b"?")
        if b"#" in query:
            query = query.partition(b"#")[0]
        elif b"#" in path:
            path = path.partition(b"#")[0]
    elif target == b"*":
        path, query = b"", b""
    else:
        url = httptools.parse_url(target)
        path = url.path or b"/"
        query = url.query or b""
        if url.host:
            # RFC 9112 3.2.2: the authority of an absolute-form target wins over Host
            host = url.host.decode("latin-1")
            environ["HTTP_HOST"] = f"{host}:{url.port}" if url.port else host
    environ["REQUEST_METHOD"] = head.method
    environ["PATH_INFO"] = (
        unquote_to_bytes(path).decode("latin-1") if b"%" in path else path.decode("latin-1")
    )
    environ["QUERY_STRING"] = query.decode("latin-1")
    environ["RAW_URI"] = raw
    environ["REQUEST_URI"] = raw
    environ["SERVER_PROTOCOL"] = _PROTOCOLS[head.version]
    environ["wsgi.input"] = body
    keys = _header_keys
    for name, value in head.headers:
        key = keys[name] if name in keys else _environ_key(name)
        if key is None:
            continue
        text = value.decode("latin-1")
        if key in environ:
            if key == "HTTP_HOST" and target[:1] != b"/":
                continue
            separator = "; " if key == "HTTP_COOKIE" else ", "
            environ[key] += separator + text
        else:
            environ[key] = text
    return environ
