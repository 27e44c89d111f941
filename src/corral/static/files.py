"""The engine of NGINX Unit's ``share`` action: a share and a request in, a
:class:`~corral.static.answer.StaticAnswer` out, synchronously, on the loop's thread.

Unit's rules, kept (its share, point by point):

- GET and HEAD only; another method takes the fallback, else 405;
- each of the share's paths (variables already filled in by routing) in order: a path ending
  in ``/`` has ``index`` appended; otherwise its MIME type must pass ``types`` (403 if not);
  the first regular file is served; a directory reached without a trailing slash is a 301 to
  the request's path plus ``/`` (its query kept); anything else (missing 404, refused 403:
  ``EACCES``, a symlink or a mount where the share forbids them, a path out of the chroot) goes
  to the next path, then to the fallback, else its status; an error that is not the request's
  (``EMFILE``, ``EIO``) is a 500 at once;
- `corral.static.opener` opens every path (chroot, follow_symlinks, traverse_mounts); a path
  that variables gave a ``..`` segment is refused before any open (403: ``$host`` or an
  argument can hold one; ``$uri`` cannot, routing resolved it), and so is a NUL;
- no ``Content-Type`` for a type the table does not know (Unit's choice).

And what nginx adds (`corral.static.preconditions` and `corral.static.policy` say how):
``ETag``, ``Last-Modified``, 304 and 412, ranges (206, 416), ``Accept-Ranges``, siblings
``.br``, ``.zst``, ``.gz`` chosen by ``Accept-Encoding`` (with ``Vary``), ``expires``,
``immutable``, ``response_headers``.

The cache, nginx's ``open_file_cache``: what a path resolved to (a file's metadata and its
answers, a directory, a refusal) is kept per path and per way of opening (chroot and flags),
for ``valid`` seconds (``open_file_cache_valid``), then resolved again from the start, so a
change (a new file, a symlink put in its place) is seen within ``valid`` and a file is never
answered under another file's validators (the inode, size and modification time are in its
entity tag). Files up to ``memory_file`` bytes are answered from memory (up to ``memory``
bytes in all); larger ones are opened again for each request (openat2 again: a symlink swapped
in is refused then) and checked to be the same file, for ``sendfile``. The cache holds no
descriptor, so nothing it keeps can leak one; it is bounded by ``entries`` (the oldest go
first).

On a cache hit without conditional fields (the common request), the work is a dict lookup, a
deadline compare, a scan of the request's field names by length, and a prebuilt answer.
"""

from __future__ import annotations

import errno
import os
import stat
from time import monotonic, time
from typing import TYPE_CHECKING, Any

from corral.http.accept import choose, parse_accept_encoding
from corral.http.fields import http_date
from corral.routing.variables import encode_location
from corral.static.answer import (
    BAD_TARGET,
    NOT_ALLOWED,
    SERVER_ERROR,
    StaticAnswer,
    not_served,
)
from corral.static.mime import MimeTypes
from corral.static.opener import NO_SYMLINKS, NO_XDEV, open_file
from corral.static.policy import is_hashed_name
from corral.static.preconditions import (
    UNSATISFIABLE,
    byte_range,
    entity_tag,
    etag_matches,
    parse_http_date,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from corral.routing.actions import Share
    from corral.routing.request import RouteRequest
    from corral.static.policy import ShareHeaders

__all__ = ["StaticFiles"]

_FILE, _DIRECTORY, _REFUSED = 0, 1, 2  # what a path resolved to

# errno -> status, as Unit maps them; any other is a 500 (and not cached)
_ERRNO_STATUS = {
    errno.ENOENT: 404,
    errno.ENOTDIR: 404,
    errno.ENAMETOOLONG: 404,
    errno.ENXIO: 404,  # a unix socket
    errno.EACCES: 403,
    errno.EPERM: 403,
    errno.ELOOP: 403,  # a symlink where the share forbids them
    errno.EXDEV: 403,  # out of the chroot, or across a mount where the share forbids it
}
_NOT_SERVED = {status: not_served(status) for status in (403, 404)}
_NOT_SERVED[405] = NOT_ALLOWED

# precompressed siblings: (coding, suffix), in the order that breaks a tie of sizes
_SIBLINGS = (("br", b".br"), ("zstd", b".zst"), ("gzip", b".gz"))

# the request fields a file's answer reads, by their lower-case name
_IF_MATCH, _IF_UNMODIFIED, _IF_NONE_MATCH, _IF_MODIFIED, _RANGE, _IF_RANGE, _ACCEPT = range(7)
_CODES = {
    b"if-match": _IF_MATCH,
    b"if-unmodified-since": _IF_UNMODIFIED,
    b"if-none-match": _IF_NONE_MATCH,
    b"if-modified-since": _IF_MODIFIED,
    b"range": _RANGE,
    b"if-range": _IF_RANGE,
    b"accept-encoding": _ACCEPT,
}
# and as clients write them ("If-None-Match"), found without lower-casing
_CODES.update({b"-".join(p.capitalize() for p in n.split(b"-")): c for n, c in _CODES.items()})
_LENGTHS = frozenset(len(name) for name in _CODES)
# browsers' other fields of those lengths, known not to be read: no lower-casing for them
_OTHER = -1
for _name in (b"Accept-Language", b"Cache-Control", b"Authorization", b"X-Forwarded-For"):
    _CODES[_name] = _CODES[_name.lower()] = _OTHER


class _Representation:
    """One encoding of a file (the file itself, or a precompressed sibling): its metadata,
    the fields of its answers, its body when it is small, its prebuilt answers per share
    headers."""

    __slots__ = (
        "answers",
        "body",
        "coding",
        "etag",
        "fields",
        "identity",
        "last_modified",
        "mtime",
        "path",
        "size",
    )

    def __init__(
        self, path: bytes, info: os.stat_result, coding: str | None, body: bytes | None
    ) -> None:
        self.path = path
        self.coding = coding
        self.identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        self.size = info.st_size
        self.mtime = int(info.st_mtime)
        etag = entity_tag(info.st_mtime_ns, info.st_size, info.st_ino)
        last_modified = http_date(self.mtime)
        self.etag = etag.encode("latin-1")
        self.last_modified = last_modified.encode("latin-1")
        self.body = body
        self.fields: list[tuple[str, str]] = [("ETag", etag), ("Last-Modified", last_modified)]
        # per ShareHeaders (None: none): (second, 200 for GET, 200 for HEAD, 304)
        self.answers: dict[Any, tuple[int, StaticAnswer | None, StaticAnswer, StaticAnswer]] = {}


class _Entry:
    """What one path resolved to, until ``deadline``."""

    __slots__ = (
        "chroot",
        "deadline",
        "hashed",
        "identity",
        "kind",
        "memory",
        "mime",
        "offers",
        "representations",
        "resolve",
        "status",
    )

    def __init__(self, kind: int, deadline: float, mime: str, status: int = 0) -> None:
        self.kind = kind
        self.deadline = deadline
        self.mime = mime
        self.status = status
        self.hashed = False
        self.identity: _Representation | None = None
        self.representations: dict[str | None, _Representation] = {}
        self.offers: tuple[str, ...] | None = None  # codings to choose from, when siblings
        self.memory = 0  # bytes of bodies held
        self.chroot: bytes | None = None
        self.resolve = 0


class StaticFiles:
    """Serves shares (the module's docstring). One per worker, used from its loop's thread.

    ``mime_types``: ``settings.http.static.mime_types``; ``valid``: seconds a path's
    resolution is trusted (0: every request resolves again); ``entries``: paths kept;
    ``memory_file``: the largest file answered from memory; ``memory``: bytes of bodies kept
    in all; ``openat2``: None to use it where the kernel has it, False for the component walk
    (tests).
    """

    def __init__(
        self,
        mime_types: Mapping[str, str | list[str]] | None = None,
        *,
        valid: float = 1.0,
        entries: int = 4096,
        memory_file: int = 32 * 1024,
        memory: int = 32 * 1024 * 1024,
        openat2: bool | None = None,
    ) -> None:
        self.mime = MimeTypes(mime_types)
        self.valid = valid
        self.entries = entries
        self.memory_file = memory_file
        self.memory = memory
        self.openat2 = openat2
        # paths opened without restriction, by path; the others by (chroot, resolve, path)
        self._plain: dict[Any, _Entry] = {}
        self._restricted: dict[Any, _Entry] = {}
        self._count = 0
        self._held = 0  # bytes of bodies the cache holds

    # -- per request

    def serve(self, share: Share, request: RouteRequest, retry: bool = True) -> StaticAnswer:
        """The answer of ``share`` to ``request``: a file's (200, 206, 304, 412, 416), a
        directory's 301, or a ``fallback`` answer whose status (403, 404, 405) is given
        when the share has no fallback; 500 for an error that is not the request's, 400 for
        a target routing could not read. (``retry``: the engine's own, once.)"""
        method = request.method
        if method != "GET" and method != "HEAD":
            return NOT_ALLOWED
        now = monotonic()
        chroot = share.chroot
        resolve = (0 if share.follow_symlinks else NO_SYMLINKS) | (
            0 if share.traverse_mounts else NO_XDEV
        )
        plain = chroot is None and not resolve
        table = self._plain if plain else self._restricted
        types = share.types
        status = 404
        for path in share.paths:
            index = path[-1:] == "/"
            if index:
                path += share.index
            key: Any = path if plain else (chroot, resolve, path)
            entry = table.get(key)
            if entry is None or entry.deadline <= now:
                entry = self._fill(table, key, path, chroot, resolve, entry, now)
            if types is not None and not index and not types(entry.mime):
                status = 403
                continue
            kind = entry.kind
            if kind == _FILE:
                answer = self._answer(entry, share, request, method)
                if answer is not None:
                    return answer
                # a large file changed since it was resolved: resolve it again, once
                entry.deadline = 0.0
                if retry:
                    return self.serve(share, request, False)
                return SERVER_ERROR
            if kind == _DIRECTORY:
                if index:
                    status = 404
                    continue
                return self._redirect(share, request)
            status = entry.status
            if status == 500:
                return SERVER_ERROR
        return _NOT_SERVED[status]

    def _answer(
        self, entry: _Entry, share: Share, request: RouteRequest, method: str
    ) -> StaticAnswer | None:
        accept: bytes | None = None
        fields: dict[int, bytes] | None = None
        codes = _CODES  # (a local the compiled core knows for a dict: no method call per get)
        lengths = _LENGTHS
        for name, value in request.headers:
            if len(name) in lengths:
                code = codes.get(name)
                if code is None:
                    code = codes.get(name.lower(), _OTHER)
                if code == _OTHER:
                    continue
                if code == _ACCEPT:
                    accept = value if accept is None else accept + b", " + value
                    continue
                if fields is None:
                    fields = {}
                # a field sent twice is its values joined, as a list field is read
                fields[code] = value if code not in fields else fields[code] + b", " + value
        rep = entry.identity
        assert rep is not None
        if entry.offers is not None:
            coding = choose(entry.offers, parse_accept_encoding(accept))
            rep = entry.representations.get(coding, rep)
        head = method == "HEAD"
        plan = share.headers
        built = rep.answers.get(plan)
        stamp = int(time()) if plan is not None and plan.timed else 0
        if built is None or built[0] != stamp:
            built = self._build(entry, rep, plan, stamp)
        if fields is not None:
            answer = self._conditional(fields, entry, rep, plan, built, head)
            if answer is not None:
                return None if answer is _CHANGED else answer
        if head:
            return built[2]
        if built[1] is not None:
            return built[1]
        fd = self._reopen(entry, rep)
        if fd < 0:
            return None
        return StaticAnswer(200, built[2].fields, fd=fd, count=rep.size)

    def _conditional(
        self,
        fields: dict[int, bytes],
        entry: _Entry,
        rep: _Representation,
        plan: ShareHeaders | None,
        built: tuple[int, StaticAnswer | None, StaticAnswer, StaticAnswer],
        head: bool,
    ) -> StaticAnswer | None:
        """The answer the request's conditional and range fields make, None for a plain 200
        (RFC 9110 §13.2.2's order; `corral.static.preconditions`)."""
        value = fields.get(_IF_MATCH)
        if value is not None:
            if not etag_matches(value, rep.etag, weak=False):
                return self._bare(412, [], plan)
        else:
            value = fields.get(_IF_UNMODIFIED)
            if value is not None:
                date = parse_http_date(value)
                if date is not None and rep.mtime > date:
                    return self._bare(412, [], plan)
        value = fields.get(_IF_NONE_MATCH)
        if value is not None:
            # the tag it got, sent back as it is: the revalidation of nearly every client
            if value == rep.etag or etag_matches(value, rep.etag, weak=True):
                return built[3]
        else:
            value = fields.get(_IF_MODIFIED)
            if value is not None:
                if value == rep.last_modified:
                    return built[3]
                date = parse_http_date(value)
                if date is not None and rep.mtime <= date:
                    return built[3]
        value = fields.get(_RANGE)
        if value is None or head:
            return None
        condition = fields.get(_IF_RANGE)
        if condition is not None and not _if_range_holds(condition, rep):
            return None
        span = byte_range(value, rep.size)
        if span is None:
            return None
        if span is UNSATISFIABLE:
            return self._bare(416, [("Content-Range", f"bytes */{rep.size}")], plan)
        start, stop = span
        partial = [*built[2].fields, ("Content-Range", f"bytes {start}-{stop}/{rep.size}")]
        if rep.body is not None:
            return StaticAnswer(206, partial, rep.body[start : stop + 1])
        fd = self._reopen(entry, rep)
        if fd < 0:
            return _CHANGED
        return StaticAnswer(206, partial, fd=fd, offset=start, count=stop - start + 1)

    def _reopen(self, entry: _Entry, rep: _Representation) -> int:
        """A large file opened again for its body; -1 when it is no longer the file its
        fields describe (changed, replaced, refused)."""
        try:
            fd = open_file(rep.path, entry.chroot, entry.resolve, openat2=self.openat2)
        except OSError:
            return -1
        try:
            info = os.fstat(fd)
        except OSError:
            os.close(fd)
            return -1
        if (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns) != rep.identity:
            os.close(fd)
            return -1
        return fd

    def _redirect(self, share: Share, request: RouteRequest) -> StaticAnswer:
        """A directory asked for without its trailing slash: 301 to the request's path with
        one (Unit's, from the request's decoded path encoded again, its query kept)."""
        try:
            location = encode_location(request.path()) + "/"
            query = request.query()
        except ValueError:  # a target routing never had to read, unreadable
            return BAD_TARGET
        if query:
            location += "?" + query
        return self._bare(301, [("Location", location)], share.headers)

    @staticmethod
    def _bare(
        status: int, fields: list[tuple[str, str]], plan: ShareHeaders | None
    ) -> StaticAnswer:
        return StaticAnswer(status, fields if plan is None else plan.apply(fields))

    # -- per file, once per ``valid`` seconds

    def _build(
        self, entry: _Entry, rep: _Representation, plan: ShareHeaders | None, stamp: int
    ) -> tuple[int, StaticAnswer | None, StaticAnswer, StaticAnswer]:
        """A representation's answers for one share's headers: 200 for GET (None when the
        body is sent from the file), 200 for HEAD, 304."""
        fields = list(rep.fields)
        if entry.mime:
            fields.insert(0, ("Content-Type", entry.mime))
        fields.append(("Accept-Ranges", "bytes"))
        if rep.coding is not None:
            fields.append(("Content-Encoding", rep.coding))
        validators = list(rep.fields)
        if entry.offers is not None:
            fields.append(("Vary", "Accept-Encoding"))
            validators.append(("Vary", "Accept-Encoding"))
        if plan is not None:
            caching = plan.caching(entry.hashed, stamp or int(time()))
            fields = plan.apply([*fields, *caching])
            validators = plan.apply([*validators, *caching])
        get = None if rep.body is None else StaticAnswer(200, fields, rep.body)
        built = (
            stamp,
            get,
            StaticAnswer(200, fields, length=rep.size),
            StaticAnswer(304, validators, length=0),
        )
        rep.answers[plan] = built
        return built

    def _fill(
        self,
        table: dict[Any, _Entry],
        key: Any,
        path: str,
        chroot: str | None,
        resolve: int,
        old: _Entry | None,
        now: float,
    ) -> _Entry:
        """Resolve ``path`` again and keep what it is for ``valid`` seconds (a 500 is not
        kept). ``old``: what it was, whose bodies are kept if the files did not change."""
        entry = self._resolve(path, chroot, resolve, old, now + self.valid)
        if entry.kind == _REFUSED and entry.status == 500:
            if old is not None:
                del table[key]
                self._count -= 1
                self._held -= old.memory
            return entry
        if old is None:
            if self._count >= self.entries:
                self._evict(table)
            self._count += 1
        else:
            self._held -= old.memory
        table[key] = entry
        self._held += entry.memory
        return entry

    def _evict(self, table: dict[Any, _Entry]) -> None:
        """Make room: the oldest path of ``table``, or of the other table when it is empty."""
        if not table:
            table = self._restricted if table is self._plain else self._plain
        if table:
            oldest = table.pop(next(iter(table)))
            self._count -= 1
            self._held -= oldest.memory

    def _resolve(
        self, path: str, chroot: str | None, resolve: int, old: _Entry | None, deadline: float
    ) -> _Entry:
        mime = self.mime.type_of(path)
        if _escapes(path) or (chroot is not None and _escapes(chroot)):
            return _Entry(_REFUSED, deadline, mime, 403)
        try:
            raw = path.encode("latin-1")
            raw_root = None if chroot is None else chroot.encode("latin-1")
        except UnicodeEncodeError:  # no such name: paths are the request's bytes
            return _Entry(_REFUSED, deadline, mime, 404)
        try:
            return self._open(path, raw, raw_root, resolve, old, deadline, mime)
        except OSError as exc:
            return _Entry(_REFUSED, deadline, mime, _ERRNO_STATUS.get(exc.errno or 0, 500))

    def _open(
        self,
        path: str,
        raw: bytes,
        raw_root: bytes | None,
        resolve: int,
        old: _Entry | None,
        deadline: float,
        mime: str,
    ) -> _Entry:
        """What ``raw`` is, opened under ``raw_root`` with ``resolve``: a file (with its
        siblings), a directory, or not servable. Raises ``OSError`` from opening the file
        itself or reading it; a sibling that fails is no sibling."""
        fd = open_file(raw, raw_root, resolve, openat2=self.openat2)
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                return _Entry(_DIRECTORY, deadline, mime)
            if not stat.S_ISREG(info.st_mode):
                return _Entry(_REFUSED, deadline, mime, 404)
            entry = _Entry(_FILE, deadline, mime)
            entry.chroot = raw_root
            entry.resolve = resolve
            entry.hashed = is_hashed_name(path)
            before = None if old is None else old.representations
            entry.identity = self._representation(entry, fd, info, raw, None, before)
        finally:
            os.close(fd)
        sizes = []
        for coding, suffix in _SIBLINGS:
            sibling_path = raw + suffix
            try:
                sibling = open_file(sibling_path, raw_root, resolve, openat2=self.openat2)
            except OSError:
                continue
            try:
                info = os.fstat(sibling)
                if stat.S_ISREG(info.st_mode):
                    self._representation(entry, sibling, info, sibling_path, coding, before)
                    sizes.append((info.st_size, coding))
            except OSError:
                continue
            finally:
                os.close(sibling)
        if sizes:
            # the smallest first: a client weighing codings alike gets the fewest bytes
            entry.offers = (*(coding for _, coding in sorted(sizes, key=_size_order)), "identity")
        return entry

    def _representation(
        self,
        entry: _Entry,
        fd: int,
        info: os.stat_result,
        path: bytes,
        coding: str | None,
        before: dict[str | None, _Representation] | None,
    ) -> _Representation:
        identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        rep = None if before is None else before.get(coding)
        if rep is None or rep.identity != identity or rep.path != path:
            body = None
            size = info.st_size
            if size <= self.memory_file and self._held + entry.memory + size <= self.memory:
                body = _read(fd, size)
                after = os.fstat(fd)
                if after.st_size != size or after.st_mtime_ns != info.st_mtime_ns:
                    body = None  # written to meanwhile: sent from the file, checked then
            rep = _Representation(path, info, coding, body)
        if rep.body is not None:
            entry.memory += rep.size
        entry.representations[coding] = rep
        return rep

    def close(self) -> None:
        """Forget every path (the cache holds no descriptor: nothing to close)."""
        self._plain.clear()
        self._restricted.clear()
        self._count = 0
        self._held = 0


_CHANGED = StaticAnswer(500, [])  # _conditional: a large file changed since it was resolved


def _size_order(item: tuple[int, str]) -> tuple[int, int]:
    return item[0], [coding for coding, _ in _SIBLINGS].index(item[1])


def _if_range_holds(condition: bytes, rep: _Representation) -> bool:
    """``If-Range``: a strong entity tag equal to the file's, or its exact date."""
    if condition[:1] == b'"' or condition[:2] == b"W/":
        return condition == rep.etag
    return parse_http_date(condition) == rep.mtime


def _escapes(path: str) -> bool:
    """Whether ``path`` has a ``..`` segment (only variables can put one there: the compiler
    refuses one in a share's text) or a NUL."""
    if "\x00" in path:
        return True
    if ".." not in path:
        return False
    return ".." in path.split("/")


def _read(fd: int, size: int) -> bytes:
    """``size`` bytes from the start of ``fd`` (fewer if the file shrank meanwhile)."""
    chunks = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
