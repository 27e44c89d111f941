"""NGINX Unit configuration files run as they are: `corral -c unit.json` (a whole document).

Each mapping from Unit's keys to corral's runtime is shown through a real server: processes,
working_directory, environment, path, limits, settings.http timeouts and max_body_size,
server_version and an access log in Unit's format.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from corral import __version__
from tests.integration.server import APPS, Server, read_all, read_response, wait_for
from tests.integration.test_cli_server import assert_one_line_error, get, info, run_cli

UNIT_LOG = '$remote_addr "$request_line" $status $body_bytes_sent "$header_user_agent" $host'


def write_unit_config(directory: Path, application: dict, **top: object) -> Path:
    """A single-application NGINX Unit config file, with Unit's older listener form."""
    config = {
        "listeners": {"127.0.0.1:0": {"application": "proc"}},
        "applications": {"proc": {"type": "python 3", "module": "proc_apps", **application}},
        **top,
    }
    path = directory / "unit.json"
    path.write_text(json.dumps(config))
    return path


def test_a_unit_config_file_runs_with_its_application_settings(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    access = tmp_path / "access.log"
    path = write_unit_config(
        tmp_path,
        {
            "processes": 2,
            "working_directory": str(tmp_path),
            "environment": {"FROM_UNIT": "yes"},
            "path": [str(APPS), str(extra)],
            "callable": "application",
        },
        settings={"http": {"server_version": True, "max_body_size": 10}},
        access_log={"path": str(access), "format": UNIT_LOG},
    )
    with Server(f"--config={path}", bind=None) as server:
        wait_for(lambda: len(server.worker_pids()) == 2)  # processes: 2
        details = info(server)
        assert details["cwd"] == str(tmp_path)  # working_directory
        assert details["environ"]["FROM_UNIT"] == "yes"  # environment
        assert str(extra) in details["sys_path"]  # path
        status, headers, _ = get(server.host, server.port, "/", {"User-Agent": "probe/1"})
        assert status == 200
        assert headers["server"] == f"corral/{__version__}"  # server_version
        with server.connect() as sock:  # max_body_size: 10 bytes
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n01234567890")
            assert read_response(sock)[0] == 413
        # the access log line, in Unit's format
        wanted = re.compile(r'^127\.0\.0\.1 "GET / HTTP/1\.1" 200 13 "probe/1" 127\.0\.0\.1$', re.M)
        wait_for(lambda: access.exists() and wanted.search(access.read_text()))


def test_processes_as_an_object_runs_the_spare_ones(tmp_path: Path) -> None:
    path = write_unit_config(tmp_path, {"processes": {"max": 4, "spare": 3}})
    with Server(f"--config={path}", bind=None) as server:
        wait_for(lambda: len(server.worker_pids()) == 3)
        assert get(server.host, server.port)[0] == 200


def test_limits_requests_recycles_and_limits_timeout_answers_504(tmp_path: Path) -> None:
    path = write_unit_config(tmp_path, {"limits": {"timeout": 0.5, "requests": 2}})
    with Server(f"--config={path}", bind=None) as server:
        first = info(server)["pid"]
        assert info(server)["pid"] == first
        # the worker served its 2 requests: the next one is answered by its replacement
        wait_for(lambda: info(server)["pid"] != first, 20)
        started = time.monotonic()
        status, _, _ = get(server.host, server.port, "/sleep?s=5")
        assert status == 504
        assert time.monotonic() - started < 4


def test_http_timeouts(tmp_path: Path) -> None:
    path = write_unit_config(
        tmp_path, {}, settings={"http": {"idle_timeout": 0.5, "header_read_timeout": 0.5}}
    )
    with Server(f"--config={path}", bind=None) as server:
        with server.connect() as sock:  # idle_timeout: a kept-alive connection is closed
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(sock)[0] == 200
            started = time.monotonic()
            assert read_all(sock) == b""
            assert 0.3 < time.monotonic() - started < 5
        with server.connect() as sock:  # header_read_timeout: an unfinished head gets 408
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            assert b" 408 " in read_all(sock).split(b"\r\n", 1)[0]
            assert 0.3 < time.monotonic() - started < 5


def test_server_wide_flags_apply_over_a_unit_file(tmp_path: Path) -> None:
    path = write_unit_config(tmp_path, {"processes": 2}, settings={"http": {"idle_timeout": 3}})
    result = run_cli("-c", str(path), "--keep-alive", "9", "-t", "40", "--check-config")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["settings"]["http"]["idle_timeout"] == 9
    assert doc["settings"]["timeout"] == 40
    assert doc["applications"]["proc"]["processes"] == 2
    assert doc["listeners"] == {"127.0.0.1:0": {"pass": "applications/proc"}}
    for args, needle in [
        (("-w", "3"), "--workers: "),
        (("--chdir", "/tmp"), "--chdir: "),
        (("proc_apps",), "APP: "),
        (("-b", ":0"), "--bind: "),
    ]:
        result = run_cli("-c", str(path), *args, "--check-config")
        assert result.returncode == 2
        assert_one_line_error(result.stderr, needle, f"{path} is a whole document")


def test_a_bad_unit_file_is_one_line_with_the_path(tmp_path: Path) -> None:
    path = write_unit_config(tmp_path, {"processes": {"max": 2, "spare": 3}})
    result = run_cli("-c", str(path))
    assert result.returncode == 2
    assert_one_line_error(
        result.stderr, f"{path}: $.applications.proc.processes.spare: expected at most max (2)"
    )
