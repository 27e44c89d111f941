"""Micro-benchmark of the request path without sockets: parse -> environ -> app -> bytes.

Feeds pipelined-free keep-alive requests to one HttpConnection over a fake
transport and reports the cost of one request in microseconds. Run it before
and after a change to the hot path, in the same session:

    python bench/micro.py [--profile] [--request-timeout SECONDS] [--routed] [--latency]
                          [--forwarded [--proxied]]
    python bench/micro.py --share   # a 1 KiB file from a share route (from memory)
    python bench/micro.py --share --revalidate   # its 304, for If-None-Match with its ETag
    python bench/micro.py --uwsgi   # one uwsgi packet per connection, as nginx's uwsgi_pass
    python bench/micro.py --llhttp  # with the llhttp parser corral had before its own
    python bench/micro.py --asgi    # the ASGI adapter (bench/apps/hello_asgi.py), on uvloop
    python bench/micro.py --threads 4   # the application on 4 threads, on uvloop
    CORRAL_NO_EXTENSIONS=1 python bench/micro.py   # the pure-Python core
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from functools import partial
from pathlib import Path

from corral.apps.deadline import Watchdog
from corral.apps.wsgi.runner import WsgiAdapter
from corral.core import NAME
from corral.http.head import Limits
from corral.observe.errorlog import setup_error_log
from corral.server.connection import HttpConnection, ServerState
from corral.server.plan import ListenerPlan

REQUEST = (
    b"GET /plaintext?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n"
)


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "13")])
    return [b"Hello, world!"]


class FakeTransport:
    def __init__(self) -> None:
        self.out = 0

    def write(self, data: bytes) -> None:
        self.out += len(data)

    def get_extra_info(self, name: str, default=None):
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name)

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...
    def get_write_buffer_size(self) -> int:
        return 0


LIMITER = None  # --rate-limit: a filters.ratelimit.Limiter
GATE = None  # --allow-from: a filters.gate.ClientGate that lets the client in
MAX_CONNECTIONS = 0  # --limit-concurrency: the worker's limit (never reached here)
CONNS = None  # --limit-conn: a filters.connlimit.ConnGate the client stays inside
PARSER = None  # the connection's default unless --llhttp
STEPS = None  # the listener plan's body steps: --compression's (hello is below min_length)

CLOSE_REQUEST = REQUEST.replace(b"Accept: */*\r\n", b"Accept: */*\r\nConnection: close\r\n")


def make_adapter(request_timeout: float, threads: int = 1) -> WsgiAdapter:
    log = setup_error_log("-", "warning")
    watchdog = Watchdog(request_timeout, 5.0, log, print) if request_timeout > 0 else None
    return WsgiAdapter(
        hello,
        threads=threads,
        body_buffer_size=1 << 20,
        response_buffer_size=1 << 16,
        response_spool_size=1 << 30,
        multiprocess=False,
        log=log,
        watchdog=watchdog,
    )


def make_state(request_timeout: float, threads: int = 1) -> ServerState:
    """A worker's shared state as the worker builds it, on a loop that never runs."""
    state = ServerState(
        make_adapter(request_timeout, threads),
        Limits(),
        keep_alive=5,
        header_timeout=30,
        body_timeout=60,
        send_timeout=60,
    )
    state.loop = asyncio.new_event_loop()
    state.prefix = "Date: Mon, 30 Nov 2026 03:31:53 GMT\r\nServer: corral\r\n"
    return state


def uwsgi_packet() -> bytes:
    """The request as nginx's stock uwsgi_params sends it."""
    from corral.http.uwsgi import packet

    return packet(
        {
            "QUERY_STRING": "x=1",
            "REQUEST_METHOD": "GET",
            "CONTENT_TYPE": "",
            "CONTENT_LENGTH": "",
            "REQUEST_URI": "/plaintext?x=1",
            "PATH_INFO": "/plaintext",
            "DOCUMENT_ROOT": "/usr/share/nginx/html",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_SCHEME": "http",
            "REMOTE_ADDR": "127.0.0.1",
            "REMOTE_PORT": "50000",
            "SERVER_PORT": "80",
            "SERVER_NAME": "localhost",
            "HTTP_HOST": "127.0.0.1:8000",
            "HTTP_USER_AGENT": "wrk",
            "HTTP_ACCEPT": "*/*",
        }
    )


def run_close(
    n: int, request_timeout: float = 0.0, uwsgi: bool = False, forwarded: bool = False
) -> float:
    """One connection per request: accept-side setup, the request, the close (``uwsgi``: the
    request as a uwsgi packet, on a uwsgi listener's connection; ``forwarded``: on a listener
    with the command line's default `forwarded`)."""
    state = make_state(request_timeout)
    if uwsgi:
        from corral.http.uwsgi import UwsgiParser

        make = partial(HttpConnection, state, ListenerPlan(parser=UwsgiParser))
        request = uwsgi_packet()
    elif forwarded:
        make, request = partial(HttpConnection, state, forwarded_plan()), CLOSE_REQUEST
    else:
        make, request = partial(HttpConnection, state), CLOSE_REQUEST
    start = time.perf_counter()
    for _ in range(n):
        conn = make()
        conn.connection_made(FakeTransport())
        conn.data_received(request)
        conn.connection_lost(None)
    elapsed = time.perf_counter() - start
    assert state.served == n
    state.loop.close()
    return elapsed / n * 1e6


def routed_connection(state: ServerState) -> HttpConnection:
    """A connection on a listener passing to ``routes``: a one-step table to this worker's
    own application (what routing adds to a request served here)."""
    import logging

    from corral.routing import compile_routes
    from corral.server.routed import Routing

    router = compile_routes(
        [{"match": {"uri": "/plaintext"}, "action": {"pass": "applications/main"}}]
    )
    routing = Routing(router, "main", {}, timeout=3.0, log=logging.getLogger("bench"))
    plan = ListenerPlan(("127.0.0.1", 8000), routing=routing, pass_target="routes")
    return HttpConnection(state, plan)


SHARE_REQUEST = REQUEST.replace(b"/plaintext?x=1", b"/static/1k.txt")


def share_connection(state: ServerState, root: str) -> HttpConnection:
    """A connection on a listener passing to ``routes`` whose one step shares ``root``, as
    `--static /static=ROOT/static` writes it (the request asks for a 1 KiB file, which the
    file engine answers from memory)."""
    import logging

    from corral.routing import compile_routes
    from corral.server.routed import Routing

    static = Path(root) / "static"
    static.mkdir()
    (static / "1k.txt").write_bytes(b"x" * 1023 + b"\n")
    router = compile_routes(
        [
            {
                "match": {"uri": ["/static", "/static/*"]},
                "action": {"share": root + "$uri", "chroot": str(static)},
            }
        ]
    )
    routing = Routing(router, "main", {}, timeout=3.0, log=logging.getLogger("bench"))
    plan = ListenerPlan(("127.0.0.1", 8000), routing=routing, pass_target="routes")
    return HttpConnection(state, plan)


def revalidation(root: str) -> bytes:
    """The share request with ``If-None-Match``: the file's ETag, as the file engine makes it."""
    from corral.static.preconditions import entity_tag

    info = (Path(root) / "static" / "1k.txt").stat()
    etag = entity_tag(info.st_mtime_ns, info.st_size, info.st_ino).encode()
    return SHARE_REQUEST.replace(b"\r\n\r\n", b"\r\nIf-None-Match: " + etag + b"\r\n\r\n")


def forwarded_plan() -> ListenerPlan:
    """A listener with the `forwarded` the command line gives every listener (Gunicorn's
    forwarded_allow_ips, 127.0.0.1 and ::1); the fake transport's peer is 127.0.0.1."""
    from corral.config.gunicorn import FORWARDED_FOR, FORWARDED_PROTO
    from corral.filters.forwarded import Forwarding

    forwarding = Forwarding(["127.0.0.1", "::1"], client_ip=FORWARDED_FOR, protocol=FORWARDED_PROTO)
    return ListenerPlan(("127.0.0.1", 8000), forwarding=forwarding)


PROXIED_REQUEST = REQUEST.replace(
    b"Accept: */*\r\n",
    b"Accept: */*\r\nX-Forwarded-For: 203.0.113.9\r\nX-Forwarded-Proto: https\r\n",
)


def run_threads(n: int, threads: int) -> float:
    """The application on a pool of ``threads`` threads (``--threads``): each request is fed
    in a callback of a uvloop loop, as a worker's are, and the next one once it is answered
    (the answer comes back to the loop from the thread, as in a worker)."""
    import uvloop

    state = make_state(0.0, threads)
    state.loop.close()
    loop = state.loop = uvloop.new_event_loop()
    conn = HttpConnection(state)
    transport = FakeTransport()
    conn.connection_made(transport)
    feed = conn.data_received
    left = n

    def request() -> None:
        nonlocal left
        left -= 1
        feed(REQUEST)

    def answered(conn: HttpConnection, exchange: object) -> None:
        loop.call_soon(request if left else loop.stop)

    state.on_finish = answered
    start = time.perf_counter()
    loop.call_soon(request)
    loop.run_forever()
    elapsed = time.perf_counter() - start
    assert transport.out > 0 and state.served == n, state.served
    state.adapter.shutdown()
    loop.close()
    return elapsed / n * 1e6


def run_asgi(n: int) -> float:
    """The ASGI adapter on the same fake transport: each request arrives in a callback of a
    uvloop loop and its task runs there, as a worker's do."""
    import uvloop

    from corral.apps.asgi.adapter import AsgiAdapter

    sys.path.insert(0, str(Path(__file__).resolve().parent / "apps"))
    from hello_asgi import app

    state = make_state(0.0)
    state.loop.close()
    loop = state.loop = uvloop.new_event_loop()
    state.adapter = AsgiAdapter(app, log=setup_error_log("-", "warning"))
    state.empty_body = state.adapter.empty_body
    conn = HttpConnection(state)
    transport = FakeTransport()
    conn.connection_made(transport)
    feed = conn.data_received

    left = n

    def request() -> None:
        # a callback of the loop, as a worker's data_received is (no task is current)
        nonlocal left
        left -= 1
        feed(REQUEST)
        if left:
            loop.call_soon(request)  # after the request's task, scheduled first
        else:
            loop.call_soon(loop.stop)

    start = time.perf_counter()
    loop.call_soon(request)
    loop.run_forever()
    elapsed = time.perf_counter() - start
    assert transport.out > 0 and state.served == n, state.served
    loop.close()
    return elapsed / n * 1e6


def run(
    n: int,
    request_timeout: float = 0.0,
    routed: bool = False,
    latency: bool = False,
    forwarded: bool = False,
    proxied: bool = False,
    share: bool = False,
    revalidate: bool = False,
) -> float:
    state = make_state(request_timeout)
    state.max_connections = MAX_CONNECTIONS
    if latency:
        from corral.observe.latency import LatencyHistogram

        state.on_finish = LatencyHistogram()
    request = PROXIED_REQUEST if proxied else REQUEST
    if share:
        import tempfile

        root = tempfile.TemporaryDirectory()
        conn = share_connection(state, root.name)
        request = SHARE_REQUEST
        if revalidate:
            request = revalidation(root.name)
    elif routed:
        conn = routed_connection(state)
    elif LIMITER is not None or GATE is not None or CONNS is not None:
        # (with --forwarded, as the command line's listener has them: the peer, 127.0.0.1,
        # is a trusted proxy, so the limits ask about every request's client)
        forwarding = forwarded_plan().forwarding if forwarded else None
        plan = ListenerPlan(
            ("127.0.0.1", 8000), limiter=LIMITER, gate=GATE, conns=CONNS, forwarding=forwarding
        )
        conn = HttpConnection(state, plan)
    elif forwarded:
        conn = HttpConnection(state, forwarded_plan())
    elif PARSER is not None:
        conn = HttpConnection(state, ListenerPlan(parser=PARSER))
    elif STEPS is not None:
        conn = HttpConnection(state, ListenerPlan(steps=STEPS))
    else:
        conn = HttpConnection(state)
    transport = FakeTransport()
    conn.connection_made(transport)
    feed = conn.data_received
    start = time.perf_counter()
    for _ in range(n):
        feed(request)
    elapsed = time.perf_counter() - start
    assert transport.out > 0 and state.served == n
    state.loop.close()
    return elapsed / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=200_000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--once", action="store_true", help="one run (for callgrind counts)")
    parser.add_argument("--close", action="store_true", help="a new connection per request")
    parser.add_argument("--routed", action="store_true", help="on a listener passing to routes")
    parser.add_argument(
        "--share", action="store_true", help="a 1 KiB file from a share route (--static's)"
    )
    parser.add_argument(
        "--revalidate", action="store_true", help="with --share: If-None-Match, answered 304"
    )
    parser.add_argument(
        "--uwsgi", action="store_true", help="a uwsgi packet per connection (as --close)"
    )
    parser.add_argument(
        "--latency", action="store_true", help="count durations, as --latency-histogram does"
    )
    parser.add_argument(
        "--forwarded",
        action="store_true",
        help="on a listener with the command line's default forwarded, from 127.0.0.1",
    )
    parser.add_argument(
        "--proxied", action="store_true", help="with X-Forwarded-For and X-Forwarded-Proto"
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="time the application's calls, as --request-timeout does (0: off, the default)",
    )
    parser.add_argument("--asgi", action="store_true", help="the ASGI adapter, hello_asgi")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="N",
        help="the application on N threads, as --threads N (1: inline on the loop)",
    )
    parser.add_argument(
        "--compression",
        action="store_true",
        help="a listener with gzip and br configured (hello: below their min_length)",
    )
    parser.add_argument(
        "--rate-limit",
        action="store_true",
        help="a listener with a rate limit the client stays inside (--limit-rate's)",
    )
    parser.add_argument(
        "--limit-conn",
        action="store_true",
        help="a listener with --limit-conn 1000 (one connection: inside it)",
    )
    parser.add_argument(
        "--limit-concurrency",
        action="store_true",
        help="a worker with --limit-concurrency 1000 (never reached: one connection)",
    )
    parser.add_argument(
        "--allow-from",
        action="store_true",
        help="a listener with --allow-from 127.0.0.0/8's gate (asked once per connection)",
    )
    parser.add_argument(
        "--llhttp",
        action="store_true",
        help="parse with the llhttp parser corral had before its own (tests/llhttp_oracle.py)",
    )
    args = parser.parse_args()
    if args.compression:
        global STEPS
        from corral.compression import build_rules
        from corral.config.values import Compression, Compressor
        from corral.server.steps import Compress

        setting = Compression(
            types=["text/*"], compressors=[Compressor(encoding="gzip"), Compressor(encoding="br")]
        )
        STEPS = Compress(build_rules(setting))
    if args.rate_limit:
        global LIMITER
        from corral.filters.ratelimit import Limiter, RateTable

        # a request a nanosecond, a burst of a million: every request counted, none refused
        LIMITER = Limiter(RateTable(1 << 20), 1, 1_000_000, 1_000_000, 429, None)
    if args.limit_conn:
        global CONNS
        from corral.filters.connlimit import ConnGate, ConnTable

        CONNS = ConnGate(ConnTable(1 << 20, 4), 1000, 503, None, 0, 0)
    if args.limit_concurrency:
        global MAX_CONNECTIONS
        MAX_CONNECTIONS = 1000
    if args.allow_from:
        global GATE
        from corral.filters.gate import ClientGate

        GATE = ClientGate(((("!127.0.0.0/8",), 403),))
    if args.llhttp:
        global PARSER
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.llhttp_oracle import RequestParser

        PARSER = RequestParser

    def measure(n: int) -> float:
        if args.asgi:
            return run_asgi(n)
        if args.threads > 1:
            return run_threads(n, args.threads)
        if args.close or args.uwsgi:
            return run_close(n, args.request_timeout, args.uwsgi, args.forwarded)
        return run(
            n,
            args.request_timeout,
            args.routed,
            args.latency,
            args.forwarded,
            args.proxied,
            args.share,
            args.revalidate,
        )

    if args.once:
        measure(args.n)
        return
    if args.profile:
        cProfile.runctx(
            "measure(n)", globals(), {"n": args.n, "measure": measure}, "/tmp/micro.prof"
        )
        pstats.Stats("/tmp/micro.prof").sort_stats("tottime").print_stats(15)
        return
    results = sorted(measure(args.n) for _ in range(5))
    core = "llhttp parser" if args.llhttp else NAME
    print(f"per request: median {results[2]:.2f} us (min {results[0]:.2f}), {core}")


if __name__ == "__main__":
    main()
