"""``--allow-from``, ``--deny-from`` and ``--deny-status`` as the routes they write (issue 34,
point 4), and their mistakes in one line."""

from __future__ import annotations

import pytest

from corral.config import load
from tests.unit.test_config import error_of

APP = [{"action": {"pass": "applications/app"}}]


def test_deny_then_allow_in_front_of_the_application() -> None:
    doc = load(
        ["app", "--deny-from", "10.1.0.0/16", "--allow-from", "10.0.0.0/8", "--deny-status", "404"]
    )
    assert doc.routes == [
        {"match": {"source": ["10.1.0.0/16"]}, "action": {"return": 404}},
        {"match": {"source": ["!10.0.0.0/8"]}, "action": {"return": 404}},
        *APP,
    ]
    assert doc.listeners["127.0.0.1:8000"].pass_ == "routes"


def test_the_gate_stands_before_the_redirect_too() -> None:
    tls = ["--certfile", "c.pem", "--keyfile", "k.pem", "-b", ":8443"]
    doc = load(["app", *tls, "--insecure-bind", ":80", "--https-redirect", "--deny-from", "::1"])
    assert doc.routes["served"][0] == {"match": {"source": ["::1"]}, "action": {"return": 403}}
    assert doc.routes["https_redirect"][0] == doc.routes["served"][0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--deny-from", "10.0.0.300"], "--deny-from: address pattern '10.0.0.300': expected an "
         "IPv4 address, a CIDR block or a range"),
        (["--deny-status", "404"], "--deny-status: applies to denied clients: give allow_from or "
         "deny_from"),
        (["--allow-from", "::1", "--deny-status", "200"], '--deny-status: expected int from 400 '
         'to 599, got "200"'),
    ],
)  # fmt: skip
def test_mistakes_are_one_line(argv: list[str], message: str) -> None:
    assert error_of(["app", *argv]) == message


def test_the_routes_the_flags_write_are_a_gate_a_worker_asks_once_per_client() -> None:
    from corral.config.gate_routes import gate_of
    from corral.filters.gate import ClientGate

    doc = load(["app", "--deny-from", "10.1.0.0/16", "--allow-from", "10.0.0.0/8"])
    steps = gate_of(doc.routes, "routes", "app")
    assert steps == ((("10.1.0.0/16",), 403), (("!10.0.0.0/8",), 403))
    gate = ClientGate(steps)
    assert [gate.status_of((a, 1)) for a in ("10.1.2.3", "10.2.0.1", "192.0.2.1")] == [403, 0, 403]
    assert gate_of({"served": doc.routes}, "routes/served", "app") == steps
    assert gate_of(doc.routes, "routes", "other") is None  # a pass to another application


@pytest.mark.parametrize(
    "step",
    [
        {"match": {"source": "10.0.0.1", "uri": "/a"}, "action": {"return": 403}},
        {"match": {"uri": "/a"}, "action": {"return": 403}},
        {"match": {"source": "10.0.0.1"}, "action": {"return": 301, "location": "/b"}},
        {"match": {"source": "10.0.0.1"}, "action": {"return": 204}},
        {"match": {"source": "10.0.0.1"}, "action": {"pass": "applications/app"}},
        {"action": {"return": 403}},
    ],
    ids=["and-uri", "uri", "redirect", "success", "pass", "no-match"],
)
def test_any_other_table_is_routed_for_each_request(step: dict) -> None:
    from corral.config.gate_routes import gate_of

    assert gate_of([step, *APP], "routes", "app") is None
    assert gate_of([step, {"action": {"pass": "applications/app/target"}}], "routes", "app") is None
