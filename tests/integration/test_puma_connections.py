"""Puma behind corral's proxy when more requests come at once than Puma has threads.

A Puma thread that has served a request waits up to 0.2 s for the next one on the same
connection (Puma's fast track, for its first ``max_fast_inline`` requests there). corral's
proxy spreads requests over its kept connections, so the next one seldom comes on that
connection: with Puma's default (10) its threads sat waiting while requests on the other
connections queued. corral's Puma settings file (``max_fast_inline 0``) sends a thread to the
waiting requests instead.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from tests.integration.control import listening_port
from tests.integration.server import wait_for
from tests.integration.test_external import ready, serving
from tests.integration.test_languages import LANGUAGES, WEB, needs, request

CLIENTS = 32
REQUESTS = 400


@needs("puma")
def test_more_clients_than_puma_threads_are_answered_without_waiting_on_kept_connections() -> None:
    app = {"type": "ruby", "script": str(LANGUAGES / "config.ru"), "threads": 2}
    with serving({"ruby": app}, listeners={WEB: {"pass": "applications/ruby"}}) as (
        server,
        _,
        _,
    ):
        ready(server, "ruby", timeout=30)
        port = wait_for(lambda: listening_port(server, WEB))
        assert request(port)[0] == 200
        started = time.monotonic()
        with ThreadPoolExecutor(CLIENTS) as clients:  # a connection per request, 32 at once
            answers = list(clients.map(lambda _: request(port), range(REQUESTS)))
        elapsed = time.monotonic() - started
        assert [status for status, _, _ in answers] == [200] * REQUESTS
        assert all(body == b"Hello, Unit!\n" for _, _, body in answers)
        # waiting on kept connections (Puma's default): 2.6 to 2.9 s here; without, 0.1 s
        assert elapsed < 1.5, f"{REQUESTS} requests, {CLIENTS} at once, took {elapsed:.1f} s"
