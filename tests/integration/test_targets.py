"""NGINX Unit's application ``prefix`` and ``targets`` in a Unit configuration file, through
real servers: SCRIPT_NAME/PATH_INFO split as Unit splits them; several targets of one
application answered by that application's workers, through routes and a listener passing
straight to a target; the configuration errors in one line."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

from tests.integration.control import listening_port, short_dir
from tests.integration.server import Server, http_json, run_cli
from tests.integration.test_applications import At
from tests.integration.test_cli_server import assert_one_line_error
from tests.integration.test_http import Reader, get
from tests.integration.test_routed import DIRECT, ROUTED, Routed
from tests.integration.test_unit_config import write_unit_config

TARGETS = {
    "first": {"module": "target_apps", "callable": "first", "prefix": "/one"},
    "second": {"module": "target_apps", "callable": "second"},
}
ROUTES = [
    {"match": {"uri": "/one/*"}, "action": {"pass": "applications/multi/first"}},
    {"match": {"uri": "/two/*"}, "action": {"pass": "applications/multi/second"}},
    {"action": {"pass": "applications/other"}},
]


def test_prefix_splits_script_name_and_path_info_as_unit_does(tmp_path: Path) -> None:
    """A trailing "/" of the prefix is dropped; the decoded path is compared; a path that
    only begins with the prefix's characters (``/mountain``) or lies outside it is whole."""
    path = write_unit_config(
        tmp_path, {"module": "target_apps", "callable": "first", "prefix": "/mount/"}
    )
    with Server(f"--config={path}", bind=None) as server:
        cases = {
            "/mount/a/b?q=1": ("/mount", "/a/b"),
            "/mount": ("/mount", ""),
            "/mount/": ("/mount", "/"),
            "/m%6Funt/x%20y": ("/mount", "/x y"),  # decoded before matching, as in Unit
            "/mountain": ("", "/mountain"),
            "/other/mount": ("", "/other/mount"),
            "/": ("", "/"),
        }
        for target, (script_name, path_info) in cases.items():
            answer = http_json(server, target)
            assert (answer["script_name"], answer["path_info"]) == (script_name, path_info), target


def test_targets_of_one_application_are_served_by_its_pool(tmp_path: Path) -> None:
    """Routes pass by uri to two targets of ``multi``: both are answered by multi's workers
    (one process runs every target, as in Unit), each target with its own prefix; a listener
    passing straight to a target is laid on multi's workers only and runs that target."""
    doc = {
        "listeners": {ROUTED: {"pass": "routes"}, DIRECT: {"pass": "applications/multi/second"}},
        "routes": ROUTES,
        "applications": {
            "multi": {"type": "python 3", "processes": 2, "targets": TARGETS},
            "other": {"type": "python 3", "module": "target_apps", "callable": "other"},
        },
    }
    with short_dir() as directory, Routed(directory, doc) as routed:
        multi = routed.pids("multi")
        seen: dict[str, set[int]] = {"first": set(), "second": set()}
        for _ in range(20):
            one = http_json(routed.at, "/one/x")
            assert (one["target"], one["script_name"], one["path_info"]) == ("first", "/one", "/x")
            two = http_json(routed.at, "/two/y")
            assert (two["target"], two["script_name"], two["path_info"]) == ("second", "", "/two/y")
            seen["first"].add(one["pid"])
            seen["second"].add(two["pid"])
        assert seen["first"] <= multi and seen["second"] <= multi, (seen, multi)
        assert http_json(routed.at, "/elsewhere")["pid"] in routed.pids("other")
        port = listening_port(routed.server, DIRECT)
        direct = At("127.0.0.2", port)
        for target in ("/one/x", "/two/y", "/elsewhere"):
            answer = http_json(direct, target)
            assert (answer["target"], answer["script_name"]) == ("second", ""), answer
            assert answer["pid"] in multi
        tcp = subprocess.run(["ss", "-tlpn"], capture_output=True, text=True, check=True).stdout
        [line] = [line for line in tcp.splitlines() if f"127.0.0.2:{port} " in line]
        assert all(f"pid={pid}," in line for pid in multi), line
        assert not any(f"pid={pid}," in line for pid in routed.pids("other")), line


def test_one_connection_alternates_targets_in_one_worker() -> None:
    """A keep-alive connection alternating targets stays with one worker: no hand-off."""
    doc = {
        "listeners": {ROUTED: {"pass": "routes"}},
        "routes": ROUTES,
        "applications": {
            "multi": {"type": "python 3", "targets": TARGETS},
            "other": {"type": "python 3", "module": "target_apps", "callable": "other"},
        },
    }
    with short_dir() as directory, Routed(directory, doc) as routed:
        with socket.create_connection(("127.0.0.1", routed.port), timeout=10) as sock:
            reader = Reader(sock)
            answers = []
            for target in ("/one/a", "/two/b", "/one/c"):
                sock.sendall(get(target))
                response = reader.response()
                assert response.status == 200, response
                answers.append(response.json())
        assert [a["target"] for a in answers] == ["first", "second", "first"]
        assert len({a["pid"] for a in answers}) == 1


def _refused(tmp_path: Path, doc: dict) -> str:
    path = tmp_path / "unit.json"
    path.write_text(json.dumps(doc))
    result = run_cli(f"--config={path}")
    assert result.returncode != 0
    return result.stderr


def test_a_pass_to_an_unknown_target_is_refused_in_one_line(tmp_path: Path) -> None:
    doc = {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"pass": "applications/multi/third"}}],
        "applications": {"multi": {"targets": TARGETS}},
    }
    assert_one_line_error(
        _refused(tmp_path, doc),
        "$.routes[0].action.pass: 'applications/multi/third' names no target of application",
    )
    doc = {
        "listeners": {"127.0.0.1:0": {"pass": "applications/multi/third"}},
        "applications": {"multi": {"targets": TARGETS}},
    }
    assert_one_line_error(_refused(tmp_path, doc), '$.listeners["127.0.0.1:0"].pass: ')


def test_module_and_targets_together_are_refused_in_one_line(tmp_path: Path) -> None:
    doc = {
        "listeners": {"127.0.0.1:0": {"pass": "applications/multi"}},
        "applications": {"multi": {"module": "target_apps", "targets": TARGETS}},
    }
    assert_one_line_error(
        _refused(tmp_path, doc),
        '$.applications.multi.module: not allowed with "targets"',
    )
