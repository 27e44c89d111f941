"""Micro-benchmark of Router.resolve: a 10-step table of the usual shapes, no sockets.

Each case builds a fresh RouteRequest per call (as the worker would: one per request) and
resolves it; the figure is resolves per second and the time of one, the median of five runs.

    PYTHONPATH=src python bench/routing_micro.py [--seconds 0.5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from corral.routing import RouteRequest, compile_routes

ROUTES = {
    "main": [
        {"match": {"uri": "/health"}, "action": {"return": 200}},
        {"match": {"uri": ["/static/*", "*.css", "*.js"]}, "action": {"share": "/srv$uri"}},
        {
            "match": {"host": "admin.example.com", "source": "10.0.0.0/8"},
            "action": {"pass": "applications/admin"},
        },
        {
            "match": {"method": ["POST", "PUT", "PATCH"], "uri": "/api/v1/*"},
            "action": {"pass": "applications/writer"},
        },
        {"match": {"headers": {"X-Canary": "1"}}, "action": {"pass": "applications/canary"}},
        {"match": {"arguments": {"debug": "!0"}}, "action": {"pass": "applications/debug"}},
        {"match": {"uri": "~^/user/[0-9]+/profile$"}, "action": {"pass": "applications/profile"}},
        {"match": {"cookies": {"beta": "yes"}}, "action": {"pass": "applications/beta"}},
        {
            "match": {"scheme": "http", "uri": "/login*"},
            "action": {"return": 301, "location": "https://$host$request_uri"},
        },
        {"action": {"pass": "applications/main"}},
    ]
}

HEADERS = [
    (b"Host", b"www.example.com"),
    (b"User-Agent", b"wrk"),
    (b"Accept", b"*/*"),
    (b"Cookie", b"session=abc; theme=dark"),
]
PEER = ("192.0.2.10", 51234)
LOCAL = ("192.0.2.1", 8000)

CASES = [
    ("step 1: exact uri", "GET", b"/health"),
    ("step 2: uri list (prefix/suffix)", "GET", b"/static/app.css"),
    ("step 4: method set + prefix", "POST", b"/api/v1/items"),
    ("step 7: regex", "GET", b"/user/42/profile"),
    ("step 9: redirect, variables", "GET", b"/login?next=/"),
    ("step 10: fall through all", "GET", b"/plaintext?x=1"),
]


def per_call(call, seconds: float) -> float:
    """Seconds per ``call()``, median of five runs of ``seconds`` each."""
    runs = []
    for _ in range(5):
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(1000):
                call()
            count += 1000
            now = time.perf_counter()
            if now >= deadline:
                break
        runs.append((now - start) / count)
    return statistics.median(runs)


def measure(router, method: str, target: bytes, seconds: float) -> float:
    """Seconds per resolve (the RouteRequest built for it included)."""
    resolve = router.resolve
    return per_call(
        lambda: resolve("routes/main", RouteRequest(method, target, HEADERS, PEER, LOCAL)),
        seconds,
    )


def measure_request_only(seconds: float) -> float:
    return per_call(lambda: RouteRequest("GET", b"/", HEADERS, PEER, LOCAL), seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="length of one run")
    args = parser.parse_args()
    router = compile_routes(ROUTES)
    baseline = measure_request_only(args.seconds)
    print(f"{'case':36} {'resolves/s':>12} {'us/resolve':>11}")
    print(f"{'(RouteRequest() alone)':36} {1 / baseline:12,.0f} {baseline * 1e6:11.2f}")
    for label, method, target in CASES:
        per = measure(router, method, target, args.seconds)
        print(f"{label:36} {1 / per:12,.0f} {per * 1e6:11.2f}")


if __name__ == "__main__":
    main()
