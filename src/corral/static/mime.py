"""The MIME type of a shared file, by its name, as NGINX Unit gives it.

Unit's rules, kept: the type comes from the file name's extension (from its last dot, the dot
included, compared without case), or, for a name without a dot, from the whole name
(``settings.http.static.mime_types`` may list ``"README"``); an unknown name has the type
``""``, and its answer no ``Content-Type`` (a share's ``types`` sees ``""`` for it). A type
may be given several extensions; an extension given to two types keeps the last one.

The table, from lowest to highest precedence: the standard library's own defaults (compiled
into `mimetypes`, without reading the system's /etc/mime.types: 1.8 ms at every worker's
start for 1,400 types nobody serves from a share), then the types browsers need that those
defaults lack or give otherwise (``.js``, fonts, ``.wasm``, ``.avif``...), then the
document's ``mime_types``. Built once per configuration; a lookup is a dict ``get``.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping

__all__ = ["MimeTypes", "extension_of"]

# what a browser needs for a site's files, where the stdlib defaults lack or differ
_WEB_TYPES = {
    ".html": "text/html",
    ".htm": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".json": "application/json",
    ".map": "application/json",
    ".webmanifest": "application/manifest+json",
    ".xml": "application/xml",
    ".rss": "application/rss+xml",
    ".atom": "application/atom+xml",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".rst": "text/x-rst",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".apng": "image/apng",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".avif": "image/avif",
    ".avifs": "image/avif-sequence",
    ".ico": "image/x-icon",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".ttf": "font/ttf",
    ".otf": "font/otf",
    ".wasm": "application/wasm",
    ".pdf": "application/pdf",
    ".zip": "application/zip",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".flac": "audio/flac",
    ".aac": "audio/aac",
    ".wav": "audio/wav",
    ".mid": "audio/midi",
    ".midi": "audio/midi",
    ".mp4": "video/mp4",
    ".webm": "video/webm",
    ".mpeg": "video/mpeg",
    ".mpg": "video/mpeg",
    ".avi": "video/x-msvideo",
}


# Unit folds ASCII letters only (names are bytes; str.lower would fold latin-1 letters too)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _stdlib_defaults() -> dict[str, str]:
    # the defaults compiled into mimetypes, before init() adds the system's files; a Python
    # without that private table gives what init() found instead
    defaults = getattr(mimetypes, "_types_map_default", None)
    if isinstance(defaults, dict):
        return dict(defaults)
    mimetypes.init()
    return dict(mimetypes.types_map)


def extension_of(path: str) -> str:
    """The key of ``path``'s type: its last component's extension from the last dot
    (lower-case), or the whole component when it has no dot."""
    name = path[path.rfind("/") + 1 :]
    dot = name.rfind(".")
    return (name if dot < 0 else name[dot:]).translate(_ASCII_LOWER)


class MimeTypes:
    """The type of each extension: stdlib defaults < the web's < the document's
    ``mime_types`` (``{TYPE: EXTENSION or [EXTENSIONS]}``, Unit's form, JSON text: UTF-8,
    kept as the latin-1 ``str`` of its bytes like every path here)."""

    __slots__ = ("table",)

    def __init__(self, mime_types: Mapping[str, str | list[str]] | None = None) -> None:
        table = _stdlib_defaults()
        table.update(_WEB_TYPES)
        for mime_type, extensions in (mime_types or {}).items():
            for extension in [extensions] if isinstance(extensions, str) else extensions:
                key = extension.encode("utf-8").decode("latin-1")
                table[key.translate(_ASCII_LOWER)] = mime_type
        self.table = table

    def type_of(self, path: str) -> str:
        """``path``'s type, ``""`` when the table does not know its extension."""
        return self.table.get(extension_of(path), "")
