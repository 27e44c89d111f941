"""The response fields that are the server's: which names (`field_kind`), and the prefix of
every head, written here (`head_fields`, `server_fields`) and taken apart here
(`prefix_without`).

The one list of the names the server owns: `OWNED`. `corral.http.response` reads it when it
first sees a name (what to do with the application's field of that name: its ``Date`` and
``Server`` replace the prefix's, its framing and hop-by-hop fields are the server's), the
``headers`` setting refuses a field of these names but ``Server`` (which replaces corral's),
and docs/settings.md lists them (a test checks every one is there).

Not compiled (setup.py's TWINS): nothing here runs per request. A worker makes its prefix
once a second; `prefix_without` runs for a head that has the application's own ``Date`` or
``Server``, once, the head being cached.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

# RFC 9110 5.1: a field name is a token
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")

# What a name is, to the server. The last two are bits: the prefix's fields an application
# may give itself, which `corral.http.response.make_head` gathers in one int.
PLAIN = 0  # the application's, sent as given
CONTENT_LENGTH = 1  # frames the body
CONNECTION = 2  # says whether the connection stays open
HOP = 3  # hop-by-hop (PEP 3333): framing and connection management, the server's
DATE = 4
SERVER = 8

# every name that is not PLAIN, lower-case
OWNED = {
    "content-length": CONTENT_LENGTH,
    "connection": CONNECTION,
    "keep-alive": HOP,
    "transfer-encoding": HOP,
    "upgrade": HOP,
    "proxy-connection": HOP,
    "te": HOP,
    "date": DATE,
    "server": SERVER,
}


def field_kind(name: str) -> int:
    """What the field name ``name`` (a token: checked by the caller) is to the server:
    `PLAIN` or one of the kinds of `OWNED`, compared without case."""
    return OWNED.get(name.lower(), PLAIN)


# RFC 9110 5.6.7's names, not the locale's (strftime's %a and %b are the locale's); and not
# email.utils.formatdate, whose import (email, calendar, random...) costs every worker 0.7 MiB
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(timestamp: float) -> str:
    """IMF-fixdate, e.g. ``Sun, 06 Nov 1994 08:49:37 GMT``."""
    t = time.gmtime(timestamp)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


def server_fields(timestamp: float, server: str) -> str:
    """``Date`` and, unless ``server`` is "", ``Server``, CRLF-terminated: the prefix of
    every head (the control API's; a worker's is `head_fields`)."""
    date = f"Date: {http_date(timestamp)}\r\n"
    return f"{date}Server: {server}\r\n" if server else date


def head_fields(server: str, headers: list[str], date: bool) -> Callable[[float], str]:
    """A worker's prefix, given the time (``ServerState.prefix``, made once a second):
    `server_fields`, ``Date`` left out unless ``date`` (the ``date_header`` setting), then
    ``headers`` (the setting's "Name: value" fields, checked by the configuration), a
    ``Server`` one replacing ``server`` (Uvicorn's rule)."""
    fixed = ""
    for line in headers:
        name, _, value = line.partition(": ")
        if field_kind(name) == SERVER:
            server = value
        else:
            fixed += f"{line}\r\n"
    if date:
        return lambda now: server_fields(now, server) + fixed
    constant = (f"Server: {server}\r\n" if server else "") + fixed
    return lambda now: constant


def prefix_without(prefix: str, given: int) -> str:
    """``prefix`` (see `head_fields`) without the fields the application gave itself
    (``given``: `DATE`, `SERVER` or both): the application's value is sent instead, never
    beside (RFC 9110 6.6.1: one ``Date``). Whatever the prefix holds (a setting may leave a
    field out), only the lines of those names go."""
    kept = []
    for line in prefix.split("\r\n"):
        if line and not field_kind(line.partition(":")[0]) & given:
            kept.append(line + "\r\n")
    return "".join(kept)
