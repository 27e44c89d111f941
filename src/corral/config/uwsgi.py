"""uWSGI ini files as a source of settings: ``corral --ini FILE[:SECTION]``, ``-c FILE.ini``.

This module owns reading one section of a uWSGI ini file with uWSGI's rules and mapping its
options onto corral's settings. It produces the same flat `Given` values a TOML file does, so
the merge (flags override the file), the document and its validation are the common ones.

uWSGI's rules kept here (its "Configuring uWSGI" and "How uWSGI parses config files" pages):

- ``[section]`` headers; ``key = value`` lines, whitespace around both insignificant; lines
  starting with ``;`` or ``#`` are comments (a ``;`` later in a line is part of the value, as
  in uWSGI); a key alone on its line is a boolean set to true. The default section is
  ``uwsgi``; ``FILE:SECTION`` picks another. ``ini = FILE[:SECTION]`` (and ``include``)
  inserts another ini file's options at that place (a relative path from the including file's
  directory); ``ini = :SECTION`` another section of the same file.
- Options are kept in file order; one given several times accumulates where it is a list
  (``socket``, ``env``, ``pythonpath``, ``touch-reload``...), else the last one wins.
- Magic variables are expanded as each line is read, from the file it is in: ``%d`` (its
  directory, with a trailing ``/``), ``%p`` (its absolute path), ``%s`` (its file name), ``%n``
  (the name without extension), ``%e`` (the extension), ``%c`` (the directory's own name),
  ``%x`` (``FILE:SECTION``), ``%0``..``%9`` (components of the directory's path), ``%o`` (the
  path as given), ``%v`` (the working directory), ``%h`` (host name), ``%k`` (CPU cores),
  ``%u``/``%U``/``%g``/``%G`` (uid, user, gid, group), ``%t``/``%T`` (start time in s/µs),
  ``%V`` (uWSGI's version: corral's here), ``%[`` (ESC) and ``%%``; the upper-case forms of
  the file's ones (``%D``, ``%N``...) are the same, as corral loads no templates.
- Then, once the options are assembled: ``$(NAME)`` is the environment variable
  (``$(NAME:-DEFAULT)`` when unset or empty, ``$(NAME-DEFAULT)`` when unset), ``@(PATH)`` the
  contents of a file, and ``%(name)`` a placeholder: the value of the first option of that
  name, which may be any key of the file (``set-placeholder = name=value`` too).

Mapping: `MAPPED` (each option and the setting it sets), `ACCEPTED` (options whose behaviour
corral always has) and `UNSUPPORTED` (options corral lacks, each with what it does instead) are
data, rendered into docs/settings.md. An unsupported option, and an unknown one that no
placeholder refers to, is one warning line each (`IniFile.warnings`, which the command line
prints as ``corral: warning: ...``); a value that does not fit is a
`ConfigError` naming the file, line and option. uWSGI's config logic (``if-env``, ``for``...)
is refused: applying what it guards unconditionally would be wrong.

``emperor = DIR`` is kept as `IniFile.emperor`: the command runs Emperor mode on it
(master/emperor.py), the file's server-wide options applying to the emperor.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral import __version__
from corral.config.document import ConfigError, convert, did_you_mean
from corral.config.given import Given
from corral.config.settings import BY_NAME, Invalid, Processes, parse_app, parse_bind, show

__all__ = [
    "ACCEPTED",
    "MAPPED",
    "UNSUPPORTED",
    "IniFile",
    "is_ini",
    "read_ini",
    "split_spec",
    "uwsgi_address",
]

DEFAULT_SECTION = "uwsgi"
_START = time.time()  # uWSGI's %t and %T: when the instance started
_TRUE = ("true", "yes", "on", "1", "y", "t")
_FALSE = ("false", "no", "off", "0", "n", "f")
_PYTHON_PLUGIN = re.compile(r"python[0-9.]*\Z")
_LOGIC = re.compile(r"(if-not|if)-[a-z-]+|for(-[a-z]+)?|endif|endfor|else")
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"


@dataclass(frozen=True)
class IniFile:
    """What one ini section says: corral's settings, and ``emperor`` (Emperor mode's DIR)."""

    given: dict[str, Given]  # by setting name, as a TOML file's
    warnings: list[str]  # one line per option corral does not act on ("FILE:LINE: key: ...")
    emperor: str | None = None  # `emperor = DIR`: Emperor mode on that directory


def is_ini(spec: str) -> bool:
    """Whether a config file argument names an ini file (``FILE.ini`` or ``FILE.ini:SECTION``)."""
    return split_spec(spec)[0].lower().endswith(".ini")


def split_spec(spec: str) -> tuple[str, str]:
    """``FILE[:SECTION]`` -> (file, section); a path that exists as given is all file."""
    if os.path.exists(spec) or ":" not in spec:
        return spec, DEFAULT_SECTION
    path, _, section = spec.rpartition(":")
    if "/" in section:
        return spec, DEFAULT_SECTION
    return path, section or DEFAULT_SECTION


def read_ini(spec: str) -> IniFile:
    """Read ``FILE[:SECTION]`` and map its options; raises `ConfigError`."""
    path, section = split_spec(spec)
    entries = _Reader().read(path, section, path)
    return _Mapper(path, entries).run()


# ---------------------------------------------------------------------------------------------
# Reading: lines, sections, includes, magic variables.


@dataclass
class _Entry:
    key: str
    value: str | None  # None: the key alone on its line (a boolean set to true)
    where: str  # "FILE:LINE: key"


class _Reader:
    def __init__(self) -> None:
        self._open: list[tuple[str, str]] = []  # (absolute path, section) being read: cycles

    def read(self, path: str, section: str, given_as: str, where: str = "") -> list[_Entry]:
        absolute = os.path.abspath(path)
        if (absolute, section) in self._open:
            raise ConfigError(f"{where or path}: includes {path}:{section} again (a cycle)")
        try:
            with open(path, encoding="utf-8-sig") as stream:
                lines = stream.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(
                f"{where}: cannot read {path}: {why}" if where else f"{path}: cannot read: {why}"
            ) from None
        self._open.append((absolute, section))
        magic = _magic_table(absolute, given_as, section)
        entries: list[_Entry] = []
        current: str | None = None
        found = False
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line or line[0] in ";#":
                continue
            if line.startswith("[") and line.endswith("]"):
                current = line[1:-1].strip()
                found = found or current == section
                continue
            if current != section:
                continue
            key, equals, value = line.partition("=")
            key = key.strip()
            at = f"{path}:{number}: {key}"
            if not key:
                raise ConfigError(f"{path}:{number}: a line without an option name")
            text = _expand_magic(value.strip(), magic) if equals else None
            if _LOGIC.fullmatch(key):
                raise ConfigError(
                    f"{at}: uWSGI's config logic (if-*, for, endif...) is not supported: write "
                    "the options it would apply"
                )
            if key in ("ini", "include") and text:
                entries.extend(self._include(text, path, section, at))
                continue
            entries.append(_Entry(key, text, at))
        self._open.pop()
        if not found:
            raise ConfigError(
                f"{where}: no [{section}] section in {path}"
                if where
                else f"{path}: no [{section}] section"
            )
        return entries

    def _include(self, spec: str, path: str, section: str, where: str) -> list[_Entry]:
        if spec.startswith(":"):  # another section of this file
            return self.read(path, spec[1:] or DEFAULT_SECTION, path, where)
        target, target_section = split_spec(spec)
        if not target.lower().endswith(".ini"):
            raise ConfigError(f"{where}: only ini files can be included, got {show(spec)}")
        if not os.path.isabs(target):
            target = os.path.join(os.path.dirname(path), target)
        return self.read(target, target_section, spec, where)


def _magic_table(path: str, given_as: str, section: str) -> dict[str, str]:
    directory = os.path.dirname(path)
    name = os.path.basename(path)
    stem, extension = os.path.splitext(name)
    table = {
        "d": directory + "/",
        "p": path,
        "s": name,
        "n": stem,
        "e": extension,
        "c": os.path.basename(directory),
        "x": f"{given_as}:{section}",
        "o": given_as,
    }
    for lower in "dpsnecxo":
        table[lower.upper()] = table[lower]
    parts = [part for part in directory.split("/") if part]
    for index in range(10):
        table[str(index)] = parts[index] if index < len(parts) else ""
    table.update(
        {
            "v": os.getcwd(),
            "V": __version__,
            "h": socket.gethostname(),
            "k": str(os.cpu_count() or 1),
            "t": str(int(_START)),
            "T": str(int(_START * 1_000_000)),
            "[": "\033",
            "%": "%",
        }
    )
    uid, gid = os.getuid(), os.getgid()
    table["u"], table["g"] = str(uid), str(gid)
    table["U"], table["G"] = _user_name(uid), _group_name(gid)
    return table


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _expand_magic(value: str, table: dict[str, str]) -> str:
    """``%X`` replaced; ``%(`` (a placeholder) and unknown letters left as they are."""
    if "%" not in value:
        return value
    out: list[str] = []
    index = 0
    while index < len(value):
        char = value[index]
        if char == "%" and index + 1 < len(value) and value[index + 1] in table:
            out.append(table[value[index + 1]])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Expanding: $(ENV), @(FILE), %(placeholder).

_ENV = re.compile(r"\$\(([^)]*)\)")
_FILE = re.compile(r"@\(([^)]*)\)")
_PLACEHOLDER = re.compile(r"%\(([^)]*)\)")


class _Expander:
    def __init__(self, entries: list[_Entry]) -> None:
        self.first: dict[str, _Entry] = {}
        for entry in entries:
            self.first.setdefault(entry.key, entry)
            if entry.key in ("set-placeholder", "set-ph") and entry.value:
                name, equals, value = entry.value.partition("=")
                if equals:
                    self.first.setdefault(name.strip(), _Entry(name.strip(), value, entry.where))
        self.done: dict[str, str | None] = {}
        self.busy: set[str] = set()
        self.referenced: set[str] = set()

    def value(self, entry: _Entry) -> str | None:
        if entry.value is None:
            return None
        return self._placeholders(_FILE.sub(self._file(entry), _ENV.sub(_env, entry.value)), entry)

    def _file(self, entry: _Entry) -> Callable[[re.Match[str]], str]:
        def read(match: re.Match[str]) -> str:
            name = match[1]
            if "://" in name:
                raise ConfigError(f"{entry.where}: @({name}): only a file path is read here")
            try:
                with open(name, encoding="utf-8") as stream:
                    return stream.read().rstrip("\r\n")
            except (OSError, UnicodeDecodeError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise ConfigError(f"{entry.where}: @({name}): cannot read: {why}") from None

        return read

    def _placeholders(self, text: str, entry: _Entry) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match[1].strip()
            if " " in name:
                raise ConfigError(
                    f"{entry.where}: %({match[1]}): placeholder arithmetic is not supported"
                )
            source = self.first.get(name)
            if source is None:
                raise ConfigError(f"{entry.where}: %({name}): no option {show(name)} to refer to")
            self.referenced.add(name)
            return self.resolved(source) or ""

        return _PLACEHOLDER.sub(replace, text)

    def resolved(self, entry: _Entry) -> str | None:
        key = entry.key
        if key in self.done and self.first.get(key) is entry:
            return self.done[key]
        if key in self.busy:
            raise ConfigError(f"{entry.where}: %({key}) refers to itself")
        self.busy.add(key)
        try:
            value = self.value(entry)
        finally:
            self.busy.discard(key)
        if self.first.get(key) is entry:
            self.done[key] = value
        return value


def _env(match: re.Match[str]) -> str:
    spec = match[1]
    if ":-" in spec:
        name, _, default = spec.partition(":-")
        return os.environ.get(name) or default
    if "-" in spec:
        name, _, default = spec.partition("-")
        return os.environ.get(name, default)
    return os.environ.get(spec, "")


# ---------------------------------------------------------------------------------------------
# Mapping: uWSGI options -> corral settings.


class _Mapper:
    """Walks the options in order, collecting settings; `run` turns them into `Given` values."""

    def __init__(self, path: str, entries: list[_Entry]) -> None:
        self.path = path
        self.entries = entries
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
        self.protocol = "uwsgi"
        self.emperor: str | None = None
        self.logto_where = self.emperor_where = ""
        self.warned: set[str] = set()
        self.warnings: list[str] = []

    def run(self) -> IniFile:
        expander = _Expander(self.entries)
        values = [(entry, expander.value(entry)) for entry in self.entries]
        for entry, value in values:
            rule = MAPPED.get(entry.key)
            if rule is not None:
                rule.apply(self, value, entry.where)
        for entry, value in values:
            self._judge(entry, value, expander.referenced)
        self._finish()
        return IniFile(self.given, self.warnings, self.emperor)

    def _judge(self, entry: _Entry, value: str | None, referenced: set[str]) -> None:
        """One warning per option corral does not act on (but the ones it always does)."""
        key = entry.key
        if key in MAPPED or key in self.warned:
            return
        if key in ACCEPTED:
            check = ACCEPTED[key].check
            if check is None or check(value):
                return
            message = ACCEPTED[key].otherwise
        elif key in ("plugin", "plugins", "need-plugin"):
            names = [n for n in re.split(r"[\s,]+", value or "") if n]
            if all(_PYTHON_PLUGIN.match(name) for name in names):
                return
            message = "corral serves Python WSGI applications itself; no plugin is loaded"
        elif key in UNSUPPORTED:
            message = "not supported: " + UNSUPPORTED[key]
        elif key in referenced or key in ("set-placeholder", "set-ph"):
            return  # a placeholder of the file's own
        else:
            known = [*MAPPED, *ACCEPTED, *UNSUPPORTED]
            message = f"unknown uWSGI option, ignored{did_you_mean(key, known)}"
        self.warned.add(key)
        self.warnings.append(f"{entry.where}: {message}")

    # -- collecting, for the rules --------------------------------------------------------------

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

    def _finish(self) -> None:
        for address, where in self.sockets:
            self.append("bind" if self.protocol == "http" else "uwsgi_socket", address, where)
        for name, (items, where) in self.lists.items():
            self.given[name] = Given(items, where)
        if self.module is not None:
            self._app(*self.module)
        elif self.callable is not None and "app" not in self.given:
            raise ConfigError(f"{self.path}: callable: needs module or wsgi-file")
        self._pool()
        if self.logto is not None:
            self.set("error_logfile", self.logto, self.logto_where)
        if self.request_log and "access_logfile" not in self.given:
            # uWSGI logs every request where it logs the rest (logto, else its own output)
            self.given["access_logfile"] = Given(self.logto or "-", self.logto_where)
        elif not self.request_log:
            self.given.pop("access_logfile", None)
        if self.emperor is not None and "app" in self.given:
            raise ConfigError(
                f"{self.emperor_where}: an emperor's file serves its vassals, not an application "
                "of its own: move the application to a vassal file"
            )

    def _app(self, spec: str, where: str) -> None:
        match = re.fullmatch(rf"({_DOTTED})(?::({_DOTTED})(\(\s*\))?)?", spec)
        if match is not None and match[3]:
            # `pkg.mod:Factory()`: called with no arguments for the application, which is
            # NGINX Unit's `factory`
            self.given["factory"] = Given(True, where)
            spec = f"{match[1]}:{match[2]}"
        elif match is not None and match[2] is None and self.callable is not None:
            spec = f"{match[1]}:{self.callable}"
        elif match is None and "(" not in spec:
            raise ConfigError(
                f'{where}: expected "module", "module:callable" or "module:factory()", '
                f"got {show(spec)}"
            )
        # a call with arguments (`pkg.mod:create_app("prod")`) is APP's own syntax: passed on
        if match is not None:
            try:
                parse_app(spec)
            except Invalid as exc:
                raise ConfigError(f"{where}: {exc}") from None
        self.given["app"] = Given(spec, where)

    def _pool(self) -> None:
        if self.idle is None and self.cheaper is None:
            if self.processes is not None:
                self.set("workers", self.processes[0], self.processes[1])
            return
        count = self.processes[0] if self.processes is not None else 1
        where = (self.idle or self.cheaper or self.processes)[1]  # type: ignore[index]
        spare = self.cheaper[0] if self.cheaper is not None else 0
        idle = self.idle[0] if self.idle is not None else Processes().idle_timeout
        if spare >= count and self.cheaper is not None:
            raise ConfigError(
                f"{self.cheaper[1]}: expected fewer than processes ({count}), got {spare}"
            )
        self.given["workers"] = Given(Processes(max=count, spare=spare, idle_timeout=idle), where)


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


@dataclass(frozen=True)
class _Rule:
    """One uWSGI option corral maps: `apply` records it; `doc` says what it becomes."""

    apply: Callable[[_Mapper, str | None, str], None]
    doc: str


def _to(name: str, read: Callable[[str | None, str], Any]) -> Callable[..., None]:
    return lambda mapper, value, where: mapper.set(name, read(value, where), where)


def _listen(name: str) -> Callable[..., None]:
    return lambda mapper, value, where: mapper.append(
        name, uwsgi_address(_text(value, where), where), where
    )


def _socket(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.sockets.append((uwsgi_address(_text(value, where), where), where))


def _protocol(mapper: _Mapper, value: str | None, where: str) -> None:
    protocol = _text(value, where).lower()
    if protocol not in ("uwsgi", "http"):
        raise ConfigError(f'{where}: expected "uwsgi" or "http", got {show(value)}')
    mapper.protocol = protocol


def _module(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.module = (_text(value, where), where)


def _callable(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.callable = _text(value, where)


def _wsgi_file(mapper: _Mapper, value: str | None, where: str) -> None:
    path = _text(value, where)
    directory, name = os.path.split(path)
    stem, extension = os.path.splitext(name)
    if extension != ".py" or not stem.isidentifier():
        raise ConfigError(
            f"{where}: {show(path)}: corral imports the application as a module: the file "
            "must be NAME.py with NAME a Python identifier (or use module = NAME)"
        )
    mapper.append("pythonpath", directory or ".", where)
    mapper.module = (stem, where)


def _chmod(mapper: _Mapper, value: str | None, where: str) -> None:
    mode = value or "666"  # uWSGI: chmod-socket alone means 666
    if not re.fullmatch(r"[0-7]{3,4}", mode):
        raise ConfigError(f"{where}: expected an octal mode such as 660, got {show(mode)}")
    mapper.set("unix_socket_mode", "0" + mode[-3:], where)


def _processes(mapper: _Mapper, value: str | None, where: str) -> None:
    count = _number(value, where)
    if count < 1:
        raise ConfigError(f"{where}: expected int >= 1, got {count}")
    mapper.processes = (count, where)


def _idle(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.idle = (_seconds(value, where), where)


def _cheaper(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.cheaper = (_number(value, where), where)


def _logto(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.logto = _text(value, where)
    mapper.logto_where = where


def _disable_logging(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.request_log = not _boolean(value, where)


def _lazy(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.set("preload", not _boolean(value, where), where)


def _autoreload(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.set("reload", _seconds(value, where) > 0, where)


def _emperor(mapper: _Mapper, value: str | None, where: str) -> None:
    mapper.emperor = _text(value, where)
    mapper.emperor_where = where


def _append(name: str) -> Callable[..., None]:
    return lambda mapper, value, where: mapper.append(name, _text(value, where), where)


_HTTP = "an HTTP listener (`bind`); corral serves HTTP there itself"
MAPPED: dict[str, _Rule] = {
    "http": _Rule(_listen("bind"), _HTTP + ", without uWSGI's separate router process"),
    "http-socket": _Rule(_listen("bind"), _HTTP),
    "http11-socket": _Rule(_listen("bind"), _HTTP + " (HTTP/1.1 keep-alive is corral's default)"),
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
        "`body_buffer_size`: larger bodies are spooled to a file. With `threads` above 1 a "
        "body streams to the application as it arrives",
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
    "static-map": "corral does not serve static files: let nginx serve them",
    "static-map2": "corral does not serve static files: let nginx serve them",
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
