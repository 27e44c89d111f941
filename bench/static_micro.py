"""Micro-benchmark of the share engine, StaticFiles.serve: files in a temporary directory, no
sockets, the share routed as the worker routes it.

Each case serves one request of its kind again and again (the path's cache entry is warm, as
on a busy site); "route + serve" builds the RouteRequest and resolves the share per call, as
the worker does per request. The figure is the median of five runs.

    PYTHONPATH=src python bench/static_micro.py [--seconds 0.5]
"""

from __future__ import annotations

import argparse
import os
import tempfile

from routing_micro import per_call

from corral.routing import RouteRequest, compile_routes
from corral.static.files import StaticFiles

WRK = [(b"Host", b"localhost:8000")]
BROWSER = [
    (b"Host", b"localhost:8000"),
    (b"User-Agent", b"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"),
    (b"Accept", b"text/css,*/*;q=0.1"),
    (b"Accept-Language", b"en-US,en;q=0.5"),
    (b"Accept-Encoding", b"gzip, deflate, br, zstd"),
    (b"Connection", b"keep-alive"),
    (b"Referer", b"http://localhost:8000/"),
    (b"Sec-Fetch-Dest", b"style"),
    (b"Sec-Fetch-Mode", b"no-cors"),
    (b"Cache-Control", b"max-age=0"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="length of one run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        for name, size in (("1k.bin", 1024), ("1m.bin", 1 << 20), ("app.css", 20_000)):
            with open(os.path.join(root, name), "wb") as file:
                file.write(os.urandom(size))
        with open(os.path.join(root, "app.css.br"), "wb") as file:
            file.write(os.urandom(4000))
        router = compile_routes([{"action": {"share": root + "$uri"}}])
        safe = compile_routes([{"action": {"share": root + "$uri", "follow_symlinks": False}}])
        files = StaticFiles()

        def case(target: bytes, headers: list[tuple[bytes, bytes]], routes=router):
            request = RouteRequest("GET", target, headers)
            share = routes.resolve("routes", request)
            answer = files.serve(share, request)
            answer.close()
            return lambda: files.serve(share, request).close()

        etag = dict(
            files.serve(
                router.resolve("routes", RouteRequest("GET", b"/1k.bin", WRK)),
                RouteRequest("GET", b"/1k.bin", WRK),
            ).fields
        )["ETag"]
        cases = [
            ("1 KiB, wrk's fields", case(b"/1k.bin", WRK)),
            ("1 KiB, a browser's fields", case(b"/1k.bin", BROWSER)),
            ("1 KiB, follow_symlinks false", case(b"/1k.bin", WRK, safe)),
            (
                "1 KiB, 304 (If-None-Match)",
                case(b"/1k.bin", [*WRK, (b"If-None-Match", etag.encode())]),
            ),
            ("1 KiB, a range", case(b"/1k.bin", [*WRK, (b"Range", b"bytes=0-99")])),
            ("20 KB css, its .br sibling", case(b"/app.css", BROWSER)),
            ("1 MiB, a descriptor (open+fstat)", case(b"/1m.bin", WRK)),
            ("missing (404, cached)", case(b"/nothing", WRK)),
        ]

        def route_and_serve() -> None:
            request = RouteRequest("GET", b"/1k.bin", WRK)
            files.serve(router.resolve("routes", request), request).close()

        cases.append(("route + serve, 1 KiB", route_and_serve))
        print(f"{'case':36} {'answers/s':>12} {'us/answer':>10}")
        for label, call in cases:
            per = per_call(call, args.seconds)
            print(f"{label:36} {1 / per:12,.0f} {per * 1e6:10.2f}")


if __name__ == "__main__":
    main()
