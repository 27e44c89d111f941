"""The master's pid file: written at start, removed at exit, refuses a second master.

During a USR2 upgrade the old master moves its file aside to ``PATH.oldbin`` (as
Gunicorn and nginx do) so that the new master can write ``PATH``; it moves it back
if the new master fails. A file is only ever removed by the process it names.
"""

from __future__ import annotations

import contextlib
import os

OLD_SUFFIX = ".oldbin"


class PidFile:
    def __init__(self, path: str) -> None:
        self.path = path
        self.current = path  # where this process's pid is written now

    def create(self) -> None:
        """Write our pid; raises RuntimeError when the file names another live process."""
        other = _read(self.path)
        if other and other != os.getpid():
            try:
                os.kill(other, 0)
            except ProcessLookupError:
                pass  # a stale file from a master that died
            except PermissionError:
                raise RuntimeError(f"pid file {self.path}: process {other} is running") from None
            else:
                raise RuntimeError(f"pid file {self.path}: process {other} is running")
        with open(self.path, "w") as stream:
            stream.write(f"{os.getpid()}\n")

    def set_aside(self) -> None:
        """USR2: leave ``PATH`` to the new master."""
        if self.current == self.path and _read(self.path) == os.getpid():
            with contextlib.suppress(OSError):
                os.replace(self.path, self.path + OLD_SUFFIX)
                self.current = self.path + OLD_SUFFIX

    def restore(self) -> None:
        """The new master failed: ``PATH`` is ours again."""
        if self.current != self.path:
            with contextlib.suppress(OSError):
                os.replace(self.current, self.path)
                self.current = self.path

    def remove(self) -> None:
        if _read(self.current) == os.getpid():
            with contextlib.suppress(OSError):
                os.unlink(self.current)


def _read(path: str) -> int:
    try:
        with open(path) as stream:
            return int(stream.read().strip() or 0)
    except (OSError, ValueError):
        return 0
