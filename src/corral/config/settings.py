"""Every setting, declared once.

This module owns the one list of `Setting` declarations (`SETTINGS`, grouped by section), and
nothing else: the types of their values and the parsers that turn what a user writes into the
value the document holds are `corral.config.values`' (``"auto"`` workers, octal modes,
``KEY=VALUE`` pairs) and `corral.config.listening`'s (`parse_bind`). Everything else is
generated from this list: the argparse CLI and the config-file keys (`corral.config.sources`),
the fields of the validated document (`corral.config.document`) and docs/settings.md
(`corral.config.docs`). Adding a setting means adding one `Setting` here, and its parser there
when no existing one fits.

Each value travels in two forms. The *input form* is what a flag or a config-file key accepts
(`Setting.input_type`, e.g. ``int >= 1 or "auto"``); `Setting.resolve` turns it into the
*document form* (`Setting.type`, e.g. ``int >= 1``), which the document validates again.

Rules kept here: stdlib and msgspec only (workers import this module); no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from msgspec import Meta

from corral.config.errors import show
from corral.config.listening import (
    BIND_EXPECT,
    DEFAULT_BIND,
    DEFAULT_HOST,
    DEFAULT_PORT,
    ProxyMode,
    address_list,
    parse_allow_ips,
    parse_binds,
    parse_optional_binds,
    proxy_mode,
)
from corral.config.values import (
    ABSOLUTE_PATH,
    APP_EXPECT,
    DEFAULT_ACCESS_LOGFORMAT,
    HEADER_VALUE,
    HEALTH_PATH,
    LIMIT_ZERO,
    MODE,
    NAME,
    SECONDS,
    Compression,
    FactoryCall,
    LogLevel,
    LoopKind,
    Processes,
    Static,
    bounded_int,
    corral_access_format,
    describe,
    existing_directories,
    existing_directory,
    existing_file,
    from_static_routes,
    parse_access_format,
    parse_app,
    parse_compression,
    parse_env,
    parse_env_files,
    parse_home,
    parse_interface,
    parse_log_level,
    parse_mode,
    parse_path_list,
    parse_response_headers,
    parse_root_path,
    parse_string_list,
    parse_websocket,
    parse_workers,
    path_entries,
    process_count,
    tls_version,
    user_or_group,
    worker_protocol,
    zero_is_largest,
)

__all__ = ["BY_NAME", "SECTIONS", "SETTINGS", "Action", "Scope", "Setting"]


class Scope(enum.StrEnum):
    """Where a setting's value lands."""

    SERVER = "server"  # a member of `$.settings`
    APPLICATION = "application"  # a member of each `$.applications.NAME`
    DOCUMENT = "document"  # a member of the document's top level (`$.access_log`)
    SOURCE = "source"  # shapes the document without being a field (APP, bind)
    COMMAND = "command"  # command line only, not a config-file key (--config, --version)


class Action(enum.StrEnum):
    """How the command line takes the value."""

    STORE = "store"  # --flag VALUE, the last one wins
    APPEND = "append"  # --flag VALUE, repeatable, collected into a list
    FLAG = "flag"  # --flag, no value: true
    OPTIONAL = "optional"  # --flag [VALUE]: without one of its `values`, the setting's `const`
    SWITCH = "switch"  # --flag: true, --no-flag: false (Uvicorn's and Granian's pairs)
    POSITIONAL = "positional"  # a bare argument


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its key, flags, types, default and documentation.

    `name` is the flat config-file key and the attribute the runtime reads on the document's
    struct (`app.workers`, `settings.keep_alive`). `key` is where the value sits in the
    document (NGINX Unit's spelling), dotted, under its scope's object (``$.settings``,
    ``$.applications.NAME``, ``$``): ``"working_directory"``, ``"limits.timeout"``,
    ``"http.idle_timeout"``; empty means `name`. When they differ the struct holds the field
    under the key and `name` is a property reading it, through `view` when the runtime wants
    another form (``processes``, an int or an object, is read as `workers`, an int).
    `type` is the document form (msgspec constraints included); `accepts` the input form when
    wider (None: same as `type`); `resolve` maps the input form to the document form and raises
    `Invalid`. `default` is in input form. A setting without flags is a file and document key
    only.
    """

    name: str
    section: str
    scope: Scope
    type: Any
    default: Any
    doc: str
    flags: tuple[str, ...] = ()
    metavar: str | None = None
    action: Action = Action.STORE
    accepts: Any = None
    resolve: Callable[[Any], Any] | None = None
    expect: str = ""  # the input form in words; derived from `input_type` when empty
    default_text: str = ""  # the default as shown in --help and the docs; derived when empty
    key: str = ""  # the dotted path under the scope's object in the document; "" is `name`
    view: Callable[[Any], Any] | None = None  # the runtime's form of the document's value
    const: Any = None  # with Action.OPTIONAL: the value of the flag given without one
    # with Action.OPTIONAL: the words `--flag WORD` takes as its value; after the flag, any
    # other word is not its (the APP's) and the flag is `const`. None: only `--flag=VALUE`.
    values: tuple[str, ...] = ()

    @property
    def path(self) -> tuple[str, ...]:
        """`key` (or `name`) split into its steps."""
        return tuple((self.key or self.name).split("."))

    @property
    def document_path(self) -> str:
        """Where the value sits in the document, as a JSON path ("" for non-document ones)."""
        root = _SCOPE_ROOTS.get(self.scope)
        return "" if root is None else root + "." + ".".join(self.path)

    @property
    def all_flags(self) -> tuple[str, ...]:
        """`flags`, with the ``--no-`` form of a switch's."""
        if self.action is not Action.SWITCH:
            return self.flags
        return self.flags + tuple("--no-" + flag[2:] for flag in self.flags)

    @property
    def input_type(self) -> Any:
        """The type a flag or a config-file value is validated against."""
        return self.type if self.accepts is None else self.accepts

    @property
    def expected(self) -> str:
        """What the input form accepts, in words."""
        return self.expect or describe(self.input_type).removesuffix(" or null")

    @property
    def in_file(self) -> bool:
        """Whether the setting is a config-file key."""
        return self.scope is not Scope.COMMAND

    def document_default(self) -> Any:
        """The default in document form."""
        return (
            self.resolve(self.default)
            if self.resolve and self.default is not None
            else self.default
        )

    def shown_default(self) -> str:
        """The default as written in --help and the docs ("" when there is none to show)."""
        if self.default_text:
            return self.default_text
        if self.default is None or self.scope is Scope.COMMAND:
            return ""
        if isinstance(self.default, list | dict) and not self.default:
            return ""
        if isinstance(self.default, str) and '"' in self.default and "'" not in self.default:
            return f"'{self.default}'"  # a TOML literal string, easier to read than escapes
        return show(self.default, limit=200)


_SCOPE_ROOTS = {
    Scope.SERVER: "$.settings",
    Scope.APPLICATION: "$.applications.NAME",
    Scope.DOCUMENT: "$",
}

SECTIONS: tuple[tuple[str, str], ...] = (
    ("Application", "What to run and how many processes and threads run it."),
    ("Listening", "Where to accept connections."),
    (
        "TLS",
        "HTTPS on every HTTP listener of the command line and file (docs/tls.md): the "
        "certificate and key are read by the master, which the workers' user never needs to "
        "read; HUP reads them again.",
    ),
    ("Timeouts", "All durations are in seconds and may be fractional."),
    ("Request limits", "Checked while the request is read, before memory is spent on it."),
    (
        "Client limits",
        "Which clients are served and how often, on every listener of the command line "
        "(docs/limits.md): nginx's `limit_req`, counted once for all the workers of a pool "
        "(a document's listener says it with its own `rate_limit`), and nginx's `allow` and "
        "`deny` (a document says them with a route's `source`).",
    ),
    ("WebSocket", "WebSocket connections of ASGI applications (RFC 6455)."),
    (
        "Proxy",
        "Requests a route's `proxy` action or `upstreams` pass sends to other HTTP servers "
        "(docs/proxy.md): each worker keeps its own connections to them.",
    ),
    (
        "Worker recycling",
        "When a worker is replaced by a fresh one. The replacement is ready before the old "
        "worker stops accepting, and the old worker finishes its requests.",
    ),
    ("Responses", "What corral adds to every response."),
    (
        "Static files",
        "Files the workers serve themselves, before the application sees the request: NGINX "
        "Unit's `share` routes, which these settings write for the command line "
        "(docs/static.md); a document's own routes say the same with every choice.",
    ),
    ("Logging", "Error log and access log."),
    ("Process", "How the server process presents itself and how it is supervised."),
    (
        "Control API",
        "The HTTP and JSON API that reconfigures the running server (docs/control-api.md). "
        "These are command-line options only: the API cannot move its own socket.",
    ),
    ("Command line", "Options of the command itself; they are not config-file keys."),
)

(
    _APPLICATION,
    _LISTENING,
    _TLS,
    _TIMEOUTS,
    _LIMITS,
    _RATES,
    _WEBSOCKET,
    _PROXY,
    _RECYCLING,
    _RESPONSES,
    _STATIC,
    _LOGGING,
    _PROCESS,
    _CONTROL,
    _COMMAND,
) = (title for title, _ in SECTIONS)
_S, _A, _SRC, _CMD = Scope.SERVER, Scope.APPLICATION, Scope.SOURCE, Scope.COMMAND
_DOC = Scope.DOCUMENT

# fmt: off
SETTINGS: tuple[Setting, ...] = (
    # -- Application ----------------------------------------------------------------------------
    Setting(
        "app", _APPLICATION, _SRC, str, None,
        "The application (WSGI or ASGI: see `interface`), `module:callable` or `module`. "
        "Without a callable, corral looks for `application`, then `app`. The application is "
        "named after its module.",
        action=Action.POSITIONAL, metavar="APP", resolve=parse_app,
        expect=APP_EXPECT.removesuffix(" (dotted Python names)"),
    ),
    Setting(
        "workers", _APPLICATION, _A, bounded_int(ge=1) | Processes, 1,
        'Number of worker processes. "auto" means one per CPU this process may run on. In the '
        'document, NGINX Unit\'s `processes`: a number, or `{"max", "spare", "idle_timeout"}` '
        "(defaults 1, 0, 15; `spare` at most `max`): `spare` workers (at least one) at rest, "
        "one more each second while every worker is busy or fewer than `spare` are idle, up "
        "to `max`; one less each second while more than `spare` are idle and one has been "
        "for `idle_timeout` seconds. A new worker takes new connections: keep-alive ones stay "
        "with the worker that accepted them. As in Gunicorn, the default is `WEB_CONCURRENCY` "
        "when that variable is set.",
        flags=("-w", "--workers"), metavar="INT", accepts=bounded_int(ge=1) | Literal["auto"],
        resolve=parse_workers, key="processes", view=process_count,
    ),
    Setting(
        "threads", _APPLICATION, _A, bounded_int(ge=1), 1,
        "Threads per worker running application code. With 1 the application runs on the "
        "worker's event loop thread.",
        flags=("--threads",), metavar="INT",
    ),
    Setting(
        "thread_scheduling", _APPLICATION, _A, Literal["batch", "normal"], "batch",
        "The Linux scheduling policy of the `threads` pool's threads (with more than one): "
        "`batch` (SCHED_BATCH) lets a thread handed a request wait for the loop thread to "
        "block instead of preempting it only to wait for the GIL the loop holds, which "
        "halves the cost of a thread's request under close-per-request traffic; the price "
        "is that a woken thread does not preempt other running processes either, so on a "
        "machine whose every core is busy it may wait up to one scheduler tick. `normal`: "
        "the system's default (SCHED_OTHER). Elsewhere than Linux, always the default.",
        flags=("--thread-scheduling",), metavar="POLICY",
    ),
    Setting(
        "factory", _APPLICATION, _A, bool | FactoryCall, False,
        "NGINX Unit's `factory`: the callable is an application factory, called with no "
        "arguments in each worker (in the master with `preload`) to get the WSGI application. "
        'Or `{"args": [...], "kwargs": {...}}`: it is called with these arguments, which is '
        "what Gunicorn's APP syntax `module:factory(ARGS)` (Python literals) sets. "
        "`--factory` is Uvicorn's flag for the same.",
        flags=("--factory",), action=Action.FLAG,
    ),
    Setting(
        "worker_class", _APPLICATION, _A, Literal["wsgi", "asgi"], "sync",
        "Gunicorn's worker class, which in the document is NGINX Unit's `protocol`: `sync` and "
        "`gthread` (also written `gunicorn.workers.sync.SyncWorker`...) are corral's worker "
        "(an event loop, with `threads` threads running the application), `wsgi`. ASGI "
        "worker classes (`uvicorn.workers.UvicornWorker`, Gunicorn's `asgi`...) are `asgi`: "
        "the application is served as ASGI whatever `interface` detects, unless `interface` "
        "names one. gevent, eventlet and tornado workers have no counterpart: use `threads`.",
        flags=("-k", "--worker-class"), metavar="CLASS", accepts=str, resolve=worker_protocol,
        key="protocol", expect='"sync", "gthread" or an ASGI worker class',
        default_text='"sync"',
    ),
    Setting(
        "interface", _APPLICATION, _A, Literal["auto", "wsgi", "asgi"], "auto",
        "How the application is called. `auto`: ASGI when the callable is a coroutine "
        "function, an object whose `__call__` is one, or a class whose `__call__` is one "
        "(ASGI 2), or when `worker_class` is an ASGI worker class; WSGI otherwise. `wsgi` or "
        "`asgi` force it. ASGI applications run as tasks on the worker's event loop "
        "(`threads` does not apply), with the HTTP and WebSocket scopes and lifespan. "
        "Uvicorn's `asgi3` and `asgi2` are `asgi`.",
        flags=("--interface",), metavar="INTERFACE", accepts=str, resolve=parse_interface,
        expect='"auto", "wsgi" or "asgi"',
    ),
    Setting(
        "lifespan", _APPLICATION, _A, Literal["auto", "on", "off"], "auto",
        "ASGI's lifespan protocol, run by each worker: `lifespan.startup` before the worker "
        "says it is ready, `lifespan.shutdown` once its graceful stop has served the last "
        "request. A startup that fails is one log line and exit 3 at start (a rollback on "
        "reload). `auto`: an application that raises or returns before it answers the "
        "startup has no lifespan, and is served without; `on`: that is a failure too; "
        "`off`: never sent. Uvicorn's `--lifespan`.",
        flags=("--lifespan",), metavar="MODE",
    ),
    Setting(
        "root_path", _APPLICATION, _A, str, "",
        "Uvicorn's `--root-path`: the path a proxy in front took off the requests' paths "
        "(it passes `/api/items` as `/items`), put back: an ASGI scope's `root_path` is it "
        "and its `path` and `raw_path` start with it (`/api/items`), a WSGI environ's "
        "`SCRIPT_NAME` is it (`PATH_INFO` stays `/items`), so the application's links carry "
        "it. One trailing `/` is dropped. A proxy that keeps the path whole wants `prefix` "
        "instead.",
        flags=("--root-path",), metavar="PATH", resolve=parse_root_path,
        expect='"" or a path beginning with "/"',
    ),
    Setting(
        "prefix", _APPLICATION, _SRC, str | None, None,
        "NGINX Unit's `prefix` of the application (a document's key), from the command line "
        "or a flat file: a request whose path is the prefix or continues it with `/` gets "
        "`SCRIPT_NAME` (ASGI: `root_path`) set to it and `PATH_INFO` the rest (ASGI: `path` "
        "stays whole); any other path is passed whole. Granian's `--url-path-prefix`.",
        flags=("--prefix",), metavar="PATH",
    ),
    Setting(
        "thread_stack_size", _APPLICATION, _A, bounded_int(ge=32768) | None, None,
        "NGINX Unit's `thread_stack_size`: the stack size in bytes of the threads the "
        "worker starts from then on (Python's `threading.stack_size`), set once the "
        "application is imported, before the `threads` pool starts. A multiple of the "
        "system's page size and at least 32768 (Python's minimum; Unit accepts the system's "
        "smaller minimum). Unlike Unit, which applies it to its request threads only, it also "
        "applies to threads the application starts while it serves. Null: the system's "
        "default.",
    ),
    Setting(
        "preload", _APPLICATION, _A, bool, False,
        "Import the application in the master before forking workers (saves memory, but code "
        "changes need a full restart).",
        flags=("--preload",), action=Action.FLAG,
    ),
    Setting(
        "gc_freeze", _APPLICATION, _A, bool, True,
        "Once the application is imported and its ASGI lifespan has started, collect garbage "
        "once and leave every object then alive out of later collections (`gc.freeze()`), so "
        "that the collector's full passes scan what requests create, not the application's "
        "modules: with 100 ASGI requests in flight these passes took about 7 % of a "
        "hello-world worker's time, and 0.2 % frozen. A reference cycle among the frozen "
        "objects is never collected. The master's objects (a preloaded application's too) are "
        "frozen across the fork, so that the worker's collection leaves the pages they share "
        "unwritten. False: Python's default.",
        flags=("--gc-freeze",), metavar="BOOL",
    ),
    Setting(
        "chdir", _APPLICATION, _A, NAME | None, None,
        "Change to this directory before importing the application.",
        flags=("--chdir",), metavar="DIR", key="working_directory",
    ),
    Setting(
        "home", _APPLICATION, _A, ABSOLUTE_PATH | None, None,
        "The application's virtualenv (NGINX Unit's `home`, uWSGI's `--home`): each worker "
        "puts its site-packages (with their `.pth` files) ahead of corral's own and sets "
        "`sys.prefix` and `VIRTUAL_ENV` before importing the application; modules corral has "
        "already imported (msgspec, httptools, uvloop, the standard library) stay corral's. A "
        "virtualenv made by another Python (3.11 or later, another major.minor than corral's) "
        "runs on that Python: its workers are spawned (its `bin/python` executed), not forked, "
        "and corral (the same version) must be installed in it. A relative path is taken from "
        "the directory corral starts in, not from `chdir`. Not with `preload`, which imports "
        "the application in the master.",
        flags=("-H", "--home", "--virtualenv"), metavar="DIR", accepts=NAME | None,
        resolve=parse_home,
    ),
    Setting(
        "pythonpath", _APPLICATION, _A, list[str] | str, [],
        "Directories to add to the Python path, comma-separated on the command line (a list "
        "or a comma-separated string in a flat file). In the document, NGINX Unit's `path`: "
        "one directory or a list.",
        flags=("--pythonpath",), metavar="DIRS", accepts=list[str] | str, resolve=parse_path_list,
        key="path", view=path_entries, expect="list of strings or comma-separated string",
    ),
    Setting(
        "env", _APPLICATION, _A, dict[str, str], {},
        "Environment variables for the workers, `KEY=VALUE`; repeat the flag for several. "
        'In a file: a table (`env = {DJANGO_DEBUG = "0"}`) or a list of "KEY=VALUE" strings.',
        flags=("-e", "--env"), metavar="KEY=VALUE", action=Action.APPEND,
        accepts=dict[str, Any] | list[Any], resolve=parse_env,
        expect='table of strings or list of "KEY=VALUE" strings', key="environment",
    ),
    Setting(
        "env_file", _APPLICATION, _SRC, list[str], [],
        "Environment variables for the workers from this file (`KEY=VALUE` lines, as the "
        "python-dotenv package reads them: comments, quotes, `export`, `${VAR}`), read with "
        "the configuration; repeat for several, a later file winning. A variable corral was "
        "started with wins over the file's, as in Uvicorn; `env` wins over both. Needs "
        "python-dotenv (`pip install corral[dotenv]`). The values become the document's "
        "`environment`, as `env`'s do: `--check-config` prints them, the control API's `GET "
        "/config` answers them and the state directory saves them, so a secret in the file is "
        "in those too. Uvicorn's `--env-file`, Granian's `--env-files`.",
        flags=("--env-file",), metavar="FILE", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_env_files,
    ),
    Setting(
        "user", _APPLICATION, _A, NAME | None, None,
        "Run the workers as this user (name or numeric id); needs a master started as root.",
        flags=("-u", "--user"), metavar="USER", accepts=NAME | int | None, resolve=user_or_group,
    ),
    Setting(
        "group", _APPLICATION, _A, NAME | None, None,
        "Run the workers as this group (name or numeric id).",
        flags=("-g", "--group"), metavar="GROUP", accepts=NAME | int | None, resolve=user_or_group,
    ),
    Setting(
        "stdout", _APPLICATION, _A, NAME | None, None,
        "NGINX Unit's `stdout`: a file the workers' standard output goes to (`print()`), "
        "opened for appending and created if missing (mode 0666 less the umask) by each "
        "worker before it switches to `user`; a relative path is taken from the directory "
        "corral starts in. A worker that cannot open it fails to start, as an application "
        "that fails to import. Null (the default): the workers write to corral's own "
        "standard output, as Gunicorn's do. This differs from Unit, whose daemon sends "
        "applications' output to /dev/null: corral runs in the foreground, under a "
        "supervisor that keeps its output, and a Gunicorn user expects to see the prints. "
        "corral's own lines (a `-` access log) stay on corral's standard output.",
    ),
    Setting(
        "stderr", _APPLICATION, _A, NAME | None, None,
        "NGINX Unit's `stderr`: a file the workers' standard error goes to (tracebacks the "
        "application prints, warnings), opened as `stdout` is. Null (the default): corral's "
        "own standard error. corral's error log stays where `error_logfile` sends it, its "
        "workers' lines included.",
    ),
    Setting(
        "executable", _APPLICATION, _A, NAME | None, None,
        'NGINX Unit\'s `"type": "external"` application: the program corral runs as the '
        "application's pool of processes (a path, or a name looked up in the `PATH` of its "
        "`environment`), which are not corral workers: the master starts one per process, "
        "hands it its socket (see `listen`), restarts one that exits with the crash backoff "
        "and stops them with SIGTERM, then SIGKILL after `graceful_timeout`. Required with "
        '`"type": "external"`, not allowed with a Python application. See docs/polyglot.md.',
    ),
    Setting(
        "arguments", _APPLICATION, _A, list[str], [],
        "NGINX Unit's `arguments` of an external application's `executable`. corral's "
        "additions: `{port}` is replaced by the loopback port and `{socket}` by the unix "
        "socket's path the program is to bind itself (see `listen`).",
    ),
    Setting(
        "listen", _APPLICATION, _A, Literal["fd", "port", "unix"] | None, None,
        "corral's: how an external application's processes get their socket. `fd`: corral "
        "binds a loopback port and hands the listening socket over as systemd does (descriptor "
        "3, `LISTEN_FDS=1`, `LISTEN_PID`, `LISTEN_FDNAMES` the application's name), shared by "
        "its processes. `port`: each process binds the free loopback port corral picked for "
        "it, given as `PORT` and as `{port}` in `arguments`. `unix`: each binds the unix "
        "socket path corral picked, given as `{socket}` in `arguments`. Null: `port` when "
        "`arguments` name `{port}`, `unix` when they name `{socket}`, else `fd`.",
    ),
    Setting(
        "health_path", _APPLICATION, _A, HEALTH_PATH, "/",
        "corral's: the path an external application's process is asked for (`GET`) until it "
        "answers; any HTTP answer, whatever its status, makes it ready, and until then no "
        "request is routed to it. A process not ready within `startup_timeout` is killed and "
        "restarted with the crash backoff.",
    ),
    Setting(
        "health_interval", _APPLICATION, _A, Annotated[float, Meta(gt=0, le=3600)], 0.2,
        "corral's: seconds between two asks of `health_path` while an external application's "
        "process starts.",
    ),
    # -- Listening ------------------------------------------------------------------------------
    Setting(
        "bind", _LISTENING, _SRC, list[str], [DEFAULT_BIND],
        "Address to listen on; repeat for several. `HOST:PORT`, `[IPV6]:PORT`, `unix:PATH`, "
        "`PORT` (on 127.0.0.1), `:PORT` or `*:PORT` (all IPv4 interfaces, 0.0.0.0). Port 0 "
        "picks a free port. In a file: a list or one string.",
        flags=("-b", "--bind"), metavar="ADDRESS", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_binds, expect=f"{BIND_EXPECT} (a list in a file)",
        default_text=DEFAULT_BIND,
    ),
    Setting(
        "host", _LISTENING, _SRC, NAME | None, None,
        "Uvicorn's and Granian's `--host`: with `port`, the address to listen on instead of "
        "`bind` (an IPv6 address without brackets, `::`, is one). Not beside `bind` in one "
        "source; on the command line, over a config file's `bind`.",
        flags=("--host",), metavar="HOST", default_text=DEFAULT_HOST,
    ),
    Setting(
        "port", _LISTENING, _SRC, bounded_int(ge=0, le=65535) | None, None,
        "Uvicorn's and Granian's `--port`: with `host`, the port to listen on (0 picks a "
        "free one).",
        flags=("--port",), metavar="PORT", default_text=str(DEFAULT_PORT),
    ),
    Setting(
        "fd", _LISTENING, _CMD, bounded_int(ge=0) | None, None,
        "Uvicorn's `--fd`: serve on the socket of this file descriptor, bound by whoever "
        "started corral (supervisor's `fcgi-program` passes fd 0), listened on if it is not "
        "yet, instead of binding `bind`; for the life of the master, reloads and USR2 "
        "upgrades included, as systemd's socket activation (which wins over it). Command "
        "line only: a descriptor is the starting process's, not a configuration's.",
        flags=("--fd",), metavar="FD",
    ),
    Setting(
        "uds", _LISTENING, _SRC, NAME | None, None,
        "Uvicorn's and Granian's `--uds`: listen on this unix socket instead (`unix:PATH` "
        "in `bind`).",
        flags=("--uds",), metavar="PATH",
    ),
    Setting(
        "uwsgi_socket", _LISTENING, _SRC, list[str], [],
        "Address to listen on for the uwsgi binary protocol (what nginx's `uwsgi_pass` "
        "sends, uWSGI's `socket`), the same forms as `bind`; repeat for several. Each becomes "
        'a listener with corral\'s `"protocol": "uwsgi"`: one request per connection, '
        "answered as HTTP/1.x then closed, under the same limits and timeouts. Without "
        "`bind`, given alone, nothing listens for HTTP.",
        flags=("--uwsgi-socket",), metavar="ADDRESS", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_optional_binds,
        expect=f"{BIND_EXPECT} (a list in a file)",
    ),
    Setting(
        "insecure_bind", _LISTENING, _SRC, list[str], [],
        "Address to listen on for plain HTTP beside the HTTPS `bind` addresses of `certfile` "
        "(Hypercorn's `--insecure-bind`, uWSGI's `http` beside `https`), the same forms as "
        "`bind`; repeat for several. Each becomes a listener with `\"tls\": false`.",
        flags=("--insecure-bind",), metavar="ADDRESS", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_optional_binds,
        expect=f"{BIND_EXPECT} (a list in a file)",
    ),
    Setting(
        "https_redirect", _LISTENING, _SRC, bool, False,
        "The `insecure_bind` listeners answer every request with a redirect to the same host "
        "and target over HTTPS, on the port of the first `bind` (uWSGI's `http-to-https`): "
        "301 for GET and HEAD, 308 for the other methods (which keeps the method and the "
        'body). The route it makes is the document\'s `"return"` and `"location": '
        '"https://$host$request_uri"`, written for you.',
        flags=("--https-redirect",), action=Action.FLAG,
    ),
    Setting(
        "backlog", _LISTENING, _S, bounded_int(ge=1, le=65535), 2048,
        "Maximum number of pending connections per listening socket (the kernel may cap it).",
        flags=("--backlog",), metavar="INT",
    ),
    Setting(
        "proxy_protocol", _LISTENING, _S, ProxyMode, ProxyMode.OFF,
        "Gunicorn's `--proxy-protocol`: every connection to a listener starts with a PROXY "
        "protocol header (HAProxy's, v1 text or v2 binary) naming the client, which becomes "
        "`REMOTE_ADDR`, `REMOTE_PORT` and the access log's address. `auto` (the flag without "
        "a value) takes either version, `v1` or `v2` only that one. Only from the "
        "`proxy_allow_from` addresses; a connection from elsewhere, or without a valid header, "
        "is closed unanswered. A listener's own `proxy_protocol` key overrides this "
        "(docs/architecture.md, PROXY protocol).",
        flags=("--proxy-protocol",), metavar="MODE", action=Action.OPTIONAL,
        accepts=ProxyMode | bool, resolve=proxy_mode, const="auto",
        values=(*ProxyMode, "true", "false", "1", "0"),
        expect='"off", "v1", "v2" or "auto" (a bool in a file)',
    ),
    Setting(
        "proxy_allow_from", _LISTENING, _S, list[str], "127.0.0.1,::1",
        "With `proxy_protocol`: the peers a PROXY header is taken from (Gunicorn's "
        "`--proxy-allow-from`, `proxy_allow_ips` in its files): addresses, CIDR networks "
        "(`10.0.0.0/8`) or `*` for any, comma-separated on the command line. Connections "
        "on a unix socket are always allowed, as in Gunicorn. A listener's own "
        "`proxy_allow_from` key overrides this.",
        flags=("--proxy-allow-from",), metavar="ADDRESSES", accepts=list[str] | str,
        resolve=address_list,
    ),
    Setting(
        "health", _LISTENING, _S, bool, False,
        "Answer readiness and liveness probes on every listener, in the worker, without the "
        "application: `readiness_path` is 503 from the moment a graceful stop begins (see "
        "`shutdown_delay`), 200 otherwise; `liveness_path` is 200 while the server runs, "
        "draining included. A listener's `health` in the document turns them on or off there "
        "alone (docs/deploy.md).",
        flags=("--health",), action=Action.FLAG,
    ),
    Setting(
        "readiness_path", _LISTENING, _S, HEALTH_PATH, "/readyz",
        "The path of the readiness probe (with `health`). Its query string is ignored.",
        flags=("--readiness-path",), metavar="PATH",
    ),
    Setting(
        "liveness_path", _LISTENING, _S, HEALTH_PATH, "/livez",
        "The path of the liveness probe (with `health`). Its query string is ignored.",
        flags=("--liveness-path",), metavar="PATH",
    ),
    Setting(
        "reuse_port", _LISTENING, _S, bool, False,
        "Set `SO_REUSEPORT` on the TCP listening sockets, as Gunicorn's `--reuse-port`: "
        "another process may then bind the same address and the kernel spreads new "
        "connections between the sockets.",
        flags=("--reuse-port",), action=Action.FLAG,
    ),
    Setting(
        "forwarded_allow_ips", _LISTENING, _SRC, list[str], "127.0.0.1,::1",
        "Gunicorn's trusted proxies: addresses or CIDR networks, comma-separated, `*` for "
        "any; `\"\"` for none. A request from one of them (or over a unix socket, as Gunicorn "
        "trusts those) gets its scheme from `X-Forwarded-Proto` (`https`: `wsgi.url_scheme` is "
        "https) and its client address from `X-Forwarded-For` (`REMOTE_ADDR`, the access "
        "log): every listener the command line or a flat file makes gets NGINX Unit's "
        "`forwarded` with these sources, whose rules apply. A whole document keeps the "
        "`forwarded` it gives (none by default). As in Gunicorn, the default is "
        "`FORWARDED_ALLOW_IPS` when that variable is set.",
        flags=("--forwarded-allow-ips",), metavar="ADDRESSES", accepts=list[str] | str,
        resolve=parse_allow_ips, expect="comma-separated addresses or networks (a list in a file)",
    ),
    Setting(
        "proxy_headers", _LISTENING, _SRC, bool, True,
        "Read `X-Forwarded-Proto` and `X-Forwarded-For` from the `forwarded_allow_ips` peers. "
        "`--no-proxy-headers` trusts no peer, as Uvicorn's.",
        flags=("--proxy-headers",), action=Action.SWITCH,
    ),
    Setting(
        "unix_socket_mode", _LISTENING, _S, MODE, 0o600,
        'Permissions of unix sockets, as an octal string ("0660"); an integer in a file is '
        "taken as is (TOML: `0o660`).",
        flags=("--unix-socket-mode",), metavar="MODE", accepts=MODE | str, resolve=parse_mode,
        expect='an octal mode such as "0660"', default_text='"0600"',
    ),
    # -- TLS --------------------------------------------------------------------------------------
    Setting(
        "certfile", _TLS, _S, NAME | None, None,
        "The certificate (PEM: the server's first, then its chain) of HTTPS on every HTTP "
        "listener; it may hold the private key too. Gunicorn's `--certfile`, Uvicorn's "
        "`--ssl-certfile`, Granian's `--ssl-certificate`.",
        flags=("--certfile",), metavar="FILE",
    ),
    Setting(
        "keyfile", _TLS, _S, NAME | None, None,
        "The private key of `certfile` (PEM), when the certificate file does not hold it. "
        "Gunicorn's `--keyfile`, Uvicorn's `--ssl-keyfile`, Granian's `--ssl-keyfile`.",
        flags=("--keyfile",), metavar="FILE",
    ),
    Setting(
        "keyfile_password", _TLS, _S, NAME | None, None,
        "The password of an encrypted `keyfile` (Uvicorn's and Granian's "
        "`--ssl-keyfile-password`).",
        flags=("--keyfile-password",), metavar="PASSWORD",
    ),
    Setting(
        "ca_certs", _TLS, _S, NAME | None, None,
        "Certificates of the authorities (PEM) a client certificate is checked against, "
        "with `cert_reqs` 1 or 2. Gunicorn's `--ca-certs`, Uvicorn's `--ssl-ca-certs`, "
        "Granian's `--ssl-ca`.",
        flags=("--ca-certs",), metavar="FILE",
    ),
    Setting(
        "cert_reqs", _TLS, _S, Annotated[int, Meta(ge=0, le=2)], 0,
        "Client certificates, as Python's `ssl.VerifyMode` numbers them (Gunicorn's "
        "`--cert-reqs`, Uvicorn's `--ssl-cert-reqs`): 0 none asked for, 1 asked for and "
        "checked when given, 2 required (Granian's `--ssl-client-verify`).",
        flags=("--cert-reqs",), metavar="INT",
    ),
    Setting(
        "ciphers", _TLS, _S, NAME | None, None,
        "The TLS 1.2 cipher suites, in OpenSSL's cipher list format (Gunicorn's "
        "`--ciphers`, Uvicorn's `--ssl-ciphers`); unset: OpenSSL's defaults, with Python's. "
        "TLS 1.3's suites are OpenSSL's.",
        flags=("--ciphers",), metavar="CIPHERS",
    ),
    Setting(
        "tls_min_version", _TLS, _S, Literal["1.2", "1.3"], "1.2",
        "The oldest TLS version a client may use (Granian's `--ssl-protocol-min`): 1.2 or "
        "1.3. TLS 1.0 and 1.1 are never offered.",
        flags=("--tls-min-version",), metavar="VERSION", accepts=str, resolve=tls_version,
        expect='"1.2" or "1.3"',
    ),
    Setting(
        "tls_handshake_timeout", _TLS, _S, Annotated[float, Meta(gt=0, le=86400)], 10.0,
        "A client that has not finished its TLS handshake this long after it connected is "
        "closed (it has sent no request to answer).",
        flags=("--tls-handshake-timeout",), metavar="SECONDS",
    ),
    Setting(
        "tls_ticket_rotation", _TLS, _S, Annotated[float, Meta(gt=0, le=7 * 86400)], 43200.0,
        "Seconds between two session ticket keys: the master makes a new key this often, "
        "shared by every worker, and the previous one still decrypts, so a client resumes "
        "its session for one to two of these periods (at most the session's timeout). 12 "
        "hours by default, as Caddy's.",
        flags=("--tls-ticket-rotation",), metavar="SECONDS",
    ),
    # -- Timeouts -------------------------------------------------------------------------------
    Setting(
        "timeout", _TIMEOUTS, _S, SECONDS, 30.0,
        "A worker whose event loop has made no progress for this long, or whose oldest "
        "request has run this long, is killed and replaced: never sooner, and within a second "
        "more. 0 disables the check.",
        flags=("-t", "--timeout"), metavar="SECONDS",
    ),
    Setting(
        "startup_timeout", _TIMEOUTS, _A, SECONDS, 60.0,
        "A worker that is not ready this long after it started (its application still "
        "importing, or the lifespan's startup still running) is killed: at start-up it is "
        "retried with the crash backoff, in a reload or a change through the control API the "
        "change is rolled back. 0 waits for ever.",
        flags=("--startup-timeout",), metavar="SECONDS",
    ),
    Setting(
        "graceful_timeout", _TIMEOUTS, _S, SECONDS, 30.0,
        "On shutdown or restart, how long workers may finish in-flight requests before they "
        "are killed.",
        flags=("--graceful-timeout",), metavar="SECONDS",
    ),
    Setting(
        "shutdown_delay", _TIMEOUTS, _S, SECONDS, 0.0,
        "On a graceful stop (TERM, INT), how long the server goes on serving and accepting, "
        "its readiness probe already 503 (see `health`) and each answer closing its "
        "connection (a balancer's kept connections move to the other instances), before it "
        "stops accepting: the time a load balancer takes to notice and send no more "
        "(Kubernetes: its endpoints' update). A worker that dies meanwhile is replaced. "
        "`graceful_timeout` runs after it. A second TERM ends the delay.",
        flags=("--shutdown-delay",), metavar="SECONDS",
    ),
    Setting(
        "handoff_timeout", _TIMEOUTS, _S, SECONDS, 3.0,
        "With routes: how long a worker waits for a worker of the application a request is "
        "routed to to take the connection (see docs/architecture.md, hand-off); then the "
        "client is answered 503 and the connection closed. It covers a respawn after a crash.",
        flags=("--handoff-timeout",), metavar="SECONDS",
    ),
    Setting(
        "fastcgi_connect_timeout", _TIMEOUTS, _S, Annotated[float, Meta(gt=0, le=86400)], 5.0,
        'How long a worker waits to connect to a `"php"` application\'s php-fpm (docs/'
        "polyglot.md); then the client is answered 502, as when php-fpm refuses or is not "
        "there.",
        flags=("--fastcgi-connect-timeout",), metavar="SECONDS",
    ),
    Setting(
        "fastcgi_read_timeout", _TIMEOUTS, _S, Annotated[float, Meta(gt=0, le=86400)], 60.0,
        "How long a worker waits for php-fpm's next bytes while it answers a request (and for "
        "php-fpm to take more of the request's body), as nginx's `fastcgi_read_timeout`: then "
        "the client is answered 504 if the answer has not begun, else its connection is "
        "closed.",
        flags=("--fastcgi-read-timeout",), metavar="SECONDS",
    ),
    Setting(
        "fastcgi_connections", _LIMITS, _S, bounded_int(ge=1, le=1024), 8,
        "The most connections a worker opens to one php-fpm, kept open from one request to "
        "the next (`FCGI_KEEP_CONN`); fewer when php-fpm has fewer children for each worker "
        "(a child serves one connection at a time). A request finding them all busy waits "
        "for one in corral, in order, up to `fastcgi_read_timeout` (then 504).",
        flags=("--fastcgi-connections",), metavar="INT",
    ),
    Setting(
        "fastcgi_head_size", _LIMITS, _S, bounded_int(ge=1024, le=1048576), 65536,
        "The largest head (status and header fields) a php script's answer may have, in "
        "bytes, as nginx's `fastcgi_buffer_size`; a larger one is answered 502.",
        flags=("--fastcgi-head-size",), metavar="BYTES",
    ),
    Setting(
        "drain_idle_timeout", _TIMEOUTS, _S, SECONDS, 1.0,
        "On a graceful stop, reload or recycle, how long a draining worker keeps an idle "
        "keep-alive connection open for a request its client may already be sending (answered "
        "with `Connection: close`), instead of resetting it. Capped by `keep_alive`.",
        flags=("--drain-idle-timeout",), metavar="SECONDS",
    ),
    Setting(
        "keep_alive", _TIMEOUTS, _S, SECONDS, 5.0,
        "How long an idle keep-alive connection is kept open. 0 closes each connection after "
        "its response.",
        flags=("--keep-alive",), metavar="SECONDS", key="http.idle_timeout",
    ),
    Setting(
        "header_timeout", _TIMEOUTS, _S, Annotated[float, Meta(gt=0, le=86400)], 30.0,
        "Time allowed to receive a complete request head (request line and headers); past it "
        "the client gets 408.",
        flags=("--header-timeout",), metavar="SECONDS", key="http.header_read_timeout",
    ),
    Setting(
        "body_timeout", _TIMEOUTS, _S, Annotated[float, Meta(gt=0, le=86400)], 60.0,
        "Time allowed between two reads of a request body (like nginx's client_body_timeout); "
        "past it the client gets 408 and the connection is closed.",
        flags=("--body-timeout",), metavar="SECONDS", key="http.body_read_timeout",
    ),
    Setting(
        "body_min_rate", _TIMEOUTS, _S, bounded_int(ge=0), 240,
        "Slowest average rate, in bytes per second, at which a request body may arrive, "
        "measured from its start once `body_min_rate_grace` has passed (ASP.NET Kestrel's "
        "MinRequestBodyDataRate, Apache's mod_reqtimeout MinRate): under it the client gets "
        "408 and the connection is closed (the slow POST attack, which `body_timeout` alone "
        "lets through: a byte a minute). 0 disables it.",
        flags=("--body-min-rate",), metavar="BYTES",
    ),
    Setting(
        "body_min_rate_grace", _TIMEOUTS, _S, Annotated[float, Meta(gt=0, le=86400)], 5.0,
        "How long a request body may take before `body_min_rate` applies.",
        flags=("--body-min-rate-grace",), metavar="SECONDS",
    ),
    Setting(
        "send_timeout", _TIMEOUTS, _S, Annotated[float, Meta(gt=0, le=86400)], 60.0,
        "Time a response may wait for the client to read it (like nginx's send_timeout); past "
        "it the connection is closed.",
        flags=("--send-timeout",), metavar="SECONDS", key="http.send_timeout",
    ),
    Setting(
        "request_timeout", _TIMEOUTS, _A, SECONDS, 0.0,
        "A request running in the application longer than this gets 504 (or its connection "
        "closed if the response had started), its stack is logged and an exception is raised "
        "in the thread running it so the worker keeps serving. 0 disables it. Must end before "
        "`timeout`. With 1 thread the worker uses SIGALRM to interrupt a blocking call, so the "
        "application must not use `signal.alarm`. For ASGI the request's task is cancelled "
        "instead (its stack logged); a coroutine that blocks the event loop is `timeout`'s.",
        flags=("--request-timeout",), metavar="SECONDS", key="limits.timeout",
    ),
    Setting(
        "request_timeout_grace", _TIMEOUTS, _A, SECONDS, 5.0,
        "How long a request past `request_timeout` may take to unwind before its worker is "
        "recycled (stacks logged, killed and replaced).",
        flags=("--request-timeout-grace",), metavar="SECONDS",
    ),
    # -- Request limits -------------------------------------------------------------------------
    Setting(
        "limit_request_line", _LIMITS, _S, bounded_int(ge=64, le=65536), 8190,
        "Maximum size of the request line (method, target, version) in bytes; longer gets 414. "
        f"{LIMIT_ZERO}",
        flags=("--limit-request-line",), metavar="BYTES", accepts=bounded_int(ge=0, le=65536),
        resolve=zero_is_largest(65536, 64), expect="0 or int from 64 to 65536",
    ),
    Setting(
        "limit_request_fields", _LIMITS, _S, bounded_int(ge=1, le=32768), 100,
        f"Maximum number of header fields in a request; more gets 431. {LIMIT_ZERO}",
        flags=("--limit-request-fields",), metavar="INT", accepts=bounded_int(ge=0, le=32768),
        resolve=zero_is_largest(32768, 1), expect="int from 0 to 32768",
    ),
    Setting(
        "limit_request_field_size", _LIMITS, _S, bounded_int(ge=64, le=65536), 8190,
        "Maximum size of one header field (name and value) in bytes; larger gets 431. A "
        "chunk-size line of a chunked body, with its extensions, is limited to the same size "
        f"(larger gets 400). {LIMIT_ZERO}",
        flags=("--limit-request-field_size", "--limit-request-field-size"), metavar="BYTES",
        accepts=bounded_int(ge=0, le=65536), resolve=zero_is_largest(65536, 64),
    ),
    Setting(
        "limit_request_head", _LIMITS, _S, bounded_int(ge=0, le=1 << 24), 0,
        "Maximum size of a whole request head in bytes (uWSGI's `buffer-size`): the request "
        "line and header fields over HTTP, the vars block over the uwsgi protocol (at most "
        "65535 bytes there, the format's own limit); larger gets 431. 0: what the three "
        "limits above allow together.",
        flags=("--limit-request-head",), metavar="BYTES",
    ),
    Setting(
        "limit_request_body", _LIMITS, _S, bounded_int(ge=0), 1073741824,
        "Maximum size of a request body in bytes; larger gets 413. 0 means unlimited.",
        flags=("--limit-request-body",), metavar="BYTES", key="http.max_body_size",
    ),
    Setting(
        "body_buffer_size", _LIMITS, _S, bounded_int(ge=0), 1048576,
        "Request bodies larger than this many bytes are spooled to a temporary file instead of "
        "memory.",
        flags=("--body-buffer-size",), metavar="BYTES",
    ),
    Setting(
        # 64 KiB: nginx's proxy_buffers on 64-bit systems (8 x 8k). Answers made at the same
        # moment hold it each until their client reads or SPILL_AFTER spills it: the bound of
        # a burst's memory, and past it the spool costs a copy to the page cache only
        "response_buffer_size", _LIMITS, _S, bounded_int(ge=0), 65536,
        "Bytes of a streamed answer from an application thread (`threads` > 1) held in memory "
        "for a client that reads slower than the application writes (nginx's `proxy_buffers`); "
        "past them it goes to `response_spool_size`'s file, so the thread goes on to its next "
        "request. A client that stops reading for 0.1 s has its bytes moved to that file.",
        flags=("--response-buffer-size",), metavar="BYTES",
    ),
    Setting(
        "response_spool_size", _LIMITS, _S, bounded_int(ge=0), 1073741824,
        "Bytes of such an answer spooled to an unlinked temporary file past "
        "`response_buffer_size` (nginx's `proxy_max_temp_file_size`); past both, the thread "
        "waits for the client. 0: no spool.",
        flags=("--response-spool-size",), metavar="BYTES",
    ),
    Setting(
        "request_buffering", _LIMITS, _S, bool, True,
        "A WSGI application running on `threads` (or asked `Expect: 100-continue`) is called "
        "once the whole request body has arrived, read by the event loop (in memory up to "
        "`body_buffer_size`, then in a temporary file), so that a slow client holds no thread "
        "(nginx's `proxy_request_buffering`). `--no-request-buffering` streams the body to "
        "the application as it arrives, `100 Continue` sent at its first read. With one thread "
        "and no `Expect`, the body is always buffered; ASGI applications always stream.",
        flags=("--request-buffering",), action=Action.SWITCH,
    ),
    Setting(
        "body_temp_dir", _LIMITS, _S, NAME | None, None,
        "Where request bodies larger than `body_buffer_size` are spooled (nginx's "
        "`client_body_temp_path`), each in a file deleted as it is made; unset: the system's "
        "temporary directory (`TMPDIR`).",
        flags=("--body-temp-dir",), metavar="DIR", resolve=existing_directory,
    ),
    # -- Client limits --------------------------------------------------------------------------
    Setting(
        "limit_rate", _RATES, _SRC, NAME | None, None,
        "Requests per second or minute each client may send, as nginx writes a rate "
        "(`10r/s`, `600r/m`): one count for the client whichever worker it reaches. Over it "
        "(and its `limit_burst`), `limit_status` with `Retry-After`. Unset: no limit.",
        flags=("--limit-rate",), metavar="RATE",
    ),
    Setting(
        "limit_burst", _RATES, _SRC, bounded_int(ge=0), 0,
        "Requests a client may send ahead of `limit_rate` (nginx's `burst`): they wait their "
        "turn (see `limit_delay`) rather than being refused.",
        flags=("--limit-burst",), metavar="INT",
    ),
    Setting(
        "limit_delay", _RATES, _SRC, bounded_int(ge=0) | None, None,
        "How many of the burst's requests are served at once, the rest waiting their turn "
        "(nginx's `delay`); unset: none (nginx's default), unless `limit_nodelay`.",
        flags=("--limit-delay",), metavar="INT",
    ),
    Setting(
        "limit_nodelay", _RATES, _SRC, bool, False,
        "Serve the whole burst at once (nginx's `nodelay`).",
        flags=("--limit-nodelay",), action=Action.FLAG,
    ),
    Setting(
        "limit_key", _RATES, _SRC, str, "$remote_addr",
        "What a client is, as a Unit variable template: its address (after `forwarded` and "
        "the PROXY protocol, the default), or `$header_x_api_key`, `$host`... A request whose "
        "key is empty is not counted.",
        flags=("--limit-key",), metavar="TEMPLATE",
    ),
    Setting(
        "limit_status", _RATES, _SRC, bounded_int(ge=400, le=599), 429,
        "The status of a request over the rate (nginx's `limit_req_status`; 429 Too Many "
        "Requests, RFC 6585), sent with `Retry-After`.",
        flags=("--limit-status",), metavar="STATUS",
    ),
    Setting(
        "limit_table_size", _RATES, _SRC, bounded_int(ge=4096), 1 << 20,
        "Bytes of shared memory for the clients' counts, 16 per client (a MiB holds 65,536; "
        "nginx keeps about 16,000): when it is full the most refilled count is forgotten.",
        flags=("--limit-table-size",), metavar="BYTES",
    ),
    Setting(
        "limit_concurrency", _RATES, _S, bounded_int(ge=0), 0,
        "A worker holding more open connections than this sheds the request: 503 with "
        "`Retry-After: 1`, the connection closed after it, rather than a queue that grows "
        "(Uvicorn's `--limit-concurrency`, Granian's `--backpressure`). 0: no limit.",
        flags=("--limit-concurrency",), metavar="INT",
    ),
    Setting(
        "limit_concurrency_total", _RATES, _S, bounded_int(ge=0), 0,
        "Open connections with a request the whole server holds at most, every worker's "
        "counted together: over it a request is shed as by `limit_concurrency` (503, "
        "`Retry-After: 1`, closed). 0: no limit.",
        flags=("--limit-concurrency-total",), metavar="INT",
    ),
    Setting(
        "limit_conn", _RATES, _SRC, bounded_int(ge=0), 0,
        "Open connections each client may hold, every worker's counted together (nginx's "
        "`limit_conn`): a connection past them is answered `limit_conn_status` with "
        "`Retry-After` and closed. The client is its address after `forwarded` and the PROXY "
        "protocol. 0: no limit.",
        flags=("--limit-conn",), metavar="INT",
    ),
    Setting(
        "limit_conn_status", _RATES, _SRC, bounded_int(ge=400, le=599), 503,
        "The status of a connection over `limit_conn` (nginx's `limit_conn_status`).",
        flags=("--limit-conn-status",), metavar="STATUS",
    ),
    Setting(
        "allow_from", _RATES, _SRC, list[str], [],
        "Only clients of these addresses or networks (CIDR) are served, the others answered "
        "`deny_status` (nginx's `allow ...; deny all;`); repeat for several. The client is "
        "the address after `forwarded` and the PROXY protocol.",
        flags=("--allow-from",), metavar="ADDRESS", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_string_list,
    ),
    Setting(
        "deny_from", _RATES, _SRC, list[str], [],
        "Clients of these addresses or networks are answered `deny_status` (nginx's "
        "`deny`), whatever `allow_from` says; repeat for several.",
        flags=("--deny-from",), metavar="ADDRESS", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_string_list,
    ),
    Setting(
        "deny_status", _RATES, _SRC, bounded_int(ge=400, le=599), 403,
        "The status a denied client gets (403 Forbidden, as nginx).",
        flags=("--deny-status",), metavar="STATUS",
    ),
    # -- WebSocket ------------------------------------------------------------------------------
    Setting(
        "ws", _WEBSOCKET, _S, Literal["auto", "websockets", "none"], "auto",
        "WebSocket for ASGI applications: `auto` and `websockets` serve it (the `websockets` "
        "library's protocol layer); `none` serves an upgrade request as a plain HTTP request. "
        "Uvicorn's `--ws` (`websockets-sansio` is `websockets`; `wsproto` has no "
        "counterpart); Granian's `--ws` (the flag alone, or before a word that is none of "
        "these: `--ws main:app`) is `auto`, `--no-ws` `none`.",
        flags=("--ws",), metavar="MODE", action=Action.OPTIONAL, const="auto", accepts=str,
        values=("auto", "websockets", "none", "websockets-sansio", "wsproto"),
        resolve=parse_websocket, expect='"auto", "websockets" or "none"',
    ),
    Setting(
        "ws_max_size", _WEBSOCKET, _S, bounded_int(ge=1), 16777216,
        "Largest WebSocket message in bytes (after permessage-deflate, its fragments "
        "together); a larger one closes the connection with 1009 (message too big). "
        "Uvicorn's `--ws-max-size`.",
        flags=("--ws-max-size",), metavar="BYTES",
    ),
    Setting(
        "ws_max_queue", _WEBSOCKET, _S, bounded_int(ge=1), 32,
        "WebSocket messages received and not yet taken by the application's `receive()`; "
        "while this many wait, the connection is not read (its client's writes wait in TCP) "
        "until the application takes one. Uvicorn's `--ws-max-queue`.",
        flags=("--ws-max-queue",), metavar="MESSAGES",
    ),
    Setting(
        "ws_ping_interval", _WEBSOCKET, _S, SECONDS, 20.0,
        "A ping every this many seconds on an open WebSocket, to find a client that went "
        "away without closing. 0: no pings. Uvicorn's `--ws-ping-interval`.",
        flags=("--ws-ping-interval",), metavar="SECONDS",
    ),
    Setting(
        "ws_ping_timeout", _WEBSOCKET, _S, Annotated[float, Meta(gt=0, le=86400)], 20.0,
        "A ping unanswered for this long closes the WebSocket with 1011. Uvicorn's "
        "`--ws-ping-timeout`.",
        flags=("--ws-ping-timeout",), metavar="SECONDS",
    ),
    Setting(
        "ws_close_timeout", _WEBSOCKET, _S, Annotated[float, Meta(gt=0, le=86400)], 5.0,
        "Once corral sent a close frame (the application closed, or the worker stops), how "
        "long it waits for the client's before it closes the connection.",
        flags=("--ws-close-timeout",), metavar="SECONDS",
    ),
    Setting(
        "ws_per_message_deflate", _WEBSOCKET, _S, bool, True,
        "Accept permessage-deflate (RFC 7692) when the client offers it. Uvicorn's "
        "`--ws-per-message-deflate`.",
        flags=("--ws-per-message-deflate",), metavar="BOOL",
    ),
    # -- Proxy ----------------------------------------------------------------------------------
    Setting(
        "proxy_connect_timeout", _PROXY, _S, Annotated[float, Meta(gt=0, le=86400)], 5.0,
        "Time allowed to open a connection to an upstream server (nginx's "
        "proxy_connect_timeout); past it the server counts as failed, the request tries the "
        "next one, and with none left the client gets 504 (502 when they refused).",
        flags=("--proxy-connect-timeout",), metavar="SECONDS",
    ),
    Setting(
        "proxy_send_timeout", _PROXY, _S, Annotated[float, Meta(gt=0, le=86400)], 60.0,
        "Time an upstream server may leave a request's body unread (nginx's "
        "proxy_send_timeout); past it the client gets 504.",
        flags=("--proxy-send-timeout",), metavar="SECONDS",
    ),
    Setting(
        "proxy_read_timeout", _PROXY, _S, Annotated[float, Meta(gt=0, le=86400)], 60.0,
        "Time allowed between two reads of an upstream server's answer, its first byte "
        "included (nginx's proxy_read_timeout); past it the client gets 504, or, once the "
        "answer began, its connection is aborted.",
        flags=("--proxy-read-timeout",), metavar="SECONDS",
    ),
    Setting(
        "proxy_tunnel_timeout", _PROXY, _S, SECONDS, 3600.0,
        "How long an upgraded connection through the proxy (a WebSocket, or another "
        "protocol the upstream switched to with 101) may pass no byte either way before both "
        "its connections are closed (nginx closes one after proxy_read_timeout of silence "
        "from the upstream; its guides raise that to hours for WebSocket). 0: never.",
        flags=("--proxy-tunnel-timeout",), metavar="SECONDS",
    ),
    Setting(
        "proxy_fail_timeout", _PROXY, _S, SECONDS, 10.0,
        "How long an upstream server that refused or timed out a connection, or did not "
        "answer, is left out of its group's choice (nginx's fail_timeout). 0: never left out.",
        flags=("--proxy-fail-timeout",), metavar="SECONDS",
    ),
    Setting(
        "proxy_keepalive", _PROXY, _S, bounded_int(ge=0, le=65536), 128,
        "Idle connections each worker keeps open to each upstream server for the next "
        "requests (nginx's keepalive). 0: a connection per request.",
        flags=("--proxy-keepalive",), metavar="CONNECTIONS",
    ),
    Setting(
        "proxy_keepalive_timeout", _PROXY, _S, SECONDS, 60.0,
        "How long a kept connection to an upstream server may stay idle before it is closed "
        "rather than reused (nginx's keepalive_timeout in an upstream).",
        flags=("--proxy-keepalive-timeout",), metavar="SECONDS",
    ),
    Setting(
        "proxy_max_conns", _PROXY, _S, bounded_int(ge=0, le=65536), 0,
        "Connections (in use, idle or opening) each worker may have to one upstream server "
        "(nginx's max_conns); a request that finds none free waits, in turn, for one to be "
        "given back or closed, at most `proxy_connect_timeout` (then 504). 0: no cap, but a "
        "ruby or perl application gets one from its capacity (docs/polyglot.md; a number "
        "larger than the connections it will ever need leaves it uncapped).",
        flags=("--proxy-max-conns",), metavar="CONNECTIONS",
    ),
    Setting(
        "proxy_buffer_size", _PROXY, _S, bounded_int(ge=1024, le=1 << 30), 65536,
        "Bytes of a request's body held while its upstream connection opens; past it the "
        "client is not read until the upstream takes them. Also the longest answer head an "
        "upstream may send (longer: 502).",
        flags=("--proxy-buffer-size",), metavar="BYTES",
    ),
    # -- Worker recycling -----------------------------------------------------------------------
    Setting(
        "max_requests", _RECYCLING, _A, bounded_int(ge=0), 0,
        "Recycle a worker after it has served this many requests. 0 disables it.",
        flags=("--max-requests",), metavar="INT", key="limits.requests",
    ),
    Setting(
        "max_requests_jitter", _RECYCLING, _A, bounded_int(ge=0), 0,
        "Add a random 0 to this many requests to each worker's `max_requests`, so that "
        "workers do not all recycle at once.",
        flags=("--max-requests-jitter",), metavar="INT",
    ),
    Setting(
        "max_worker_lifetime", _RECYCLING, _A, SECONDS, 0.0,
        "Recycle a worker after it has run this long. 0 disables it.",
        flags=("--max-worker-lifetime",), metavar="SECONDS",
    ),
    Setting(
        "max_worker_lifetime_jitter", _RECYCLING, _A, SECONDS, 0.0,
        "Add a random 0 to this many seconds to each worker's `max_worker_lifetime`.",
        flags=("--max-worker-lifetime-jitter",), metavar="SECONDS",
    ),
    Setting(
        "max_worker_memory", _RECYCLING, _A, bounded_int(ge=0), 0,
        "Recycle a worker whose resident memory (RSS) exceeds this many MiB, checked every "
        "second (uWSGI's reload-on-rss). 0 disables it.",
        flags=("--max-worker-memory",), metavar="MIB",
    ),
    Setting(
        "min_worker_lifetime", _RECYCLING, _A, SECONDS, 5.0,
        "A worker younger than this is never recycled, and one that dies younger than this "
        "counts as a crash at start-up: it is respawned with an exponential backoff.",
        flags=("--min-worker-lifetime",), metavar="SECONDS",
    ),
    # -- Responses ------------------------------------------------------------------------------
    Setting(
        "server_header", _RESPONSES, _S, HEADER_VALUE, "corral",
        "Value of the Server header; an empty string sends no Server header (Uvicorn's "
        "`--no-server-header`). On the command line the value goes after `=` "
        "(`--server-header=NAME`): the flag alone is Uvicorn's switch, which keeps the "
        "default, and the word after it stays the APP's (`--server-header main:app`).",
        flags=("--server-header",), metavar="STRING", action=Action.OPTIONAL, const="corral",
    ),
    Setting(
        "date_header", _RESPONSES, _S, bool, True,
        "Send the Date header (RFC 9110 6.6.1: a server with a clock sends it). "
        "`--no-date-header` leaves it out, as Uvicorn's.",
        flags=("--date-header",), action=Action.SWITCH,
    ),
    Setting(
        "headers", _RESPONSES, _S, list[str], [],
        "Header fields added to every response the server sends, `Name: value` each; repeat "
        "the flag for several (Uvicorn's `--header`). One named `Server` replaces corral's "
        "Server header. Any other name in \"The fields corral writes\" below (`Date`, "
        "`Content-Length`, `Connection`, the hop-by-hop ones) is the server's own and refused. "
        "A field the application sends too is sent twice.",
        flags=("--header",), metavar="NAME:VALUE", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_response_headers,
        expect='"Name: value" strings',
    ),
    Setting(
        "server_version", _RESPONSES, _S, bool, False,
        "NGINX Unit's `server_version`: add corral's version to the Server header "
        "(`corral/VERSION`).",
        key="http.server_version",
    ),
    Setting(
        "discard_unsafe_fields", _RESPONSES, _S, bool | None, None,
        "Which header fields reach the WSGI environ, by name. Null (the default, Gunicorn's "
        "rule) leaves out every name with `_`, so that `X_Foo` cannot pose as `X-Foo` (both "
        "would be `HTTP_X_FOO`), and keeps every other name as Gunicorn does (`X.Custom|Pipe` "
        "is `HTTP_X.CUSTOM|PIPE`). `true` is NGINX Unit's `discard_unsafe_fields` (its "
        "default): only letters, digits and `-`. A field left out is not read for `forwarded` "
        "either. `false` keeps every name the parser accepts, `_` included (Gunicorn's "
        '`header_map = "dangerous"`): only behind a proxy that drops or normalizes such names.',

        key="http.discard_unsafe_fields",
    ),
    Setting(
        "static", _RESPONSES, _S, Static | None, None,
        'NGINX Unit\'s `static` (`{"mime_types": {TYPE: EXTENSIONS}}`), and corral\'s '
        "`cache_valid` (seconds a share trusts what a path resolved to, nginx's "
        "`open_file_cache_valid`: 1; 0: every request), for the shares of routes "
        "(docs/static.md).",
        key="http.static",
    ),
    Setting(
        "compression", _RESPONSES, _S, Compression | None, None,
        "NGINX Unit's `compression`: compress answers whose client accepts it "
        '(`{"types": [PATTERNS], "compressors": [{"encoding", "level", "min_length"}]}`). '
        "`encoding`: `gzip`, `deflate`, `br` or `zstd`; the list's order is the server's "
        "preference when the client weighs two alike. `level`: gzip and deflate 1-9 "
        "(default 1), br 0-11 (default 4), zstd -7 to 19 (default 3). `min_length`: a body "
        "of known length below it is not compressed with that encoding (default 256). "
        "`types`: the media types compressed, Unit's patterns (`text/*`, `!image/*`, "
        "`~regex`); absent or empty, every type. br needs the `brotli` package and zstd "
        'the `backports.zstd` package before Python 3.14: `pip install "corral[compression]"`, '
        "which also brings `isal`, which makes gzip levels 1-3 up to six times faster. "
        "What is and is not compressed: \"Response compression\" below. On the command "
        "line: the codings in the server's order, each with its level if not the default "
        "(`--compression gzip,br` or `gzip:6,br:5`), for text, JSON, JavaScript, XML and "
        "SVG answers.",
        key="http.compression",
        flags=("--compression",),
        metavar="CODINGS",
        accepts=Compression | str | None,
        resolve=parse_compression,
        expect='"CODING[:LEVEL],..." (gzip, br, zstd) or a table as NGINX Unit writes it',
    ),
    # -- Static files ---------------------------------------------------------------------------
    Setting(
        "static_map", _STATIC, _SRC, list[str] | dict[str, str], [],
        "Serve the files of DIR under the URL path URL: `--static /static=./static` answers "
        "`/static/app.css` with `./static/app.css`; repeat for several (the longest URL that "
        "matches decides). A file no mount has is answered 404, except under `/` (the whole "
        "site), which passes it to the application; see `static_fallback`. DIR must exist; a "
        "relative one is taken from the directory corral starts in. Nothing outside DIR is "
        "served (a share `chroot`). A file instead of DIR serves that file for URL exactly. "
        "uWSGI's `static-map`, `static-map2` and `check-static`, Granian's "
        "`--static-path-route` and `--static-path-mount`. In a file: a list of \"URL=DIR\" or "
        "a table.",
        flags=("--static",), metavar="URL=DIR", action=Action.APPEND,
        accepts=list[str] | dict[str, str], resolve=from_static_routes("parse_mounts"),
        expect='"URL=DIR" (repeatable), a list of them or a table of URL to DIR',
    ),
    Setting(
        "static_fallback", _STATIC, _SRC, bool, False,
        "A file a mount does not have is looked for in every other mount whose URL covers "
        "the request, in the order given, then passed to the application (uWSGI's "
        "`static-map`, WhiteNoise); then a mount serves GET and HEAD only, the application "
        "every other method. Without it a miss is 404, as in nginx and Granian.",
        flags=("--static-fallback",), action=Action.FLAG,
    ),
    Setting(
        "static_index", _STATIC, _SRC, list[str], [],
        "The file a directory of a mount is served by (the share `index`), repeatable: tried "
        "in order. Without it `index.html`. uWSGI's `static-index`, Granian's "
        "`--static-path-dir-to-file`.",
        flags=("--static-index",), metavar="NAME", action=Action.APPEND,
        accepts=list[str] | str, resolve=from_static_routes("parse_index"),
    ),
    Setting(
        "static_expires", _STATIC, _SRC, int | str | None, None,
        "How long clients may keep the files of every mount (the share `expires`, nginx's "
        "`expires`): seconds or `30s`, `10m`, `24h`, `7d`, `max`, `epoch`, `off`; "
        "`Cache-Control: max-age` and `Expires` say it. Granian's `--static-path-expires`.",
        flags=("--static-expires",), metavar="TIME", resolve=from_static_routes("check_expires"),
    ),
    Setting(
        "static_expires_uri", _STATIC, _SRC, dict[str, int | str] | list[str], {},
        "A file whose URL path (decoded, without the query) matches REGEX (searched, "
        "Python's `re`) gets TIME (as `static_expires` takes it) instead, the first REGEX "
        "that matches winning; repeatable. uWSGI's `static-expires-uri`. In a file: a list "
        "of \"REGEX TIME\" strings or a table of REGEX to TIME.",
        flags=("--static-expires-uri",), metavar='"REGEX TIME"', action=Action.APPEND,
        resolve=from_static_routes("parse_expires_uri"),
    ),
    # -- Logging --------------------------------------------------------------------------------
    Setting(
        "access_logfile", _LOGGING, _DOC, NAME | None, None,
        'Access log file; "-" is standard output. Without it there is no access log. In the '
        "document, NGINX Unit's `access_log` may also be the path alone.",
        flags=("--access-logfile",), metavar="FILE", key="access_log.path",
    ),
    Setting(
        "access_logformat", _LOGGING, _DOC, str, DEFAULT_ACCESS_LOGFORMAT,
        "Access log line, in Gunicorn's `%(x)s` atom syntax, or NGINX Unit's `$variable` "
        "syntax when it has a `$` (`$remote_addr`, `$time_local`, `$request_line`, `$status`, "
        "`$body_bytes_sent`, `$header_NAME`, `$request_time`, `$method`, `$request_uri`, "
        "`$uri`, `$host`, and corral's `$refusal`, `%({refusal}u)s` in atoms: why the server "
        "answered itself, `rate_limit`, `limit_conn`, `overload`, `timeout`, `denied` or `-`: "
        "docs/limits.md); the default is Apache's combined format.",
        flags=("--access-logformat",), metavar="FORMAT", resolve=parse_access_format,
        key="access_log.format", view=corral_access_format,
    ),
    Setting(
        "error_logfile", _LOGGING, _S, NAME, "-",
        'Error log file; "-" is standard error. Gunicorn\'s `--log-file` (and `logfile` in '
        "old configs) is this.",
        flags=("--error-logfile", "--log-file"), metavar="FILE",
    ),
    Setting(
        "log_level", _LOGGING, _S, LogLevel, LogLevel.INFO,
        "Lowest level written to the error log (any letter case).",
        flags=("--log-level",), metavar="LEVEL", accepts=str, resolve=parse_log_level,
        expect=describe(LogLevel),
    ),
    Setting(
        "log_config", _LOGGING, _S, NAME | None, None,
        "A logging configuration file, applied with Python's `logging.config` once corral's "
        "error log is set up, in the master (the workers inherit it): JSON (a `dictConfig` "
        "dictionary: a name ending in `.json`, or text starting with `{`), YAML (`.yaml`, "
        "`.yml`; needs PyYAML) or an ini file (`fileConfig`), and read again on every reload "
        "(HUP), as Gunicorn does. Existing loggers stay enabled. "
        "corral's error log is the `corral` logger; the access log is not a logger. Uvicorn's, "
        "Gunicorn's and Granian's `--log-config` (and Gunicorn's `--log-config-json`).",
        flags=("--log-config",), metavar="FILE", resolve=existing_file,
    ),
    Setting(
        "use_colors", _LOGGING, _S, bool, False,
        "Colour the level of each error log line (ANSI escapes), as Uvicorn's `--use-colors`.",
        flags=("--use-colors",), action=Action.SWITCH,
    ),
    Setting(
        "latency_histogram", _LOGGING, _S, bool | None, None,
        "Count request durations per application for the control API's `/metrics` "
        "(`corral_request_duration_seconds`). Unset: on when the control API is on (the "
        "histogram's only reader), off otherwise. It costs two clock reads per request: about "
        "9 % of a hello-world request's instructions.",
        flags=("--latency-histogram",), action=Action.FLAG,
    ),
    Setting(
        "capture_output", _LOGGING, _SRC, bool, False,
        "Gunicorn's `--capture-output`: the workers' standard output and error (the "
        "application's prints and tracebacks) go to the error log file, when it is a file: "
        "each application's `stdout` and `stderr` (unless given) are set to it.",
        flags=("--capture-output",), action=Action.FLAG,
    ),
    # -- Process --------------------------------------------------------------------------------
    Setting(
        "pid", _PROCESS, _S, NAME | None, None,
        "Write the master's process id to this file.",
        flags=("-p", "--pid"), metavar="FILE",
    ),
    Setting(
        "daemon", _PROCESS, _S, bool, False,
        "Detach from the terminal, as Gunicorn's `-D`: the server forks twice and starts a "
        "new session (`setsid`); its standard input, output and error become /dev/null "
        "(give `--error-logfile` and `--pid`); the command exits 0 once every worker is "
        "ready, or with the server's exit code if it stops before that. Under systemd or "
        "another supervisor, do not use it.",
        flags=("-D", "--daemon"), action=Action.FLAG,
    ),
    Setting(
        "enable_stdio_inheritance", _PROCESS, _S, bool, False,
        "With `daemon`, keep the standard output and error the command was started with "
        "(a file a shell redirection opened) instead of /dev/null; standard input is "
        "/dev/null either way.",
        flags=("-R", "--enable-stdio-inheritance"), action=Action.FLAG,
    ),
    Setting(
        "loop", _PROCESS, _S, LoopKind, LoopKind.AUTO,
        'Event loop of the workers: "uvloop", "asyncio", or "auto" (uvloop when installed).',
        flags=("--loop",), metavar="LOOP",
    ),
    Setting(
        "proc_name", _PROCESS, _S, NAME | None, None,
        "Name shown in process titles (`ps`); by default the application's name.",
        flags=("-n", "--name"), metavar="NAME",
    ),
    Setting(
        "reload", _PROCESS, _S, bool, False,
        "Development: reload (as on HUP) when a Python source file under the working directory "
        "or the Python path, or the config file, changes. Needs the watchfiles package "
        "(`pip install watchfiles`, or `pip install corral[reload]`).",
        flags=("--reload",), action=Action.FLAG,
    ),
    Setting(
        "reload_dirs", _PROCESS, _S, list[str], [],
        "With `reload`: the directories to watch instead of the working directory and the "
        "Python path; repeat for several (Uvicorn's `--reload-dir`, Granian's "
        "`--reload-paths`). Each must be a directory.",
        flags=("--reload-dir",), metavar="DIR", action=Action.APPEND,
        accepts=list[str] | str, resolve=existing_directories,
    ),
    Setting(
        "reload_include", _PROCESS, _S, list[str], [],
        "With `reload`: files that reload too, besides the Python sources, by glob matched "
        "from the right as pathlib matches (`*.html`, `templates/*.txt`); repeat for "
        "several (Uvicorn's `--reload-include`).",
        flags=("--reload-include",), metavar="GLOB", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_path_list,
    ),
    Setting(
        "reload_exclude", _PROCESS, _S, list[str], [],
        "With `reload`: files that do not reload, by glob, and every file under a directory "
        "a glob matches (`node_modules`, `/srv/app/tmp`); repeat for several (Uvicorn's "
        "`--reload-exclude`, Granian's `--reload-ignore-dirs` and `--reload-ignore-paths`).",
        flags=("--reload-exclude",), metavar="GLOB", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_path_list,
    ),
    Setting(
        "watch_config", _PROCESS, _S, bool, False,
        "Reload (as on HUP) when the config file's content changes, checked every second: "
        "for a file a deploy tool pushes (written in place, renamed over, or a Kubernetes "
        "ConfigMap's link swapped). A new modification time with the same bytes is no change; "
        "a file that does not parse is one error line, the running configuration serves on, "
        "and its next change is read again. Files the config file includes or imports are not "
        "watched. Needs a config file (`-c`, `--ini`...): not with the control API's saved "
        "document or `--emperor`.",
        flags=("--watch-config",), action=Action.FLAG,
    ),
    Setting(
        "touch_reload", _PROCESS, _S, list[str], [],
        "Reload (as on HUP) when this file's modification time changes; repeat for several. "
        "Gunicorn's `--reload-extra-file` is this (and works without `--reload`).",
        flags=("--touch-reload", "--reload-extra-file"), metavar="FILE", action=Action.APPEND,
        accepts=list[str] | str, resolve=parse_path_list,
    ),
    Setting(
        "hooks", _PROCESS, _S, NAME | None, None,
        "Python file (`path/hooks.py`) or module (`pkg.hooks`) whose functions run at the "
        "server's events, with Gunicorn's names and signatures (`on_starting`, `when_ready`, "
        "`pre_fork`, `post_fork`, `post_worker_init`, `worker_int`, `worker_abort`, "
        "`pre_request`, `post_request`, `worker_exit`, `child_exit`, `nworkers_changed`, "
        "`on_reload`, `pre_exec`, `on_exit`); other names in it are not applied, and each of "
        "Gunicorn's settings among them gets a warning line (`-c gunicorn.conf.py` applies "
        "them, and makes the file the hooks file: it is run once, when the configuration is "
        "read). Imported once, in the master at start-up, like the application (after `chdir` "
        "and `pythonpath`); a hook that raises is logged with its traceback and the server "
        "goes on.",
        flags=("--hooks",), metavar="FILE",
    ),
    # -- Control API ----------------------------------------------------------------------------
    Setting(
        "control", _CONTROL, _CMD, NAME, None,
        "Serve the control API on this address: `unix:PATH` (created with mode 0600), or "
        "`HOST:PORT`, which needs `--control-token` (`PORT` and `:PORT` listen on 127.0.0.1). "
        "The API is on when this or `--state-dir` is given, off otherwise.",
        flags=("--control",), metavar="ADDRESS", default_text="unix:STATE_DIR/control.sock",
    ),
    Setting(
        "control_token", _CONTROL, _CMD, NAME, None,
        "Every control request must carry `Authorization: Bearer TOKEN`, else it gets 401. "
        "Command lines are visible to other users: prefer a unix socket, which its file mode "
        "protects.",
        flags=("--control-token",), metavar="TOKEN",
    ),
    Setting(
        "state_dir", _CONTROL, _CMD, NAME, None,
        "Directory of the control socket and of the saved configuration (`conf.json`), "
        "created with mode 0700 if missing. Started with it and without APP or `--config`, "
        "corral runs the configuration saved there (none at first: no listener, no worker) "
        "and saves every change the API makes, as `unitd` does.",
        flags=("--state-dir",), metavar="DIR",
        default_text="/var/lib/corral as root, else ~/.local/state/corral",
    ),
    Setting(
        "emperor", _CONTROL, _CMD, NAME, None,
        "Serve one application per config file (`.ini`, `.toml`, `.json`) in this directory, "
        "as uWSGI's Emperor: a file added, changed, touched or removed starts, restarts or "
        "stops its application only. Without APP and `--config`; the other flags are the "
        "server-wide settings.",
        flags=("--emperor",), metavar="DIR",
    ),
    # -- Command line ---------------------------------------------------------------------------
    Setting(
        "config", _COMMAND, _CMD, NAME, None,
        "Read settings from this TOML (.toml), JSON (.json) or uWSGI ini (.ini) file, or from "
        "Gunicorn's Python config file (.py, or `python:MODULE`: run as Gunicorn runs it, its "
        "settings mapped, its hook functions the hooks); flags given on the command line "
        "override it.",
        flags=("-c", "--config"), metavar="FILE",
    ),
    Setting(
        "ini", _COMMAND, _CMD, NAME, None,
        "Read settings from the `[uwsgi]` section (or SECTION) of a uWSGI ini file, with "
        "uWSGI's meaning for its keys (docs/settings.md, uWSGI ini files); `-c FILE.ini` "
        "does the same. Flags given on the command line override it.",
        flags=("--ini", "-ini"), metavar="FILE[:SECTION]",
    ),
    Setting(
        "check_config", _COMMAND, _CMD, bool, False,
        "Validate the configuration, print the resolved document as JSON and exit.",
        flags=("--check-config", "--print-config"), action=Action.FLAG,
    ),
    Setting(
        "version", _COMMAND, _CMD, bool, False,
        "Print the version and exit.",
        flags=("-v", "--version"), action=Action.FLAG,
    ),
    Setting(
        "help", _COMMAND, _CMD, bool, False,
        "Show this help and exit.",
        flags=("-h", "--help"), action=Action.FLAG,
    ),
)
# fmt: on

BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}
