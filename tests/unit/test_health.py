"""The probes' decisions (server/health.py): which paths a listener answers, and what the
whole server's readiness is. What the probes answer is in tests/integration/test_health.py."""

from types import SimpleNamespace

from corral.server.health import probes_of, server_readiness

SETTINGS = SimpleNamespace(health=False, readiness_path="/readyz", liveness_path="/livez")


def test_a_listeners_own_key_wins_over_the_setting() -> None:
    on = SimpleNamespace(**{**vars(SETTINGS), "health": True})
    assert probes_of(None, SETTINGS) is None
    assert probes_of(None, on) == ("/readyz", "/livez")
    assert probes_of(True, SETTINGS) == ("/readyz", "/livez")
    assert probes_of(False, on) is None


def test_the_servers_readiness() -> None:
    assert server_readiness(stopping=False, ever_ready=False, ready_workers=0) == "starting"
    assert server_readiness(stopping=False, ever_ready=True, ready_workers=2) == "ready"
    assert server_readiness(stopping=False, ever_ready=True, ready_workers=0) == "no worker ready"
    assert server_readiness(stopping=True, ever_ready=True, ready_workers=2) == "draining"
    # nothing for workers to serve (external programs only, or nothing yet)
    assert server_readiness(False, ever_ready=True, ready_workers=0, runs_workers=False) == "ready"
    assert server_readiness(False, ever_ready=False, ready_workers=0, runs_workers=False) == (
        "starting"
    )
