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

Mapping: `corral.config.uwsgi_options` holds the options as data, `MAPPED` (each option and the
setting it sets), `ACCEPTED` (options whose behaviour corral always has) and `UNSUPPORTED`
(options corral lacks, each with what it does instead), rendered into docs/settings.md; the
`Mapper` here walks a file's options through them. An unsupported option, and an unknown one
that no placeholder refers to, is one warning line each (`IniFile.warnings`, which the command
line prints as ``corral: warning: ...``); a value that does not fit is a `ConfigError` naming
the file, line and option. uWSGI's config logic (``if-env``, ``for``...) is refused: applying
what it guards unconditionally would be wrong.

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

from corral import __version__
from corral.config.document import did_you_mean
from corral.config.errors import ConfigError, Invalid, show
from corral.config.given import Given
from corral.config.ini_spec import DEFAULT_SECTION, is_ini, split_spec
from corral.config.uwsgi_options import ACCEPTED, MAPPED, UNSUPPORTED, Recorded, uwsgi_address
from corral.config.values import Processes, parse_app

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

_START = time.time()  # uWSGI's %t and %T: when the instance started
_PYTHON_PLUGIN = re.compile(r"python[0-9.]*\Z")
_LOGIC = re.compile(r"(if-not|if)-[a-z-]+|for(-[a-z]+)?|endif|endfor|else")
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"


@dataclass(frozen=True)
class IniFile:
    """What one ini section says: corral's settings, and ``emperor`` (Emperor mode's DIR)."""

    given: dict[str, Given]  # by setting name, as a TOML file's
    warnings: list[str]  # one line per option corral does not act on ("FILE:LINE: key: ...")
    emperor: str | None = None  # `emperor = DIR`: Emperor mode on that directory


def read_ini(spec: str) -> IniFile:
    """Read ``FILE[:SECTION]`` and map its options; raises `ConfigError`."""
    path, section = split_spec(spec)
    entries = _Reader().read(path, section, path)
    return Mapper(path, entries).run()


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


class Mapper(Recorded):
    """Walks the options in order, collecting settings; `run` turns them into `Given` values."""

    def __init__(self, path: str, entries: list[_Entry]) -> None:
        super().__init__()
        self.path = path
        self.entries = entries
        self.warned: set[str] = set()

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

    def _finish(self) -> None:
        for address, where in self.sockets:
            self.append("bind" if self.protocol == "http" else "uwsgi_socket", address, where)
        if self.https:
            plain, first = self.lists.pop("bind", ([], ""))
            if plain and "https_redirect" in self.given:
                raise ConfigError(
                    f"{self.given['https_redirect'].where}: beside plain http listeners: "
                    "corral's https_redirect redirects every plain listener (make them "
                    "http-to-https too, or serve them without it)"
                )
            for address in plain:
                self.append("insecure_bind", address, first)
            for address, where in self.https:
                self.append("bind", address, where)
        self._statics()
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

    def _statics(self) -> None:
        """The mounts in uWSGI's order, each miss passed on as uWSGI does; without a mount,
        the options that refine them do nothing (a warning each)."""
        for _, mount, where in sorted(self.statics, key=lambda item: item[0]):
            self.append("static_map", mount, where)
        if self.statics:
            self.given["static_fallback"] = Given(True, self.statics[0][2])
            return
        for name in ("static_index", "static_expires_uri"):
            if name in self.lists:
                where = self.lists.pop(name)[1]
                self.warnings.append(f"{where}: has no effect without static-map or check-static")

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
