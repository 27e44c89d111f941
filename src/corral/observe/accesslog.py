"""The access log: Gunicorn's format tokens, written by a thread so the loop never waits.

Format tokens (``%(NAME)s``): ``h`` remote address, ``l`` ``-``, ``u`` user (``-``),
``t`` time ``[10/Oct/2000:13:55:36 +0000]``, ``r`` request line, ``m`` method,
``U`` path, ``q`` query, ``H`` protocol, ``s`` status, ``b`` body bytes (``-`` when
0), ``B`` body bytes, ``f`` Referer, ``a`` User-Agent, ``T`` seconds, ``D``
microseconds, ``M`` milliseconds, ``L`` seconds with decimals, ``p`` pid,
``{header}i`` a request header, ``{header}o`` a response header; corral adds
``{time_local}u``, ``{request_uri}u``, ``{uri}u`` and ``{host}u`` for NGINX Unit's variables
that have no Gunicorn token, and ``{scheme}u`` (nginx's ``$scheme``: ``https`` for a request
that came over TLS, relayed ones included). The default is Apache's combined format.

NGINX Unit's format (``$remote_addr - - [$time_local] "$request_line" ...``, recognized by its
``$``) is translated to these tokens once, when the configuration is read
(`from_unit_format`); a variable that cannot be written is a `FormatError` then.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO
from urllib.parse import unquote

COMBINED = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
_REOPEN = "reopen"  # a queue marker, told apart from lines by identity
_TOKEN = re.compile(r"%\((\{[^}]*\}[iou]|[A-Za-z]+)\)s")


def _request_header(name: bytes) -> Callable[[Any, Any, float], str]:
    wanted = name.lower()

    def get(conn: Any, exchange: Any, duration: float) -> str:
        for key, value in exchange.head.headers:
            if key.lower() == wanted:
                return value.decode("latin-1")
        return "-"

    return get


def _response_header(name: str) -> Callable[[Any, Any, float], str]:
    wanted = name.lower()

    def get(conn: Any, exchange: Any, duration: float) -> str:
        for key, value in exchange.response_headers or ():
            if key.lower() == wanted:
                return value
        return "-"

    return get


def _peer(conn: Any, exchange: Any, duration: float) -> str:
    """The client: a trusted proxy's forwarded one (Unit's ``$remote_addr``), or the one a
    uwsgi packet names (its ``REMOTE_ADDR``), else the peer."""
    forwarded = exchange.forwarded
    if forwarded is not None and forwarded.address is not None:
        return forwarded.address
    client = exchange.head.client
    if client is not None:
        return client
    peer = conn.peer
    return str(peer[0]) if isinstance(peer, tuple) else "-"


def _path(exchange: Any) -> str:
    return exchange.head.target.partition(b"?")[0].decode("latin-1")


def _scheme(conn: Any, exchange: Any, duration: float) -> str:
    """``https`` or ``http``: as the request came, or as a trusted proxy says it came."""
    forwarded = exchange.forwarded
    if forwarded is not None and forwarded.scheme is not None:
        return str(forwarded.scheme)
    return "https" if conn.encrypted else "http"


def _now(conn: Any, exchange: Any, duration: float) -> str:
    return time.strftime("[%d/%b/%Y:%H:%M:%S %z]")


def _time_local(conn: Any, exchange: Any, duration: float) -> str:
    return time.strftime("%d/%b/%Y:%H:%M:%S %z")


def _request_uri(conn: Any, exchange: Any, duration: float) -> str:
    return exchange.head.target.decode("latin-1")


def _uri(conn: Any, exchange: Any, duration: float) -> str:
    return unquote(_path(exchange), "latin-1")


def _host(conn: Any, exchange: Any, duration: float) -> str:
    """The Host field without its port, lower-cased, as NGINX Unit's ``$host``."""
    for key, value in exchange.head.headers:
        if key.lower() == b"host":
            host = value.decode("latin-1").lower()
            return host.partition("]")[0] + "]" if host.startswith("[") else host.partition(":")[0]
    return "-"


_SIMPLE: dict[str, Callable[[Any, Any, float], str]] = {
    "h": _peer,
    "l": lambda c, e, d: "-",
    "u": lambda c, e, d: "-",
    "t": _now,
    "r": lambda c, e, d: f"{e.head.method} {e.head.target.decode('latin-1')} {e.head.protocol}",
    "m": lambda c, e, d: e.head.method,
    "U": lambda c, e, d: _path(e),
    "q": lambda c, e, d: e.head.target.partition(b"?")[2].decode("latin-1"),
    "H": lambda c, e, d: e.head.protocol,
    "s": lambda c, e, d: str(e.status),
    "b": lambda c, e, d: str(e.response_bytes) if e.response_bytes else "-",
    "B": lambda c, e, d: str(e.response_bytes),
    "f": _request_header(b"referer"),
    "a": _request_header(b"user-agent"),
    "T": lambda c, e, d: str(int(d)),
    "D": lambda c, e, d: str(int(d * 1_000_000)),
    "M": lambda c, e, d: str(int(d * 1000)),
    "L": lambda c, e, d: f"{d:.6f}",
    "p": lambda c, e, d: f"<{os.getpid()}>",
}


# corral's ``%({name}u)s`` tokens: NGINX Unit's variables without a Gunicorn token.
_UNIT_ONLY: dict[str, Callable[[Any, Any, float], str]] = {
    "time_local": _time_local,
    "request_uri": _request_uri,
    "uri": _uri,
    "host": _host,
    # why the server answered a request itself without the application (observe/refusals.py's
    # REASONS); "-"
    "refusal": lambda c, e, d: e.refusal or "-",
    "scheme": _scheme,
}


class FormatError(ValueError):
    pass


# NGINX Unit's access log variables, in corral's tokens.
_UNIT_VARIABLES = {
    "remote_addr": "%(h)s",
    "time_local": "%({time_local}u)s",
    "request_line": "%(r)s",
    "status": "%(s)s",
    "body_bytes_sent": "%(B)s",
    "header_referer": "%(f)s",
    "header_user_agent": "%(a)s",
    "request_time": "%(L)s",
    "method": "%(m)s",
    "request_uri": "%({request_uri}u)s",
    "uri": "%({uri}u)s",
    "host": "%({host}u)s",
    "refusal": "%({refusal}u)s",
    "dollar": "$",
}
_UNIT_VARIABLE = re.compile(r"\$(?:\{([A-Za-z0-9_]*)\}|([A-Za-z0-9_]*))")


def from_unit_format(fmt: str) -> str:
    """An access log format in corral's ``%(x)s`` tokens.

    A format with a ``$`` is NGINX Unit's: each ``$name`` or ``${name}`` becomes its token and
    a ``%`` is escaped; a format without one is already corral's and is returned as is.
    Raises `FormatError` naming a variable that corral cannot write.
    """
    if "$" not in fmt:
        return fmt
    pieces: list[str] = []
    position = 0
    for match in _UNIT_VARIABLE.finditer(fmt):
        pieces.append(fmt[position : match.start()].replace("%", "%%"))
        name = match[1] if match[1] is not None else match[2]
        if name in _UNIT_VARIABLES:
            pieces.append(_UNIT_VARIABLES[name])
        elif name.startswith("header_") and len(name) > 7:
            pieces.append(f"%({{{name[7:].replace('_', '-')}}}i)s")
        elif not name:
            raise FormatError(f"a '$' without a variable name at offset {match.start()}")
        else:
            known = ", ".join(f"${known}" for known in _UNIT_VARIABLES)
            raise FormatError(
                f"${name}: not a variable corral can write in the access log "
                f"(it writes {known} and $header_NAME)"
            )
        position = match.end()
    pieces.append(fmt[position:].replace("%", "%%"))
    return "".join(pieces)


def compile_format(fmt: str) -> Callable[[Any, Any, float], str]:
    """Turn a format string into a function ``(conn, exchange, seconds) -> line``."""
    pieces: list[str | Callable[[Any, Any, float], str]] = []
    position = 0
    for match in _TOKEN.finditer(fmt):
        pieces.append(fmt[position : match.start()].replace("%%", "%"))
        token = match.group(1)
        if token.startswith("{"):
            name, kind = token[1:-2], token[-1]
            if kind == "i":
                pieces.append(_request_header(name.encode("latin-1")))
            elif kind == "o":
                pieces.append(_response_header(name))
            elif name in _UNIT_ONLY:
                pieces.append(_UNIT_ONLY[name])
            else:
                raise FormatError(f"unknown access log token %({token})s")
        elif token in _SIMPLE:
            pieces.append(_SIMPLE[token])
        else:
            raise FormatError(f"unknown access log token %({token})s")
        position = match.end()
    pieces.append(fmt[position:].replace("%%", "%"))

    def render(conn: Any, exchange: Any, duration: float) -> str:
        return "".join(p if isinstance(p, str) else p(conn, exchange, duration) for p in pieces)

    return render


class AccessLog:
    """Formats on the loop (cheap), writes on its own thread (may block on disk or pipe)."""

    def __init__(self, target: str, fmt: str) -> None:
        self._render = compile_format(fmt)
        self._target = target
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._stream = self._open()
        self._thread = threading.Thread(target=self._write, name="corral-accesslog", daemon=True)
        self._thread.start()

    def _open(self) -> TextIO:
        if self._target == "-":
            return sys.stdout
        return open(self._target, "a", encoding="utf-8", buffering=1)

    @property
    def writes_to_stdout(self) -> bool:
        """Whether the log is ``-``: standard output."""
        return self._target == "-"

    def move_stdout(self, stream: TextIO) -> None:
        """Write to `stream` (a duplicate of the master's standard output): the worker's
        standard output is about to become the application's ``stdout`` file."""
        self._stream = stream

    def __call__(self, conn: Any, exchange: Any) -> None:
        duration = time.monotonic() - exchange.request_start
        self._lines.put(self._render(conn, exchange, duration))

    def reopen(self) -> None:
        """USR1 (logrotate): lines queued before go to the old file, later ones to the new."""
        self._lines.put(_REOPEN)

    def _write(self) -> None:
        lines = self._lines
        while True:
            line = lines.get()
            if line is None:
                break
            if line is _REOPEN:
                self._reopen()
                continue
            batch = [line]
            try:
                while len(batch) < 256:
                    more = lines.get_nowait()
                    if more is None or more is _REOPEN:
                        lines.put(more)  # handled on the next turn, after this batch
                        break
                    batch.append(more)
            except queue.Empty:
                pass
            try:
                self._stream.write("\n".join(batch) + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                pass
        self._stream.flush()

    def _reopen(self) -> None:
        if self._target == "-":
            return
        try:
            stream = self._open()
        except OSError:
            return  # keep writing to the old file rather than lose lines
        with contextlib.suppress(OSError):
            self._stream.close()
        self._stream = stream

    def close(self) -> None:
        """Write what is queued and stop the writer thread."""
        self._lines.put(None)
        self._thread.join(timeout=5)
