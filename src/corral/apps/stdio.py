"""The application's standard output and error: NGINX Unit's ``stdout`` and ``stderr``.

A worker opens the files (for appending, created if missing) in the master's fork path before
it switches to the application's user, as it opens the access log, then puts them on
descriptors 1 and 2 and rebinds ``sys.stdout`` and ``sys.stderr`` (line-buffered: a print lands
in the file when it is made, not when a buffer fills).

Invariant: corral's own writers stay where they were. An error log handler or a ``-`` access
log writing to a descriptor about to be replaced is moved first to a duplicate of it, so the
worker's log lines still reach the master's standard error (or output), not the application's
file. Without either key nothing here runs: the workers inherit the master's descriptors.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO

from corral.observe.errorlog import LOGGER_NAME

__all__ = ["StdioError", "open_stdio", "redirect_stdio"]

_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC


class StdioError(OSError):
    """A ``stdout`` or ``stderr`` file could not be opened; `str()` is one line naming it."""


def open_stdio(stdout: str | None, stderr: str | None) -> dict[int, int]:
    """The files opened, by the descriptor each is to replace (1, 2); none for a null key."""
    opened: dict[int, int] = {}
    try:
        for target, key, path in ((1, "stdout", stdout), (2, "stderr", stderr)):
            if path is None:
                continue
            try:
                opened[target] = os.open(path, _FLAGS, 0o666)  # Unit's mode, less the umask
            except OSError as exc:
                raise StdioError(f"cannot open {key} {path!r}: {exc.strerror}") from None
    except BaseException:
        for fd in opened.values():
            os.close(fd)
        raise
    return opened


def redirect_stdio(opened: dict[int, int], access_log: Any = None) -> None:
    """Put each opened file on its descriptor, corral's writers moved off it first."""
    for target, fd in opened.items():
        old: TextIO = sys.stdout if target == 1 else sys.stderr
        old.flush()
        kept: TextIO | None = None
        writers = [
            h
            for h in logging.getLogger(LOGGER_NAME).handlers
            if isinstance(h, logging.StreamHandler)
        ]
        for handler in writers:
            if _fileno(handler.stream) == target:
                kept = kept or _duplicate(target, old)
                handler.setStream(kept)
        if target == 1 and access_log is not None and access_log.writes_to_stdout:
            access_log.move_stdout(kept or _duplicate(target, old))
        os.dup2(fd, target)
        os.close(fd)
        stream = open(  # noqa: SIM115 - it lives as long as the process
            target,
            "w",
            buffering=1,
            encoding=old.encoding,
            errors=old.errors,
            closefd=False,
        )
        if target == 1:
            sys.stdout = stream
        else:
            sys.stderr = stream


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None


def _duplicate(target: int, like: TextIO) -> TextIO:
    """A stream on a duplicate of `target`, where corral's own lines keep going."""
    return open(os.dup(target), "w", buffering=1, encoding=like.encoding, errors=like.errors)
