"""Other servers' flags on corral's command line: what one of their names is, and the reader
that maps the flags a command line gave through the tables.

Owns the shape of a table entry (`Name`: one setting or flag of Gunicorn, Uvicorn or Granian,
and what corral does with it) and the reading of the flags corral does not declare itself
(`hidden_flags`, `from_flags`). The tables are the servers' own modules:
`corral.config.gunicorn_names` (whose ``gunicorn.conf.py`` `corral.config.gunicorn` reads),
`corral.config.uvicorn` and `corral.config.granian`.
A flag corral declares (`corral.config.settings`) is corral's, with the meaning the tables
say it has there (a unit test holds them to it); every other flag of a table is known to the
parser, hidden from ``--help``, and handled here:

- one that sets a setting gives a `Mapped` value (``Name.convert`` first, when the server
  writes the value otherwise), type-checked by the caller like a flag of corral's own;
- a value in ``Name.same`` asks nothing corral does not do anyway: taken without a word;
- one without a counterpart stops the command with one `ConfigError` line saying what corral
  does instead, except ``Name.accept`` ones (nothing is lost without them: one warning line);
- one whose meaning needs other flags' values (Granian's ``--static-path-mount``, paired with
  its ``--static-path-route``) has a ``Name.gather`` that reads them all (its
  ``Name.companions``) into values for several settings; a companion is then not read alone.

A flag two tables share has one meaning (the first table's entry is the one registered).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from corral.config.errors import ConfigError, Invalid

__all__ = [
    "HTTP2",
    "Mapped",
    "Name",
    "Reading",
    "Unsupported",
    "entry",
    "from_flags",
    "hidden_flags",
    "same",
]

# What corral does instead, in the words every table uses.
HTTP2 = "HTTP/2 is not supported yet (corral speaks HTTP/1.1); terminate HTTP/2 in a proxy"


class Unsupported(Exception):
    """Raised by a `Name.convert` for a value corral has no counterpart for; its text says what
    corral does instead (a warning in a file, an error as a flag)."""


@dataclass(frozen=True, slots=True)
class Name:
    """One of another server's settings or flags: Gunicorn's by config-file name, Uvicorn's and
    Granian's by flag."""

    name: str
    flags: tuple[str, ...] = ()  # the server's command-line flags for it
    setting: str = ""  # corral's setting it sets ("" none)
    convert: Callable[[Any], Any] | None = None  # the server's value -> the setting's input form
    same: tuple[Any, ...] = ()  # values that ask nothing corral does not do: taken silently
    instead: str = ""  # no counterpart: what corral does instead; with `setting`: a note
    hook: bool = False  # a server hook (a function); corral runs it unless `instead` says why not
    value: bool = True  # whether the flag takes a value
    constant: Any = True  # a flag without value: the value it sets (False for --no-sendfile)
    accept: bool = False  # no counterpart, nothing lost: a flag is accepted with a warning
    refuse: bool = False  # no counterpart, and a file that sets it is refused too
    server: str = "Gunicorn's"  # whose name it is, as the messages say it
    repeat: bool = False  # the flag may be given several times: its value is the list
    # the flags read with this one (by their names), not alone, when it is given
    companions: tuple[str, ...] = ()
    # this flag's and its companions' values (by name) -> (setting, value, flag) for each
    # setting they set; raises Unsupported or Invalid
    gather: Callable[[Mapping[str, Any]], list[tuple[str, Any, str]]] | None = None

    def disposition(self) -> str:
        """What corral does with it, in words (docs/settings.md)."""
        if self.hook and not self.instead:
            return "a hook, run as Gunicorn runs it"
        if self.setting:
            return f"`{self.setting}`" + (f": {self.instead}" if self.instead else "")
        if self.same and not self.instead:
            return "accepted: what corral always does"
        return self.instead


@dataclass(frozen=True, slots=True)
class Mapped:
    """A value for one of corral's settings, from another server's name or flag."""

    setting: str
    value: Any
    where: str


@dataclass(slots=True)
class Reading:
    """What another server's source gave: values for corral's settings, and warning lines."""

    values: list[Mapped]
    warnings: list[str]


def entry(server: str, flag: str, setting: str = "", instead: str = "", **extra: Any) -> Name:
    """A table entry for one flag of a server whose names are its flags (Uvicorn, Granian)."""
    return Name(flag, (flag,), setting=setting, instead=instead, server=server, **extra)


def same(value: Any, values: tuple[Any, ...]) -> bool:
    """Whether `value` is one of `values` (`Name.same`)."""
    # `True == 1`: a bool is only the same as a bool
    return any(value == item and type(value) is type(item) for item in values) or any(
        isinstance(value, dict) and isinstance(item, dict) and _upper(value) == item
        for item in values
    )


def _same_text(value: Any, values: tuple[Any, ...]) -> bool:
    """A flag's text for one of `values` (``--worker-connections 1000``)."""
    return isinstance(value, str) and any(
        not isinstance(item, bool) and isinstance(item, int | float | str) and str(item) == value
        for item in values
    )


def _upper(value: dict[Any, Any]) -> dict[Any, Any]:
    return {str(key).upper(): item for key, item in value.items()}


def hidden_flags(
    tables: Iterable[Iterable[Name]], declared: Iterable[str]
) -> list[tuple[Name, tuple[str, ...]]]:
    """The tables' flags corral does not declare (`declared`), each once, by entry: the parser
    knows them (so that they take their value), without showing them in --help. The entry of
    a flag several tables have is the first table's, named after every server that has it
    (``--ssl-version``: "Gunicorn's and Uvicorn's option")."""
    tables = [list(table) for table in tables]
    owners: dict[str, list[str]] = {}
    for table in tables:
        for entry in table:
            for flag in entry.flags:
                servers = owners.setdefault(flag, [])
                servers += [s for s in _servers(entry.server) if s not in servers]
    known = set(declared)
    found = []
    for table in tables:
        for entry in table:
            flags = tuple(flag for flag in entry.flags if flag not in known)
            known.update(flags)
            if flags:
                servers = [s for flag in flags for s in owners[flag]]
                named = " and ".join(f"{s}'s" for s in dict.fromkeys(servers))
                found.append((replace(entry, server=named), flags))
    return found


def _servers(named: str) -> list[str]:
    """The servers of a `Name.server` ("Uvicorn's and Granian's": Uvicorn, Granian)."""
    return [part.removesuffix("'s") for part in named.split(" and ")]


def from_flags(given: Sequence[tuple[Name, Any]], argv: Iterable[str]) -> Reading:
    """The values and warnings of the hidden flags found (`given`: each entry with its parsed
    value); `ConfigError` for the first one in `argv` order corral does not support."""
    reading = Reading([], [])
    refused: list[tuple[Name, str]] = []  # each with its line
    typed = [arg.partition("=")[0] for arg in argv]
    found = {entry.name: value for entry, value in given}
    read_with = {name for entry, _ in given if entry.gather for name in entry.companions}
    for entry, value in given:
        flag = next((f for f in typed if f in entry.flags), entry.flags[-1])
        if not flag.startswith("--"):  # named long, as corral names its own flags
            flag = next(f for f in entry.flags if f.startswith("--"))
        if entry.name in read_with or same(value, entry.same) or _same_text(value, entry.same):
            continue
        if entry.gather is not None:
            names = (entry.name, *entry.companions)
            try:
                gathered = entry.gather({name: found[name] for name in names if name in found})
            except (Unsupported, Invalid) as exc:
                refused.append((entry, f"{flag}: {exc}"))
                continue
            reading.values += [Mapped(setting, item, at) for setting, item, at in gathered]
        elif entry.setting:
            try:
                converted = entry.convert(value) if entry.convert else value
            except (Unsupported, Invalid) as exc:
                refused.append((entry, f"{flag}: {exc}"))
                continue
            reading.values.append(Mapped(entry.setting, converted, flag))
        elif entry.accept:
            reading.warnings.append(f"{flag}: {entry.server} option has no effect: {entry.instead}")
        else:
            line = f"{flag}: {entry.server} option is not supported: {entry.instead}"
            refused.append((entry, line))
    if refused:
        for flag in typed:
            for entry, line in refused:
                if flag in entry.flags:
                    raise ConfigError(line)
        raise ConfigError(refused[0][1])
    return reading
