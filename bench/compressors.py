"""Measure the compression libraries corral could use for `settings.http.compression`.

For each content coding (gzip, br, zstd) and each library that can produce it, on three
bodies an application really answers (a 100 KiB HTML page, a 20 KiB JSON list, a 1 KiB JSON
answer), at the levels the settings offer:

- one-shot speed (MB/s of input, best of several repeats: a busy shared machine only ever
  makes a run slower) and the compressed size as a percentage of the body;
- streaming: the body fed in pieces with a flush after each (a page in 4 KiB pieces, and 200
  server-sent events of about 100 bytes), checked by decompressing the output after every
  piece; what the flushes cost in bytes and time against one-shot;
- memory per stream: the resident memory (RSS) a live compressor holds after 100 KiB and
  after 4 MiB fed, and what tracemalloc sees of it (only allocations through Python's
  allocator: zlib's, not the others');
- import time (``-X importtime``) and installed size of each library;
- with ``--nginx``, nginx's own gzip (gzip_comp_level 1 and 6) of the same bodies, fetched
  with curl from an nginx on a loopback port, beside zlib's output at the same level.

Run by hand; it prints Markdown for bench/RESULTS.md:

    .venv/bin/python bench/compressors.py [--nginx] [--quick] [--json FILE]
    .venv/bin/python bench/compressors.py --write-bodies DIR   # the bodies as files, for load runs

Libraries that are not installed are left out of the tables (``pip install isal zlib-ng
brotli brotlicffi zstandard``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.metadata
import inspect
import json
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

KIB = 1024
PAGE_PIECE = 4 * KIB
EVENTS = 200
# 2 and 3 beside the levels offered: where ISA-L's levels fall on zlib's scale
GZIP_LEVELS = (1, 2, 3, 4, 6, 9)
BR_LEVELS = (0, 1, 2, 3, 4, 5, 11)
ZSTD_LEVELS = (1, 3, 6, 19)
# ISA-L has four levels of its own (0-3), none of them zlib's: it is measured at each
ISAL_LEVELS = (0, 1, 2, 3)


# ---------------------------------------------------------------------------------------------
# The bodies: deterministic for one Python version, built from the standard library's own
# docstrings (real English prose and code) so that no file has to be downloaded.


def _docstrings() -> Iterator[tuple[str, str, str]]:
    """(qualified name, signature, docstring) of public functions and classes of a few
    standard modules, in a fixed order."""
    for module_name in (
        "json",
        "textwrap",
        "argparse",
        "http.client",
        "email.message",
        "shlex",
        "logging",
        "subprocess",
        "pathlib",
        "configparser",
    ):
        module = importlib.import_module(module_name)
        for name in sorted(vars(module)):
            obj = getattr(module, name)
            if name.startswith("_") or getattr(obj, "__module__", None) != module_name:
                continue
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            yield from _entry(f"{module_name}.{name}", obj)
            if inspect.isclass(obj):
                for method_name, method in sorted(vars(obj).items()):
                    if not method_name.startswith("_") and inspect.isfunction(method):
                        yield from _entry(f"{module_name}.{name}.{method_name}", method)


def _entry(name: str, obj: Any) -> Iterator[tuple[str, str, str]]:
    doc = inspect.getdoc(obj)
    if doc:
        try:
            # without the addresses of default objects: the page is the same in every run
            signature = re.sub(r" at 0x[0-9a-f]+", "", str(inspect.signature(obj)))
        except (TypeError, ValueError):
            signature = "(...)"
        yield name, signature, doc


def html_page(size: int = 100 * KIB) -> bytes:
    """A documentation page of `size` bytes: site chrome, then one section per entry."""
    from html import escape

    head = textwrap.dedent(
        """\
        <!DOCTYPE html>
        <html lang="en">
        <head>
          <meta charset="utf-8">
          <meta name="viewport" content="width=device-width, initial-scale=1">
          <title>Library reference</title>
          <link rel="stylesheet" href="/static/css/site.3f2a9c.css">
          <script defer src="/static/js/site.91be07.js"></script>
        </head>
        <body class="reference">
        <header class="site-header"><nav class="nav">
          <a class="nav-link" href="/">Home</a> <a class="nav-link" href="/guide/">Guide</a>
          <a class="nav-link active" href="/reference/">Reference</a>
          <a class="nav-link" href="/blog/">Blog</a> <a class="nav-link" href="/about/">About</a>
        </nav></header>
        <main class="content">
        """
    )
    tail = (
        '</main>\n<footer class="site-footer"><p>&copy; 2026 Example</p></footer>\n'
        "</body>\n</html>\n"
    )
    parts = [head]
    total = len(head) + len(tail)
    for name, signature, doc in _docstrings():
        paragraphs = "".join(
            f"  <p>{escape(p.strip())}</p>\n" for p in doc.split("\n\n") if p.strip()
        )
        anchor = name.replace(".", "-").lower()
        section = (
            f'<section class="entry" id="{anchor}">\n'
            f'  <h2 class="entry-title"><a href="#{anchor}"><code>{escape(name)}'
            f"{escape(signature)}</code></a></h2>\n{paragraphs}</section>\n"
        )
        if total + len(section) > size:
            break
        parts.append(section)
        total += len(section)
    page = ("".join(parts) + tail).encode()
    return page + b" " * (size - len(page))  # padded to the exact size with trailing space


def json_records(size: int) -> bytes:
    """A REST list answer (users with a profile) of at most `size` bytes, compact JSON."""
    words = sorted(
        {w.lower() for _, _, doc in _docstrings() for w in re.findall(r"[a-z]{3,}", doc, re.I)}
    )
    first = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
    last = ["smith", "jones", "garcia", "miller", "davis", "lopez", "wilson", "moore", "clark"]
    rng = random.Random(32)
    records: list[dict[str, Any]] = []
    text = "[]"
    while True:
        given, family = rng.choice(first), rng.choice(last)
        record = {
            "id": len(records) + 1,
            "username": f"{given}.{family}{rng.randrange(100)}",
            "email": f"{given}.{family}@example.com",
            "first_name": given.title(),
            "last_name": family.title(),
            "is_active": rng.random() < 0.9,
            "date_joined": f"2026-{rng.randrange(1, 13):02}-{rng.randrange(1, 29):02}T"
            f"{rng.randrange(24):02}:{rng.randrange(60):02}:{rng.randrange(60):02}Z",
            "groups": sorted(
                rng.sample(["staff", "editors", "billing", "support"], rng.randrange(3))
            ),
            "profile": {
                "bio": " ".join(rng.choice(words) for _ in range(rng.randrange(6, 16))),
                "followers": rng.randrange(5000),
                "url": f"https://example.com/users/{len(records) + 1}/",
            },
        }
        candidate = json.dumps([*records, record], separators=(",", ":"))
        if len(candidate) > size:
            return text.encode()
        records.append(record)
        text = candidate


def sse_events(count: int = EVENTS) -> list[bytes]:
    """Server-sent events of about 100 bytes each: a ticker's updates."""
    rng = random.Random(6)
    symbols = ["ACME", "GLOBX", "INITECH", "UMBRL", "STARK", "WAYNE"]
    events = []
    for i in range(count):
        data = {
            "seq": i,
            "symbol": rng.choice(symbols),
            "price": round(rng.uniform(10, 500), 2),
            "change": round(rng.uniform(-3, 3), 2),
            "at": f"2026-12-06T04:{i // 60 % 60:02}:{i % 60:02}Z",
        }
        events.append(f"id: {i}\nevent: tick\ndata: {json.dumps(data)}\n\n".encode())
    return events


def bodies() -> dict[str, bytes]:
    return {
        "html 100 KiB": html_page(),
        "json 20 KiB": json_records(20 * KIB),
        "json 1 KiB": json_records(KIB),
    }


# ---------------------------------------------------------------------------------------------
# The libraries, behind one shape: one-shot, and a stream with a flush after each piece.


@dataclass(frozen=True)
class Codec:
    coding: str  # the content coding: gzip, br, zstd
    library: str  # the distribution's name on PyPI ("stdlib" for zlib)
    module: str  # what is imported
    levels: tuple[int, ...]
    one_shot: Callable[[bytes, int], bytes]
    stream: Callable[[int], Any]  # level -> object with feed(bytes) -> bytes, finish() -> bytes
    decompress: Callable[[], Any]  # -> object with feed(bytes) -> bytes
    variant: str = ""  # a parameter beside the level (a smaller window...)


class _ZlibStream:
    """gzip from a zlib-shaped module (zlib, isal_zlib, zlib_ng): Z_SYNC_FLUSH after each."""

    def __init__(self, module: Any, level: int, mem_level: int = 8) -> None:
        self._c = module.compressobj(level, module.DEFLATED, 31, mem_level)
        self._sync = module.Z_SYNC_FLUSH

    def feed(self, data: bytes) -> bytes:
        return self._c.compress(data) + self._c.flush(self._sync)

    def finish(self) -> bytes:
        return self._c.flush()


class _ZlibInflate:
    def __init__(self) -> None:
        self._d = zlib.decompressobj(31)

    def feed(self, data: bytes) -> bytes:
        return self._d.decompress(data)


class _BrotliStream:
    def __init__(self, module: Any, level: int, lgwin: int = 22) -> None:
        self._c = module.Compressor(quality=level, lgwin=lgwin)

    def feed(self, data: bytes) -> bytes:
        return self._c.process(data) + self._c.flush()

    def finish(self) -> bytes:
        return self._c.finish()


class _BrotliInflate:
    def __init__(self) -> None:
        import brotli

        self._d = brotli.Decompressor()

    def feed(self, data: bytes) -> bytes:
        return self._d.process(data)


class _ZstdStream:
    def __init__(self, level: int, window_log: int = 0) -> None:
        import zstandard

        if window_log:
            params = zstandard.ZstdCompressionParameters.from_level(level, window_log=window_log)
            compressor = zstandard.ZstdCompressor(compression_params=params)
        else:
            compressor = zstandard.ZstdCompressor(level=level)
        self._c = compressor.compressobj()
        self._block = zstandard.COMPRESSOBJ_FLUSH_BLOCK

    def feed(self, data: bytes) -> bytes:
        return self._c.compress(data) + self._c.flush(self._block)

    def finish(self) -> bytes:
        return self._c.flush()


class _ZstdInflate:
    def __init__(self) -> None:
        import zstandard

        self._d = zstandard.ZstdDecompressor().decompressobj()

    def feed(self, data: bytes) -> bytes:
        return self._d.decompress(data)


def _zlib_codec(library: str, module_name: str, levels: tuple[int, ...]) -> Codec:
    module = importlib.import_module(module_name)
    return Codec(
        "gzip",
        library,
        module_name,
        levels,
        lambda data, level: module.compress(data, level, wbits=31),
        lambda level: _ZlibStream(module, level),
        _ZlibInflate,
    )


def _brotli_codec(library: str, module_name: str) -> Codec:
    module = importlib.import_module(module_name)
    return Codec(
        "br",
        library,
        module_name,
        BR_LEVELS,
        lambda data, level: module.compress(data, quality=level),
        lambda level: _BrotliStream(module, level),
        _BrotliInflate,
    )


def _zstd_codec() -> Codec:
    import zstandard

    compressors: dict[int, Any] = {}

    def one_shot(data: bytes, level: int) -> bytes:
        if level not in compressors:  # a compressor is reusable: a server keeps one per level
            compressors[level] = zstandard.ZstdCompressor(level=level)
        return compressors[level].compress(data)

    return Codec("zstd", "zstandard", "zstandard", ZSTD_LEVELS, one_shot, _ZstdStream, _ZstdInflate)


class _StdZstdStream:
    """zstd from compression.zstd (Python 3.14) or its backport: one call per piece."""

    def __init__(self, module: Any, level: int, window_log: int = 0) -> None:
        options = {module.CompressionParameter.compression_level: level}
        if window_log:
            options[module.CompressionParameter.window_log] = window_log
        self._c = module.ZstdCompressor(options=options)
        self._block = module.ZstdCompressor.FLUSH_BLOCK

    def feed(self, data: bytes) -> bytes:
        return self._c.compress(data, self._block)

    def finish(self) -> bytes:
        return self._c.flush()


def _std_zstd_whole(module: Any, compressors: dict[int, Any], data: bytes, level: int) -> bytes:
    if level not in compressors:  # reused, as a server would (`compress()` makes one a call)
        compressors[level] = module.ZstdCompressor(level)
    return compressors[level].compress(data, module.ZstdCompressor.FLUSH_FRAME)


def _std_zstd_codec() -> Codec:
    name = "compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd"
    module = importlib.import_module(name)
    return Codec(
        "zstd",
        name,
        name,
        ZSTD_LEVELS,
        partial(_std_zstd_whole, module, {}),
        lambda level: _StdZstdStream(module, level),
        _ZstdInflate,
    )


def codecs() -> list[Codec]:
    """Every codec whose library is installed."""
    makers: list[Callable[[], Codec]] = [
        lambda: _zlib_codec("stdlib", "zlib", GZIP_LEVELS),
        lambda: _zlib_codec("isal", "isal.isal_zlib", ISAL_LEVELS),
        lambda: _zlib_codec("zlib-ng", "zlib_ng.zlib_ng", GZIP_LEVELS),
        lambda: _brotli_codec("brotli", "brotli"),
        lambda: _brotli_codec("brotlicffi", "brotlicffi"),
        _zstd_codec,
        _std_zstd_codec,
    ]
    found = []
    for make in makers:
        try:
            found.append(make())
        except ImportError as exc:
            print(f"<!-- left out: {exc} -->", file=sys.stderr)
    return found


def library_version(codec: Codec) -> str:
    if codec.library == "stdlib":
        return f"zlib {zlib.ZLIB_RUNTIME_VERSION}"
    if codec.library == "compression.zstd":
        return f"libzstd {importlib.import_module(codec.module).zstd_version}"
    version = importlib.metadata.version(codec.library)
    if codec.library == "zstandard":
        import zstandard

        return f"{version} (libzstd {'.'.join(map(str, zstandard.ZSTD_VERSION))})"
    if codec.library == "backports.zstd":
        return f"{version} (libzstd {importlib.import_module(codec.module).zstd_version})"
    if codec.library == "zlib-ng":
        import zlib_ng.zlib_ng

        return f"{version} (zlib-ng {zlib_ng.zlib_ng.ZLIBNG_VERSION})"
    return version


# ---------------------------------------------------------------------------------------------
# Measurements.


def best_seconds(run: Callable[[], object], budget: float) -> float:
    """CPU seconds one call of `run` takes: the best of 7 repeats, each long enough to time.
    The thread's CPU time, not the wall clock: on a shared machine the time this process
    waits for a core is not the library's."""
    clock = time.thread_time
    start = clock()
    run()
    once = max(clock() - start, 1e-6)
    number = max(1, int(budget / 7 / once))
    best = float("inf")
    for _ in range(7 if once < budget else 2):
        start = clock()
        for _ in range(number):
            run()
        best = min(best, (clock() - start) / number)
    return best


def check_stream(codec: Codec, level: int, pieces: list[bytes]) -> tuple[int, bool]:
    """Compressed size of `pieces` streamed with a flush after each, and whether the output
    decompressed after each piece gave back every byte fed so far."""
    encoder = codec.stream(level)
    decoder = codec.decompress()
    fed = out = b""
    total = 0
    flushed = True
    for piece in pieces:
        chunk = encoder.feed(piece)
        total += len(chunk)
        fed += piece
        out += decoder.feed(chunk)
        flushed = flushed and out == fed
    chunk = encoder.finish()
    total += len(chunk)
    out += decoder.feed(chunk)
    assert out == fed, f"{codec.library} {level}: the stream does not decompress to its input"
    return total, flushed


def stream_seconds(codec: Codec, level: int, pieces: list[bytes], budget: float) -> float:
    def run() -> None:
        encoder = codec.stream(level)
        for piece in pieces:
            encoder.feed(piece)
        encoder.finish()

    return best_seconds(run, budget)


def speed_table(found: list[Codec], named: dict[str, bytes], budget: float) -> list[dict[str, Any]]:
    rows = []
    for codec in found:
        for level in codec.levels:
            for body_name, body in named.items():
                compressed = codec.one_shot(body, level)
                assert codec.decompress().feed(compressed) == body
                seconds = best_seconds(lambda c=codec, b=body, lv=level: c.one_shot(b, lv), budget)
                rows.append(
                    {
                        "coding": codec.coding,
                        "library": codec.library,
                        "level": level,
                        "body": body_name,
                        "size": len(body),
                        "compressed": len(compressed),
                        "seconds": seconds,
                    }
                )
    return rows


def stream_table(
    found: list[Codec], html: bytes, events: list[bytes], budget: float
) -> list[dict[str, Any]]:
    page = [html[i : i + PAGE_PIECE] for i in range(0, len(html), PAGE_PIECE)]
    rows = []
    for codec in found:
        for level in codec.levels:
            whole = len(codec.one_shot(html, level))
            whole_seconds = best_seconds(lambda c=codec, lv=level: c.one_shot(html, lv), budget)
            page_size, page_flushed = check_stream(codec, level, page)
            page_seconds = stream_seconds(codec, level, page, budget)
            events_whole = len(codec.one_shot(b"".join(events), level))
            events_size, events_flushed = check_stream(codec, level, events)
            events_seconds = stream_seconds(codec, level, events, budget)
            rows.append(
                {
                    "coding": codec.coding,
                    "library": codec.library,
                    "level": level,
                    "flushes": page_flushed and events_flushed,
                    "page_whole": whole,
                    "page_streamed": page_size,
                    "page_seconds_whole": whole_seconds,
                    "page_seconds_streamed": page_seconds,
                    "events_bytes": sum(map(len, events)),
                    "events_whole": events_whole,
                    "events_streamed": events_size,
                    "events_seconds": events_seconds,
                }
            )
    return rows


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_probe(library: str, level: int, variant: str, count: int, fed: int) -> dict[str, float]:
    """In this (fresh) process: `count` live streams, each fed `fed` bytes in 4 KiB pieces
    with a flush after each; RSS and tracemalloc's count per stream."""
    codec = next(c for c in codecs() if c.library == library)
    html = html_page()
    data = (html * (fed // len(html) + 1))[:fed]
    pieces = [data[i : i + PAGE_PIECE] for i in range(0, len(data), PAGE_PIECE)]

    def make() -> Any:
        if variant.startswith("lgwin="):
            return _BrotliStream(importlib.import_module(codec.module), level, int(variant[6:]))
        if variant.startswith("window_log=") and codec.library == "zstandard":
            return _ZstdStream(level, int(variant[11:]))
        if variant.startswith("window_log="):
            return _StdZstdStream(importlib.import_module(codec.module), level, int(variant[11:]))
        if variant.startswith("memLevel="):
            return _ZlibStream(importlib.import_module(codec.module), level, int(variant[9:]))
        return codec.stream(level)

    def fill(n: int) -> list[Any]:
        streams = []
        for _ in range(n):
            stream = make()
            for piece in pieces:
                stream.feed(piece)
            streams.append(stream)
        return streams

    fill(2)  # first use: the library's own lazily built tables, the allocator's arenas
    gc.collect()
    before = _rss()
    streams = fill(count)
    gc.collect()
    rss = (_rss() - before) / count
    del streams
    gc.collect()
    tracemalloc.start()
    streams = fill(count)
    traced = tracemalloc.get_traced_memory()[0] / count
    tracemalloc.stop()
    del streams
    return {"rss": rss, "traced": traced}


def memory_table(found: list[Codec], count: int) -> list[dict[str, Any]]:
    plans: list[tuple[str, int, str]] = [
        ("stdlib", 1, ""),
        ("stdlib", 6, ""),
        ("stdlib", 1, "memLevel=9"),
        ("stdlib", 1, "memLevel=4"),
        ("isal", 1, ""),
        ("zlib-ng", 1, ""),
        ("zlib-ng", 6, ""),
        ("brotli", 1, ""),
        ("brotli", 4, ""),
        ("brotli", 4, "lgwin=18"),
        ("brotli", 11, "lgwin=18"),
        ("brotlicffi", 4, ""),
        ("zstandard", 1, ""),
        ("zstandard", 3, ""),
        ("zstandard", 3, "window_log=19"),
        ("zstandard", 6, "window_log=19"),
        ("zstandard", 12, "window_log=19"),
        ("zstandard", 19, ""),
        ("zstandard", 19, "window_log=19"),
        ("backports.zstd", 3, ""),
        ("backports.zstd", 3, "window_log=19"),
    ]
    installed = {c.library for c in found}
    rows = []
    for library, level, variant in plans:
        if library not in installed:
            continue
        # the slowest levels (under 3 MB/s) with fewer streams, to keep the run in minutes
        streams = count if level < 11 else min(count, 6)
        for fed in (100 * KIB, 4096 * KIB):
            result = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--memory-probe",
                    library,
                    str(level),
                    variant or "-",
                    str(streams),
                    str(fed),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(result.stdout)
            rows.append(
                {"library": library, "level": level, "variant": variant, "fed": fed, **figures}
            )
    return rows


def import_table(found: list[Codec]) -> list[dict[str, Any]]:
    rows = []
    for codec in found:
        best = float("inf")
        for _ in range(5):
            result = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", f"import {codec.module}"],
                capture_output=True,
                text=True,
                check=True,
            )
            # the last line is the module asked for, with everything it imported (cumulative)
            last = result.stderr.strip().splitlines()[-1]
            best = min(best, int(last.split("|")[1]))
        size = 0
        if codec.library not in ("stdlib", "compression.zstd"):
            files = importlib.metadata.files(codec.library) or []
            size = sum(f.locate().stat().st_size for f in files if f.locate().exists())
            if codec.library == "brotlicffi":  # its C extension needs cffi at run time
                size += sum(
                    f.locate().stat().st_size
                    for f in importlib.metadata.files("cffi") or []
                    if f.locate().exists()
                )
        rows.append(
            {"library": codec.library, "module": codec.module, "import_us": best, "installed": size}
        )
    return rows


# ---------------------------------------------------------------------------------------------
# corral's decision per answer (corral.compression.rules), what a request pays for compression
# being configured.

DECISION_DOCUMENT = {
    "listeners": {"127.0.0.1:8000": {"pass": "applications/app"}},
    "applications": {"app": {"type": "python", "module": "app"}},
    "settings": {
        "http": {
            "compression": {
                "types": ["text/html", "application/json"],
                "compressors": [{"encoding": "gzip", "level": 1}],
            }
        }
    },
}


def decision_table() -> list[dict[str, Any]]:
    """Nanoseconds `CompressionRules.decide` takes for answers it excludes and for one it
    compresses (`timeit`, best of 5), the function called directly."""
    import timeit

    from corral.compression import build_rules
    from corral.config.document import validate_document

    rules = build_rules(validate_document(DECISION_DOCUMENT).settings.http.compression)
    assert rules is not None
    accept = "gzip, deflate, br, zstd"
    html = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", "5000")]
    cases = [
        (
            "hello world, 13 bytes of text/plain (below min_length)",
            "GET",
            200,
            [("Content-Type", "text/plain"), ("Content-Length", "13")],
            accept,
            13,
        ),
        (
            "5000 bytes of text/plain (a type not listed)",
            "GET",
            200,
            [("Content-Type", "text/plain"), ("Content-Length", "5000")],
            accept,
            5000,
        ),
        ("5000 bytes of text/html, no Accept-Encoding (Vary added)", "GET", 200, html, None, 5000),
        ("5000 bytes of text/html, gzip chosen", "GET", 200, html, accept, 5000),
    ]
    rows = []
    decide = rules.decide
    for what, method, status, headers, accept_encoding, length in cases:

        def call(
            m: str = method,
            s: int = status,
            h: Any = headers,
            a: Any = accept_encoding,
            n: int = length,
        ) -> object:
            return decide(m, s, h, a, n)

        number = 200_000
        best = min(timeit.repeat(call, number=number, repeat=5, timer=time.thread_time))
        empty = min(timeit.repeat(lambda: None, number=number, repeat=5, timer=time.thread_time))
        rows.append({"case": what, "ns": (best - empty) / number * 1e9})
    return rows


# ---------------------------------------------------------------------------------------------
# nginx's gzip, for the ratio.

NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid nginx.pid;
error_log stderr warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    types {{ text/html html; application/json json; }}
    client_body_temp_path tmp;
    proxy_temp_path tmp;
    fastcgi_temp_path tmp;
    uwsgi_temp_path tmp;
    scgi_temp_path tmp;
    gzip on;
    gzip_comp_level {level};
    gzip_types application/json;
    gzip_min_length 0;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def nginx_table(named: dict[str, bytes]) -> list[dict[str, Any]]:
    from corral.compression import make_codec

    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "root")
        root.mkdir()
        Path(tmp, "tmp").mkdir()
        files = {}
        for name, body in named.items():
            file_name = name.replace(" ", "-").replace("-KiB", "k") + (
                ".html" if "html" in name else ".json"
            )
            Path(root, file_name).write_bytes(body)
            files[name] = file_name
        for level in (1, 6):
            port = _free_port()
            conf = Path(tmp, "nginx.conf")
            conf.write_text(NGINX_CONF.format(level=level, port=port, root=root))
            server = subprocess.Popen([nginx, "-p", tmp, "-c", str(conf), "-e", "stderr"])
            try:
                for _ in range(100):
                    with socket.socket() as probe:
                        if probe.connect_ex(("127.0.0.1", port)) == 0:
                            break
                    time.sleep(0.05)
                for name, file_name in files.items():
                    out = Path(tmp, "out.gz")
                    subprocess.run(
                        [
                            "curl",
                            "-sS",
                            "--fail",
                            "-H",
                            "Accept-Encoding: gzip",
                            "-o",
                            str(out),
                            f"http://127.0.0.1:{port}/{file_name}",
                        ],
                        check=True,
                    )
                    got = out.read_bytes()
                    assert zlib.decompress(got, 31) == named[name], "nginx did not gzip the body"
                    body = named[name]
                    ours = len(zlib.compress(body, level, wbits=31))
                    codec = make_codec("gzip", level)
                    rows.append(
                        {
                            "level": level,
                            "body": name,
                            "size": len(body),
                            "nginx": len(got),
                            "zlib": ours,
                            "corral": len(codec.whole(body)),
                            "corral_library": codec.library,
                        }
                    )
            finally:
                server.terminate()
                server.wait()
    return rows


# ---------------------------------------------------------------------------------------------
# Markdown.


def _mbs(size: int, seconds: float) -> str:
    return (
        f"{size / seconds / 1e6:,.0f}" if size / seconds >= 1e7 else f"{size / seconds / 1e6:,.1f}"
    )


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %"


def render(report: dict[str, Any]) -> str:
    lines = [
        f"Measured by `bench/compressors.py` on {report['date']} ({report['machine']}; "
        f"CPython {report['python']}). Speeds are MB/s of input on one core, best of 7 "
        "repeats of the thread's CPU time; sizes are the output's, as a percentage of the body.",
        "",
        "| library | version |",
        "| --- | --- |",
        *(f"| {lib} | {version} |" for lib, version in report["versions"].items()),
        "",
        "### One-shot: speed (MB/s) and size",
        "",
    ]
    body_names = list(report["bodies"])
    lines.append("| coding | library | level | " + " | ".join(body_names) + " |")
    lines.append("| --- | --- | ---: | " + " | ".join("---:" for _ in body_names) + " |")
    grouped: dict[tuple[str, str, int], dict[str, dict[str, Any]]] = {}
    for row in report["speed"]:
        grouped.setdefault((row["coding"], row["library"], row["level"]), {})[row["body"]] = row
    for (coding, library, level), by_body in grouped.items():
        cells = [
            f"{_mbs(r['size'], r['seconds'])} MB/s, {_pct(r['compressed'], r['size'])}"
            for r in (by_body[name] for name in body_names)
        ]
        lines.append(f"| {coding} | {library} | {level} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Streaming with a flush after each piece",
        "",
        "The 100 KiB page in 4 KiB pieces, and 200 server-sent events (about 100 bytes each), "
        "each piece followed by the library's flush (zlib's `Z_SYNC_FLUSH`, brotli's "
        "`flush()`, zstandard's `COMPRESSOBJ_FLUSH_BLOCK`). *flushes*: the output, decompressed "
        "after every piece, gave back every byte fed so far. Sizes against the same input "
        "compressed in one piece; time is the whole stream's.",
        "",
        "| coding | library | level | flushes | page: size, one-shot → streamed "
        "| page: time / one-shot's | events: size, one-shot → streamed | events: µs per event |",
        "| --- | --- | ---: | :---: | --- | ---: | --- | ---: |",
    ]
    for r in report["stream"]:
        lines.append(
            f"| {r['coding']} | {r['library']} | {r['level']} | "
            f"{'yes' if r['flushes'] else 'no'} | "
            f"{_pct(r['page_whole'], 100 * KIB)} → {_pct(r['page_streamed'], 100 * KIB)} | "
            f"{r['page_seconds_streamed'] / r['page_seconds_whole']:.2f} | "
            f"{_pct(r['events_whole'], r['events_bytes'])} → "
            f"{_pct(r['events_streamed'], r['events_bytes'])} | "
            f"{r['events_seconds'] / EVENTS * 1e6:.1f} |"
        )
    lines += [
        "",
        "### Memory per live stream",
        "",
        f"{report['memory_count']} compressors (6 at br 11 and zstd 19) alive at once in a fresh "
        "process, each fed the "
        "page (repeated) in 4 KiB pieces with a flush after each; resident memory (RSS, "
        "`/proc/self/statm`) grown, per compressor, and what tracemalloc counts (only what the "
        "library allocates through Python's allocator).",
        "",
        "| library | level | parameter | RSS after 100 KiB | RSS after 4 MiB | tracemalloc |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    memory: dict[tuple[str, int, str], dict[int, dict[str, Any]]] = {}
    for row in report["memory"]:
        memory.setdefault((row["library"], row["level"], row["variant"]), {})[row["fed"]] = row
    for (library, level, variant), by_fed in memory.items():
        small, large = by_fed[100 * KIB], by_fed[4096 * KIB]
        lines.append(
            f"| {library} | {level} | {variant or 'default'} | {small['rss'] / KIB:,.0f} KiB | "
            f"{large['rss'] / KIB:,.0f} KiB | {large['traced'] / KIB:,.0f} KiB |"
        )
    lines += [
        "",
        "### Import time and size",
        "",
        "`python -X importtime -c 'import MODULE'`, the module's cumulative time, best of 5; "
        "the installed files of the distribution (brotlicffi: with cffi, which it needs).",
        "",
        "| library | module | import | installed |",
        "| --- | --- | ---: | ---: |",
    ]
    for r in report["imports"]:
        installed = f"{r['installed'] / KIB:,.0f} KiB" if r["installed"] else "(stdlib)"
        lines.append(
            f"| {r['library']} | `{r['module']}` | {r['import_us'] / 1000:.1f} ms | {installed} |"
        )
    if report.get("decisions"):
        lines += [
            "",
            "### corral's decision per answer",
            "",
            "`CompressionRules.decide` (corral.compression.rules) with `types` "
            '`["text/html", "application/json"]` and one gzip compressor (min_length 256), '
            "called directly, `timeit` best of 5 less an empty call's time: what an answer "
            "pays on a listener with compression configured.",
            "",
            "| answer | ns per answer |",
            "| --- | ---: |",
        ]
        for r in report["decisions"]:
            lines.append(f"| {r['case']} | {r['ns']:,.0f} |")
    if report.get("nginx"):
        lines += [
            "",
            "### nginx's gzip beside zlib's and corral's",
            "",
            f"{report['nginx_version']} (`gzip on; gzip_comp_level N; gzip_min_length 0`), the "
            "bodies as files, fetched with `curl -H 'Accept-Encoding: gzip'`; beside them "
            "`zlib.compress(body, N, wbits=31)` and corral's gzip codec at level N (a whole "
            "body: `corral.compression.make_codec('gzip', N).whole(body)`, its library named).",
            "",
            "| level | body | nginx | zlib | zlib / nginx | corral | corral / nginx |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in report["nginx"]:
            lines.append(
                f"| {r['level']} | {r['body']} | "
                f"{r['nginx']:,} B ({_pct(r['nginx'], r['size'])}) | "
                f"{r['zlib']:,} B ({_pct(r['zlib'], r['size'])}) | {r['zlib'] / r['nginx']:.3f} | "
                f"{r['corral']:,} B ({r['corral_library']}) | {r['corral'] / r['nginx']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def machine() -> str:
    model = ""
    try:
        with open("/proc/cpuinfo") as info:
            model = next(
                line.split(":", 1)[1].strip() for line in info if line.startswith("model name")
            )
    except (OSError, StopIteration):
        model = platform.processor()
    return f"{model}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nginx", action="store_true", help="also measure nginx's gzip (curl)")
    parser.add_argument("--quick", action="store_true", help="shorter timings (a smoke run)")
    parser.add_argument("--json", help="also write the raw figures to this file")
    parser.add_argument(
        "--memory-count", type=int, default=40, help="live streams per memory probe"
    )
    parser.add_argument(
        "--write-bodies", metavar="DIR", help="write the bodies as files, measure nothing"
    )
    parser.add_argument("--memory-probe", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_probe:
        library, level, variant, count, fed = args.memory_probe
        figures = memory_probe(
            library, int(level), "" if variant == "-" else variant, int(count), int(fed)
        )
        print(json.dumps(figures))
        return
    named = bodies()
    if args.write_bodies:
        out = Path(args.write_bodies)
        out.mkdir(parents=True, exist_ok=True)
        (out / "page-100k.html").write_bytes(named["html 100 KiB"])
        (out / "list-20k.json").write_bytes(named["json 20 KiB"])
        (out / "answer-1k.json").write_bytes(named["json 1 KiB"])
        (out / "events.txt").write_bytes(b"".join(sse_events()))
        print(f"wrote the bodies to {out}")
        return
    budget = 0.05 if args.quick else 0.4
    found = codecs()
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "python": platform.python_version(),
        "versions": {c.library: library_version(c) for c in found},
        "bodies": {name: len(body) for name, body in named.items()},
        "speed": speed_table(found, named, budget),
        "stream": stream_table(found, named["html 100 KiB"], sse_events(), budget),
        "memory_count": args.memory_count,
        "memory": memory_table(found, args.memory_count),
        "imports": import_table(found),
        "decisions": decision_table(),
    }
    if args.nginx:
        report["nginx_version"] = subprocess.run(
            [shutil.which("nginx") or "/usr/sbin/nginx", "-v"], capture_output=True, text=True
        ).stderr.strip()
        report["nginx"] = nginx_table(named)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    print(render(report))


if __name__ == "__main__":
    main()
