"""The validated configuration document: NGINX Unit's shape for Python applications.

This module owns the shape of the one document the server runs from (`Document`) and its
whole-tree validation (`validate_document`), which every source goes through: the command line,
config files and the control API. The shape is NGINX Unit's: ``listeners``, ``routes``,
``applications`` (``processes``, ``working_directory``, ``environment``, ``path``,
``limits``...), ``settings`` (``http`` and corral's own server settings) and ``access_log``, so
a Unit configuration of Python applications loads unchanged. The `Settings` and `Application`
structs (and their nested `Http`, `Limits`, `AccessLog`) are generated from the declarations
in `corral.config.settings`; no setting is written here. Each setting is also an attribute
under its own name (`app.workers`, `settings.keep_alive`): a property when the document spells
it otherwise.

Invariants:
- a `Document` returned by `validate_document` satisfies every constraint of every field, every
  listener key is a normalized bind address (`str(parse_bind(key)) == key`), every listener
  passes to an application or a route of the same document, and the routes compile
  (`corral.routing.compile_routes`); values a user may spell several ways are kept as given
  (``routes``, ``path``, ``type``), only ``access_log`` given as a path becomes an object;
- documents are values (frozen structs): derive a changed copy with `msgspec.structs.replace`
  and validate it again; they encode to JSON with `msgspec.json.encode` and decode back with
  `msgspec.json.decode(data, type=Document)`, and `validate_document(msgspec.to_builtins(doc))`
  gives `doc` back;
- every failure is one `ConfigError` whose text is one line: ``<where>: <what was expected>``,
  the JSON path in the document's (Unit's) spelling.
"""

import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from corral import __version__
from corral.config import language_keys, php_keys
from corral.config.app_types import APP_TYPE, kind_problem
from corral.config.errors import ConfigError, Invalid, show
from corral.config.language_keys import JVM_OPTION, PATH
from corral.config.listener_limits import ConnLimit, RateLimit
from corral.config.listener_tls import Tls
from corral.config.listening import ProxyMode, address_list, parse_bind
from corral.config.settings import SETTINGS, Scope, Setting
from corral.config.suggest import did_you_mean
from corral.config.targets import _CALLABLE, _MODULE, _PREFIX, EntryPoint, Target
from corral.config.targets import entry_points as _entry_points
from corral.config.targets import target_names as _target_names
from corral.config.values import Processes, access_format_problem, describe, parse_mode
from corral.interpreter.limits import unshared_limit
from corral.jsonpath import member

if TYPE_CHECKING:
    from corral.config._structs import AccessLog, Application, Document, Http, Limits, Settings

__all__ = [
    "AccessLog",
    "Application",
    "Document",
    "EntryPoint",
    "Forwarded",
    "Http",
    "Limits",
    "Listener",
    "Settings",
    "convert",
    "did_you_mean",
    "dump_document",
    "member",
    "validate_document",
]


# ---------------------------------------------------------------------------------------------
# The structs.

_HEADER_NAME = Annotated[
    str, Meta(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", description="header field name")
]
_APP_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_STRUCT_OPTIONS: dict[str, Any] = {
    "kw_only": True,
    "forbid_unknown_fields": True,
    "frozen": True,
    "module": __name__,
}

# The nested objects generated from the settings' keys, by name ("Http", "Limits"...).
_NESTED: dict[str, type] = {}


def _reader(path: tuple[str, ...], view: Callable[[Any], Any] | None) -> property:
    """A property reading the field at `path` (through `view`): a setting under its name."""

    def read(self: Any) -> Any:
        value = self
        for step in path:
            value = getattr(value, step)
        return value if view is None else view(value)

    return property(read, doc=f"The document's `{'.'.join(path)}`, as the runtime reads it.")


def _generate(
    name: str,
    entries: list[tuple[tuple[str, ...], Setting]],
    *,
    leading: Iterable[tuple[Any, ...]] = (),
    trailing: Iterable[tuple[Any, ...]] = (),
    namespace: dict[str, Any] | None = None,
) -> type:
    """A struct with a field per setting of `entries` (its path under this struct); settings
    whose paths share a first step are gathered in a nested struct named after it."""
    fields: list[tuple[Any, ...]] = list(leading)
    groups: dict[str, list[tuple[tuple[str, ...], Setting]]] = {}
    for path, setting in entries:
        if len(path) == 1:
            default = setting.document_default()
            if isinstance(default, list) and default:  # each struct gets its own copy
                default = msgspec.field(default_factory=partial(list, default))
            fields.append((path[0], setting.type, default))
        elif path[0] in groups:
            groups[path[0]].append((path[1:], setting))
        else:
            groups[path[0]] = [(path[1:], setting)]
            fields.append((path[0],))  # the nested struct's place, filled in below
    for index, field in enumerate(fields):
        if len(field) == 1:
            step = field[0]
            nested_name = "".join(part.title() for part in step.split("_"))
            nested = _generate(nested_name, groups[step])
            _NESTED[nested_name] = nested
            fields[index] = (step, nested, msgspec.field(default_factory=nested))
    return msgspec.defstruct(
        name, [*fields, *trailing], namespace=namespace or {}, **_STRUCT_OPTIONS
    )


def _scope_struct(
    name: str, scope: Scope, doc: str, extra: dict[str, Any] | None = None, **fields: Any
) -> type:
    settings = [s for s in SETTINGS if s.scope is scope]
    namespace: dict[str, Any] = {"__doc__": doc, **(extra or {})}
    for setting in settings:
        if setting.path != (setting.name,) or setting.view is not None:
            namespace[setting.name] = _reader(setting.path, setting.view)
    return _generate(name, [(s.path, s) for s in settings], namespace=namespace, **fields)


def _server_field(self: Any) -> str:
    """The Server header's value ("" for none): `server_header`, with the version if asked."""
    header = self.server_header
    return f"{header}/{__version__}" if header and self.http.server_version else header


if not TYPE_CHECKING:  # the type checker reads _structs.pyi (config/stubs.py)
    Settings = _scope_struct(
        "Settings",
        Scope.SERVER,
        "Server-wide settings (every `Scope.SERVER` declaration), NGINX Unit's `http` included.",
        {"server": property(_server_field)},
    )
    Http = _NESTED["Http"]


def _dynamic(self: Any) -> Processes | None:
    """NGINX Unit's process pool when `processes` is an object, else None."""
    return self.processes if isinstance(self.processes, Processes) else None


if not TYPE_CHECKING:  # the type checker reads _structs.pyi (config/stubs.py)
    Application = _scope_struct(
        "Application",
        Scope.APPLICATION,
        "One application: what to import and its process settings.",
        {
            "dynamic": property(_dynamic),
            "entry_points": property(_entry_points),
            "target_names": property(_target_names),
        },
        leading=[
            ("type", APP_TYPE, "python"),
            ("module", _MODULE | None, None),  # None only with `targets`
            ("callable", _CALLABLE | None, None),  # None: try `application`, then `app`
            ("prefix", _PREFIX | UnsetType, UNSET),  # NGINX Unit's SCRIPT_NAME
            ("targets", dict[str, Target] | UnsetType, UNSET),
            # a php application's (config/php_keys.py)
            ("root", php_keys.ROOT | UnsetType, UNSET),
            ("script", PATH | UnsetType, UNSET),  # php's is under root: php_keys.check
            ("index", php_keys.SCRIPT | UnsetType, UNSET),
            # php's object, or a java application's JVM options
            ("options", php_keys.PhpOptions | list[JVM_OPTION] | UnsetType, UNSET),
            # a java or ruby application's (config/language_keys.py); script is perl's too
            ("webapp", PATH | UnsetType, UNSET),
            ("classpath", list[PATH] | UnsetType, UNSET),
            ("unit_jars", PATH | UnsetType, UNSET),
            ("hooks", PATH | UnsetType, UNSET),
        ],
    )
    Limits = _NESTED["Limits"]


class Forwarded(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """NGINX Unit's `forwarded`: which headers tell a trusted proxy's client and scheme
    (applied in the workers, see corral/filters/forwarded.py)."""

    client_ip: _HEADER_NAME | UnsetType = UNSET
    protocol: _HEADER_NAME | UnsetType = UNSET
    source: str | list[str]
    recursive: bool = False


class Listener(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """One listening address (the key in `Document.listeners`) and where its requests go."""

    pass_: str = msgspec.field(name="pass")  # "applications/NAME[/TARGET]", "routes[/NAME]"
    forwarded: Forwarded | UnsetType = UNSET
    # corral's: the PROXY protocol on this listener (corral/server/proxied.py); unset: the settings'
    proxy_protocol: ProxyMode | bool | UnsetType = UNSET
    proxy_allow_from: str | list[str] | UnsetType = UNSET
    # corral's (Unit has no uwsgi listeners): the wire protocol, HTTP/1.1 unless "uwsgi"
    protocol: Literal["http", "uwsgi"] | UnsetType = UNSET
    tls: Tls | bool | UnsetType = UNSET  # the store's (tls/store.py), certfile's, or plain
    rate_limit: RateLimit | UnsetType = UNSET  # corral's: nginx's limit_req (filters/ratelimit)
    limit_conn: ConnLimit | UnsetType = UNSET  # corral's: nginx's limit_conn (filters/connlimit)
    health: bool | UnsetType = UNSET  # corral's: its probes here or not; unset: the settings'


_ROUTES = list[Any] | dict[str, list[Any]]

if not TYPE_CHECKING:  # the type checker reads _structs.pyi (config/stubs.py)
    Document = _scope_struct(
        "Document",
        Scope.DOCUMENT,
        "Everything the server does. Build it with `validate_document` or `corral.config.load`.",
        leading=[
            ("listeners", dict[str, Listener], {}),
            ("routes", _ROUTES | UnsetType, UNSET),
            ("applications", dict[str, Application], {}),
            ("upstreams", dict[str, Any], {}),  # Unit's, checked by corral.routing.upstreams
            ("settings", Settings, msgspec.field(default_factory=Settings)),
        ],
    )
    AccessLog = _NESTED["AccessLog"]

# NGINX Unit's keys corral does not implement, by object: refused with their own words.
_UNIT_ONLY: dict[type, tuple[str, ...]] = {
    Document: ("certificates", "js_modules"),
    Listener: ("client_ip", "backlog"),
    Application: ("isolation",),
    Settings: ("js_module", "telemetry"),
    Http: ("log_route", "chunked_transform"),
    AccessLog: ("if",),
}


# Settings the document spells otherwise, by their flat names: an error says where they went.
_RENAMED: dict[type, dict[str, str]] = {
    struct: {s.name: ".".join(s.path) for s in SETTINGS if s.scope is scope and s.key}
    for struct, scope in ((Settings, Scope.SERVER), (Application, Scope.APPLICATION))
}


def _members(tp: Any) -> list[Any]:
    """The alternatives of a union type (the type itself otherwise), UNSET left out."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return [m for t in typing.get_args(tp) for m in _members(t)]
    return [] if tp is UnsetType else [tp]


def _struct_of(tp: Any) -> type | None:
    """The struct type a field holds when its value is an object, if any."""
    return next((m for m in _members(tp) if isinstance(m, type) and _is_struct(m)), None)


def _is_struct(tp: type) -> bool:
    return issubclass(tp, msgspec.Struct)


def _describe_field(tp: Any) -> str:
    return " or ".join(describe(m) for m in _members(tp))


def _expects(struct: type, prefix: str = "") -> dict[str, str]:
    """What each field (nested ones too) accepts, in words: errors say this, not msgspec."""
    words: dict[str, str] = {}
    for field in msgspec.structs.fields(struct):
        at = f"{prefix}.{field.encode_name}"
        words[at] = _describe_field(field.type)
        nested = _struct_of(field.type)
        if nested is not None:
            words.update(_expects(nested, at))
    return words


_EXPECTS: dict[type, dict[str, str]] = {
    Settings: _expects(Settings),
    Application: {
        **_expects(Application),
        ".protocol": '"wsgi" or "asgi"',
        ".module": "dotted Python module name",  # null only as a document's own encoding
    },
    Listener: {
        **_expects(Listener),
        ".pass": '"applications/NAME", "routes" or "routes/NAME"',
        ".forwarded.source": 'address, CIDR block or "unix", or a list of them',
        ".protocol": '"http" or "uwsgi"',
        ".tls.certificate": "a certificate's name or a list of names",
    },
    AccessLog: _expects(AccessLog),
    Target: _expects(Target),
    php_keys.PhpOptions: _expects(php_keys.PhpOptions),
}


# ---------------------------------------------------------------------------------------------
# Whole-tree validation.


def validate_document(data: Any) -> Document:
    """Validate a whole document given as builtins (parsed JSON) and return it.

    Listener keys are normalized (``"localhost:80"`` becomes ``"127.0.0.1:80"``, ``"*:80"``
    ``"0.0.0.0:80"``); NGINX Unit's older ``{"application": NAME}`` listener is
    ``{"pass": "applications/NAME"}``. Raises `ConfigError` naming the JSON path of the first
    problem.
    """
    top = _object(data, "$")
    _check_keys(top, Document, "$")
    applications: dict[str, Any] = {}
    for name, raw in _object(top.get("applications", {}), "$.applications").items():
        where = f"$.applications{member(name)}"
        if not re.fullmatch(_APP_NAME, name):
            raise ConfigError(f"{where}: expected a name of letters, digits, '_', '.' and '-'")
        applications[name] = _application(raw, where)
    routes, upstreams = top.get("routes", UNSET), top.get("upstreams", {})
    # the routes and upstreams checked first, whether a listener passes to them or not; without
    # either, a listener's pass to them compiles the empty table (corral.routing, imported then)
    router = _router(routes, applications, upstreams) if routes is not UNSET or upstreams else None
    listeners: dict[str, Listener] = {}
    for key, raw in _object(top.get("listeners", {}), "$.listeners").items():
        where = f"$.listeners{member(key)}"
        try:
            address = str(parse_bind(key))
        except Invalid as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if address in listeners:
            raise ConfigError(f"{where}: {address} is listed twice")
        if isinstance(raw, dict) and "application" in raw and "pass" not in raw:
            # NGINX Unit's older form: {"application": NAME} is {"pass": "applications/NAME"}
            raw = {k: v for k, v in raw.items() if k != "application"} | {
                "pass": f"applications/{raw['application']}"
            }
        listener = _struct(raw, Listener, where)
        target = listener.pass_
        if target.startswith("applications/") and "$" not in target and target.count("/") == 1:
            if target.removeprefix("applications/") not in applications:
                names = ", ".join(f'"applications/{name}"' for name in applications) or "none"
                raise ConfigError(
                    f"{where}.pass: expected an application (defined: {names}), got {show(target)}"
                )
        else:
            if router is None:
                router = _router(routes, applications, upstreams)
            _route_check(lambda r=router, t=target, w=where: r.check_pass(t, f"{w}.pass"))  # type: ignore[misc]
        if listener.forwarded is not UNSET:
            _check_forwarded(listener.forwarded, f"{where}.forwarded")
        if listener.proxy_allow_from is not UNSET:
            _check_proxy_allow(listener.proxy_allow_from, f"{where}.proxy_allow_from")
        if listener.protocol == "uwsgi":
            _check_uwsgi(listener, applications, where)
        listeners[address] = listener
    settings = _struct(_octal_modes(top.get("settings", {})), Settings, "$.settings")
    access_log = top.get("access_log", {})
    if isinstance(access_log, str):  # NGINX Unit's short form: the path alone
        access_log = {"path": access_log}
    elif not isinstance(access_log, dict):
        expected = 'expected a path or an object {"path", "format"}'
        raise ConfigError(f"$.access_log: {expected}, got {show(access_log)}")
    access = _struct(access_log, AccessLog, "$.access_log")
    problem = access_format_problem(access.format)
    if problem is not None:
        raise ConfigError(f"$.access_log.format: {problem}")
    for name, app in applications.items():
        if php_keys.is_php(app):  # (its limits are php-fpm's: php/fpm.py)
            continue
        _check_request_timeout(app, settings, f"$.applications{member(name)}")
        _check_home(app, f"$.applications{member(name)}")
        _check_stack_size(app, f"$.applications{member(name)}")
    unshared = unshared_limit(listeners, routes, applications, settings)
    if unshared is not None:  # (a worker on another Python: corral/interpreter/)
        raise ConfigError(unshared)
    return Document(
        listeners=listeners,
        routes=routes,
        applications=applications,
        upstreams=upstreams,
        settings=settings,
        access_log=access,
    )


def _application(raw: Any, where: str) -> Any:
    targets = raw.get("targets") if isinstance(raw, dict) else None
    if isinstance(targets, dict):  # each on its own: an error names the target
        for name, target in targets.items():
            _struct(target, Target, f"{where}.targets{member(name)}")
    app = _struct(raw, Application, where)
    language = language_keys.is_language(app)
    if language:  # perl, ruby, java
        problem = language_keys.check(app, raw, where)
    else:
        problem = language_keys.misplaced(app, where) or php_keys.check(app, where)
    if problem is not None:
        raise ConfigError(problem)
    if php_keys.is_php(app):
        return app
    if not language and (problem := kind_problem(app, raw, where)) is not None:
        raise ConfigError(problem)
    if app.targets is not UNSET:
        for key in ("module", "callable", "prefix"):
            if getattr(app, key) not in (None, UNSET):
                raise ConfigError(f'{where}.{key}: not allowed with "targets" (give it per target)')
        if not app.targets:
            raise ConfigError(f"{where}.targets: expected at least one target, got {{}}")
    pool = app.dynamic
    if pool is not None and pool.spare > pool.max:
        raise ConfigError(
            f"{where}.processes.spare: expected at most max ({pool.max}), got {pool.spare}"
        )
    return app


def _router(routes: Any, applications: Mapping[str, Any], upstreams: Any) -> Any:
    """The compiled routes (UNSET: none), to validate them and the passes that name them."""
    from corral.routing import compile_routes

    if routes is None:  # compile_routes' "no routes"; in a document, null is no value
        raise ConfigError(
            "$.routes: expected an array of route steps or an object of named arrays, got null"
        )
    given, targets = None if routes is UNSET else routes, route_targets(applications)
    return _route_check(lambda: compile_routes(given, applications=targets, upstreams=upstreams))


def route_targets(applications: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Each application's target names, as `corral.routing.compile_routes` takes them."""
    return {name: app.target_names for name, app in applications.items()}


def _route_check(check: Callable[[], Any]) -> Any:
    from corral.routing import RouteError

    try:
        return check()
    except RouteError as exc:
        raise ConfigError(str(exc)) from None


def _check_forwarded(forwarded: Forwarded, where: str) -> None:
    from corral.net.addresses import AddressError, address_matcher

    if forwarded.client_ip is UNSET and forwarded.protocol is UNSET:
        raise ConfigError(f'{where}: needs "client_ip" or "protocol" (a header name)')
    try:
        address_matcher(forwarded.source, f"{where}.source")
    except AddressError as exc:
        raise ConfigError(str(exc)) from None


def _check_proxy_allow(allowed: str | list[str], where: str) -> None:
    try:
        address_list(allowed)
    except Invalid as exc:
        raise ConfigError(f"{where}{exc.at}: {exc}") from None


def _check_uwsgi(listener: Listener, applications: Mapping[str, Any], where: str) -> None:
    """A uwsgi listener's requests are served by the worker that reads them: neither routed
    (a hand-off would carry HTTP bytes) nor read for `forwarded` (the vars name the client)."""
    name = listener.pass_.removeprefix("applications/")
    if not listener.pass_.startswith("applications/") or name not in applications:
        raise ConfigError(
            f'{where}.pass: a "uwsgi" listener passes to one application '
            f'("applications/NAME"), got {show(listener.pass_)}'
        )
    if listener.forwarded is not UNSET:
        raise ConfigError(
            f'{where}.forwarded: not with "protocol": "uwsgi": the uwsgi packet names the '
            "client (REMOTE_ADDR) and the scheme itself"
        )


def _check_request_timeout(app: Any, settings: Any, where: str) -> None:
    """The master's ``timeout`` also watches requests: it would cut a request first."""
    if not app.request_timeout or not settings.timeout:
        return
    if app.request_timeout + app.request_timeout_grace >= settings.timeout:
        raise ConfigError(
            f"{where}.limits.timeout: limits.timeout ({app.request_timeout:g}s) plus "
            f"request_timeout_grace ({app.request_timeout_grace:g}s) must be below "
            f"settings.timeout ({settings.timeout:g}s), which would kill the worker first; "
            "raise settings.timeout"
        )


def _check_home(app: Any, where: str) -> None:
    """`preload` imports the application in the master, which is not in the virtualenv and
    serves every application and every reload: activating it there would leak into them."""
    if app.home is not None and app.preload:
        raise ConfigError(
            f"{where}.home: home cannot be combined with preload: the master would import the "
            "application outside its virtualenv; drop preload"
        )


def _check_stack_size(app: Any, where: str) -> None:
    """The page size is the machine's: not a constraint of the type, which the docs show."""
    page = os.sysconf("SC_PAGE_SIZE")
    if app.thread_stack_size is not None and app.thread_stack_size % page:
        raise ConfigError(
            f"{where}.thread_stack_size: expected a multiple of the page size ({page}), "
            f"got {app.thread_stack_size}"
        )


# Settings that are file modes: shown as users write them ("0600"), taken as such or as ints.
_MODE_SETTINGS = ("unix_socket_mode",)


def document_builtins(doc: Document) -> dict[str, Any]:
    """The document as builtins to show (``--check-config``, the control API's GET): file
    modes in octal, as users write them."""
    data: dict[str, Any] = msgspec.to_builtins(doc)
    settings = data.get("settings", {})
    for name in _MODE_SETTINGS:
        if isinstance(settings.get(name), int):
            settings[name] = f"{settings[name]:04o}"
    return data


def _octal_modes(settings: Any) -> Any:
    """``settings`` with its octal mode strings as the ints the document holds."""
    if not isinstance(settings, dict) or not any(
        isinstance(settings.get(name), str) for name in _MODE_SETTINGS
    ):
        return settings
    settings = dict(settings)
    for name in _MODE_SETTINGS:
        if isinstance(settings.get(name), str):
            try:
                settings[name] = parse_mode(settings[name])
            except Invalid as exc:
                raise ConfigError(f"$.settings.{name}: {exc}") from None
    return settings


def dump_document(doc: Document) -> str:
    """The document as indented JSON text (what ``--check-config`` prints)."""
    return msgspec.json.format(msgspec.json.encode(document_builtins(doc)), indent=2).decode()


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected an object, got {show(value)}")
    return value


def _check_keys(value: Mapping[str, Any], struct: type, where: str) -> None:
    """Every key of `value` is a field of `struct`, and so on into nested objects; NGINX Unit's
    keys corral lacks are named as such, others get a "did you mean". Every unknown key is
    named in the one error (a document from another server often has several)."""
    problems = _unknown_keys(value, struct, where)
    if problems:
        raise ConfigError("; ".join(problems))


def _unknown_keys(value: Mapping[str, Any], struct: type, where: str) -> list[str]:
    fields = {f.encode_name: f for f in msgspec.structs.fields(struct)}
    problems = []
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            if key in _UNIT_ONLY.get(struct, ()):
                problems.append(
                    f"{where}{member(key)}: NGINX Unit's {show(key)} is not supported by corral"
                )
                continue
            if key in _RENAMED.get(struct, {}):
                hint = f" (the document calls it {show(_RENAMED[struct][key])}, as NGINX Unit)"
            else:
                hint = did_you_mean(key, fields)
            problems.append(f"{where}{member(key)}: unknown key{hint}")
            continue
        nested = _struct_of(field.type)
        if nested is not None and isinstance(item, dict):
            problems += _unknown_keys(item, nested, f"{where}{member(key)}")
    return problems


def _struct(value: Any, struct: type, where: str) -> Any:
    _check_keys(_object(value, where), struct, where)
    return convert(value, struct, where, _EXPECTS[struct])


# ---------------------------------------------------------------------------------------------
# Errors in one line.


def convert(
    value: Any,
    tp: Any,
    where: str,
    expects: Mapping[str, str],
    *,
    strict: bool = True,
    nested: bool = True,
) -> Any:
    """`msgspec.convert` whose failure is a one-line `ConfigError`.

    `where` names the value (``"--workers"``, ``"$.settings"``); `expects` says in words what is
    expected at a sub-path (``""`` for the value itself, ``".workers"`` for a field), overriding
    msgspec's wording; with `nested` false, sub-paths are not appended to `where` (flags).
    """
    try:
        return msgspec.convert(value, tp, strict=strict)
    except msgspec.ValidationError as exc:
        raise ConfigError(_message(str(exc), value, where, expects, nested)) from None


_AT = r"(?s)(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?"
_EXPECTED = r"(?s)Expected `(?P<type>[^`]*)`(?P<rest>.*?)(?:, got `[^`]*`)?"
_STEP = r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]"
_WORDS = {"str": "string", "float": "number", "bool": "true or false", "array": "list"}


def _message(text: str, value: Any, where: str, expects: Mapping[str, str], nested: bool) -> str:
    match = re.fullmatch(_AT, text)
    assert match is not None  # the pattern matches any text
    msg, path = match["msg"], match["path"] or ""
    place = where + path if nested else where
    if field := re.fullmatch(r"Object contains unknown field `(.*)`", msg):
        return f"{place}{member(field[1])}: unknown key"
    if field := re.fullmatch(r"Object missing required field `(.*)`", msg):
        return f"{place}: missing required key {show(field[1])}"
    if path in expects and msg[:1].isupper():  # not a struct's own check (in lower case)
        expected = expects[path]
    elif words := re.fullmatch(_EXPECTED, msg):
        kinds = " or ".join(_WORDS.get(kind, kind) for kind in words["type"].split(" | "))
        expected = kinds + words["rest"]
    else:
        return f"{place}: {msg[:1].lower()}{msg[1:]}"
    if "[...]" in path:  # msgspec does not say which key of a table: show the table
        path = path.partition("[...]")[0]
        place = where + path if nested else where
        expected += " in every entry"
    got = _lookup(value, path)
    return f"{place}: expected {expected}" + ("" if got is ... else f", got {show(got)}")


def _lookup(value: Any, path: str) -> Any:
    """The value at msgspec's error path inside `value`, or ``...`` when it cannot be told."""
    for step in re.finditer(_STEP, path):
        name, index = step[1], step[2]
        if name is not None and isinstance(value, dict) and name in value:
            value = value[name]
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return ...
    return value
