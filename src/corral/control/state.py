"""The state directory: created private, and the configuration saved in it.

Invariants:
- the directory is created with mode 0700 when missing (an existing one is left as it is);
- `conf.json` is replaced atomically: written to a temporary file in the same directory
  (mode 0600), flushed to disk, renamed over the old one, and the directory synced, so a
  crash leaves either the old file or the new one, never a mix;
- what `load` returns went through `validate_document`, like every other source.
"""

from __future__ import annotations

import contextlib
import os

import msgspec

from corral.config import ConfigError, Document, dump_document, validate_document


def make_state_dir(path: str) -> None:
    """Create ``path`` (mode 0700) if missing. Raises `ConfigError` (one line)."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--state-dir {path}: cannot create it: {exc.strerror or exc}") from None
    if not os.path.isdir(path):
        raise ConfigError(f"--state-dir {path}: not a directory")


def load(path: str) -> Document | None:
    """The document saved at ``path``, or None when there is none yet."""
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from None
    try:
        return validate_document(raw)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def save(path: str, doc: Document) -> None:
    """Replace the file at ``path`` with ``doc`` atomically. Raises OSError."""
    directory = os.path.dirname(path) or "."
    import tempfile  # here: the workers fork from the master (wsgi/input.py)

    fd, temporary = tempfile.mkstemp(prefix=".conf-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(dump_document(doc) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
