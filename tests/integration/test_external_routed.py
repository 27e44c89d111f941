"""Requests routed to external applications: a listener's or a route's ``pass`` to one is
proxied to its ready processes (actions/external.py through the proxy's ``forward``), in turn,
and answered 503 while none is ready; the programs are real ones (tests/integration/external/),
the client talks to corral's listener only."""

from __future__ import annotations

import http.client
import json
import os
from typing import Any

import pytest

from tests.integration.control import listening_port, short_dir
from tests.integration.server import wait_for
from tests.integration.test_external import PYTHON, external, ready, serving

pytestmark = [
    pytest.mark.usefixtures("each_core"),
    pytest.mark.skipif(not os.access(PYTHON, os.X_OK), reason=f"{PYTHON} is not installed"),
]
WEB, API = "127.0.0.1:0", "127.0.0.2:0"


def request(host: str, port: int, path: str = "/") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def answer(host: str, port: int, path: str = "/") -> dict[str, Any]:
    status, body = request(host, port, path)
    assert status == 200, body
    found: dict[str, Any] = json.loads(body)
    return found


def test_a_listener_and_a_route_pass_to_external_applications() -> None:
    doc_apps = {
        "fds": external("listen_fds.py", processes=2),
        "unix": external("binds.py", "unix", "{socket}"),
    }
    with serving(
        doc_apps,
        listeners={
            WEB: {"pass": "applications/fds"},
            API: {"pass": "routes"},
        },
        routes=[{"match": {"uri": "/api/*"}, "action": {"pass": "applications/unix"}}],
    ) as (server, _, _):
        fds = {int(pid) for pid in ready(server, "fds", 2)}
        unix = int(ready(server, "unix")[0])
        web = listening_port(server, WEB)
        api = listening_port(server, API)
        seen = {answer("127.0.0.1", web, "/x")["pid"] for _ in range(8)}
        assert seen <= fds and seen  # through corral's listener to the programs' socket
        found = answer("127.0.0.2", api, "/api/items?q=1")
        assert (found["pid"], found["path"]) == (unix, "/api/items?q=1")
        assert request("127.0.0.2", api, "/other")[0] == 404  # no route: corral's own answer


def test_nothing_reaches_a_program_before_it_answers() -> None:
    with serving(
        {"slow": external("binds.py", "port", "{port}", "--slow-start", "2")},
        listeners={WEB: {"pass": "applications/slow"}},
    ) as (server, _, _):
        server.wait_log(r"slow process 0 started")
        web = wait_for(lambda: listening_port(server, WEB))
        assert request("127.0.0.1", web)[0] == 503
        pid = int(ready(server, "slow")[0])
        assert answer("127.0.0.1", web)["pid"] == pid


def test_the_standard_librarys_http_server_as_an_external_application() -> None:
    with short_dir() as files:
        (files / "static").mkdir()
        (files / "static" / "hello.txt").write_bytes(b"Hello, Unit!\n")
        command = ["-m", "http.server", "{port}", "--bind", "127.0.0.1", "--directory"]
        with serving(
            {
                "files": {
                    "type": "external",
                    "executable": PYTHON,
                    "arguments": [*command, str(files)],
                }
            },
            listeners={WEB: {"pass": "routes"}},
            routes=[{"match": {"uri": "/static/*"}, "action": {"pass": "applications/files"}}],
        ) as (server, _, _):
            ready(server, "files")
            web = listening_port(server, WEB)
            assert request("127.0.0.1", web, "/static/hello.txt") == (200, b"Hello, Unit!\n")
            status, body = request("127.0.0.1", web, "/static/missing.txt")
            assert status == 404 and b"File not found" in body  # the program's own answer
