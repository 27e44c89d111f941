"""Starman and Puma behind corral's proxy when more requests come at once than they have
workers or threads: corral's proxy keeps up to ``proxy_keepalive`` (128) idle connections to a
server and spreads requests over them, which each server's defaults answered slowly.

- Starman: a worker serves one connection at a time and, with keep-alive, waits on a served
  connection for its next request, so the connections a busy moment opens beyond the workers
  waited in its backlog behind kept ones (seen: ``ab -c 100`` through corral to 4 workers, 179
  requests a second and 96 failed; nginx with ``keepalive 32``, 193). Starman's
  ``--disable-keepalive`` is its documented answer to a front that pools more connections than
  it has workers: corral always gives it.
- Puma: a thread that has served a request waits up to 0.2 s for the next one on the same
  connection (its fast track, for the first ``max_fast_inline`` requests there); the next one
  seldom comes there, so its threads sat waiting while requests on the other connections
  queued. corral's Puma settings file (``max_fast_inline 0``) sends a thread to them instead.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.integration.control import listening_port
from tests.integration.server import wait_for
from tests.integration.test_external import ready, serving
from tests.integration.test_languages import LANGUAGES, WEB, needs, request

CASES = [
    # (type, application, clients at once, requests, the time they must take at most)
    pytest.param(
        "perl",
        {"type": "perl", "script": str(LANGUAGES / "hello.psgi"), "processes": 2},
        16,
        64,
        4.0,  # with keep-alive: seconds of waiting for kept connections' 1 s timeout, many times
        marks=needs("starman"),
        id="starman",
    ),
    pytest.param(
        "ruby",
        {"type": "ruby", "script": str(LANGUAGES / "config.ru"), "threads": 2},
        32,
        400,
        1.5,  # with Puma's default fast track: 2.6 to 2.9 s here; without, 0.1 s
        marks=needs("puma"),
        id="puma",
    ),
]


@pytest.mark.parametrize(("name", "app", "clients", "requests", "within"), CASES)
def test_more_clients_than_the_server_has_workers_are_answered_promptly(
    name: str, app: dict[str, Any], clients: int, requests: int, within: float
) -> None:
    with serving({name: app}, listeners={WEB: {"pass": f"applications/{name}"}}) as (
        server,
        _,
        _,
    ):
        ready(server, name, timeout=30)
        port = wait_for(lambda: listening_port(server, WEB))
        assert request(port)[0] == 200
        started = time.monotonic()
        with ThreadPoolExecutor(clients) as pool:  # a connection per request, many at once
            answers = list(pool.map(lambda _: request(port), range(requests)))
        elapsed = time.monotonic() - started
        assert [status for status, _, _ in answers] == [200] * requests
        assert all(body == b"Hello, Unit!\n" for _, _, body in answers)
        assert elapsed < within, f"{requests} requests, {clients} at once, took {elapsed:.1f} s"
