"""The request path's budget, stage by stage: each stage of bench/micro.py's request timed alone.

    python bench/stages.py            # the build that runs (CORRAL_NO_EXTENSIONS=1: Python)

Stages, for the wrk request and the hello app (keep-alive, one connection, no sockets):
- parse: the request parser, fed the request, reporting to a sink that keeps nothing;
- environ: `request_environ` from the connection's constant part and the parsed head;
- application: the hello app called with that environ and a `start_response` that keeps
  its arguments (the application's own cost, which no server can save);
- head: `build_head` for its status and headers, the body's length known;
- whole: bench/micro.py's request (the above, plus the connection, the call's bookkeeping
  and the write), for the rest by difference.
Medians of 5 runs of 200,000; microseconds per request.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import micro

from corral.apps.wsgi.environ import connection_environ, request_environ
from corral.core import NAME, RequestParser
from corral.http.head import Limits, RequestSink
from corral.http.response import build_head

N = 200_000


class Keep(RequestSink):
    head = None

    def on_request(self, head) -> None:
        self.head = head

    def on_body(self, chunk: bytes) -> None: ...

    def on_request_end(self) -> None: ...


def timed(step: Callable[[], object]) -> float:
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(N):
            step()
        runs.append((time.perf_counter() - start) / N * 1e6)
    return statistics.median(runs)


def main() -> None:
    request = micro.REQUEST
    sink = Keep()
    parser = RequestParser(sink, Limits())
    parser.feed(request)
    head = sink.head
    base = connection_environ(
        ("127.0.0.1", 8000),
        ("127.0.0.1", 50000),
        multithread=False,
        multiprocess=False,
        file_wrapper=None,
        errors=None,
        http=True,
    )
    environ = request_environ(base, head, None)
    kept: list = []

    def start_response(status, headers, exc_info=None):
        kept[:] = [status, headers]

    micro.hello(environ, start_response)
    status, headers = kept
    prefix = "Date: Mon, 30 Nov 2026 03:31:53 GMT\r\nServer: corral\r\n"
    stages = {
        "parse": timed(lambda: parser.feed(request)),
        "environ": timed(lambda: request_environ(base, head, None)),
        "application": timed(lambda: micro.hello(environ, start_response)),
        "head": timed(lambda: build_head(status, headers, prefix, True, True, "1.1", 13)),
    }
    whole = statistics.median(micro.run(N) for _ in range(5))
    print(f"{NAME}, us per request (medians of 5 x {N:,}):")
    for name, cost in stages.items():
        print(f"  {name:12s} {cost:5.2f}")
    rest = whole - sum(stages.values())
    print(f"  {'the rest':12s} {rest:5.2f}  (connection, pipeline, call bookkeeping, write)")
    print(f"  {'whole':12s} {whole:5.2f}")


if __name__ == "__main__":
    main()
