"""Sources of the document: the command line and config files (TOML, JSON, Gunicorn's .py).

This module owns the way from what a user typed to a validated `Document`: what the command
line's parser (`corral.config.parser`) read and the flat config-file keys, both of `SETTINGS`
(a uWSGI ini file is read into the same flat keys by `corral.config.uwsgi`); the merge
(defaults, then the file, then ``GUNICORN_CMD_ARGS``, then flags: a flag replaces the file's
value for its key, lists and tables included); and the mapping of the flat settings onto the
document (one application named after its module, one listener per bind address passing to
it, each value at its setting's document path).

Gunicorn's sources (`corral.config.gunicorn` maps their names): a ``.py`` config file (or
``python:MODULE``) gives flat settings like a TOML file, ``GUNICORN_CMD_ARGS`` flags under the
command line's, and Gunicorn's flags corral does not declare are known to the parser, hidden
from ``--help``: those with a counterpart set it, the others are refused by name. What a source
gives that corral ignores is a warning line, passed to the ``warn`` callback of
`CommandLine.document` (``corral: warning: ...`` on standard error by default).

What a source gives that corral ignores (a uWSGI option it lacks) is a warning line, passed to
the ``warn`` callback of `CommandLine.document` (``corral: warning: ...`` on standard error by
default).

A config file whose top level has a document key (``listeners``, ``routes``, ``applications``,
``settings``, ``access_log``) is a whole document in NGINX Unit's shape rather than flat
settings: it is validated as such, and only server-wide flags may be given with it.

Every failure is one `ConfigError` with one line of text naming the flag or the file and key.
Nothing here prints or exits: `corral.cli` does. Workers import `corral.config` without this
module, so they do not pay for argparse.
"""

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from corral.config import gunicorn, peers
from corral.config.document import (
    Document,
    convert,
    did_you_mean,
    member,
    validate_document,
)
from corral.config.errors import ConfigError, Invalid, show
from corral.config.gate_routes import REDIRECT, SERVED, client_gate, https_redirect
from corral.config.given import Given
from corral.config.ini_spec import is_ini, split_spec
from corral.config.listener_limits import RateLimit
from corral.config.listening import DEFAULT_PORT, BindAddress, parse_bind
from corral.config.parser import (
    flag_of,
    format_help,
    hidden,
    hidden_flags,
    parser,
    unexpected,
    with_constants,
)
from corral.config.settings import BY_NAME, SETTINGS, Scope, Setting
from corral.config.unserved import unserved

Warn = Callable[[str], None]


def warn_on_stderr(line: str) -> None:
    """A warning before the error log is set up: one line on standard error."""
    print(f"corral: warning: {line}", file=sys.stderr)


__all__ = [
    "CommandLine",
    "Given",
    "build_document",
    "format_help",
    "load",
    "load_file",
    "parse_command_line",
]


@dataclass(frozen=True, slots=True)
class CommandLine:
    """The parsed command line: settings given as flags, and the command's own options."""

    given: dict[str, Given]
    config: str | None = None
    ini: str | None = None  # FILE[:SECTION], uWSGI's --ini
    check_config: bool = False
    version: bool = False
    help: bool = False
    control: str | None = None
    control_token: str | None = None
    state_dir: str | None = None
    emperor: str | None = None
    fd: int | None = None  # Uvicorn's --fd: the socket the starting process handed
    warnings: list[str] = field(default_factory=list)  # the flags', for each document()
    defaults: dict[str, Given] = field(default_factory=dict)  # Gunicorn's, from variables
    default_config: bool = False  # `config` is ./gunicorn.conf.py, found as Gunicorn finds it

    @property
    def config_path(self) -> str | None:
        """The config file read, if any (an ini file's path, without its section)."""
        spec = self.ini if self.ini is not None else self.config
        if spec is None:
            return None
        return split_spec(spec)[0] if is_ini(spec) or spec is self.ini else spec

    @property
    def config_note(self) -> str | None:
        """The line that says the config file was not named but found, as Gunicorn finds it."""
        if not self.default_config:
            return None
        return (
            f"reading {self.config}: Gunicorn's default config file, found in the working "
            "directory (-c FILE names another, as in Gunicorn)"
        )

    def with_default_config(self, cwd: str) -> "CommandLine":
        """This command line with Gunicorn's default config file, ``gunicorn.conf.py`` in
        ``cwd``, when it is there and nothing else says what to read: no ``-c`` (on the command
        line or in ``GUNICORN_CMD_ARGS``, as Gunicorn), no ``--ini``, no ``--emperor``. Without
        an APP, a state directory (``--state-dir``, ``--control``) runs its saved configuration
        instead, and the file unread is a warning."""
        if self.config is not None or self.ini is not None or self.emperor is not None:
            return self
        path = os.path.join(cwd, gunicorn.DEFAULT_FILE)
        if not os.path.isfile(path):
            return self
        if "app" not in self.given and (self.state_dir is not None or self.control is not None):
            unread = (
                f"{path} is not read: without an APP the state directory's configuration runs "
                f"(give -c {gunicorn.DEFAULT_FILE} to serve the file)"
            )
            return replace(self, warnings=[*self.warnings, unread])
        return replace(self, config=path, default_config=True)

    def emperor_directory(self) -> str | None:
        """Emperor mode's directory: ``--emperor DIR``, or an ini file's ``emperor = DIR``."""
        if self.emperor is not None:
            return self.emperor
        spec = self.ini if self.ini is not None else self.config
        if spec is not None and is_ini(spec):
            from corral.config.uwsgi import read_ini

            return read_ini(spec).emperor
        return None

    def emperor_document(self, warn: Warn = warn_on_stderr) -> Document:
        """The emperor's own document: the server-wide settings of its flags and of its ini
        file, if any (uWSGI's emperor file); the rest of that file would be the vassals'."""
        if "app" in self.given:
            raise ConfigError("--emperor: the applications are the vassal files: give no APP")
        spec = self.ini if self.ini is not None else self.config
        given = dict(_ini_config(spec, warn)) if spec is not None else {}
        for name in list(given):
            if BY_NAME[name].scope not in (Scope.SERVER, Scope.DOCUMENT):
                warn(f"{given.pop(name).where}: not for the emperor: give it in each vassal file")
        given.update(self.given)
        return build_document(given, Document())

    @property
    def names_an_application(self) -> bool:
        """Whether the command line says what to serve (an APP or a config file)."""
        return "app" in self.given or self.config is not None or self.ini is not None

    def document(self, base: Document | None = None, warn: Warn = warn_on_stderr) -> Document:
        """Read the config file if any, apply the flags over it and build the document.

        With `base` (a command line without APP or config file that runs the control API's
        saved configuration), the flags may only set server-wide settings, over base's. So
        with a config file that is a whole document. Each warning line goes to `warn`, the
        parts of the document corral accepts and does not serve among them (`unserved`).
        """
        doc = self._document(base, warn)
        for line in unserved(doc):
            warn(line)
        return doc

    def _document(self, base: Document | None, warn: Warn) -> Document:
        for line in self.warnings:
            warn(line)
        content: dict[str, Given] | Document = {}
        if self.ini is not None:
            if self.config is not None:
                raise ConfigError("--ini: give one config file (--ini or -c), not both")
            content = _ini_config(self.ini, warn)
        elif self.config is not None:
            content = read_config(self.config, warn)
        if isinstance(content, Document):
            return build_document(self.given, content, file=self.config)
        if base is None:  # the command line's own document: a file or a flag overrides them
            content = self.defaults | content
        doc = build_document(_over(content, self.given), base)
        uwsgi = [key for key, listener in doc.listeners.items() if listener.protocol == "uwsgi"]
        if doc.routes is not msgspec.UNSET and uwsgi:
            warn(
                f"{', '.join(uwsgi)}: a uwsgi socket passes every request to the application: "
                "the static files are served on the HTTP listeners only (bind)"
            )
        return doc


# The settings that say where to listen: `bind`, or Uvicorn's and Granian's host, port and uds.
ADDRESS = ("bind", "host", "port", "uds")


def _over(lower: Mapping[str, Given], higher: Mapping[str, Given]) -> dict[str, Given]:
    """`higher`'s values over `lower`'s (the flags over a file's). An address in `higher`
    replaces `lower`'s whole address, so `--port 8001` wins over a file's `bind` as `-b` does;
    `bind` beside `host`, `port` or `uds` is refused only when one source gives both."""
    if any(name in higher for name in ADDRESS):
        lower = {name: item for name, item in lower.items() if name not in ADDRESS}
    return {**lower, **higher}


def load(argv: Sequence[str]) -> Document:
    """The document described by a command line (without the program name).

    The command's own options (--check-config, --version, --help) are ignored here; see
    `parse_command_line`. Raises `ConfigError` on any bad input.
    """
    return parse_command_line(argv).document()


def parse_command_line(
    argv: Sequence[str], environ: Mapping[str, str] | None = None, cwd: str | None = None
) -> CommandLine:
    """Parse and type-check the flags, those of ``GUNICORN_CMD_ARGS`` (in `environ`, default
    `os.environ`) under them; without a config file named, Gunicorn's ``gunicorn.conf.py`` in
    `cwd` (default: the working directory) is the one. The file is read later, by
    `document()`."""
    environ = os.environ if environ is None else environ
    env_args = gunicorn.environment_args(environ)
    given, options, warnings = _parse(argv)
    if env_args:
        prefix = f"{gunicorn.ENV_ARGS}: "
        try:
            env_given, env_options, env_warnings = _parse(env_args, prefix)
        except ConfigError as exc:
            text = str(exc)
            raise ConfigError(text if text.startswith(prefix) else prefix + text) from None
        given = _over(env_given, given)
        options = env_options | options
        warnings = env_warnings + warnings
    defaults = {
        item.setting: _given(BY_NAME[item.setting], item.value, item.where)
        for item in gunicorn.environment_defaults(environ)
    }
    command = CommandLine(given, warnings=warnings, defaults=defaults, **options)
    return command.with_default_config(os.getcwd() if cwd is None else cwd)


def _parse(
    argv: Sequence[str], prefix: str = ""
) -> tuple[dict[str, Given], dict[str, Any], list[str]]:
    """One list of arguments: the settings given, the command's options, the warnings."""
    argv, bare = with_constants(argv)
    namespace, extras = parser().parse_known_args(argv)
    if extras:
        raise unexpected(extras[0], argv, bare)
    given: dict[str, Given] = {}
    options: dict[str, Any] = {}
    for setting in SETTINGS:
        if not hasattr(namespace, setting.name):
            continue
        raw = getattr(namespace, setting.name)
        where = prefix + flag_of(setting)
        if setting.scope is Scope.COMMAND:
            expects = {"": setting.expected}
            options[setting.name] = convert(raw, setting.input_type, where, expects, strict=False)
        else:
            given[setting.name] = _given(setting, raw, where)
    found = [
        (entry, getattr(namespace, hidden(entry)))
        for entry, _ in hidden_flags()
        if hasattr(namespace, hidden(entry))
    ]
    reading = peers.from_flags(found, argv)
    for item in reading.values:  # a flag of corral's own for the same setting comes first
        if item.setting not in given:
            given[item.setting] = _given(BY_NAME[item.setting], item.value, prefix + item.where)
    return given, options, [prefix + line for line in reading.warnings]


def _given(setting: Setting, raw: Any, where: str) -> Given:
    expects = {"": setting.expected}
    return Given(
        convert(raw, setting.input_type, where, expects, strict=False, nested=False), where
    )


# Top-level keys that make a config file a whole document rather than flat settings.
DOCUMENT_KEYS = ("listeners", "routes", "applications", "settings", "access_log")


def load_file(path: str, warn: Warn = warn_on_stderr) -> dict[str, Given]:
    """Read and type-check a flat config file: TOML (.toml), JSON (.json), setting keys,
    Gunicorn's .py or a uWSGI .ini."""
    content = read_config(path, warn)
    if isinstance(content, Document):
        raise ConfigError(f"{path}: a whole document where flat settings were expected")
    return content


def read_config(path: str, warn: Warn = warn_on_stderr) -> dict[str, Given] | Document:
    """Read a config file: flat settings, type-checked (TOML or JSON with the setting keys, or
    Gunicorn's Python file with its names, a uWSGI ini file's options), or a whole document
    (NGINX Unit's shape), validated."""
    if gunicorn.is_python_config(path):
        return _python_config(path, warn)
    if is_ini(path):  # FILE.ini or FILE.ini:SECTION, uWSGI's
        return _ini_config(path, warn)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".toml", ".json"):
        raise ConfigError(
            f"{path}: unsupported config file type; expected .toml, .json, Gunicorn's .py or "
            "uWSGI's .ini"
        )
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    raw = _parse_toml(path, data) if suffix == ".toml" else _parse_json(path, data)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: $: expected an object, got {show(raw)}")
    if any(key in raw for key in DOCUMENT_KEYS):
        try:
            return validate_document(raw)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    unknown = [
        f"${member(key)}: unknown key{_key_hint(key)}"
        for key in raw
        if key not in BY_NAME or not BY_NAME[key].in_file
    ]
    if unknown:  # all at once: a file from another server often has several
        raise ConfigError(f"{path}: " + "; ".join(unknown))
    given: dict[str, Given] = {}
    for key, value in raw.items():
        where = f"{path}: ${member(key)}"
        setting = BY_NAME[key]
        value = convert(value, setting.input_type, where, {"": setting.expected})
        given[key] = Given(value, where, nested=True)
    return given


def _python_config(path: str, warn: Warn) -> dict[str, Given]:
    reading = gunicorn.read_file(path)
    for line in reading.warnings:
        warn(line)
    given: dict[str, Given] = {}
    for item in reading.values:
        setting = BY_NAME[item.setting]
        expects = {"": setting.expected}
        value = convert(item.value, setting.input_type, item.where, expects, strict=False)
        given[item.setting] = Given(value, item.where, nested=True)
    return given


def build_document(
    given: Mapping[str, Given], base: Document | None = None, file: str | None = None
) -> Document:
    """Resolve given values to document form and lay them out as the document.

    The application is named after its module; every bind address becomes a listener passing
    to it; each setting lands at its document path (`Setting.key` under ``$.settings``, the
    application or ``$``). Unset keys keep their defaults. Without an APP, `base` (the control
    API's saved document, maybe empty, or the whole document `file` holds) is the document and
    the given values may only be server-wide settings, which override base's.
    """
    resolved: dict[str, Any] = {}
    for name, item in given.items():
        setting = BY_NAME[name]
        if setting.resolve is None or item.value is None:
            resolved[name] = item.value
            continue
        try:
            resolved[name] = setting.resolve(item.value)
        except Invalid as exc:
            raise ConfigError(f"{item.where}{exc.at if item.nested else ''}: {exc}") from None
    if file is not None and base is not None:
        return _over_base(resolved, given, base, file)
    if "app" not in resolved and base is not None:
        return _over_base(resolved, given, base)
    if "app" not in resolved:
        raise ConfigError(
            "missing APP: give the application (module:callable) as an argument "
            "or as `app` in the config file (or start with --state-dir DIR and configure "
            "it through the control API)"
        )
    module, callable_, call = resolved.pop("app")
    uwsgi = resolved.pop("uwsgi_socket", None) or []
    binds = _addresses(resolved, given) or resolved.pop("bind", None)
    binds = binds or ([] if uwsgi else BY_NAME["bind"].document_default())
    trusted = _source("forwarded_allow_ips", resolved)
    if not _source("proxy_headers", resolved):
        trusted = None  # not even a unix socket's peer
    capture = _source("capture_output", resolved)
    application: dict[str, Any] = {"module": module, "callable": callable_}
    if resolved.get("prefix") is not None:
        application["prefix"] = resolved.pop("prefix")
    from_files = resolved.pop("env_file", None)
    if from_files:  # under `env`
        resolved["env"] = from_files | resolved.get("env", {})
    routes = _static_routes(module, resolved, given)
    gate = client_gate(resolved, given)
    if gate:  # in front of the application (or of its static routes)
        routes = gate + (routes or [{"action": {"pass": f"applications/{module}"}}])
    listeners = {str(bind): _listener(module, bind, trusted, routes) for bind in binds}
    redirect = https_redirect(binds, resolved, given)
    if redirect and gate:
        redirect = gate + redirect
    for address in resolved.pop("insecure_bind", None) or []:
        if str(address) in listeners:
            raise ConfigError(
                f"{given['insecure_bind'].where}: {address} is also a bind address (HTTPS); "
                "one address speaks one protocol"
            )
        listener = _listener(module, address, trusted, routes)
        if redirect:
            listener["pass"] = f"routes/{REDIRECT}"
        listeners[str(address)] = listener | {"tls": False}
    for address in uwsgi:
        if str(address) in listeners:
            raise ConfigError(
                f"{given['uwsgi_socket'].where}: {address} is also a bind address (HTTP); "
                "one address speaks one protocol"
            )
        listeners[str(address)] = {"pass": f"applications/{module}", "protocol": "uwsgi"}
    data: dict[str, Any] = {
        "listeners": listeners,
        "applications": {module: application},
        "settings": {},
    }
    limit = _rate_limit(resolved, given)
    for listener in listeners.values() if limit else ():
        listener["rate_limit"] = limit
    conns, conn_status = resolved.pop("limit_conn", 0), resolved.pop("limit_conn_status", None)
    if "limit_conn_status" in given and not conns:
        raise ConfigError(f"{given['limit_conn_status'].where}: applies to limit_conn: give it")
    for listener in listeners.values() if conns else ():
        listener["limit_conn"] = {"connections": conns, "status": conn_status or 503}
    if redirect:  # named routes: the application's (maybe none) and the redirect
        for listener in listeners.values():
            if listener["pass"] == "routes":
                listener["pass"] = f"routes/{SERVED}"
        data["routes"] = ({SERVED: routes} if routes else {}) | {REDIRECT: redirect}
    elif routes:
        data["routes"] = routes
    for name, value in resolved.items():
        setting = BY_NAME[name]
        _place(application if setting.scope is Scope.APPLICATION else data, setting, value)
    if call is not None:  # Gunicorn's module:factory(ARGS)
        application["factory"] = msgspec.to_builtins(call)
    error_log = resolved.get("error_logfile", BY_NAME["error_logfile"].default)
    if capture and error_log != "-":
        application.setdefault("stdout", error_log)
        application.setdefault("stderr", error_log)
    return validate_document(data)


def _addresses(resolved: dict[str, Any], given: Mapping[str, Given]) -> list[BindAddress]:
    """Uvicorn's and Granian's `host`, `port` and `uds` (taken out of `resolved`) as the bind
    address they name, if any."""
    host, port, uds = (resolved.pop(name, None) for name in ("host", "port", "uds"))
    if host is None and port is None and uds is None:
        return []
    first = next(given[name] for name in ("host", "port", "uds") if name in given)
    if "bind" in resolved:
        raise ConfigError(
            f"{first.where}: give the address once: --bind, or --host and --port (or --uds)"
        )
    if uds is not None:
        if host is not None or port is not None:
            where = given["host" if host is not None else "port"].where
            raise ConfigError(f"{where}: --uds listens on the unix socket only: give one of them")
        text = f"unix:{uds}"
    elif host is None:
        text = str(port)  # PORT alone: on the default host, as `bind` takes it
    else:
        if ":" in host and not host.startswith("["):  # an IPv6 address, as Uvicorn takes it
            host = f"[{host}]"
        text = f"{host}:{DEFAULT_PORT if port is None else port}"
    try:
        return [parse_bind(text)]
    except Invalid as exc:
        raise ConfigError(f"{first.where}: {exc}") from None


_RATE_LIMIT = {  # the settings of a listener's `rate_limit`, by its key
    "rate": "limit_rate",
    "burst": "limit_burst",
    "delay": "limit_delay",
    "nodelay": "limit_nodelay",
    "key": "limit_key",
    "status": "limit_status",
    "table_size": "limit_table_size",
}


def _rate_limit(resolved: dict[str, Any], given: Mapping[str, Given]) -> dict[str, Any]:
    """The listeners' `rate_limit` of the `limit_*` settings (taken out of `resolved`); none
    without `limit_rate` (a setting that needs it is an error)."""
    values = {key: resolved.pop(name, None) for key, name in _RATE_LIMIT.items()}
    if values["rate"] is None:
        needless = [name for name in _RATE_LIMIT.values() if name in given]
        if needless:
            raise ConfigError(f"{given[needless[0]].where}: applies to a rate: give limit_rate")
        return {}
    limit = {key: value for key, value in values.items() if value is not None}
    try:
        RateLimit(**limit)
    except ValueError as exc:  # said of the flag or file key, not the listener it makes
        words = str(exc)
        key = words.partition(":")[0]
        where = given[_RATE_LIMIT[key]].where if _RATE_LIMIT.get(key) in given else "limit_rate"
        raise ConfigError(f"{where}{words.removeprefix(key)}") from None
    return limit


def _source(name: str, resolved: dict[str, Any]) -> Any:
    """A setting that shapes the document without being a field: taken out of `resolved`."""
    if name in resolved:
        return resolved.pop(name)
    return BY_NAME[name].document_default()


def _static_routes(
    module: str, resolved: dict[str, Any], given: Mapping[str, Given]
) -> list[dict[str, Any]]:
    """The share routes of the static-file settings (taken out of `resolved`), in front of
    the application; none without a mount (a setting that needs one is an error)."""
    values = {name: resolved.pop(name, None) for name in _STATIC_SETTINGS}
    mounts = values["static_map"]
    if not mounts:
        needless = [name for name in _STATIC_SETTINGS if values[name] and name in given]
        if needless:
            raise ConfigError(
                f"{given[needless[0]].where}: applies to the static mounts: give them "
                f"({flag_of(BY_NAME['static_map'])} URL=DIR)"
            )
        return []
    from corral.config.static_routes import StaticError, static_routes

    try:
        return static_routes(
            mounts,
            module,
            index=values["static_index"],
            expires=values["static_expires"],
            expires_uri=values["static_expires_uri"],
            fallback=bool(values["static_fallback"]),
        )
    except StaticError as exc:
        raise ConfigError(f"{given['static_map'].where}: {exc}") from None


_STATIC_SETTINGS = (
    "static_map",
    "static_fallback",
    "static_index",
    "static_expires",
    "static_expires_uri",
)


def _listener(
    module: str, bind: BindAddress, trusted: list[str] | None, routes: list[Any]
) -> dict[str, Any]:
    listener: dict[str, Any] = {"pass": "routes" if routes else f"applications/{module}"}
    forwarded = None if trusted is None else gunicorn.forwarded(bind.kind == "unix", trusted)
    if forwarded is not None:
        listener["forwarded"] = forwarded
    return listener


def _place(data: dict[str, Any], setting: Setting, value: Any) -> None:
    """Put `value` at the setting's path in `data` (the document or its application)."""
    if setting.scope is Scope.SERVER:
        data = data.setdefault("settings", {})
    *parents, last = setting.path
    for step in parents:
        data = data.setdefault(step, {})
    data[last] = msgspec.to_builtins(value)


def _over_base(
    resolved: dict[str, Any], given: Mapping[str, Given], base: Document, file: str | None = None
) -> Document:
    """The saved document (or the one `file` holds) with the server-wide settings given on the
    command line."""
    for name in resolved:
        if BY_NAME[name].scope not in (Scope.SERVER, Scope.DOCUMENT):
            if file is not None:
                raise ConfigError(
                    f"{given[name].where}: {file} is a whole document: set the applications "
                    "and listeners there (only server-wide options apply over it)"
                )
            raise ConfigError(
                f"{given[name].where}: needs an APP; without one the applications and "
                "listeners are configured through the control API"
            )
    data = msgspec.to_builtins(base)
    for name, value in resolved.items():
        _place(data, BY_NAME[name], value)
    return validate_document(data)


# ---------------------------------------------------------------------------------------------
# Files.


def _ini_config(spec: str, warn: Warn) -> dict[str, Given]:
    """A uWSGI ini file's settings (``FILE[:SECTION]``); its warning lines go to `warn`."""
    from corral.config.uwsgi import read_ini

    ini = read_ini(spec)
    for line in ini.warnings:
        warn(line)
    return ini.given


def _parse_toml(path: str, data: bytes) -> Any:
    import tomllib

    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _parse_json(path: str, data: bytes) -> Any:
    import json

    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from None


def _key_hint(key: str) -> str:
    setting = BY_NAME.get(key)
    if setting is not None:  # a command-line option
        return f" ({setting.flags[-1]} is a command-line option only)"
    for candidate in SETTINGS:  # a flag spelling, e.g. "name" for proc_name
        if candidate.in_file and f"--{key.replace('_', '-')}" in candidate.flags:
            return f" (did you mean {show(candidate.name)}?)"
    return did_you_mean(key.replace("-", "_"), (s.name for s in SETTINGS if s.in_file))
