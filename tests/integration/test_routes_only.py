"""A document without applications runs: listeners whose routes only answer (``return``) or
serve files (``share``) get workers of their own, which import no application.

Real servers on both cores: the routes' answers come from those workers, a control API change
to such a document starts them and a change that adds an application retires them; a document
with nothing to serve is one line. What the shares answer is the file engine's business (its
own tests); here a share only has to be part of a document that starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.control import Control, listening_port, short_dir
from tests.integration.server import Server, run_cli, wait_for
from tests.integration.test_cli_server import assert_one_line_error, get

pytestmark = pytest.mark.usefixtures("each_core")

ROUTES = [
    {"match": {"uri": "/health"}, "action": {"return": 204}},
    {"match": {"uri": "/old/*"}, "action": {"return": 301, "location": "https://example.com$uri"}},
    {"match": {"uri": "/gone"}, "action": {"return": 410}},
    {"match": {"uri": "/static/*"}, "action": {"share": "/srv${uri_after:/static}"}},
]


def routes_document(listener: str = "127.0.0.1:0") -> dict:
    return {"listeners": {listener: {"pass": "routes"}}, "routes": ROUTES}


def test_a_document_of_routes_alone_starts_workers_that_answer(tmp_path: Path) -> None:
    path = tmp_path / "routes.json"
    path.write_text(json.dumps(routes_document()))
    with Server(f"--config={path}", bind=None) as server:
        server.wait_log(r"serving the routes with 1 worker\(s\) \(no application\)")
        assert len(server.worker_pids()) == 1
        assert get(server.host, server.port, "/health")[0] == 204
        status, headers, _ = get(server.host, server.port, "/old/a/b")
        assert (status, headers["location"]) == (301, "https://example.com/old/a/b")
        status, _, body = get(server.host, server.port, "/gone")
        assert status == 410 and b"Error 410" in body  # Unit's error page for 400-599
        assert get(server.host, server.port, "/elsewhere")[0] == 404  # no step matched
        assert "reached the pool of a document without an application" not in server.stderr
        assert server.stop() == 0


def test_a_destination_match_reads_the_address_each_client_reached(tmp_path: Path) -> None:
    """On a wildcard listener the local address differs by client: the routes see the one
    this connection reached (looked up only because a step matches on ``destination``)."""
    document = {
        "listeners": {"0.0.0.0:0": {"pass": "routes"}},
        "routes": [
            {"match": {"destination": "127.0.0.2"}, "action": {"return": 204}},
            {"match": {"destination": "!127.0.0.2"}, "action": {"return": 410}},
        ],
    }
    path = tmp_path / "destination.json"
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as server:
        assert get("127.0.0.2", server.port, "/")[0] == 204
        assert get("127.0.0.1", server.port, "/")[0] == 410
        assert get("127.0.0.2", server.port, "/again")[0] == 204
        assert server.stop() == 0


def test_a_document_with_nothing_to_serve_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"listeners": {}, "applications": {}}))
    result = run_cli(f"--config={path}")
    assert result.returncode == 2
    assert_one_line_error(
        result.stderr,
        "nothing to serve: the document has no listener and no application",
        "--control",
    )


def test_the_control_api_starts_and_retires_the_routes_workers() -> None:
    with short_dir() as directory:
        server = Server(f"--state-dir={directory / 'state'}", bind=None, wait_ready=False)
        with server:
            server.wait_log("no application configured: waiting for the control API")
            control = Control.of(server)
            answer = control.put("/config", routes_document())
            assert answer.status == 200, answer.raw
            server.host, server.port = "127.0.0.1", listening_port(server, "127.0.0.1:0")
            assert get(server.host, server.port, "/health")[0] == 204
            routes_workers = server.worker_pids()
            assert len(routes_workers) == 1
            # counted from the workers' heartbeats (one a second), not under an application
            status = wait_for(lambda: (s := control.get("/status").json)["requests"]["total"] and s)
            assert status["connections"]["accepted"] >= 1 and status["applications"] == {}
            # the same listener, now passing to an application: its workers take over
            with_app = {
                "listeners": {"127.0.0.1:0": {"pass": "applications/proc_apps"}},
                "applications": {"proc_apps": {"module": "proc_apps"}},
            }
            answer = control.put("/config", with_app)
            assert answer.status == 200, answer.raw
            assert get(server.host, server.port, "/")[0] == 200
            wait_for(lambda: not set(routes_workers) & set(server.worker_pids()))
            assert server.stop() == 0
