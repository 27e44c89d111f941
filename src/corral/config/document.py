"""The validated configuration document: listeners, applications, settings.

This module owns the shape of the one document the server runs from (`Document`) and its
whole-tree validation (`validate_document`), which every source goes through: the command line,
config files and, later, the control API. The `Settings` and `Application` structs are generated
from the declarations in `corral.config.settings`; no setting is written here.

Invariants:
- a `Document` returned by `validate_document` satisfies every constraint of every field, every
  listener key is a normalized bind address (`str(parse_bind(key)) == key`) and every listener
  passes to an application of the same document;
- documents are values (frozen structs): derive a changed copy with `msgspec.structs.replace`
  and validate it again; they encode to JSON with `msgspec.json.encode` and decode back with
  `msgspec.json.decode(data, type=Document)`;
- every failure is one `ConfigError` whose text is one line: ``<where>: <what was expected>``.
"""

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from corral.config.settings import (
    SETTINGS,
    Invalid,
    Scope,
    describe,
    parse_bind,
    show,
)

__all__ = [
    "Application",
    "ConfigError",
    "Document",
    "Listener",
    "Settings",
    "convert",
    "did_you_mean",
    "dump_document",
    "member",
    "validate_document",
]


class ConfigError(ValueError):
    """Bad configuration input. `str()` is one line: where the problem is and what was expected.

    Examples: ``--workers: expected int >= 1 or "auto", got "two"``,
    ``config.toml: $.workers: expected int >= 1 or "auto", got "two"``,
    ``$.applications.main.workers: expected int >= 1, got "two"``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split("\n")))


# ---------------------------------------------------------------------------------------------
# The structs.

_DOTTED = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
_MODULE = Annotated[str, Meta(pattern=_DOTTED, description="dotted Python module name")]
_CALLABLE = Annotated[str, Meta(pattern=_DOTTED, description="dotted Python name")]
_APP_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_STRUCT_OPTIONS: dict[str, Any] = {
    "kw_only": True,
    "forbid_unknown_fields": True,
    "frozen": True,
    "module": __name__,
}


def _fields(scope: Scope) -> list[tuple[str, Any, Any]]:
    return [(s.name, s.type, s.document_default()) for s in SETTINGS if s.scope is scope]


Settings = msgspec.defstruct(
    "Settings",
    _fields(Scope.SERVER),
    namespace={"__doc__": "Server-wide settings (every `Scope.SERVER` declaration)."},
    **_STRUCT_OPTIONS,
)

Application = msgspec.defstruct(
    "Application",
    [
        ("module", _MODULE),
        ("callable", _CALLABLE | None, None),  # None: try `application`, then `app`
        *_fields(Scope.APPLICATION),
    ],
    namespace={"__doc__": "One application: what to import and its process settings."},
    **_STRUCT_OPTIONS,
)


class Listener(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """One listening address (the key in `Document.listeners`) and where its requests go."""

    pass_: str = msgspec.field(name="pass")  # "applications/NAME"


class Document(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Everything the server does. Build it with `validate_document` or `corral.config.load`."""

    listeners: dict[str, Listener] = {}
    applications: dict[str, Application] = {}
    settings: Settings = msgspec.field(default_factory=Settings)


# What each field accepts, in words, by struct: errors say this rather than msgspec's words.
_EXPECTS: dict[type, dict[str, str]] = {
    Settings: {f".{s.name}": describe(s.type) for s in SETTINGS if s.scope is Scope.SERVER},
    Application: {
        ".module": describe(_MODULE),
        ".callable": describe(_CALLABLE),
        **{f".{s.name}": describe(s.type) for s in SETTINGS if s.scope is Scope.APPLICATION},
    },
    Listener: {".pass": '"applications/NAME"'},
}


# ---------------------------------------------------------------------------------------------
# Whole-tree validation.


def validate_document(data: Any) -> Document:
    """Validate a whole document given as builtins (parsed JSON) and return it.

    Listener keys are normalized (``"localhost:80"`` becomes ``"127.0.0.1:80"``). Raises
    `ConfigError` naming the JSON path of the first problem.
    """
    top = _object(data, "$")
    _check_keys(top, ("listeners", "applications", "settings"), "$")
    applications: dict[str, Any] = {}
    for name, raw in _object(top.get("applications", {}), "$.applications").items():
        where = f"$.applications{member(name)}"
        if not re.fullmatch(_APP_NAME, name):
            raise ConfigError(f"{where}: expected a name of letters, digits, '_', '.' and '-'")
        applications[name] = _struct(raw, Application, where)
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
        target = listener.pass_.removeprefix("applications/")
        if target == listener.pass_ or target not in applications:
            names = ", ".join(f'"applications/{name}"' for name in applications) or "none"
            raise ConfigError(
                f"{where}.pass: expected an application (defined: {names}), "
                f"got {show(listener.pass_)}"
            )
        listeners[address] = listener
    settings = _struct(top.get("settings", {}), Settings, "$.settings")
    for name, app in applications.items():
        _check_request_timeout(app, settings, f"$.applications{member(name)}")
        _check_home(app, f"$.applications{member(name)}")
    return Document(listeners=listeners, applications=applications, settings=settings)


def _check_request_timeout(app: Any, settings: Any, where: str) -> None:
    """The master's ``timeout`` also watches requests: it would cut a request first."""
    if not app.request_timeout or not settings.timeout:
        return
    if app.request_timeout + app.request_timeout_grace >= settings.timeout:
        raise ConfigError(
            f"{where}.request_timeout: request_timeout ({app.request_timeout:g}s) plus "
            f"request_timeout_grace ({app.request_timeout_grace:g}s) must be below timeout "
            f"({settings.timeout:g}s), which would kill the worker first; raise timeout"
        )


def _check_home(app: Any, where: str) -> None:
    """`preload` imports the application in the master, which is not in the virtualenv and
    serves every application and every reload: activating it there would leak into them."""
    if app.home is not None and app.preload:
        raise ConfigError(
            f"{where}.home: home cannot be combined with preload: the master would import the "
            "application outside its virtualenv; drop preload"
        )


def dump_document(doc: Document) -> str:
    """The document as indented JSON text (what ``--check-config`` prints)."""
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode()


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected an object, got {show(value)}")
    return value


def _check_keys(value: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    allowed = list(allowed)
    for key in value:
        if key not in allowed:
            raise ConfigError(f"{where}{member(key)}: unknown key{did_you_mean(key, allowed)}")


def _struct(value: Any, struct: type, where: str) -> Any:
    _check_keys(_object(value, where), struct.__struct_encode_fields__, where)
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
    if path in expects:
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


def member(key: str) -> str:
    """A JSON-path step for `key`: ``.workers``, or ``["myproj.wsgi"]`` when not a plain name."""
    return f".{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"[{show(key)}]"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean "x"?)`` for the closest choice, or ``""``."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {show(close[0])}?)" if close else ""
