"""NGINX Unit's certificate store: named bundles, kept in the state directory.

The master owns one store per state directory (`corral.control.server.ControlServer`); the
control API's ``/certificates`` (`corral.control.certificates`) adds, describes and removes
bundles, and whatever builds a listener's TLS reads them with `CertificateStore.get`.

Invariants:
- a bundle is in the store only once `corral.tls.bundle.parse_bundle` accepted it, and stays
  as it is: a name is never given a second bundle (Unit's rule; upload under a new name and
  point the listener at it), it can only be removed;
- on disk each bundle is ``<state dir>/certs/NAME``, exactly the bytes uploaded, mode 0600 in
  a 0700 directory, written to a temporary file (a dot name, never a bundle's), synced and
  renamed, so a crash leaves the whole bundle or none; `load` restores every file, and one it
  cannot read or parse is left on disk, logged and skipped (as Unit skips it);
- names are file names: not empty, no ``/``, no NUL, not starting with ``.``, at most 255
  bytes; `BadName` says which rule a name breaks;
- nothing here imports `cryptography` until a bundle is parsed (`parse_bundle` does).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from corral.tls.bundle import Bundle, BundleError, parse_bundle

__all__ = [
    "BadName",
    "BundleError",
    "CertificateStore",
    "Exists",
    "Unserved",
    "listener_bundles",
    "missing_text",
]

CERTS_DIR = "certs"  # under the state directory, as Unit's
MAX_NAME_BYTES = 255


class BadName(ValueError):
    """A name that cannot be a bundle's."""


class Exists(ValueError):
    """A name that already has a bundle."""


def missing_text(name: str) -> str:
    """Unit's words for a listener naming a certificate the store lacks."""
    return f'Certificate "{name}" is not found.'


class Unserved(ValueError):
    """A bundle a listener's ``tls`` names that it cannot serve: ``where`` in the ``tls``
    (``certificate``, ``client_certificate.ca``), ``text`` why (Unit's words where Unit has
    them)."""

    def __init__(self, where: str, text: str) -> None:
        super().__init__(f"{where}: {text}")
        self.where = where
        self.text = text


def listener_bundles(
    tls: Any, get: Callable[[str], Bundle | None]
) -> tuple[list[Bundle], list[Bundle]]:
    """The bundles a listener's ``tls`` names (`corral.config.listener_tls.Tls`), by ``get``
    (a store's): its certificates, then its CA bundles. Raises `Unserved`: a name the store
    lacks, a certificate without a key, a CA bundle with one."""
    found: tuple[list[Bundle], list[Bundle]] = ([], [])
    for where, names, authorities in (
        ("certificate", tls.names, False),
        ("client_certificate.ca", tls.authorities, True),
    ):
        for name in names:
            bundle = get(name)
            if bundle is None:
                raise Unserved(where, missing_text(name))
            if bundle.authorities != authorities:
                raise Unserved(where, _misplaced_text(name, bundle.authorities))
            found[authorities].append(bundle)
    return found


def _misplaced_text(name: str, authorities: bool) -> str:
    if authorities:
        return (
            f'Certificate "{name}" has no private key: a CA bundle checks client '
            "certificates (client_certificate.ca)"
        )
    return (
        f'Certificate "{name}" has a private key: client_certificate.ca names CA bundles '
        "(certificates only)"
    )


class CertificateStore:
    """The bundles of one state directory, by name, in the order they were added."""

    def __init__(self, state_dir: str, log: logging.Logger | None = None) -> None:
        self.state_dir = state_dir
        self.directory = os.path.join(state_dir, CERTS_DIR)
        self.log = log or logging.getLogger(__name__)
        self._bundles: dict[str, Bundle] = {}

    # -- what a listener's TLS reads ---------------------------------------------------------

    def get(self, name: str) -> Bundle | None:
        return self._bundles.get(name)

    def names(self) -> list[str]:
        return list(self._bundles)

    def __contains__(self, name: object) -> bool:
        return name in self._bundles

    def missing(self, names: Iterable[str]) -> list[str]:
        """The names among ``names`` that have no bundle, in their order."""
        return [name for name in names if name not in self._bundles]

    # -- what the control API shows ----------------------------------------------------------

    def info(self, name: str) -> dict[str, Any] | None:
        """Unit's JSON of one bundle: ``{"key": ..., "chain": [...]}``; None when missing."""
        bundle = self._bundles.get(name)
        return None if bundle is None else bundle.info

    def all_info(self) -> dict[str, Any]:
        return {name: bundle.info for name, bundle in self._bundles.items()}

    # -- changes -----------------------------------------------------------------------------

    def add(self, name: str, data: bytes, now: datetime | None = None) -> Bundle:
        """Parse ``data``, keep it under ``name``, and return it. Raises `BadName`, `Exists`,
        `BundleError` (nothing changed), or OSError (the file could not be written: nothing
        changed either)."""
        check_name(name)
        if name in self._bundles:
            raise Exists(name)
        bundle = parse_bundle(data)
        self._write(name, data)
        self._bundles[name] = bundle
        warning = bundle.validity_warning(now)
        if warning:
            self.log.warning("certificate %r: %s", name, warning)
        return bundle

    def remove(self, name: str) -> bool:
        """Forget ``name`` and delete its file; False when it has no bundle. Raises OSError
        when the file cannot be deleted (the bundle stays)."""
        if name not in self._bundles:
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.directory, name))
        _sync_directory(self.directory)
        del self._bundles[name]
        return True

    def load(self, now: datetime | None = None) -> None:
        """Restore the bundles on disk (none when the directory does not exist)."""
        try:
            entries = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return
        except OSError as exc:
            self.log.error("certificate store %s: cannot list: %s", self.directory, exc)
            return
        for name in entries:
            if name.startswith("."):  # a temporary file a crash left behind
                continue
            path = os.path.join(self.directory, name)
            try:
                with open(path, "rb") as stream:
                    bundle = parse_bundle(stream.read())
            except (OSError, BundleError) as exc:
                self.log.error("certificate %r: not restored from %s: %s", name, path, exc)
                continue
            self._bundles[name] = bundle
            warning = bundle.validity_warning(now)
            if warning:
                self.log.warning("certificate %r: %s", name, warning)
        if self._bundles:
            self.log.info(
                "certificate store: %d restored from %s", len(self._bundles), self.directory
            )

    def _write(self, name: str, data: bytes) -> None:
        for directory in (self.state_dir, self.directory):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        import tempfile  # here: its import would cost every worker memory (wsgi/input.py)

        fd, temporary = tempfile.mkstemp(prefix=".new-", dir=self.directory)  # mode 0600
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, os.path.join(self.directory, name))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        _sync_directory(self.directory)


def check_name(name: str) -> None:
    """Raise `BadName` unless ``name`` can name a bundle (and its file)."""
    if not name:
        raise BadName("a certificate's name is not empty")
    if "/" in name or "\0" in name:
        raise BadName(f"{name!r}: a certificate's name has no '/' and no NUL")
    if name.startswith("."):
        raise BadName(f"{name!r}: a certificate's name does not start with '.'")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise BadName(f"a certificate's name has at most {MAX_NAME_BYTES} bytes")


def _sync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
