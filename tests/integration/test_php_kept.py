"""Kept connections to php-fpm that its children close (Unit's ``limits.requests``, php-fpm's
``pm.max_requests``: with 1, every child exits after its request and closes the connection
corral keeps, often as the next request goes on it), for a request that could not simply be
sent again: a POST (not idempotent) has its kept connection looked at before it is used
(`corral.fastcgi.client.Backend.gone`), and is sent again only if the close came at once; a
GET is sent again instead (test_php.py). A body too long to be held for sending again goes on
a new connection (the close can cross the request after any look at the kept one: it did, a
502 in a few runs). Every request is answered whole, by a new child each, on both cores."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

from corral.actions.fastcgi import RETRY_HELD
from tests.integration.server import Server
from tests.integration.test_php import document, fpm_ready, needs_php_fpm, root

__all__ = ["root"]  # (the php tests' fixture: their scripts under a root of their own)

pytestmark = [pytest.mark.usefixtures("each_core"), needs_php_fpm]


def test_posts_on_connections_each_child_closes_are_all_answered(
    each_core: str, root: Path
) -> None:
    doc = document(root)
    doc["applications"]["site"]["limits"] = {"requests": 1}
    doc["applications"]["site"]["processes"] = 2
    path = root / f"php-kept-{each_core}.json"
    path.write_text(json.dumps(doc))
    bodies = [b"a small body %d" % n for n in range(20)]
    bodies += [bytes([65 + n]) * RETRY_HELD for n in range(4)]  # (all held for a retry)
    bodies += [bytes([97 + n]) * (RETRY_HELD + 1) for n in range(10)]  # (held by none)
    with Server(f"--config={path}", bind=None) as server:
        fpm_ready(server)
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        pids = set()
        for body in bodies:
            conn.request("POST", "/echo.php", body=body)
            answer = conn.getresponse()
            assert answer.status == 200, server.stderr
            assert answer.read() == body
            conn.request("GET", "/pid.php")
            answer = conn.getresponse()
            assert answer.status == 200
            pids.add(answer.read())
        conn.close()
        assert len(pids) == len(bodies)  # a child a request: each kept connection closed
        assert "answered 502" not in server.stderr and "Traceback" not in server.stderr, (
            server.stderr
        )
