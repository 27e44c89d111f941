"""The content codings corral compresses with, each behind one shape: `Codec`.

This module owns which library makes each coding, at which levels, with which parameters,
chosen by bench/compressors.py's figures (bench/RESULTS.md, "Response compression codecs"):

- ``gzip`` (and NGINX Unit's ``deflate``, zlib's format, RFC 9110 §8.4.1.2): levels 1 to 3
  with ISA-L (python-isal) when it is installed, 4 to 9 with the standard library's zlib, and
  every level with zlib when ISA-L is not installed. At level 1 ISA-L is 6 times zlib's speed
  on a 100 KiB page (2 times on a 20 KiB answer) and smaller; at 2 and 3, 6.4 and 3.7 times on
  the page, sizes within 2.3 % of zlib's; a stream holds a third of zlib's memory. It has no
  level beyond 3, so 4 to 9 stay zlib's, whose output is nginx's byte for byte (the same
  library, level and window).
- ``br``: Google's ``brotli`` module, levels 0 to 11. A stream keeps a 256 KiB window (lgwin
  18) instead of the library's 4 MiB: a live stream then holds about 1 MiB instead of 4.7.
- ``zstd``: the standard library's ``compression.zstd`` (Python 3.14) or its backport,
  ``backports.zstd``, levels -7 to 19. A stream's window is at most 512 KiB (window_log 19),
  and never over the 8 MiB that RFC 9659 lets an HTTP client refuse beyond.

Every `Codec` makes a whole body in one call (`Codec.whole`) and a stream (`Codec.stream`),
whose `Encoder.feed` returns the compressed piece flushed (zlib's ``Z_SYNC_FLUSH``, brotli's
flush, zstd's block flush): what it returns decompresses, with what came before, to every
byte fed so far, so that each piece of a streamed answer leaves when the application sends it.

The libraries are imported when a codec is first made (`make_codec`: a worker's plan, once),
never when this module is: a configuration without compression imports none of them.
`check_compressor` says, without importing a library, whether a configured coding and level
can be served here (the configuration's validation).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "CODINGS",
    "Codec",
    "Encoder",
    "check_compressor",
    "default_level",
    "make_codec",
]


class _Coding(NamedTuple):
    lowest: int
    highest: int
    default: int
    module: str  # what makes it ("": the standard library's zlib, always there)
    package: str  # what to install when none is (the corral[compression] extra has it)


# Python 3.14's module, or its backport before (a name looked for on 3.11 must not be
# "compression.zstd": any "compression" module on the path would be imported to look)
_ZSTD_MODULE = "compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd"
# The levels of each coding (NGINX Unit's, but zstd's top: above 19 the library's window
# passes the 8 MiB an HTTP client may refuse, RFC 9659) and its default when the compressor
# names none. gzip's is nginx's gzip_comp_level default, 1 (Unit's is zlib's, 6: about 16 %
# smaller than 1 on a web page, and 3.5 times slower than zlib's 1, 21 than ISA-L's,
# bench/RESULTS.md); br's is 4 (Unit's, 11, makes about 1 MB/s); zstd's is the library's.
CODINGS: dict[str, _Coding] = {
    "gzip": _Coding(1, 9, 1, "", ""),
    "deflate": _Coding(1, 9, 1, "", ""),
    "br": _Coding(0, 11, 4, "brotli", "brotli"),
    "zstd": _Coding(-7, 19, 3, _ZSTD_MODULE, "backports.zstd"),
}

_ZSTD_TOP_WHY = " (above 19 the window passes the 8 MiB an HTTP client may refuse, RFC 9659)"
# ISA-L's levels (python-isal): 1 to 3, used for the gzip and deflate levels of the same number
_ISAL_TOP = 3
_BROTLI_STREAM_WINDOW = 18  # log2 of a stream's window: 256 KiB
_ZSTD_STREAM_WINDOW = 19  # log2 of a stream's largest window: 512 KiB


def default_level(encoding: str) -> int:
    """The level of a compressor that names none."""
    return CODINGS[encoding].default


def check_compressor(encoding: str, level: int | None) -> str:
    """Why a compressor of ``encoding`` at ``level`` (None: the default) cannot be served
    here, as the end of a one-line configuration error; "" when it can. Imports nothing."""
    coding = CODINGS.get(encoding)
    if coding is None:
        names = ", ".join(f'"{name}"' for name in CODINGS)
        return f'expected "encoding" one of {names}, got {json.dumps(encoding)}'
    if level is not None and not coding.lowest <= level <= coding.highest:
        why = _ZSTD_TOP_WHY if encoding == "zstd" and level > coding.highest else ""
        return (
            f'expected "level" from {coding.lowest} to {coding.highest} for {encoding}, '
            f"got {level}{why}"
        )
    if coding.module and not _importable(coding.module):
        return (
            f"{encoding} needs the {coding.package} package: "
            f'pip install "corral[compression]" (or {coding.package})'
        )
    return ""


def _importable(name: str) -> bool:
    if name in sys.modules:  # None there: imports of it are blocked
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package that is not there (compression, backports)
        return False


class Encoder:
    """One answer's body as it is compressed, piece by piece.

    `feed` returns the compressed piece, flushed: ``b""`` only for an empty piece (never
    write an empty chunk: it would end a chunked body). `finish` returns the end of the
    stream (the coding's trailer); the encoder is spent after it."""

    __slots__ = ()

    def feed(self, data: bytes) -> bytes:
        raise NotImplementedError

    def finish(self) -> bytes:
        raise NotImplementedError


class Codec:
    """One configured coding at one level: made once per worker, shared by its answers."""

    __slots__ = ("coding", "level", "library")

    def __init__(self, coding: str, level: int, library: str) -> None:
        self.coding = coding  # the Content-Encoding value
        self.level = level
        self.library = library  # the module that compresses, for logs and tests

    def whole(self, data: bytes) -> bytes:
        """``data``, a whole body, compressed (then its length frames the answer)."""
        raise NotImplementedError

    def stream(self) -> Encoder:
        """An encoder for one answer whose body comes in pieces."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<Codec {self.coding} level {self.level} ({self.library})>"


class _ZlibEncoder(Encoder):
    __slots__ = ("_compress", "_flush", "_sync")

    def __init__(self, module: Any, level: int, wbits: int) -> None:
        compressor = module.compressobj(level, module.DEFLATED, wbits)
        self._compress = compressor.compress
        self._flush = compressor.flush
        self._sync = module.Z_SYNC_FLUSH

    def feed(self, data: bytes) -> bytes:
        if not data:
            return b""
        return self._compress(data) + self._flush(self._sync)

    def finish(self) -> bytes:
        return self._flush()


class _ZlibCodec(Codec):
    """gzip (wbits 31: the gzip wrapper) or deflate (wbits 15: the zlib wrapper)."""

    __slots__ = ("_module", "_wbits")

    def __init__(self, coding: str, level: int, module: Any, library: str) -> None:
        super().__init__(coding, level, library)
        self._module = module
        self._wbits = 31 if coding == "gzip" else 15

    def whole(self, data: bytes) -> bytes:
        return self._module.compress(data, self.level, wbits=self._wbits)

    def stream(self) -> Encoder:
        return _ZlibEncoder(self._module, self.level, self._wbits)


class _BrotliEncoder(Encoder):
    __slots__ = ("_finish", "_flush", "_process")

    def __init__(self, module: Any, level: int) -> None:
        compressor = module.Compressor(quality=level, lgwin=_BROTLI_STREAM_WINDOW)
        self._process = compressor.process
        self._flush = compressor.flush
        self._finish = compressor.finish

    def feed(self, data: bytes) -> bytes:
        if not data:
            return b""
        return self._process(data) + self._flush()

    def finish(self) -> bytes:
        return self._finish()


class _BrotliCodec(Codec):
    __slots__ = ("_module",)

    def __init__(self, level: int, module: Any) -> None:
        super().__init__("br", level, module.__name__)
        self._module = module

    def whole(self, data: bytes) -> bytes:
        # the library's own window: a whole body's encoder sizes itself to the body
        return self._module.compress(data, quality=self.level)

    def stream(self) -> Encoder:
        return _BrotliEncoder(self._module, self.level)


class _ZstdEncoder(Encoder):
    __slots__ = ("_block", "_compress", "_flush")

    def __init__(self, compressor: Any, block: int) -> None:
        self._compress = compressor.compress
        self._flush = compressor.flush
        self._block = block

    def feed(self, data: bytes) -> bytes:
        if not data:
            return b""
        return self._compress(data, self._block)

    def finish(self) -> bytes:
        return self._flush()


class _ZstdCodec(Codec):
    """zstd from compression.zstd's API. A whole body reuses an idle compressor (making one
    costs about as much as compressing a 1 KiB body); each is used by one thread at a time
    (list.pop and list.append are atomic)."""

    __slots__ = ("_idle", "_module", "_stream_options")

    def __init__(self, level: int, module: Any) -> None:
        super().__init__("zstd", level, module.__name__)
        self._module = module
        parameter = module.CompressionParameter
        # a stream's memory is mostly its window; every level's own is at least this one
        self._stream_options = {
            parameter.compression_level: level,
            parameter.window_log: _ZSTD_STREAM_WINDOW,
        }
        self._idle: list[Any] = []

    def whole(self, data: bytes) -> bytes:
        idle = self._idle
        try:
            compressor = idle.pop()
        except IndexError:
            compressor = self._module.ZstdCompressor(self.level)
        compressor.set_pledged_input_size(len(data))  # the frame says the size; small tables
        compressed = compressor.compress(data, self._module.ZstdCompressor.FLUSH_FRAME)
        idle.append(compressor)
        return compressed

    def stream(self) -> Encoder:
        compressor = self._module.ZstdCompressor(options=self._stream_options)
        return _ZstdEncoder(compressor, self._module.ZstdCompressor.FLUSH_BLOCK)


def make_codec(encoding: str, level: int | None) -> Codec:
    """The codec for a configured compressor (`check_compressor` passed): imports its
    library. ``level`` None is the coding's default."""
    if level is None:
        level = default_level(encoding)
    return _MAKERS[encoding](encoding, level)


def _zlib_codec(encoding: str, level: int) -> Codec:
    if level <= _ISAL_TOP:
        try:
            from isal import isal_zlib
        except ImportError:
            pass
        else:
            return _ZlibCodec(encoding, level, isal_zlib, "isal")
    import zlib

    return _ZlibCodec(encoding, level, zlib, "zlib")


def _brotli_codec(_encoding: str, level: int) -> Codec:
    return _BrotliCodec(level, importlib.import_module("brotli"))


def _zstd_codec(_encoding: str, level: int) -> Codec:
    return _ZstdCodec(level, importlib.import_module(_ZSTD_MODULE))


_MAKERS: dict[str, Callable[[str, int], Codec]] = {
    "gzip": _zlib_codec,
    "deflate": _zlib_codec,
    "br": _brotli_codec,
    "zstd": _zstd_codec,
}
