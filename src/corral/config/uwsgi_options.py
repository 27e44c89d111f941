"""uWSGI's options as corral reads them: each option an ini file may give, and what it becomes.

Owns the data of the mapping `corral.config.uwsgi` walks: `MAPPED` (each option with the rule
that records it on a `Recorded` and the words docs/settings.md shows), `ACCEPTED` (options
whose behaviour corral always has) and `UNSUPPORTED` (options corral lacks, each with what it
does instead), the readers of an option's text, and `Recorded`, what the rules write on. A
rule only records: the mapper (`corral.config.uwsgi.Mapper`, a `Recorded`) turns what was
recorded into settings once every option is read (`Mapper._finish`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral.config.document import convert
from corral.config.errors import ConfigError, Invalid, show
from corral.config.given import Given
from corral.config.listening import parse_bind
from corral.config.settings import BY_NAME

__all__ = ["ACCEPTED", "MAPPED", "UNSUPPORTED", "Recorded", "uwsgi_address"]

_TRUE = ("true", "yes", "on", "1", "y", "t")
_FALSE = ("false", "no", "off", "0", "n", "f")


# -- value readers: an option's text -> a setting's input form ------------------------------------


def _text(value: str | None, where: str) -> str:
    if not value:
        raise ConfigError(f"{where}: expected a value")
    return value


def _number(value: str | None, where: str) -> int:
    text = _text(value, where)
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(f"{where}: expected a whole number, got {show(text)}")
    return int(text)


def _seconds(value: str | None, where: str) -> float:
    text = _text(value, where)
    try:
        seconds = float(text)
    except ValueError:
        raise ConfigError(f"{where}: expected a number of seconds, got {show(text)}") from None
    if not 0 <= seconds < float("inf"):
        raise ConfigError(f"{where}: expected a number of seconds, got {show(text)}")
    return seconds


def _boolean(value: str | None, where: str) -> bool:
    if value is None or value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ConfigError(f"{where}: expected true or false, got {show(value)}")


def uwsgi_address(value: str, where: str = "") -> str:
    """A uWSGI socket address as corral's bind address: without a ``:`` it is a unix socket's
    path (uWSGI's rule), else ``HOST:PORT`` (``:PORT`` is every IPv4 interface in both)."""
    if value.startswith("@"):
        raise ConfigError(f"{where}: {show(value)}: abstract unix sockets are not supported")
    address = value if ":" in value else f"unix:{value}"
    try:
        parse_bind(address)
    except Invalid as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return address


# -- the rules ---------------------------------------------------------------------------------


class Recorded:
    """What the rules record as they read a file's options: the settings given (`set`,
    `append`), and the options `corral.config.uwsgi.Mapper` turns into settings once every
    option is read (the pool, the sockets and their protocol, logging, the static mounts)."""

    def __init__(self) -> None:
        self.given: dict[str, Any] = {}
        self.lists: dict[str, tuple[list[Any], str]] = {}
        self.module: tuple[str, str] | None = None  # (spec, where)
        self.callable: str | None = None
        self.processes: tuple[int, str] | None = None
        self.idle: tuple[float, str] | None = None
        self.cheaper: tuple[int, str] | None = None
        self.logto: str | None = None
        self.request_log = True  # uWSGI logs every request unless disable-logging
        self.sockets: list[tuple[str, str]] = []  # `socket` values: their protocol comes last
        # the `https` listeners, with where: beside them, the `http` ones are plain
        self.https: list[tuple[Any, str]] = []
        # check-static (0), static-map (1), static-map2 (2) as static_map mounts, with where:
        # uWSGI tries them in that order whatever the file's
        self.statics: list[tuple[int, str, str]] = []
        self.protocol = "uwsgi"
        self.emperor: str | None = None
        self.logto_where = self.emperor_where = ""
        self.warnings: list[str] = []

    def set(self, name: str, value: Any, where: str) -> None:
        """A scalar setting: converted (and checked) now, so an error names this line."""
        setting = BY_NAME[name]
        converted = convert(
            value, setting.input_type, where, {"": setting.expected}, strict=False, nested=False
        )
        self.given[name] = Given(converted, where)

    def append(self, name: str, value: Any, where: str) -> None:
        items, first = self.lists.get(name, ([], where))
        items.append(value)
        self.lists[name] = (items, first)


@dataclass(frozen=True)
class _Rule:
    """One uWSGI option corral maps: `apply` records it; `doc` says what it becomes."""

    apply: Callable[[Recorded, str | None, str], None]
    doc: str


def _to(name: str, read: Callable[[str | None, str], Any]) -> Callable[..., None]:
    return lambda recorded, value, where: recorded.set(name, read(value, where), where)


def _listen(name: str) -> Callable[..., None]:
    return lambda recorded, value, where: recorded.append(
        name, uwsgi_address(_text(value, where), where), where
    )


def _https(recorded: Recorded, value: str | None, where: str) -> None:
    """uWSGI's ``https`` and ``https-socket``, ``ADDRESS,CERT,KEY[,CIPHERS[,CLIENT_CA]]``: an
    HTTPS listener, with the TLS settings (a CLIENT_CA starting with ``!`` makes the client's
    certificate optional, as in uWSGI)."""
    parts = [part.strip() for part in _text(value, where).split(",")]
    if len(parts) < 3 or len(parts) > 5 or not all(parts[:3]):
        raise ConfigError(
            f"{where}: expected ADDRESS,CERT,KEY[,CIPHERS[,CLIENT_CA]], got {show(value)}"
        )
    recorded.https.append((uwsgi_address(parts[0], where), where))
    recorded.set("certfile", parts[1], where)
    recorded.set("keyfile", parts[2], where)
    if len(parts) > 3 and parts[3]:
        recorded.set("ciphers", parts[3], where)
    if len(parts) > 4 and parts[4]:
        optional = parts[4].startswith("!")
        recorded.set("ca_certs", parts[4].removeprefix("!"), where)
        recorded.set("cert_reqs", 1 if optional else 2, where)


def _http_to_https(recorded: Recorded, value: str | None, where: str) -> None:
    """uWSGI's ``http-to-https = ADDRESS``: a plain listener that redirects to HTTPS."""
    recorded.append("insecure_bind", uwsgi_address(_text(value, where), where), where)
    recorded.set("https_redirect", True, where)


def _socket(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.sockets.append((uwsgi_address(_text(value, where), where), where))


def _protocol(recorded: Recorded, value: str | None, where: str) -> None:
    protocol = _text(value, where).lower()
    if protocol not in ("uwsgi", "http"):
        raise ConfigError(f'{where}: expected "uwsgi" or "http", got {show(value)}')
    recorded.protocol = protocol


def _module(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.module = (_text(value, where), where)


def _callable(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.callable = _text(value, where)


def _wsgi_file(recorded: Recorded, value: str | None, where: str) -> None:
    path = _text(value, where)
    directory, name = os.path.split(path)
    stem, extension = os.path.splitext(name)
    if extension != ".py" or not stem.isidentifier():
        raise ConfigError(
            f"{where}: {show(path)}: corral imports the application as a module: the file "
            "must be NAME.py with NAME a Python identifier (or use module = NAME)"
        )
    recorded.append("pythonpath", directory or ".", where)
    recorded.module = (stem, where)


def _chmod(recorded: Recorded, value: str | None, where: str) -> None:
    mode = value or "666"  # uWSGI: chmod-socket alone means 666
    if not re.fullmatch(r"[0-7]{3,4}", mode):
        raise ConfigError(f"{where}: expected an octal mode such as 660, got {show(mode)}")
    recorded.set("unix_socket_mode", "0" + mode[-3:], where)


def _processes(recorded: Recorded, value: str | None, where: str) -> None:
    count = _number(value, where)
    if count < 1:
        raise ConfigError(f"{where}: expected int >= 1, got {count}")
    recorded.processes = (count, where)


def _idle(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.idle = (_seconds(value, where), where)


def _cheaper(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.cheaper = (_number(value, where), where)


def _logto(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.logto = _text(value, where)
    recorded.logto_where = where


def _disable_logging(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.request_log = not _boolean(value, where)


def _lazy(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.set("preload", not _boolean(value, where), where)


def _autoreload(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.set("reload", _seconds(value, where) > 0, where)


def _emperor(recorded: Recorded, value: str | None, where: str) -> None:
    recorded.emperor = _text(value, where)
    recorded.emperor_where = where


def _append(name: str) -> Callable[..., None]:
    return lambda recorded, value, where: recorded.append(name, _text(value, where), where)


def _static_map(order: int) -> Callable[..., None]:
    """static-map (1) and static-map2 (2), ``MOUNTPOINT=DIR``: a `static_map` mount; a DIR
    that is not there is left out, as uWSGI leaves it out."""

    def rule(recorded: Recorded, value: str | None, where: str) -> None:
        url, equals, directory = _text(value, where).partition("=")
        if not equals or not url.startswith("/"):
            raise ConfigError(f"{where}: expected MOUNTPOINT=DIR, got {show(value, limit=300)}")
        if order == 2:  # the whole path under DIR: DIR + MOUNTPOINT serves what is under it
            directory = directory.rstrip("/") + url.rstrip("/")
        if not os.path.exists(directory):
            recorded.warnings.append(
                f"{where}: {show(directory, limit=300)}: no such directory: left out"
            )
            return
        recorded.statics.append((order, f"{url}={directory}", where))

    return rule


def _check_static(recorded: Recorded, value: str | None, where: str) -> None:
    directory = _text(value, where)
    if not os.path.isdir(directory):
        recorded.warnings.append(
            f"{where}: {show(directory, limit=300)}: no such directory: left out"
        )
        return
    recorded.statics.append((0, f"/={directory}", where))


_HTTP = "an HTTP listener (`bind`); corral serves HTTP there itself"
MAPPED: dict[str, _Rule] = {
    "http": _Rule(_listen("bind"), _HTTP + ", without uWSGI's separate router process"),
    "http-socket": _Rule(_listen("bind"), _HTTP),
    "http11-socket": _Rule(_listen("bind"), _HTTP + " (HTTP/1.1 keep-alive is corral's default)"),
    "https": _Rule(
        _https,
        "an HTTPS listener (`bind`) with `certfile`, `keyfile` and, when given, `ciphers` and "
        "`ca_certs` (docs/tls.md), the `http` ones beside it plain (`insecure_bind`); "
        "without uWSGI's separate router process",
    ),
    "https-socket": _Rule(_https, "the same as `https`"),
    "http-to-https": _Rule(
        _http_to_https,
        "a plain HTTP listener (`insecure_bind`) answering every request with a redirect to "
        "the first HTTPS listener (`https_redirect`)",
    ),
    "socket": _Rule(
        _socket,
        "a uwsgi-protocol listener (`uwsgi_socket`), for nginx's `uwsgi_pass`; an HTTP one "
        "with `protocol = http`. No `:` in the address: a unix socket's path",
    ),
    "uwsgi-socket": _Rule(_listen("uwsgi_socket"), "a uwsgi-protocol listener (`uwsgi_socket`)"),
    "protocol": _Rule(_protocol, "`http` makes `socket` listeners HTTP ones; `uwsgi` (default)"),
    "chmod-socket": _Rule(_chmod, "`unix_socket_mode` (alone: 666), for every unix socket"),
    "module": _Rule(
        _module,
        "`app`: `pkg.mod`, `pkg.mod:callable`; `pkg.mod:Factory()` is `factory = true` (called "
        "with no arguments for the application); a call with arguments is passed on as APP",
    ),
    "wsgi": _Rule(_module, "the same as `module`"),
    "wsgi-file": _Rule(
        _wsgi_file,
        "`app` (the file's name as a module) and its directory on `pythonpath`; it must be "
        "`NAME.py`",
    ),
    "file": _Rule(_wsgi_file, "the same as `wsgi-file`"),
    "callable": _Rule(
        _callable, "the callable of `module` (corral's default: `application`, then `app`)"
    ),
    "chdir": _Rule(_to("chdir", _text), "`chdir`"),
    "pythonpath": _Rule(_append("pythonpath"), "`pythonpath` (repeatable)"),
    "python-path": _Rule(_append("pythonpath"), "`pythonpath` (repeatable)"),
    "pp": _Rule(_append("pythonpath"), "`pythonpath` (repeatable)"),
    "env": _Rule(_append("env"), "`env`, `KEY=VALUE` (repeatable)"),
    "virtualenv": _Rule(_to("home", _text), "`home`"),
    "venv": _Rule(_to("home", _text), "`home`"),
    "home": _Rule(_to("home", _text), "`home`"),
    "pyhome": _Rule(_to("home", _text), "`home`"),
    "processes": _Rule(_processes, "`workers` (the pool's `max` with `idle` or `cheaper`)"),
    "workers": _Rule(_processes, "the same as `processes`"),
    "threads": _Rule(_to("threads", _number), "`threads`"),
    "harakiri": _Rule(
        _to("timeout", _seconds),
        "`timeout`: a worker whose request runs this long has its stacks logged (the "
        "traceback) and is killed and replaced, the request named in the log; as harakiri, "
        "the request is dropped (nginx answers 502). corral's default is 30 s where uWSGI has "
        "none; `request_timeout` is the gentler choice (a 504, the worker lives on)",
    ),
    "max-requests": _Rule(_to("max_requests", _number), "`max_requests`"),
    "max-worker-lifetime": _Rule(_to("max_worker_lifetime", _seconds), "`max_worker_lifetime`"),
    "reload-on-rss": _Rule(_to("max_worker_memory", _number), "`max_worker_memory` (MiB)"),
    "worker-reload-mercy": _Rule(_to("graceful_timeout", _seconds), "`graceful_timeout`"),
    "idle": _Rule(
        _idle,
        "a dynamic pool (NGINX Unit's `processes` object): `max` = processes, `spare` = "
        "cheaper (0), `idle_timeout` = idle; a worker idle that long is stopped, down to one "
        "(uWSGI stops all of them and spawns one on the next request)",
    ),
    "cheaper": _Rule(_cheaper, "the dynamic pool's `spare` workers (see `idle`)"),
    "touch-reload": _Rule(_append("touch_reload"), "`touch_reload` (repeatable)"),
    "py-autoreload": _Rule(_autoreload, "`reload` when above 0 (any change, not polled)"),
    "buffer-size": _Rule(
        _to("limit_request_head", _number),
        "`limit_request_head`: the largest request head (the uwsgi vars block, or an HTTP "
        "head), else 431",
    ),
    "post-buffering": _Rule(
        _to("body_buffer_size", _number),
        "`body_buffer_size`: larger bodies are spooled to a file (`body_temp_dir`). As with "
        "uWSGI's, the whole body is read before the application is called, with any "
        "`threads` (`request_buffering`)",
    ),
    "limit-post": _Rule(_to("limit_request_body", _number), "`limit_request_body` (413)"),
    "uid": _Rule(_to("user", _text), "`user`"),
    "gid": _Rule(_to("group", _text), "`group`"),
    "pidfile": _Rule(_to("pid", _text), "`pid`"),
    "logto": _Rule(
        _logto,
        "`error_logfile`, and the access log too unless `disable-logging` (uWSGI logs "
        "requests where it logs the rest)",
    ),
    "disable-logging": _Rule(
        _disable_logging,
        "no access log; without it the access log goes to `logto`, or standard output",
    ),
    "lazy-apps": _Rule(_lazy, "`preload` when false (corral imports in each worker by default)"),
    "lazy": _Rule(_lazy, "the same as `lazy-apps`"),
    "listen": _Rule(_to("backlog", _number), "`backlog`"),
    "emperor": _Rule(_emperor, "Emperor mode (`--emperor DIR`): one application per vassal file"),
    "static-map": _Rule(
        _static_map(1),
        "`static_map` (repeatable): `/static=DIR` serves DIR's files under /static (a file "
        "instead of DIR: that file), GET and HEAD only; a file no mount has is passed to the "
        "application (`static_fallback`), as in uWSGI (docs/static.md)",
    ),
    "static-map2": _Rule(
        _static_map(2), "`static_map` of DIR and the mount point: `/static=/srv` serves /srv/static"
    ),
    "check-static": _Rule(
        _check_static,
        "`static_map` `/=DIR`: a GET or HEAD is served by DIR's file when there is one, "
        "before the static-map mounts as in uWSGI",
    ),
    "static-check": _Rule(_check_static, "the same as `check-static`"),
    "static-index": _Rule(_append("static_index"), "`static_index` (repeatable)"),
    "static-expires-uri": _Rule(
        _append("static_expires_uri"),
        "`static_expires_uri` (`REGEX SECONDS`, repeatable), matched against the decoded path "
        "without the query (uWSGI: the request's URI as sent); `Cache-Control: max-age` is "
        "sent with `Expires` (uWSGI: `Expires` only)",
    ),
}


@dataclass(frozen=True)
class _Accepted:
    doc: str  # why nothing needs doing
    check: Callable[[str | None], bool] | None = None  # the values that need nothing
    otherwise: str = ""  # the warning for the other values


def _is_true(value: str | None) -> bool:
    return value is None or value.lower() in _TRUE


def _is_false(value: str | None) -> bool:
    return value is not None and value.lower() in _FALSE


ACCEPTED: dict[str, _Accepted] = {
    "master": _Accepted(
        "corral always runs a master", _is_true, "corral always runs a master process"
    ),
    "enable-threads": _Accepted("threads the application starts always run"),
    "die-on-term": _Accepted(
        "TERM stops corral gracefully",
        _is_true,
        "TERM stops corral gracefully (uWSGI without die-on-term reloads on it); HUP reloads",
    ),
    "vacuum": _Accepted("corral removes its unix sockets and pid file when it stops"),
    "strict": _Accepted("corral warns of every option it does not act on"),
    "need-app": _Accepted("a worker that cannot import the application stops corral (exit 3)"),
    "single-interpreter": _Accepted("each worker has one interpreter"),
    "thunder-lock": _Accepted("the kernel wakes one worker per connection"),
    "harakiri-verbose": _Accepted("the timeout's log always names the request and its stacks"),
    "auto-procname": _Accepted("process titles name the master and the workers"),
    "no-orphans": _Accepted("workers leave when their master is gone"),
}

UNSUPPORTED: dict[str, str] = {
    "daemonize": "corral stays in the foreground (run it under systemd or supervisor); use "
    "logto for the log file",
    "stats": "the control API's /status and /metrics (--control unix:PATH)",
    "chown-socket": "unix sockets belong to the user corral starts as; use chmod-socket",
    "umask": "corral keeps the umask it starts with",
    "logformat": "the access log has corral's format (access_logformat)",
    "log-format": "the access log has corral's format (access_logformat)",
    "log-maxsize": "rotate with logrotate and USR1",
    "logger": "the error log goes to logto or standard error",
    "req-logger": "the access log goes to logto or standard output",
    "static-expires": "a regular expression over the file's path: write it over the URL "
    "with static-expires-uri",
    "static-expires-type": "a route of a JSON document whose share has `types` and `expires` "
    "(docs/static.md)",
    "static-safe": "a mount serves nothing outside its directory: mount the other one too",
    "static-skip-ext": "a route of a JSON document whose match leaves them out (docs/static.md)",
    "offload-threads": "responses are written by each worker's event loop",
    "socket-timeout": "see header_timeout, body_timeout and send_timeout",
    "http-timeout": "see header_timeout, body_timeout and send_timeout",
    "http-keepalive": "HTTP/1.1 keep-alive is on (keep_alive seconds)",
    "cheaper-algo": "the dynamic pool grows and shrinks by busy share (see idle)",
    "cheaper-initial": "the dynamic pool starts with its spare workers (at least one)",
    "cheaper-step": "the dynamic pool grows one worker a second",
    "evil-reload-on-rss": "reload-on-rss (max_worker_memory) recycles gracefully",
    "memory-report": "the control API's /status reports each worker",
    "pidfile2": "pidfile is written by the master, as root if it starts as root",
    "max-requests-delta": "max_requests_jitter spreads recycling at random",
    "reload-mercy": "graceful_timeout bounds every stop and reload",
    "procname": "proc_name",
    "procname-prefix": "proc_name",
    "procname-master": "proc_name",
    "route": "NGINX Unit's routes, in a JSON document",
    "add-header": "the application sets its headers",
    "mount": "one application per listener; NGINX Unit's prefix in a JSON document",
    "manage-script-name": "NGINX Unit's prefix (SCRIPT_NAME), in a JSON document",
    "xml": "only ini files are read",
    "yaml": "only ini files are read",
    "json": "only ini files are read",
    "inherit": "use ini = FILE",
}
