"""uWSGI's Emperor: one application per file of a directory, kept in step with the files.

Owns: reading the directory (``--emperor DIR``) into one document, and telling what changed
since the last look. Each ``.ini``, ``.toml`` or ``.json`` file is a *vassal*: a config file
as ``-c`` reads it (flat settings, or a whole document without routes), whose applications
and listeners join the emperor's document. A vassal's one application is named after its
file (``blog.ini`` is ``blog``); a vassal with several names them ``FILE-NAME``. Server-wide
settings are the emperor's own (its command line): a vassal's are ignored, with a warning.
The routes a vassal's static files make (uWSGI's ``static-map``...) are its own table of the
emperor's routes, named after its file (``routes/blog``), which its listeners pass to.

The arbiter looks every second (its tick) and applies a change through the path the control
API uses (`Reloads.apply`): a file added, changed or touched (a new mtime, same content
included) starts or restarts its applications only, a file removed stops them; the others'
workers serve on. A vassal that cannot be read, or whose listener another vassal has, is one
log line and changes nothing: the applications it had serve on as they were, and a new one is
not started. A change that fails to apply (an application that cannot be imported) is rolled
back by the arbiter and forgotten here, so that the next change does not bring it back.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import msgspec

from corral.config import ConfigError, Document
from corral.config.document import validate_document
from corral.config.sources import build_document, read_config

__all__ = ["VASSAL_SUFFIXES", "Change", "Emperor"]

VASSAL_SUFFIXES = (".ini", ".toml", ".json")


@dataclass
class _Vassal:
    signature: tuple[int, int, int]  # mtime_ns, size, inode: a touch is a change
    listeners: dict[str, Any] = field(default_factory=dict)
    applications: dict[str, Any] = field(default_factory=dict)
    good: bool = True  # False: read failed; `listeners` and `applications` are the last good
    routes: dict[str, Any] = field(default_factory=dict)  # its table, by its name, if any


@dataclass
class Change:
    """What one look found: the document to run, and the applications to restart."""

    document: Document
    restart: set[str]
    why: str
    _before: dict[str, _Vassal | None]  # the vassals it replaced, for `Emperor.forget`


class Emperor:
    def __init__(self, directory: str, base: Document, log: logging.Logger) -> None:
        self.directory = directory
        self.base = base  # the emperor's own document: its settings, no application
        self.log = log
        self.vassals: dict[str, _Vassal] = {}  # by file name

    def document(self) -> Document:
        """The document of the vassals as last read (what a reload restarts)."""
        data = msgspec.to_builtins(self.base)
        data["listeners"] = {}
        data["applications"] = {}
        routes: dict[str, Any] = {}
        for vassal in self.vassals.values():
            data["listeners"].update(vassal.listeners)
            data["applications"].update(vassal.applications)
            routes.update(vassal.routes)
        if routes:
            data["routes"] = routes
        return validate_document(data)

    def look(self) -> Change | None:
        """Read what changed in the directory since the last look; None: nothing did."""
        try:
            names = sorted(
                name
                for name in os.listdir(self.directory)
                if name.endswith(VASSAL_SUFFIXES) and not name.startswith(".")
            )
        except OSError as exc:
            self.log.error("emperor: cannot read %s: %s", self.directory, exc.strerror or exc)
            return None
        before: dict[str, _Vassal | None] = {}
        restart: set[str] = set()
        said: list[str] = []
        for name in set(self.vassals) - set(names):
            before[name] = self.vassals.pop(name)
            said.append(f"{name} removed")
        for name in names:
            path = os.path.join(self.directory, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue  # removed meanwhile: the next look sees it gone
            signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
            old = self.vassals.get(name)
            if old is not None and old.signature == signature:
                continue
            vassal = self._read(name, path, signature, old)
            self.vassals[name] = vassal
            if vassal.good:
                before[name] = old
                restart |= set(vassal.applications)
                said.append(f"{name} {'changed' if old is not None else 'added'}")
        if not before:
            return None
        return Change(self.document(), restart, "emperor: " + ", ".join(said), before)

    def forget(self, change: Change) -> None:
        """``change`` was rolled back: its vassals are as they were, until their files change."""
        for name, old in change._before.items():
            current = self.vassals.get(name)
            if old is None:
                if current is not None:  # an added file: kept unread until it changes
                    current.listeners, current.applications = {}, {}
            else:
                restored = _Vassal(
                    current.signature if current is not None else old.signature,
                    old.listeners,
                    old.applications,
                    routes=old.routes,
                )
                self.vassals[name] = restored

    def _read(
        self, name: str, path: str, signature: tuple[int, int, int], old: _Vassal | None
    ) -> _Vassal:
        try:
            listeners, applications, routes = self._parts(name, path)
        except ConfigError as exc:
            self.log.error("emperor: %s; it changes nothing", exc)
            kept = old or _Vassal(signature)
            return _Vassal(signature, kept.listeners, kept.applications, False, kept.routes)
        return _Vassal(signature, listeners, applications, routes=routes)

    def _parts(self, name: str, path: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        content = read_config(path, lambda line: self.log.warning("emperor: %s", line))
        doc = content if isinstance(content, Document) else build_document(content)
        data = msgspec.to_builtins(doc)
        if data.get("routes") and isinstance(content, Document):
            raise ConfigError(f"{path}: a vassal has no routes: one application per file")
        stem = os.path.splitext(name)[0]
        apps = data.get("applications", {})
        renamed = {old: stem if len(apps) == 1 else f"{stem}-{old}" for old in apps}
        applications = {renamed[old]: app for old, app in apps.items()}
        # its static files' steps (a flat file's: one array), as its own table
        steps = [_renamed(step, renamed) for step in data.get("routes") or ()]
        listeners = {}
        for address, listener in data.get("listeners", {}).items():
            listener = _renamed(listener, renamed)
            if listener["pass"] == "routes":
                listener["pass"] = f"routes/{quote(stem, safe='')}"
            for other_name, other in self.vassals.items():
                if other_name != name and address in other.listeners:
                    raise ConfigError(f"{path}: listener {address} is {other_name}'s already")
            listeners[address] = listener
        emperors = msgspec.to_builtins(self.base.settings)
        ignored = sorted(
            key for key, value in data.get("settings", {}).items() if value != emperors.get(key)
        )
        if ignored:
            self.log.warning(
                "emperor: %s: server-wide settings are the emperor's; ignored: %s",
                path,
                ", ".join(ignored),
            )
        return listeners, applications, {stem: steps} if steps else {}


def _renamed(action: dict[str, Any], renamed: dict[str, str]) -> dict[str, Any]:
    """A listener, a route step or an action, with each pass to one of the vassal's
    applications (its fallbacks' too) naming it as the emperor's document does."""
    found = dict(action)
    target = found.get("pass", "").removeprefix("applications/")
    app, slash, rest = target.partition("/")
    if "pass" in found and app in renamed:
        found["pass"] = f"applications/{renamed[app]}{slash}{rest}"
    for key in ("action", "fallback"):
        if isinstance(found.get(key), dict):
            found[key] = _renamed(found[key], renamed)
    return found
