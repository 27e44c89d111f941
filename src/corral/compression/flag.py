"""``--compression CODINGS`` (``gzip,br`` or ``gzip:6,br:4``): NGINX Unit's
``settings.http.compression`` from one flag, for the command line that has no document.

The codings are the server's order of preference; the media types are those worth compressing
(:data:`COMPRESSIBLE_TYPES`, where Unit's default, absent ``types``, would compress every type,
images and archives included)."""

from __future__ import annotations

from typing import Any

# text and the structured formats served as text: what nginx's users list in gzip_types
COMPRESSIBLE_TYPES = [
    "text/*",
    "application/json",
    "application/*+json",
    "application/javascript",
    "application/xml",
    "application/*+xml",
    "application/wasm",
    "image/svg+xml",
]


def parse_codings(value: str) -> dict[str, Any]:
    """The ``settings.http.compression`` table of ``"gzip,br:4"`` (the settings check the
    codings and levels). Raises ValueError with the message for the user."""
    compressors: list[dict[str, Any]] = []
    for item in value.split(","):
        encoding, colon, level = item.strip().partition(":")
        if not encoding:
            raise ValueError(f"expected CODING[:LEVEL],... (gzip, br, zstd), got {value!r}")
        if colon and not level.lstrip("-").isdigit():
            raise ValueError(f"{encoding}: expected a whole number for its level, got {level!r}")
        compressor: dict[str, Any] = {"encoding": encoding.lower()}
        if colon:
            compressor["level"] = int(level)
        compressors.append(compressor)
    return {"types": list(COMPRESSIBLE_TYPES), "compressors": compressors}
