"""Starman behind corral's proxy when more requests come at once than Starman has workers.

A Starman worker serves one connection at a time; with keep-alive it waits on a served
connection for the next request. corral's proxy keeps up to ``proxy_keepalive`` (128) idle
connections to a server: more than the workers, so the connections a busy moment opens beyond
them wait in Starman's backlog behind kept ones their workers never leave (seen: ``ab -c 100``
through corral to 4 workers, 179 requests a second and 96 failed; nginx with ``keepalive 32``,
193). Starman's ``--disable-keepalive`` is its documented answer to a front that pools more
connections than it has workers: corral always gives it.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from tests.integration.control import listening_port
from tests.integration.server import wait_for
from tests.integration.test_external import ready, serving
from tests.integration.test_languages import LANGUAGES, WEB, needs, request

CLIENTS = 16
REQUESTS = 64


@needs("starman")
def test_more_clients_than_starman_workers_are_all_answered_promptly() -> None:
    app = {"type": "perl", "script": str(LANGUAGES / "hello.psgi"), "processes": 2}
    with serving({"perl": app}, listeners={WEB: {"pass": "applications/perl"}}) as (
        server,
        _,
        _,
    ):
        ready(server, "perl", timeout=30)
        port = wait_for(lambda: listening_port(server, WEB))
        assert request(port)[0] == 200
        started = time.monotonic()
        with ThreadPoolExecutor(CLIENTS) as clients:  # a connection per request, 16 at once
            answers = list(clients.map(lambda _: request(port), range(REQUESTS)))
        elapsed = time.monotonic() - started
        assert [status for status, _, _ in answers] == [200] * REQUESTS
        assert all(body == b"Hello, Unit!\n" for _, _, body in answers)
        # a Starman with keep-alive holds the extra connections until its workers' kept ones
        # go idle for its keep-alive timeout (1 s): seconds of waiting, many times over
        assert elapsed < 4.0, f"{REQUESTS} requests, {CLIENTS} at once, took {elapsed:.1f} s"
