"""ASGI's lifespan (issue 11, point 3) on real processes: startup before a worker is ready,
shutdown after its graceful stop, the state in every request's scope, ``--lifespan``."""

from __future__ import annotations

import json
import signal

import pytest

from tests.integration.server import Server, http_get, run_cli


def state_and_pid(server: Server) -> tuple[dict, int]:
    status, body = http_get(server, "/")
    assert status == 200
    answer = json.loads(body)
    return answer["state"], answer["pid"]


def test_startup_fills_the_state_each_request_sees_and_shutdown_follows_the_drain() -> None:
    with Server("lifespan_apps:app", workers=2) as server:
        server.wait_log(r"worker 1 ready")
        state, pid = state_and_pid(server)
        assert state == {"greeting": "set at startup"}
        server.wait_log(r"lifespan startup \d+", count=2)  # each worker runs its own
        assert server.stop(signal.SIGTERM) == 0
        shutdowns = server.wait_log(r"lifespan shutdown \d+", count=2)
    assert f"lifespan shutdown {pid}" in "\n".join(shutdowns)
    log = server.stderr
    # every worker said it started before the master heard it was ready
    assert log.index("lifespan startup") < log.index("worker 0 ready")


@pytest.mark.parametrize(
    ("target", "why"),
    [("failing", "database unreachable"), ("raising", "RuntimeError: no configuration")],
)
def test_a_failed_startup_is_one_line_and_exit_3(target: str, why: str) -> None:
    result = run_cli(f"lifespan_apps:{target}", "-b", "127.0.0.1:0", "--lifespan", "on")
    assert result.returncode == 3, result.stderr
    assert f"ASGI lifespan startup failed: {why}" in result.stderr
    assert "respawning" not in result.stderr


def test_auto_serves_an_application_without_lifespan() -> None:
    with Server("lifespan_apps:http_only") as server:
        assert state_and_pid(server)[0] == {}
        server.wait_log(r"ASGI lifespan: not supported by the application")
        assert server.stop() == 0


def test_auto_still_fails_a_startup_the_application_says_failed() -> None:
    result = run_cli("lifespan_apps:failing", "-b", "127.0.0.1:0")
    assert result.returncode == 3, result.stderr
    assert "ASGI lifespan startup failed: database unreachable" in result.stderr


def test_on_refuses_an_application_without_lifespan() -> None:
    result = run_cli("lifespan_apps:http_only", "-b", "127.0.0.1:0", "--lifespan", "on")
    assert result.returncode == 3, result.stderr
    assert "ASGI lifespan startup failed: AssertionError" in result.stderr


def test_off_never_sends_it() -> None:
    with Server("lifespan_apps:app", "--lifespan", "off") as server:
        assert state_and_pid(server)[0] == {}
        assert server.stop() == 0
    assert "lifespan startup" not in server.stderr


LIFESPAN_RELOAD_APP = """
import os

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        if os.path.exists("fail.flag"):
            await send({"type": "lifespan.startup.failed", "message": "flag set"})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(os.getpid()).encode()})
"""


def test_a_reload_whose_startup_fails_is_rolled_back(tmp_path) -> None:
    (tmp_path / "life_reload.py").write_text(LIFESPAN_RELOAD_APP)
    with Server("life_reload:app", workers=2, cwd=str(tmp_path)) as server:
        server.wait_log(r"worker 1 ready")
        before = set(server.worker_pids())
        (tmp_path / "fail.flag").touch()
        server.send(signal.SIGHUP)
        line = server.wait_log(r".*reload failed: .*")[0]
        assert line.endswith(
            "exited (exit code 3) before it was ready: ASGI lifespan startup failed: flag set; "
            "generation 1 keeps serving"
        ), line
        assert "ASGI lifespan startup failed: flag set" in server.stderr
        status, body = http_get(server, "/")
        assert status == 200 and int(body) in before
        assert server.stop() == 0
