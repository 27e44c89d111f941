"""Session resumption (issue 33, point 2): ticket keys shared by a pool's workers and rotated
by the master, the previous key decrypting for one more period; NGINX Unit's ``session``
(``tickets`` as keys or false, ``cache_size``, ``timeout``) applied. Real servers, Python's
TLS client, each resumption checked on every worker of the pool.
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.certificates import leaf
from tests.integration.control import listening_port
from tests.integration.server import Server, wait_for
from tests.integration.test_tls import store_server
from tests.integration.test_tls_renewal import file_server, get, resumes_everywhere, trusting

pytestmark = pytest.mark.usefixtures("each_core")


def resumed_on(port: int, session: Any, workers: int = 2) -> set[bool]:
    """Whether ``session`` resumed, on each of the ``workers`` (every answer's)."""
    by_worker = resumes_everywhere(port, session, workers)
    assert len(by_worker) == workers, by_worker
    return {resumed for answers in by_worker.values() for resumed in answers}


@pytest.mark.wallclock  # each check must be done within the period it checks (5 s)
def test_ticket_keys_rotate_and_the_previous_one_still_decrypts(tmp_path: Path) -> None:
    with file_server(tmp_path, leaf("ec"), "--tls-ticket-rotation", "5") as (server, _, _):
        first = get(server.port, trusting())["session"]
        assert resumed_on(server.port, first) == {True}  # on both workers: one key
        server.wait_log(r"TLS: new session ticket keys \(1 listener context", timeout=15)
        assert resumed_on(server.port, first) == {True}  # the previous key decrypts it
        second = get(server.port, trusting())["session"]  # of the new key
        server.wait_log(r"TLS: new session ticket keys", count=2, timeout=15)
        assert resumed_on(server.port, first) == {False}  # two keys ago: a full handshake
        assert resumed_on(server.port, second) == {True}


def _keys() -> tuple[str, str]:
    return tuple(base64.b64encode(os.urandom(80)).decode() for _ in range(2))  # type: ignore[return-value]


def test_unit_ticket_keys_are_the_ones_given() -> None:
    # new workers (a change of the keys is not a certificate's) resume a session of the
    # old ones only with the key given: Unit encrypts with the last of the list
    old, new = _keys()
    with store_server(site=leaf("ec")) as (server, control):
        document = {
            "listeners": {
                "127.0.0.1:0": {
                    "pass": "applications/app",
                    "tls": {"certificate": "site", "session": {"tickets": old}},
                }
            },
            "applications": {"app": {"module": "tls_apps", "callable": "wsgi", "processes": 2}},
        }
        assert control.put("/config", document).status == 200
        port = listening_port(server, "127.0.0.1:0")
        first = get(port, trusting())["session"]
        assert resumed_on(port, first) == {True}
        document["listeners"]["127.0.0.1:0"]["tls"]["session"]["tickets"] = [old, new]
        pids = set(server.worker_pids())
        assert control.put("/config", document).status == 200
        wait_for(lambda: not set(server.worker_pids()) & pids, timeout=30)  # (drained)
        assert resumed_on(port, first) == {True}  # the old key decrypts
        second = get(port, trusting())["session"]  # the new one encrypts
        document["listeners"]["127.0.0.1:0"]["tls"]["session"]["tickets"] = new
        assert control.put("/config", document).status == 200
        assert resumed_on(port, first) == {False}
        assert resumed_on(port, second) == {True}


def _session_server(session: dict[str, Any], processes: int = 1) -> Any:
    return {
        "listeners": {
            "127.0.0.1:0": {
                "pass": "applications/app",
                "tls": {"certificate": "site", "session": session},
            }
        },
        "applications": {"app": {"module": "tls_apps", "callable": "wsgi", "processes": processes}},
    }


@pytest.mark.parametrize(("cache_size", "kept"), [(None, 2), (1, 1), (0, 0)])
def test_the_session_cache_holds_cache_size_sessions(cache_size: int | None, kept: int) -> None:
    # without tickets a session resumes from the worker's cache: cache_size of them
    session: dict[str, Any] = {"tickets": False}
    if cache_size is not None:
        session["cache_size"] = cache_size
    with store_server(site=leaf("ec")) as (server, control):
        assert control.put("/config", _session_server(session)).status == 200
        port = listening_port(server, "127.0.0.1:0")
        older, newer = (get(port, trusting(), clean=True)["session"] for _ in range(2))
        resumed = [get(port, trusting(), s, clean=True)["resumed"] for s in (newer, older)]
        assert resumed == [True, True][:kept] + [False, False][: 2 - kept]


@pytest.mark.wallclock  # resumed within its 2 s, and not 3 s later
def test_a_session_ends_after_its_timeout() -> None:
    with store_server(site=leaf("ec")) as (server, control):
        assert control.put("/config", _session_server({"timeout": 2}, 2)).status == 200
        port = listening_port(server, "127.0.0.1:0")
        answer = get(port, trusting())
        assert answer["session"].ticket_lifetime_hint == 2
        assert resumed_on(port, answer["session"]) == {True}
        time.sleep(3.1)  # what is tested is the clock: OpenSSL counts whole seconds
        assert resumed_on(port, answer["session"]) == {False}


def test_session_settings_that_cannot_be_served_are_one_line() -> None:
    with store_server(site=leaf("ec")) as (server, control):
        refused = control.put("/config", _session_server({"tickets": "bm90IGEga2V5"}))
        assert refused.status == 400
        assert "is 9 bytes: a key is 48 or 80" in str(refused.json)
        assert isinstance(server, Server)
