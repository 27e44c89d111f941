"""What triggers a reload besides HUP: touched files and, with --reload, source changes.

`TouchedFiles` is polled by the master's one-second tick (uWSGI's touch-reload: a
change of modification time, or a file appearing), and so is `ConfigContent` (``watch_config``:
a change of the config file's bytes). `SourceWatcher` runs watchfiles
on a thread and calls back (thread-safe) with the first path that changed: Python
sources under the watched directories (and the files `reload_include`'s globs name, less
those `reload_exclude`'s name, Uvicorn's rule: `matches`), and the config file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.master.generation import Generation


class TouchedFiles:
    def __init__(self, paths: Iterable[str]) -> None:
        self._mtimes = {path: _mtime(path) for path in paths}

    def changed(self) -> str | None:
        """The first file whose modification time moved since the last call."""
        found = None
        for path, before in self._mtimes.items():
            now = _mtime(path)
            if now != before:
                self._mtimes[path] = now
                found = found or path
        return found


class ConfigContent:
    """The config file's bytes as the running configuration last read them.

    By content, not by modification time: a deploy tool's copy may keep the old time
    (``rsync -t``, ``cp -p``), a Kubernetes ConfigMap swaps a link to a new file, and a
    ``touch`` alone is no change. `read` is called as a reload reads the file, before it does,
    so that a change during the read is seen at the next look; a file caught half written
    fails that reload, and its last write is a change again."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._bytes = self._now()

    def read(self) -> None:
        """The file as it is now is the one the configuration is read from."""
        self._bytes = self._now()

    def changed(self) -> bool:
        """Whether the bytes differ from the last `read`; a file missing for the moment (a
        rename under way) is no change."""
        now = self._now()
        return now is not None and now != self._bytes

    def _now(self) -> bytes | None:
        try:
            with open(self.path, "rb") as file:
                return file.read()  # a config file's few KiB: kept, not hashed
        except OSError:
            return None


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def matches(path: str, globs: Iterable[str], directories: bool = False) -> bool:
    """Whether ``path`` matches one of ``globs`` as pathlib matches (from the right: ``*.html``,
    ``templates/*.txt``, an absolute ``/srv/app/tmp``), or with ``directories`` whether one of
    the directories it is in does (``node_modules``: everything under one)."""
    from pathlib import PurePath  # (--reload and reload_exclude only)

    pure = PurePath(path)
    candidates = (pure, *pure.parents) if directories else (pure,)
    return any(p.name and p.match(glob) for glob in globs for p in candidates)


class SourceWatcher:
    """--reload: watchfiles on a daemon thread; ``on_change(path)`` from that thread."""

    def __init__(
        self,
        directories: Iterable[str],
        files: Iterable[str],
        on_change: Callable[[str], None],
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
    ) -> None:
        import watchfiles  # ImportError: the caller says how to install it

        self._watchfiles = watchfiles
        self._include, self._exclude = tuple(include), tuple(exclude)
        self._files = {os.path.abspath(path) for path in files}
        roots = {os.path.abspath(d) for d in directories if os.path.isdir(d)}
        roots.update(os.path.dirname(path) for path in self._files)
        self._roots = sorted(roots)
        self._on_change = on_change
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="corral-reload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        sources = self._watchfiles.PythonFilter()
        others = self._watchfiles.DefaultFilter()  # no .git, __pycache__, editors' files...
        files, include, exclude = self._files, self._include, self._exclude

        def wanted(change: Any, path: str) -> bool:
            if path in files:
                return True
            if exclude and matches(path, exclude, directories=True):
                return False
            return sources(change, path) or (
                bool(include) and others(change, path) and matches(path, include)
            )

        for changes in self._watchfiles.watch(
            *self._roots,
            watch_filter=wanted,
            stop_event=self._stop,
            debounce=300,
            raise_interrupt=False,
        ):
            self._on_change(min(path for _change, path in changes))


def watch_sources(
    current: Generation,
    config_file: str | None,
    loop: asyncio.AbstractEventLoop,
    reload: Callable[[str], None],
    log: logging.Logger,
) -> SourceWatcher:
    """--reload: a started `SourceWatcher` of the running generation's source directories
    (``reload_dirs``, else the working directory and the applications' ``pythonpath``) and
    ``config_file``, each change a ``reload(why)`` on ``loop``."""
    pythonpath = [path for pool in current.pools.values() for path in pool.application.pythonpath]
    directories = current.settings.reload_dirs or [os.getcwd(), *dict.fromkeys(pythonpath)]
    files = [config_file] if config_file else []

    def changed(path: str) -> None:
        loop.call_soon_threadsafe(reload, f"{path} changed")

    settings = current.settings
    include, exclude = settings.reload_include, settings.reload_exclude
    watcher = SourceWatcher(directories, files, changed, include, exclude)
    watcher.start()
    log.info("reload: watching %s for changes", ", ".join(directories + files))
    return watcher
