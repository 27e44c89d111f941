"""The settings' values: their types, and the parsers from what a user writes to what the
document holds.

Each value travels in two forms. The *input form* is what a flag or a config-file key accepts
(``int >= 1 or "auto"``); a parser here turns it into the *document form* (``int >= 1``), the
type the document validates again, or raises `Invalid`. The settings (`corral.config.settings`)
declare which type and which parser each one has; `corral.config.listening` holds the values of
where corral listens. A few functions are views instead: the document's value in the form the
runtime reads (`process_count`, `path_entries`, `corral_access_format`).

Rules kept here: stdlib and msgspec only (workers import this module: a parser that needs more
imports it when it runs); no I/O except `parse_home`'s look for a ``pyvenv.cfg`` and the
checks that a named file or directory exists.
"""

from __future__ import annotations

import enum
import os
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from corral.config.errors import Invalid, show

__all__ = [
    "ABSOLUTE_PATH",
    "APP_EXPECT",
    "DEFAULT_ACCESS_LOGFORMAT",
    "HEADER_VALUE",
    "HEALTH_PATH",
    "LIMIT_ZERO",
    "MASK",
    "MODE",
    "NAME",
    "SECONDS",
    "SECRETS",
    "Compression",
    "Compressor",
    "FactoryCall",
    "LogLevel",
    "LoopKind",
    "Processes",
    "Static",
    "access_format_problem",
    "bounded_int",
    "corral_access_format",
    "describe",
    "existing_directories",
    "existing_directory",
    "existing_file",
    "from_static_routes",
    "masked",
    "parse_access_format",
    "parse_app",
    "parse_compression",
    "parse_env",
    "parse_env_files",
    "parse_home",
    "parse_interface",
    "parse_log_level",
    "parse_mode",
    "parse_path_list",
    "parse_response_headers",
    "parse_root_path",
    "parse_string_list",
    "parse_websocket",
    "parse_workers",
    "path_entries",
    "process_count",
    "tls_version",
    "unmasked",
    "user_or_group",
    "worker_protocol",
    "zero_is_largest",
]

# ---------------------------------------------------------------------------------------------
# Value types (document form) and their descriptions in words.


class LogLevel(enum.StrEnum):
    """Error-log threshold."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


class LoopKind(enum.StrEnum):
    """The worker's event loop implementation."""

    AUTO = "auto"
    UVLOOP = "uvloop"
    ASYNCIO = "asyncio"


def bounded_int(ge: int | None = None, le: int | None = None) -> Any:
    return Annotated[int, Meta(ge=ge, le=le)]


SECONDS = Annotated[float, Meta(ge=0, le=86400)]
NAME = Annotated[str, Meta(min_length=1)]
HEADER_VALUE = Annotated[
    str, Meta(pattern=r"^[\t\x20-\x7e]*$", description="printable ASCII string (no CR, LF, NUL)")
]
MODE = Annotated[int, Meta(ge=0, le=0o777)]


ABSOLUTE_PATH = Annotated[str, Meta(pattern=r"^/", description="absolute path")]
HEALTH_PATH = Annotated[
    str, Meta(pattern=r"^/\S*$", description='a path beginning with "/", without spaces')
]


class Processes(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """NGINX Unit's dynamic process pool (`processes` given as an object); Unit's defaults.

    `spare` processes start with the application and are kept idle; more start on demand up to
    `max`; an idle one beyond `spare` stops after `idle_timeout` seconds.
    """

    max: Annotated[int, Meta(ge=1)] = 1
    spare: Annotated[int, Meta(ge=0)] = 0
    idle_timeout: SECONDS = 15.0


class Static(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True, omit_defaults=True
):
    """NGINX Unit's ``settings.http.static``: MIME types by file extension, for shares; and
    corral's ``cache_valid``: the seconds a share trusts what a path resolved to before
    resolving it again (nginx's ``open_file_cache_valid``; 0: every request)."""

    mime_types: dict[str, str | list[str]] = {}
    cache_valid: SECONDS = 1.0


class Compressor(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True, omit_defaults=True
):
    """One of NGINX Unit's ``settings.http.compression.compressors``: a content coding, its
    level (None: the coding's default) and the least body length it compresses."""

    encoding: str  # one of corral.compression.codecs.CODINGS, checked with the level
    level: int | None = None
    min_length: Annotated[int, Meta(ge=0)] = 256

    def __post_init__(self) -> None:
        # here, not at the top: the codings are the compression package's (no library is
        # imported to check one)
        from corral.compression.codecs import check_compressor

        problem = check_compressor(self.encoding, self.level)
        if problem:
            raise ValueError(problem)


class Compression(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """NGINX Unit's ``settings.http.compression``: the media types compressed (Unit's
    patterns; none is every type) and the compressors, in the server's order of preference."""

    types: str | list[str] = []
    compressors: Compressor | list[Compressor]

    def __post_init__(self) -> None:
        compressors = self.compressors if isinstance(self.compressors, list) else []
        if isinstance(self.compressors, list) and not compressors:
            raise ValueError('"compressors": expected at least one compressor, got []')
        seen = set()
        for compressor in compressors:
            if compressor.encoding in seen:
                raise ValueError(
                    f'"compressors": {show(compressor.encoding)} is listed twice (the second '
                    "would never be chosen)"
                )
            seen.add(compressor.encoding)
        if self.types:
            # here, not at the top: only a configuration with compression reads patterns
            from corral.routing.errors import RouteError
            from corral.routing.patterns import MIME_TYPE_PATTERNS

            try:
                MIME_TYPE_PATTERNS.rule(self.types, "types")
            except RouteError as exc:
                raise ValueError(str(exc)) from None


def process_count(processes: int | Processes) -> int:
    """How many processes run the application: the number, or a pool's spare ones (>= 1)."""
    return processes if isinstance(processes, int) else max(processes.spare, 1)


def path_entries(path: str | list[str]) -> list[str]:
    """NGINX Unit's ``path``: one directory or a list of them."""
    return [path] if isinstance(path, str) else path


def describe(tp: Any) -> str:
    """Say in words what values `tp` accepts, for errors, ``--help`` and the docs."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        text = describe(base)
        for meta in extras:
            if isinstance(meta, Meta):
                if meta.description:
                    return meta.description
                text = _with_bounds(text, meta)
        return text
    if origin is typing.Union or origin is types.UnionType:
        return " or ".join(describe(arg) for arg in typing.get_args(tp))
    if origin is Literal:
        return " or ".join(show(arg) for arg in typing.get_args(tp))
    if origin is list:
        return f"list of {describe(typing.get_args(tp)[0])}s"
    if origin is dict:
        return "table"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(show(member.value) for member in tp)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return "object {" + ", ".join(tp.__struct_encode_fields__) + "}"
    return _TYPE_WORDS.get(tp, getattr(tp, "__name__", str(tp)))


_TYPE_WORDS: dict[Any, str] = {
    int: "int",
    float: "number",
    str: "string",
    bool: "true or false",
    type(None): "null",
    Any: "value",
}


def _with_bounds(text: str, meta: Meta) -> str:
    if meta.min_length == 1 and text == "string":
        text = "non-empty string"
    if meta.ge is not None and meta.le is not None:
        return f"{text} from {meta.ge} to {meta.le}"
    bounds = ((meta.ge, ">="), (meta.gt, ">"), (meta.le, "<="), (meta.lt, "<"))
    limits = " and ".join(f"{sign} {bound}" for bound, sign in bounds if bound is not None)
    return f"{text} {limits}" if limits else text


# ---------------------------------------------------------------------------------------------
# Parsers: input form -> document form. Each raises `Invalid`.


_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_APP = rf"({_DOTTED})(?::({_DOTTED})(\(.*\))?)?"
APP_EXPECT = '"module:callable", "module" or "module:factory(ARGS)" (dotted Python names)'


class FactoryCall(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """The literal arguments of Gunicorn's ``module:factory(ARGS)``: the factory is called with
    them (``factory(*args, **kwargs)``) to get the WSGI application."""

    args: list[Any] = []
    kwargs: dict[str, Any] = {}


def parse_app(value: str) -> tuple[str, str | None, FactoryCall | None]:
    """Split ``module:callable`` (or ``module``) into ``(module, callable or None, None)``;
    Gunicorn's ``module:factory(ARGS)`` gives the call's literal arguments as third item."""
    match = re.fullmatch(_APP, value.strip(), re.DOTALL) if isinstance(value, str) else None
    if match is None:
        raise Invalid(APP_EXPECT, value)
    call = None if match[3] is None else _factory_call(match[2], match[3])
    return match[1], match[2], call


def _factory_call(name: str, text: str) -> FactoryCall:
    """Gunicorn's rule: the arguments are Python literals (``ast.literal_eval`` of each);
    here they must also be JSON values, since the document holds them."""
    import ast

    try:
        call = ast.parse(f"f{text}", mode="eval").body
    except SyntaxError:
        raise Invalid(message=f"{name}{text}: not a call with literal arguments") from None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise Invalid(message=f"{name}{text}: not a call with literal arguments")
    try:
        args = [ast.literal_eval(arg) for arg in call.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
    except ValueError:
        raise Invalid(
            message=f"{name}{text}: the arguments must be literals (strings, numbers, True, "
            "False, None, lists, dicts)"
        ) from None
    if len(kwargs) != len(call.keywords):  # a **mapping
        raise Invalid(message=f"{name}{text}: the arguments must be literals, not **mapping")
    try:
        return FactoryCall(args=_json_like(args), kwargs=_json_like(kwargs))
    except TypeError as exc:
        raise Invalid(
            message=f"{name}{text}: {exc} cannot be an argument: the document keeps them as "
            "JSON (strings, numbers, True, False, None, lists, dicts with string keys)"
        ) from None


def _json_like(value: Any) -> Any:
    """`value` with tuples as lists; TypeError naming the first value JSON cannot hold."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_json_like(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _json_like(item) for key, item in value.items()}
    raise TypeError(type(value).__name__)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def parse_workers(value: int | str | Processes) -> int | Processes:
    if isinstance(value, Processes):  # a dynamic pool, from a source that makes one (uwsgi.py)
        return value
    return _cpu_count() if value == "auto" else int(value)


# the worker classes Gunicorn's `worker_class` may name, by what they serve
_WSGI_WORKERS = frozenset(
    {
        "sync",
        "gthread",
        "gunicorn.workers.sync.SyncWorker",
        "gunicorn.workers.gthread.ThreadWorker",
        "egg:gunicorn#sync",
        "egg:gunicorn#gthread",
        "wsgi",  # the document's own spelling (NGINX Unit's protocol)
    }
)
_ASGI_WORKERS = frozenset(
    {
        "asgi",
        "gunicorn.workers.gasgi.ASGIWorker",
        "egg:gunicorn#asgi",
        "uvicorn.workers.UvicornWorker",
        "uvicorn.workers.UvicornH11Worker",
        "uvicorn_worker.UvicornWorker",
        "uvicorn_worker.UvicornH11Worker",
    }
)
_GREEN_WORKERS = re.compile(r"(egg:gunicorn#)?(gevent|eventlet|tornado|gevent_wsgi|gevent_pywsgi)")


def worker_protocol(value: str) -> str:
    """The document's `protocol` for a Gunicorn worker class (``wsgi`` or ``asgi``); `Invalid`
    for the others."""
    text = value.strip()
    if text in _WSGI_WORKERS:
        return "wsgi"
    if text in _ASGI_WORKERS or "uvicorn" in text.lower():
        return "asgi"
    if _GREEN_WORKERS.fullmatch(text) or text.startswith("gunicorn.workers.g"):
        raise Invalid(
            message=f"{show(text)}: corral has no gevent, eventlet or tornado workers; its "
            "worker runs an event loop for the connections and the application on --threads N "
            'threads: use "sync" or "gthread" with --threads'
        )
    raise Invalid(message=f'unknown worker class {show(text)}: corral runs "sync" or "gthread"')


# settings whose values are secrets: shown as MASK (--check-config, GET /config); a document
# sent back with MASK keeps the value it had (control/api.py)
SECRETS = ("keyfile_password",)
MASK = "********"


def masked(data: dict[str, Any]) -> dict[str, Any]:
    """A document's builtins (``document_builtins``) with each secret set shown as MASK."""
    settings = data.get("settings") or {}
    for name in SECRETS:
        if settings.get(name) is not None:
            settings[name] = MASK
    return data


def unmasked(data: Any, before: dict[str, Any]) -> Any:
    """A document's builtins as sent back: a secret still MASK keeps ``before``'s value."""
    settings = data.get("settings") if isinstance(data, dict) else None
    if isinstance(settings, dict):
        for name in SECRETS:
            if settings.get(name) == MASK:
                settings[name] = (before.get("settings") or {}).get(name)
    return data


def parse_string_list(value: list[str] | str) -> list[str]:
    """A list in a file, or one string (on the command line, each flag's)."""
    return [value] if isinstance(value, str) else list(value)


def parse_mode(value: int | str) -> int:
    """A file mode as users write it: ``"0660"``, ``"660"``, ``"0o660"``, or an int."""
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"(?:0o?)?([0-7]{1,3})", value.strip())
    if match is None:
        raise Invalid('an octal mode such as "0660"', value)
    return int(match[1], 8)


def parse_path_list(value: list[str] | str) -> list[str]:
    items = value.split(",") if isinstance(value, str) else value
    return [item.strip() for item in items if item.strip()]


def parse_home(value: str) -> str:
    """`home` made absolute against the directory the configuration is read in (where corral
    started; a reload reads it there again), and checked to be a virtualenv. The worker checks
    the rest (the Python version, site-packages) as it activates it: `corral.apps.venv`."""
    if "\0" in value:
        raise Invalid("a path without NUL", value)
    path = os.path.abspath(value)
    if not os.path.isfile(os.path.join(path, "pyvenv.cfg")):
        why = "no such directory" if not os.path.isdir(path) else "it has no pyvenv.cfg"
        raise Invalid(message=f"{show(value)} is not a virtualenv ({why})")
    return path


def parse_env(value: dict[str, Any] | list[Any]) -> dict[str, str]:
    if isinstance(value, dict):
        pairs = [(key, val, f"[{show(key)}]") for key, val in value.items()]
    else:
        pairs = []
        for index, item in enumerate(value):
            if not isinstance(item, str) or "=" not in item:
                raise Invalid("KEY=VALUE", item, at=f"[{index}]")
            key, _, val = item.partition("=")
            pairs.append((key, val, f"[{index}]"))
    env: dict[str, str] = {}
    for key, val, at in pairs:
        if not key or "=" in key or "\0" in key:
            raise Invalid("a variable name without '=' or NUL", key, at=at)
        if not isinstance(val, str) or "\0" in val:
            raise Invalid("a string without NUL", val, at=at)
        env[key] = val
    return env


# Apache's combined format, in Gunicorn's atoms: the default of access_logformat
DEFAULT_ACCESS_LOGFORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'


def access_format_problem(value: str) -> str | None:
    """Why ``value`` (corral's or NGINX Unit's syntax) is no access log format, None when it
    compiles. The default is taken as it is (it compiles: a test says so), without the access
    log's module, which a server without an access log never imports."""
    if value == DEFAULT_ACCESS_LOGFORMAT:
        return None
    from corral.observe.accesslog import FormatError, compile_format, from_unit_format

    try:
        compile_format(from_unit_format(value))
    except FormatError as exc:
        return str(exc)
    return None


def parse_access_format(value: str) -> str:
    problem = access_format_problem(value)
    if problem is not None:
        raise Invalid(message=f"{show(value)}: {problem}")
    return value


def corral_access_format(value: str) -> str:
    """The access log format in corral's `%(x)s` syntax (NGINX Unit's translated)."""
    from corral.observe.accesslog import from_unit_format

    return from_unit_format(value)


def tls_version(value: str) -> str:
    """`tls_min_version`: "1.2" or "1.3", also as OpenSSL and the peers write them
    ("TLSv1.2", Granian's "tls1.3")."""
    text = str(value).strip().lower().replace("_", ".")
    for prefix in ("tlsv", "tls"):
        text = text.removeprefix(prefix)
    if text not in ("1.2", "1.3"):
        raise Invalid(message=f'expected "1.2" or "1.3", got {value!r}')
    return text


def user_or_group(value: str | int | None) -> str | None:
    """A user or group: a name, or a numeric id (Gunicorn's config files give ints)."""
    return str(value) if isinstance(value, int) else value


LIMIT_ZERO = "0 (Gunicorn's unlimited) means the largest value."


def zero_is_largest(largest: int, least: int) -> Callable[[int], int]:
    def resolve(value: int) -> int:
        if value == 0:
            return largest
        if value < least:
            raise Invalid(f"0 or int from {least} to {largest}", value)
        return value

    return resolve


# the other servers' names for corral's levels: Uvicorn's "trace", Granian's "warn", "notset"
_LEVEL_NAMES = {"trace": LogLevel.DEBUG, "notset": LogLevel.DEBUG, "warn": LogLevel.WARNING}


def parse_log_level(value: str) -> LogLevel:
    try:
        return _LEVEL_NAMES.get(value.lower()) or LogLevel(value.lower())
    except ValueError:
        raise Invalid(describe(LogLevel), value) from None


def parse_interface(value: str) -> str:
    """`interface`, with Uvicorn's and Granian's names: ``asgi3``, ``asgi2`` are ``asgi``."""
    text = value.strip().lower()
    if text in ("auto", "wsgi", "asgi", "asgi3", "asgi2"):
        return "asgi" if text.startswith("asgi") else text
    if text == "asginl":
        raise Invalid(
            message='"asginl" is Granian\'s ASGI without lifespan: --interface asgi --lifespan off'
        )
    if text == "rsgi":
        raise Invalid(
            message='"rsgi": Granian\'s own interface is not served by corral: '
            "serve the application's ASGI or WSGI callable (--interface asgi or wsgi)"
        )
    raise Invalid('"auto", "wsgi" or "asgi"', value)


def parse_websocket(value: str) -> str:
    """`ws`, with Uvicorn's ``websockets-sansio`` (the protocol layer corral uses)."""
    if value in ("auto", "websockets", "none"):
        return value
    if value == "websockets-sansio":
        return "websockets"
    if value == "wsproto":
        raise Invalid(
            message='"wsproto": corral serves WebSocket with the websockets '
            'library\'s protocol layer: --ws websockets (or "auto")'
        )
    raise Invalid('"auto", "websockets" or "none"', value)


def parse_root_path(value: str) -> str:
    """`root_path`: "" or a path beginning with "/"; one trailing "/" dropped."""
    if value and (not value.startswith("/") or "\0" in value):
        raise Invalid('"" or a path beginning with "/"', value)
    return value.removesuffix("/")


_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")


def parse_response_headers(value: list[str] | str) -> list[str]:
    """`headers`: each "Name: value" (Uvicorn's ``--header NAME:VALUE``), normalized. A name
    the server owns (`corral.http.fields.OWNED`) is refused, its value being the server's to
    decide per answer, but ``Server``, which replaces corral's (as in Uvicorn)."""
    # here, not at the top: only a configuration with `headers` needs the http layer
    from corral.http import fields as owned

    why_not = {
        owned.DATE: "the Date field is the server's (--no-date-header leaves it out)",
        owned.CONTENT_LENGTH: "the server frames each response",
        owned.CONNECTION: "the server says whether the connection stays open",
        owned.HOP: "a hop-by-hop field: the server's, for each connection and response",
    }
    fields = []
    for index, item in enumerate([value] if isinstance(value, str) else value):
        at = f"[{index}]" if isinstance(value, list) else ""
        name, colon, text = item.partition(":")
        name, text = name.strip(), text.strip()
        if not colon or not owned.TOKEN.match(name):
            raise Invalid('"Name: value" with a field name (a token)', item, at=at)
        if not _FIELD_VALUE.fullmatch(text):
            raise Invalid("a value of printable ASCII characters", item, at=at)
        why = why_not.get(owned.field_kind(name))
        if why is not None:
            raise Invalid(message=f"{show(name)}: {why}", at=at)
        fields.append(f"{name}: {text}")
    return fields


def existing_file(value: str | None) -> str | None:
    """A file that must be there, its path made absolute against the directory the
    configuration is read in (a `chdir` does not move it)."""
    if value is None:
        return None
    if not os.path.isfile(value):
        raise Invalid(message=f"{show(value)}: no such file")
    return os.path.abspath(value)


def existing_directories(value: list[str] | str) -> list[str]:
    """Directories that must be there (a watch of one that is not would see nothing), made
    absolute as `existing_file` makes a file."""
    found = parse_path_list(value)
    for index, path in enumerate(found):
        if not os.path.isdir(path):
            at = f"[{index}]" if isinstance(value, list) else ""
            raise Invalid(message=f"{show(path)}: no such directory", at=at)
    return [os.path.abspath(path) for path in found]


def existing_directory(value: str | None) -> str | None:
    """A directory that must be there, made absolute as `existing_file` makes a file."""
    if value is None:
        return None
    if not os.path.isdir(value):
        raise Invalid(message=f"{show(value)}: no such directory")
    return os.path.abspath(value)


def parse_compression(value: Any) -> Any:
    """``--compression gzip,br``: `corral.compression.flag` (imported when it is given)."""
    if not isinstance(value, str):  # a document's table
        return value
    from corral.compression.flag import parse_codings

    try:
        return msgspec.convert(parse_codings(value), Compression)
    except (ValueError, msgspec.ValidationError) as exc:
        raise Invalid(message=str(exc)) from None


def from_static_routes(parse: str) -> Callable[[Any], Any]:
    """A reader of `corral.config.static_routes` (imported when a value is resolved), its
    error made `Invalid`."""

    def resolve(value: Any) -> Any:
        from corral.config import static_routes

        try:
            return getattr(static_routes, parse)(value)
        except static_routes.StaticError as exc:
            raise Invalid(message=str(exc), at=exc.at) from None

    return resolve


def parse_env_files(value: list[str] | str) -> dict[str, str]:
    from corral.config.envfile import read_env_files

    try:
        return read_env_files(parse_path_list(value))
    except ValueError as exc:
        raise Invalid(message=str(exc)) from None
