"""Gunicorn's names as corral reads them: every setting of Gunicorn 23 to 27, and what corral does
with it.

Owns the data only: `NAMES`, each setting by its config-file name, with its flags and what
corral does with it (a `corral.config.peers.Name` each): it sets one of corral's settings
(`Name.setting`, the value converted by `Name.convert` when Gunicorn writes it otherwise), it is
a server hook, or it has no counterpart and `Name.instead` says what corral does instead.
`Name.same` lists the values that ask nothing corral does not do anyway (Gunicorn's defaults,
mostly): they pass without a word. Corral's own declarations (`corral.config.settings`) carry
the flags both servers share (`-w`, `-u`, `--log-file`...); this table only says what to do
with the others. The readers are `corral.config.gunicorn`'s (a config file, the environment)
and `corral.config.peers`' (the flags); `corral.hooks` reads the names here (`CORRAL_NAMES`,
`settings_in`) without importing the config file's reader, which imports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from corral.config.errors import Invalid
from corral.config.peers import HTTP2, Name, Unsupported

__all__ = ["CORRAL_NAMES", "NAMES", "settings_in"]


# -- value conversions ---------------------------------------------------------------------------


def _umask(value: Any) -> int:
    """Gunicorn's ``umask`` (an int, or a string as ``int(text, 0)`` reads it, a leading 0
    meaning octal) as the mode of the unix sockets, where Gunicorn applies it."""
    if isinstance(value, str):
        text = value.strip()
        if re.match(r"0\d", text):
            text = "0o" + text[1:]
        try:
            value = int(text, 0)
        except ValueError:
            raise Invalid('an int or a string such as "0o007", "007" or "0x7"', value) from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0o777:
        raise Invalid("a mask from 0 to 0o777", value)
    return 0o777 & ~value


def _header_map(value: Any) -> Any:
    if value == "dangerous":
        return False  # every name the parser accepts, underscores included
    raise Unsupported(
        'corral drops header fields whose names have "_" (Gunicorn\'s "drop"); "refuse" '
        'has no counterpart: "drop" or "dangerous"'
    )


# -- the table ---------------------------------------------------------------------------------

_HTTP2 = HTTP2
_SSL_VERSION = (
    "ignored, as Gunicorn 21 and later ignore it: TLS 1.2 and 1.3 are offered "
    "(tls_min_version raises the floor)"
)
_SYSLOG = (
    "syslog is not supported: corral logs to standard error (for journald or the supervisor) "
    "or to --error-logfile"
)
_STATSD = "StatsD is not supported: the control API's /metrics serves Prometheus metrics"
_LOGCONFIG = (
    "corral logs through Python's logging, logger `corral`: give a logging configuration "
    "file with --log-config, or call logging.config in an on_starting hook"
)
_PASTE = "PasteDeploy is not supported: give APP as module:callable"
_DIRTY = (
    "Gunicorn's dirty arbiters are not supported: run such work as another application "
    "(NGINX Unit's applications, in a document) or in a task queue"
)
_STRICT = "corral's HTTP/1.1 parser is strict and has no option for it: "
_UWSGI = "the uwsgi protocol is not served on a Gunicorn-style listener"
_SECURE_HEADERS = {
    "X-FORWARDED-PROTOCOL": "ssl",
    "X-FORWARDED-PROTO": "https",
    "X-FORWARDED-SSL": "on",
}


def _to(name: str, setting: str, *flags: str, **extra: Any) -> Name:
    return Name(name, flags, setting=setting, **extra)


def _no(name: str, instead: str, *flags: str, **extra: Any) -> Name:
    return Name(name, flags, instead=instead, **extra)


def _hook(name: str, instead: str = "") -> Name:
    return Name(name, hook=True, instead=instead)


# fmt: off
NAMES: dict[str, Name] = {n.name: n for n in (
    # Config File
    _to("config", "config", "-c", "--config", same=("./gunicorn.conf.py",),
        instead="./gunicorn.conf.py by default, as in Gunicorn (one log line says it was read); "
        "-c FILE, --ini FILE or --emperor replaces it"),
    _to("wsgi_app", "app", instead="`module:callable` or `module:factory(ARGS)`"),
    # Server Socket
    _to("bind", "bind", "-b", "--bind"),
    _to("backlog", "backlog", "--backlog"),
    # Worker Processes
    _to("workers", "workers", "-w", "--workers",
        instead="the default comes from WEB_CONCURRENCY when set, as in Gunicorn"),
    _to("worker_class", "worker_class", "-k", "--worker-class",
        instead="sync and gthread; ASGI classes (Uvicorn's workers, asgi) are the asgi "
        "interface; gevent, eventlet, tornado: use --threads"),
    _to("threads", "threads", "--threads"),
    _no("worker_connections",
        "corral does not cap a worker's connections: an idle keep-alive connection holds no "
        "thread, and --threads bounds the requests running at once",
        "--worker-connections", same=(1000,), accept=True),
    _to("max_requests", "max_requests", "--max-requests"),
    _to("max_requests_jitter", "max_requests_jitter", "--max-requests-jitter"),
    _to("timeout", "timeout", "-t", "--timeout"),
    _to("graceful_timeout", "graceful_timeout", "--graceful-timeout"),
    _to("keepalive", "keep_alive", "--keep-alive", instead="corral's default is 5 s, Gunicorn's 2"),
    _to("asgi_loop", "loop", "--asgi-loop"),
    _to("asgi_lifespan", "lifespan", "--asgi-lifespan"),
    _no("asgi_disconnect_grace_period", "corral does not cancel an ASGI request whose client "
        "went away: the application gets http.disconnect and ends when it returns "
        "(request_timeout bounds it)", "--asgi-disconnect-grace-period", same=(3,),
        accept=True),
    _no("http_parser", "corral parses with its own strict parser (compiled, or its Python "
        "twin); there is no other parser to choose", "--http-parser", same=("auto",)),
    _to("websocket_max_message_size", "ws_max_size", "--websocket-max-message-size"),
    # Security
    _to("limit_request_line", "limit_request_line", "--limit-request-line",
        instead="Gunicorn's 0 (unlimited) is 65536; corral's default is 8190, Gunicorn's 4094"),
    _to("limit_request_fields", "limit_request_fields", "--limit-request-fields"),
    _to("limit_request_field_size", "limit_request_field_size",
        "--limit-request-field_size"),
    # Debugging
    _to("reload", "reload", "--reload", value=False),
    _no("reload_engine", "corral's --reload watches with watchfiles (inotify on Linux); the "
        "engine cannot be chosen", "--reload-engine", same=("auto",)),
    _to("reload_extra_files", "touch_reload", "--reload-extra-file",
        instead="works without --reload too"),
    _no("spew", "no line tracing: call sys.settrace in a post_fork hook", "--spew",
        value=False, same=(False,)),
    _to("check_config", "check_config", "--check-config", value=False, same=(False,),
        instead="it prints the resolved document too"),
    _to("print_config", "check_config", "--print-config", value=False, same=(False,),
        instead="the resolved document"),
    # Server Mechanics
    _to("preload_app", "preload", "--preload", value=False),
    _no("sendfile", "corral always sends wsgi.file_wrapper files with sendfile() on plain "
        "sockets", "--no-sendfile", value=False, constant=False, same=(None, True)),
    _to("reuse_port", "reuse_port", "--reuse-port", value=False),
    _to("chdir", "chdir", "--chdir"),
    _to("daemon", "daemon", "-D", "--daemon", value=False,
        instead="the command returns once the workers are ready"),
    _to("raw_env", "env", "-e", "--env"),
    _to("pidfile", "pid", "-p", "--pid"),
    _no("worker_tmp_dir", "corral's workers report to the master through pipes, with no "
        "temporary file to place", "--worker-tmp-dir", same=(None,), accept=True),
    _to("user", "user", "-u", "--user"),
    _to("group", "group", "-g", "--group"),
    _to("umask", "unix_socket_mode", "-m", "--umask", convert=_umask, same=(0, "0"),
        instead="applied where Gunicorn applies it, to the unix sockets: mode 0777 less the "
        "mask (0, Gunicorn's default, keeps corral's 0600; --unix-socket-mode wins); read as "
        "int(text, 0), a leading 0 meaning octal"),
    _no("initgroups", "", "--initgroups", value=False, same=(True, False)),
    _to("tmp_upload_dir", "body_temp_dir", same=(None,),
        instead="where request bodies larger than body_buffer_size are spooled"),
    _no("secure_scheme_headers", "corral reads X-Forwarded-Proto (https or on) from the "
        "forwarded_allow_ips peers, as NGINX Unit's forwarded.protocol",
        same=(_SECURE_HEADERS, {"X-FORWARDED-PROTO": "https"})),
    _to("forwarded_allow_ips", "forwarded_allow_ips", "--forwarded-allow-ips",
        instead="X-Forwarded-Proto and X-Forwarded-For from those peers, through NGINX Unit's "
        "forwarded; the default comes from FORWARDED_ALLOW_IPS when set, as in Gunicorn"),
    _to("pythonpath", "pythonpath", "--pythonpath"),
    _no("paste", _PASTE, "--paste", "--paster", same=(None,)),
    _no("raw_paste_global_conf", _PASTE, "--paste-global", same=([],)),
    _to("proxy_protocol", "proxy_protocol", "--proxy-protocol"),
    _to("proxy_allow_ips", "proxy_allow_from", "--proxy-allow-from"),
    _no("permit_obsolete_folding", _STRICT + "obsolete line folding gets 400",
        "--permit-obsolete-folding", value=False, same=(False,)),
    _no("strip_header_spaces", _STRICT + "whitespace before a field's colon gets 400 "
        "(RFC 9112 5.1)", "--strip-header-spaces", value=False, same=(False,)),
    _no("permit_unconventional_http_method", _STRICT + "only the registered methods are "
        "served", "--permit-unconventional-http-method", value=False, same=(False,)),
    _no("permit_unconventional_http_version", _STRICT + "only HTTP/1.0 and HTTP/1.1 are "
        "served", "--permit-unconventional-http-version", value=False, same=(False,)),
    _no("casefold_http_method", _STRICT + "methods are case-sensitive",
        "--casefold-http-method", value=False, same=(False,)),
    _no("forwarder_headers", "corral takes no SCRIPT_NAME or PATH_INFO from request headers; "
        "mount the application with NGINX Unit's prefix (in a document)",
        "--forwarder-headers", same=("SCRIPT_NAME,PATH_INFO",)),
    _to("header_map", "discard_unsafe_fields", "--header-map", convert=_header_map,
        same=("drop",), instead='"drop" is the default, "dangerous" false; "refuse" has no '
        "counterpart"),
    _no("protocol", _UWSGI, "--protocol", same=("http",)),
    _no("uwsgi_allow_ips", _UWSGI, "--uwsgi-allow-from", same=("127.0.0.1,::1",)),
    _to("root_path", "root_path", "--root-path", same=("",),
        instead="Uvicorn's meaning: the path a proxy took off, put back in front of each path"),
    # Logging
    _to("accesslog", "access_logfile", "--access-logfile"),
    _no("disable_redirect_access_to_syslog", _SYSLOG, "--disable-redirect-access-to-syslog",
        value=False, same=(False,)),
    _to("access_log_format", "access_logformat", "--access-logformat"),
    _to("errorlog", "error_logfile", "--error-logfile", "--log-file"),
    _to("logfile", "error_logfile", instead="errorlog's name until Gunicorn 0.13 (2011), still "
        "in blog posts; Gunicorn now ignores it without a word and logs to standard error"),
    _to("loglevel", "log_level", "--log-level"),
    _to("capture_output", "capture_output", "--capture-output", value=False,
        instead="the workers' output and error to the error log file"),
    _no("logger_class", _LOGCONFIG, "--logger-class",
        same=("gunicorn.glogging.Logger", "simple")),
    _to("logconfig", "log_config", "--log-config"),
    _no("logconfig_dict", _LOGCONFIG, same=({},)),
    _to("logconfig_json", "log_config", "--log-config-json"),
    _no("syslog_addr", _SYSLOG, "--log-syslog-to",
        same=("udp://localhost:514", "unix:///var/run/syslog", "unix:///dev/log")),
    _no("syslog", _SYSLOG, "--log-syslog", value=False, same=(False,)),
    _no("syslog_prefix", _SYSLOG, "--log-syslog-prefix", same=(None,)),
    _no("syslog_facility", _SYSLOG, "--log-syslog-facility", same=("user",)),
    _to("enable_stdio_inheritance", "enable_stdio_inheritance", "-R",
        "--enable-stdio-inheritance", value=False),
    _no("statsd_host", _STATSD, "--statsd-host", same=(None,)),
    _no("dogstatsd_tags", _STATSD, "--dogstatsd-tags", same=("",)),
    _no("statsd_prefix", _STATSD, "--statsd-prefix", same=("",)),
    _no("enable_backlog_metric", _STATSD, "--enable-backlog-metric", value=False,
        same=(False,)),
    # Process Naming
    _to("proc_name", "proc_name", "-n", "--name"),
    _no("default_proc_name", "set proc_name", same=("gunicorn",)),
    # Server Hooks
    _hook("on_starting"), _hook("on_reload"), _hook("when_ready"), _hook("pre_fork"),
    _hook("post_fork"), _hook("post_worker_init"), _hook("worker_int"),
    _hook("worker_abort"), _hook("pre_exec"), _hook("pre_request"), _hook("post_request"),
    _hook("child_exit"), _hook("worker_exit"), _hook("nworkers_changed"), _hook("on_exit"),
    _hook("ssl_context", "not run: corral makes the TLS context from certfile, keyfile, "
          "ca_certs, cert_reqs and ciphers, in the master (docs/tls.md)"),
    _hook("on_dirty_starting", _DIRTY), _hook("dirty_post_fork", _DIRTY),
    _hook("dirty_worker_init", _DIRTY), _hook("dirty_worker_exit", _DIRTY),
    # SSL
    _to("keyfile", "keyfile", "--keyfile"),
    _to("certfile", "certfile", "--certfile"),
    # 2 is Gunicorn's old default (PROTOCOL_TLS), 17 Uvicorn's (PROTOCOL_TLS_SERVER)
    _no("ssl_version", _SSL_VERSION, "--ssl-version", same=(2, 17), accept=True),
    _to("cert_reqs", "cert_reqs", "--cert-reqs"),
    _to("ca_certs", "ca_certs", "--ca-certs"),
    _no("suppress_ragged_eofs", "accepted: a client that closes without TLS's close_notify "
        "ends its connection quietly", "--suppress-ragged-eofs", value=False, same=(True,),
        accept=True),
    _no("do_handshake_on_connect", "accepted: the handshake is always made as the connection "
        "opens", "--do-handshake-on-connect", value=False, same=(False,), accept=True),
    _to("ciphers", "ciphers", "--ciphers"),
    # HTTP/2
    _no("http_protocols", _HTTP2, "--http-protocols", same=("h1",)),
    _no("http2_max_concurrent_streams", _HTTP2, "--http2-max-concurrent-streams", same=(100,)),
    _no("http2_initial_window_size", _HTTP2, "--http2-initial-window-size", same=(65535,)),
    _no("http2_max_frame_size", _HTTP2, "--http2-max-frame-size", same=(16384,)),
    _no("http2_max_header_list_size", _HTTP2, "--http2-max-header-list-size", same=(65536,)),
    _no("http2_cleartext", _HTTP2, "--http2-cleartext", same=("off",)),
    # Dirty Arbiters
    _no("dirty_apps", _DIRTY, "--dirty-app", same=([],)),
    _no("dirty_workers", _DIRTY, "--dirty-workers", same=(0,)),
    _no("dirty_timeout", _DIRTY, "--dirty-timeout", same=(300,)),
    _no("dirty_threads", _DIRTY, "--dirty-threads", same=(1,)),
    _no("dirty_graceful_timeout", _DIRTY, "--dirty-graceful-timeout", same=(30,)),
    # Control
    _no("control_socket", "Gunicorn's control socket (gunicornc) is not supported; corral's "
        "control API is --control unix:PATH, with corral ctl", "--control-socket"),
    _no("control_socket_mode", "Gunicorn's control socket is not supported (see "
        "--control)", "--control-socket-mode", same=(0o600,)),
    _no("control_socket_disable", "", "--no-control-socket", value=False,
        same=(True, False)),
)}
# fmt: on

# Gunicorn's names for corral's settings where they differ (hooks' `server.cfg` answers both).
CORRAL_NAMES: dict[str, str] = {
    n.name: n.setting
    for n in NAMES.values()
    if n.setting and n.setting != n.name and n.convert is None
}


def settings_in(names: Iterable[str]) -> list[str]:
    """Which of `names` are Gunicorn's settings (not hooks): what a hooks file may hold that
    `--hooks` does not apply."""
    return [name for name in names if name in NAMES and not NAMES[name].hook]
