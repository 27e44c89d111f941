"""Which php script answers a request, by NGINX Unit's rules for a ``"php"`` application (or
one of its ``targets``): a `Site` is its ``root``, ``script`` and ``index``.

- ``script`` set: every request runs that script (``SCRIPT_NAME`` is ``/`` and its name, the
  request's path is ``PATH_INFO``);
- else the request's path (routing's: percent-decoded, dot segments resolved, a ``..`` above
  the root already refused with 400) names a file under ``root``: one ending in ``/`` is a
  directory and runs its ``index`` (``index.php`` by default); the first segment that ends in
  ``.php`` followed by more path is the script, the rest ``PATH_INFO``
  (``/blog.php/2024/post``); a path ending in ``.php`` is the script; a directory named
  without its ``/`` is redirected there (301, the query kept), as Unit and corral's shares do;
  anything else is not a script: 404 (php-fpm never runs a file not named ``.php``).

The script must be a regular file beneath ``root``, opened as corral's shares open a file
under a ``chroot`` (`corral.static.opener`: ``openat2`` with ``RESOLVE_BENEATH``): a
symlink out of the root is 403, a missing file 404, a directory where a script was named 404.
That open is a check, not the script's: php-fpm opens ``SCRIPT_FILENAME`` itself. What a
path resolved to is trusted ``valid`` seconds (the shares' ``http.static.cache_valid``), at
most ``CACHE_MAX`` paths, so that a busy script costs no system call per request.
"""

from __future__ import annotations

import errno
import os
import stat

from corral.server import clock
from corral.static.opener import open_file

__all__ = ["Choice", "Site"]

DEFAULT_INDEX = "index.php"
CACHE_MAX = 1024  # paths whose choice is kept; past it the cache starts again
_REFUSED = {errno.EACCES: 403, errno.EPERM: 403, errno.ELOOP: 403, errno.EXDEV: 403}


class Choice:
    """What a request runs: its ``SCRIPT_NAME``, ``SCRIPT_FILENAME`` (bytes: the root's file
    system name and the request's bytes) and ``PATH_INFO``; or,
    when ``status`` is not 0, the answer instead (404, 403, or 301 to ``location``)."""

    __slots__ = ("encoded", "filename", "location", "path_info", "script_name", "status")

    def __init__(
        self,
        script_name: bytes = b"",
        filename: bytes = b"",
        path_info: str = "",
        status: int = 0,
        location: str | None = None,
    ) -> None:
        self.script_name = script_name
        self.filename = filename
        self.path_info = path_info
        self.status = status
        self.location = location
        self.encoded: bytes | None = None  # its variables for php-fpm (fastcgi/params.py)


NOT_FOUND = Choice(status=404)
FORBIDDEN = Choice(status=403)


class Site:
    """One php application's (or target's) ``root``, ``script`` and ``index``."""

    __slots__ = ("cache", "index", "raw_root", "root", "script", "valid")

    def __init__(
        self, root: str, script: str | None = None, index: str | None = None, valid: float = 1.0
    ) -> None:
        self.root = os.path.abspath(root)  # relative to corral's working directory, as Unit's
        self.script = None if script is None else os.fsencode("/" + script.lstrip("/"))
        self.index = os.fsencode((index or DEFAULT_INDEX).lstrip("/"))
        self.raw_root = os.fsencode(self.root)
        self.valid = valid
        self.cache: dict[str, tuple[float, Choice]] = {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Site) and (self.root, self.script, self.index) == (
            other.root,
            other.script,
            other.index,
        )

    def __hash__(self) -> int:
        return hash((self.root, self.script, self.index))

    def choose(self, path: str, query: str = "") -> Choice:
        """The script for a request whose normalized path is ``path`` (its query string
        ``query``, kept by a redirect)."""
        now = clock.now()
        kept = self.cache.get(path)
        if kept is not None and kept[0] > now:
            choice = kept[1]
        else:
            choice = self._choose(path)
            if self.valid > 0:
                if len(self.cache) >= CACHE_MAX:
                    self.cache.clear()
                self.cache[path] = (now + self.valid, choice)
        if choice.status == 301 and query:
            return Choice(status=301, location=f"{choice.location}?{query}")
        return choice

    def _choose(self, path: str) -> Choice:
        if self.script is not None:
            return self._checked(self.script, path)
        raw = _raw(path)
        if raw.endswith(b"/"):
            return self._checked(raw + self.index, "")
        at = path.find(".php/")
        if at >= 0:
            return self._checked(raw[: at + 4], path[at + 4 :])
        if path.endswith(".php"):
            return self._checked(raw, "")
        kind = self._kind(raw)
        if kind == stat.S_IFDIR:
            return Choice(status=301, location=path + "/")
        return NOT_FOUND if kind >= 0 or kind == -404 else FORBIDDEN

    def _checked(self, script_name: bytes, path_info: str) -> Choice:
        kind = self._kind(script_name)
        if kind == stat.S_IFREG:
            return Choice(script_name, self.raw_root + script_name, path_info)
        return FORBIDDEN if kind == -403 else NOT_FOUND

    def _kind(self, path: bytes) -> int:
        """The file type of ``path`` under the root (``stat.S_IFREG``...), or -404 / -403."""
        if b"\x00" in path:
            return -404
        try:
            fd = open_file(self.raw_root + path, self.raw_root)
        except OSError as exc:
            return -_REFUSED.get(exc.errno or 0, 404)
        try:
            return stat.S_IFMT(os.fstat(fd).st_mode)
        finally:
            os.close(fd)


def _raw(path: str) -> bytes:
    """A request's path as its bytes (routing's strings are latin-1)."""
    return path.encode("latin-1")
