"""Uvicorn's command line as corral reads it: every flag of ``uvicorn --help`` (0.55), and what
corral does with it.

Owns the data only: `FLAGS`, each flag with the setting it sets (Uvicorn's meaning kept: a
flag corral declares itself, such as ``--host``, ``--root-path`` or ``--header``, is declared
for it in `corral.config.settings`; a unit test holds the two to the same setting), or what
corral does instead. The flags corral does not declare are read by `corral.config.peers`
(hidden from ``--help``); docs/settings.md's table is generated from this one. Entries Granian
shares (`SHARED`) are `corral.config.granian`'s too, so that one flag has one meaning.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from corral.config.peers import HTTP2, Name, entry

__all__ = ["FLAGS", "SHARED", "VERSION"]

VERSION = "0.55.0"  # the version whose --help the table (and tests/unit/test_peers.py) lists

_BOTH = "Uvicorn's and Granian's"
_flag = partial(entry, "Uvicorn's")
_both = partial(entry, _BOTH)


def _one_directory(value: Any) -> list[Any]:
    return [value]  # not split at commas, as --pythonpath's text is


# In the order of `uvicorn --help`; `_both`: Granian has the flag too, with this meaning.
# fmt: off
FLAGS: dict[str, Name] = {n.name: n for n in (
    _both("--host", "host"),
    _both("--port", "port"),
    _both("--uds", "uds"),
    _flag("--fd", "fd"),
    _both("--reload", "reload", value=False),
    _flag("--reload-dir", "reload_dirs"),
    _flag("--reload-include", "reload_include"),
    _flag("--reload-exclude", "reload_exclude"),
    _flag("--reload-delay", instead="corral's --reload waits for changes to settle for 0.3 s",
          same=(0.25,), accept=True),
    _both("--workers", "workers"),
    _both("--loop", "loop"),
    _both("--http", instead="HTTP/2 is not supported yet: corral speaks HTTP/1.1, with its own "
          "parser whichever one --http names; terminate HTTP/2 in a proxy",
          same=("auto", "h11", "httptools", "1")),
    _flag("--http2", instead=HTTP2, value=False),
    _both("--ws", "ws"),
    _flag("--ws-max-size", "ws_max_size"),
    _flag("--ws-max-queue", "ws_max_queue"),
    _flag("--ws-ping-interval", "ws_ping_interval"),
    _flag("--ws-ping-timeout", "ws_ping_timeout"),
    _flag("--ws-per-message-deflate", "ws_per_message_deflate"),
    _flag("--lifespan", "lifespan"),
    _both("--interface", "interface"),
    _flag("--env-file", "env_file"),
    _both("--log-config", "log_config"),
    _both("--log-level", "log_level"),
    _flag("--access-log", "access_logfile", value=False, constant="-",
          instead="to standard output; without it corral writes none (Uvicorn writes one "
          "unless --no-access-log)"),
    _both("--no-access-log", instead="no access log: corral's default", value=False, constant=False,
          same=(False,)),
    _flag("--use-colors", "use_colors", value=False),
    _flag("--no-use-colors", "use_colors", value=False, constant=False),
    _flag("--proxy-headers", "proxy_headers", value=False),
    _flag("--no-proxy-headers", "proxy_headers", value=False, constant=False),
    _flag("--server-header", "server_header", value=False, constant="corral"),
    _flag("--no-server-header", "server_header", value=False, constant=""),
    _flag("--date-header", "date_header", value=False),
    _flag("--no-date-header", "date_header", value=False, constant=False),
    _flag("--forwarded-allow-ips", "forwarded_allow_ips"),
    _flag("--root-path", "root_path"),
    _both("--limit-concurrency", "limit_concurrency"),
    _both("--backlog", "backlog"),
    _flag("--limit-max-requests", "max_requests"),
    _flag("--limit-max-requests-jitter", "max_requests_jitter"),
    _flag("--timeout-keep-alive", "keep_alive"),
    _flag("--timeout-graceful-shutdown", "graceful_timeout",
          "without it Uvicorn waits for ever; corral's default is 30 s"),
    _flag("--timeout-worker-healthcheck", "timeout",
          "a worker whose event loop is silent this long is killed and replaced; corral's "
          "default is 30 s"),
    _both("--ssl-keyfile", "keyfile"),
    _flag("--ssl-certfile", "certfile"),
    _both("--ssl-keyfile-password", "keyfile_password"),
    _flag("--ssl-version", instead="TLS 1.2 and 1.3 are offered, whatever protocol number it "
          "gives (tls_min_version raises the floor)", same=(2, 17), accept=True),
    _flag("--ssl-cert-reqs", "cert_reqs"),
    _flag("--ssl-ca-certs", "ca_certs"),
    _flag("--ssl-ciphers", "ciphers", same=("TLSv1",),
          instead="Uvicorn's default, TLSv1, is OpenSSL's own list: corral leaves it unset"),
    _flag("--header", "headers"),
    _both("--version", "version", value=False),
    _flag("--app-dir", "pythonpath", "put in front of the Python path, as Uvicorn does",
          convert=_one_directory, same=("", ".")),
    _flag("--h11-max-incomplete-event-size", "limit_request_head",
          "the largest request head (its line and fields together); a larger one gets 431"),
    _flag("--reset-contextvars", instead="accepted: what corral always does (each request "
          "runs in a copy of the worker's context, the lifespan in its own)", value=False,
          same=(True,)),
    _both("--factory", "factory", value=False),
    _both("--help", "help", value=False),
)}
# fmt: on

# The entries Granian's table takes as they are.
SHARED: dict[str, Name] = {flag: n for flag, n in FLAGS.items() if n.server == _BOTH}
