"""Granian's command line as corral reads it: every flag of ``granian --help`` (2.8), and what
corral does with it.

Owns the data only, as `corral.config.uvicorn` does for Uvicorn (whose entries for the flags
both servers have, `uvicorn.SHARED`, are this table's too): `FLAGS`, each flag with the
setting it sets, converted where Granian writes the value otherwise (milliseconds, durations
such as ``1h30m``), or what corral does instead. Granian's own interface, RSGI, is not served
(``--interface rsgi`` says so); its default is RSGI, so a Granian command line serving ASGI or
WSGI names it, and corral's ``auto`` tells the two apart anyway.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from functools import partial
from typing import Any

from corral.config.errors import Invalid
from corral.config.peers import HTTP2, Name, Unsupported, entry
from corral.config.uvicorn import SHARED

__all__ = ["FLAGS", "VERSION"]

VERSION = "2.8.9"  # the version whose --help the table (and tests/unit/test_peers.py) lists

_flag = partial(entry, "Granian's")

_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def _duration(text: str) -> int:
    """Granian's duration: seconds, or ``1d``, ``2h``, ``30m``, ``10s`` and their sums."""
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    match = _DURATION.fullmatch(stripped)
    if not stripped or match is None:
        raise Invalid('seconds, or a duration such as "1h30m"', text)
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _milliseconds(text: str) -> float:
    if not text.strip().isdigit():
        raise Invalid("milliseconds (an int)", text)
    return int(text) / 1000


_MOUNT = "--static-path-mount"
_STATIC_COMPANIONS = ("--static-path-route", "--static-path-expires", "--static-path-dir-to-file")
_DEFAULT_EXPIRES = 86400  # Granian's --static-path-expires
_ALONE = "read with --static-path-mount, nothing without it"


def _static(values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """Granian's static flags as corral's: each mount under its route (``/static`` for one
    mount without a route; as many routes as mounts otherwise, Granian's rule), a miss
    answered 404 as Granian does, ``Cache-Control`` for a day unless the flag says otherwise
    (0: none)."""
    mounts = values[_MOUNT]
    routes = values.get("--static-path-route") or (["/static"] if len(mounts) == 1 else [])
    if len(routes) != len(mounts):
        raise Unsupported(
            f"give one --static-path-route per mount (Granian's rule): {len(mounts)} mount(s), "
            f"{len(routes)} route(s)"
        )
    found = [("static_map", [f"{r}={m}" for r, m in zip(routes, mounts, strict=True)], _MOUNT)]
    expires: Any = values.get("--static-path-expires", _DEFAULT_EXPIRES)
    with contextlib.suppress(Invalid):  # else the setting says what is wrong, naming the flag
        expires = _duration(str(expires))
    if expires != 0:
        found.append(("static_expires", expires, "--static-path-expires"))
    index = values.get("--static-path-dir-to-file")
    if index is not None:
        found.append(("static_index", [index], "--static-path-dir-to-file"))
    return found


_ONE_LOOP = "corral's worker runs one event loop thread; use --workers for more"
_METRICS = "the control API's /metrics serves Prometheus metrics (--control)"

# fmt: off
FLAGS: dict[str, Name] = {n.name: n for n in (
    SHARED["--host"],
    SHARED["--port"],
    SHARED["--uds"],
    _flag("--uds-permissions", "unix_socket_mode"),
    SHARED["--interface"],
    SHARED["--http"],
    SHARED["--ws"],
    _flag("--no-ws", "ws", value=False, constant="none"),
    SHARED["--workers"],
    _flag("--blocking-threads", "threads",
          "for WSGI; an ASGI application runs on the worker's event loop"),
    _flag("--blocking-threads-idle-timeout", instead="corral's threads start with the worker "
          "and are kept", same=(30,), accept=True),
    _flag("--runtime-threads", instead=_ONE_LOOP, same=(1,), accept=True),
    _flag("--runtime-blocking-threads", instead="corral's worker does its socket I/O on its "
          "event loop thread", accept=True),
    _flag("--runtime-mode", instead=_ONE_LOOP, same=("auto", "st"), accept=True),
    SHARED["--loop"],
    _flag("--task-impl", instead="corral runs ASGI requests as asyncio tasks",
          same=("asyncio",), accept=True),
    SHARED["--backlog"],
    _flag("--backpressure", "limit_concurrency",
          "a worker's open connections before it sheds a request (503, Retry-After)"),
    _flag("--http1-buffer-size", "limit_request_head",
          "the largest request head (its line and fields together); a larger one gets 431"),
    _flag("--http1-header-read-timeout", "header_timeout", convert=_milliseconds),
    _flag("--http1-keep-alive", instead="accepted: what corral does", value=False,
          same=(True,)),
    _flag("--no-http1-keep-alive", "keep_alive", "each connection closes after its response",
          value=False, constant=0),
    _flag("--http1-pipeline-flush", instead="corral writes each pipelined response once it is "
          "ready", value=False, accept=True),
    _flag("--no-http1-pipeline-flush", instead="accepted: what corral does", value=False,
          constant=False, same=(False,)),
    _flag("--http2-adaptive-window", instead=HTTP2, value=False),
    _flag("--no-http2-adaptive-window", instead="accepted: no HTTP/2", value=False,
          constant=False, same=(False,)),
    _flag("--http2-initial-connection-window-size", instead=HTTP2),
    _flag("--http2-initial-stream-window-size", instead=HTTP2),
    _flag("--http2-keep-alive-interval", instead=HTTP2),
    _flag("--http2-keep-alive-timeout", instead=HTTP2),
    _flag("--http2-max-concurrent-streams", instead=HTTP2),
    _flag("--http2-max-frame-size", instead=HTTP2),
    _flag("--http2-max-headers-size", instead=HTTP2),
    _flag("--http2-max-send-buffer-size", instead=HTTP2),
    _flag("--log", instead="accepted: what corral does", value=False, same=(True,)),
    _flag("--no-log", instead="corral always writes its error log: --log-level critical keeps "
          "only the gravest lines, --error-logfile /dev/null none", value=False,
          constant=False),
    SHARED["--log-level"],
    SHARED["--log-config"],
    _flag("--access-log", "access_logfile", value=False, constant="-",
          instead="to standard output, as Granian's"),
    SHARED["--no-access-log"],
    _flag("--access-log-fmt", instead="Granian's access log atoms are not corral's: write the "
          "format with --access-logformat (Gunicorn's %(x)s atoms or NGINX Unit's $variables)"),
    _flag("--ssl-certificate", "certfile"),
    SHARED["--ssl-keyfile"],
    SHARED["--ssl-keyfile-password"],
    _flag("--ssl-protocol-min", "tls_min_version"),
    _flag("--ssl-ca", "ca_certs"),
    _flag("--ssl-crl", instead="certificate revocation lists are not read yet: a client "
          "certificate is checked against --ssl-ca alone"),
    _flag("--ssl-client-verify", "cert_reqs", value=False, constant=2),
    _flag("--no-ssl-client-verify", instead="accepted: a client certificate is not asked for",
          value=False, constant=False, same=(False,)),
    _flag("--url-path-prefix", "prefix"),
    _flag("--respawn-failed-workers", instead="accepted: what corral always does",
          value=False, same=(True,)),
    _flag("--no-respawn-failed-workers", instead="corral always respawns a worker that dies "
          "(with a growing delay while they die young) and keeps serving", value=False,
          constant=False, accept=True),
    _flag("--respawn-interval", instead="corral respawns a worker at once, then with a "
          "growing delay while workers die younger than --min-worker-lifetime",
          same=(3.5,), accept=True),
    _flag("--rss-sample-interval", instead="corral reads a worker's memory every second",
          same=(30,), accept=True),
    _flag("--rss-samples", instead="one reading over --max-worker-memory recycles a worker",
          same=(1,), accept=True),
    _flag("--workers-lifetime", "max_worker_lifetime", convert=_duration),
    _flag("--workers-max-rss", "max_worker_memory"),
    _flag("--workers-kill-timeout", "graceful_timeout",
          "without it Granian waits for ever; corral's default is 30 s", convert=_duration),
    SHARED["--factory"],
    _flag("--no-factory", instead="accepted: what corral does without --factory",
          value=False, constant=False, same=(False,)),
    _flag("--working-dir", "chdir"),
    _flag("--env-files", "env_file"),
    _flag("--static-path-route", instead=_ALONE + ": the URL of the mount at its place "
          "(`static_map`)", repeat=True, accept=True),
    _flag("--static-path-mount", "static_map", "served under its --static-path-route "
          "(/static for one mount), a file it does not have answered 404, with Cache-Control "
          "max-age=86400 unless --static-path-expires says otherwise (0: none), as in Granian; "
          "--static URL=DIR is corral's flag (docs/static.md)", repeat=True,
          companions=_STATIC_COMPANIONS, gather=_static),
    _flag("--static-path-dir-to-file", instead=_ALONE + ": `static_index`; without it a "
          "directory is served by its index.html, where Granian answers 404", accept=True),
    _flag("--static-path-expires", instead=_ALONE + ": `static_expires`; Granian's default "
          "is 86400 (a day), corral's --static-expires has none", accept=True),
    _flag("--metrics", instead=_METRICS, value=False),
    _flag("--no-metrics", instead="accepted: no metrics exporter", value=False,
          constant=False, same=(False,)),
    _flag("--metrics-scrape-interval", instead=_METRICS),
    _flag("--metrics-address", instead=_METRICS),
    _flag("--metrics-port", instead=_METRICS),
    SHARED["--reload"],
    _flag("--no-reload", instead="accepted: what corral does without --reload", value=False,
          constant=False, same=(False,)),
    _flag("--reload-paths", "reload_dirs"),
    _flag("--reload-ignore-dirs", "reload_exclude", "a name: every file under a directory of "
          "that name"),
    _flag("--reload-ignore-patterns", instead="regular expressions are not read: write globs "
          "with --reload-exclude", accept=True),
    _flag("--reload-ignore-paths", "reload_exclude", "an absolute path: the file, or every "
          "file under the directory"),
    _flag("--reload-tick", instead="corral's --reload is told of changes by the system "
          "(inotify) and waits for them to settle for 0.3 s", same=(50,), accept=True),
    _flag("--reload-ignore-worker-failure", instead="a change --reload (or HUP) applies whose "
          "workers fail to start is rolled back: the workers before it go on serving",
          value=False, accept=True),
    _flag("--no-reload-ignore-worker-failure", instead="accepted: corral's default",
          value=False, constant=False, same=(False,)),
    _flag("--process-name", "proc_name"),
    _flag("--pid-file", "pid"),
    SHARED["--version"],
    SHARED["--help"],
)}
# fmt: on
