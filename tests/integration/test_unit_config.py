"""NGINX Unit configuration files run as they are: `corral -c unit.json` (a whole document).

Each mapping from Unit's keys to corral's runtime is shown through a real server: processes,
working_directory, environment, path, limits, settings.http timeouts and max_body_size,
server_version and an access log in Unit's format.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

from corral import __version__
from tests.integration.control import Control, short_dir
from tests.integration.server import APPS, Server, read_all, read_response, run_cli, wait_for
from tests.integration.test_cli_server import (
    assert_fails_to_load,
    assert_one_line_error,
    get,
    info,
)

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


@pytest.mark.wallclock
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


@pytest.mark.wallclock
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


# -- NGINX Unit's stdout, stderr, thread_stack_size and factory ---------------------------


def test_stdout_and_stderr_go_to_their_files_and_corral_lines_do_not(tmp_path: Path) -> None:
    out, err = tmp_path / "out.log", tmp_path / "err.log"
    out.write_text("before\n")  # appended to, as Unit does
    path = write_unit_config(
        tmp_path,
        {"module": "unit_keys_app", "stdout": str(out), "stderr": str(err)},
        access_log="-",
    )
    with Server(f"--config={path}", bind=None) as server:
        assert get(server.host, server.port, "/print?text=hello-out")[0] == 200
        wait_for(lambda: "hello-out" in out.read_text())
        assert get(server.host, server.port, "/warn?text=hello-err")[0] == 200
        wait_for(lambda: err.exists() and "hello-err" in err.read_text())  # created
        assert get(server.host, server.port, "/boom")[0] == 500
        # the worker's own error log line (stderr, "-") still reaches the master's stderr
        server.wait_log(r"\[ERROR\] error handling GET /boom")
        # and its "-" access log the master's stdout
        wait_for(lambda: '"GET /boom HTTP/1.1" 500' in server.stdout)
        assert "hello-out" not in server.stdout.splitlines()  # the access log names it
        assert "hello-err" not in server.stderr.splitlines()
    assert out.read_text() == "before\nhello-out\n"
    assert err.read_text() == "hello-err\n"


def test_without_stdout_the_prints_reach_corral_s_own_stdout(tmp_path: Path) -> None:
    path = write_unit_config(tmp_path, {"module": "unit_keys_app"})
    with Server(f"--config={path}", bind=None) as server:
        assert get(server.host, server.port, "/print?text=hello-inherited")[0] == 200
        assert get(server.host, server.port, "/warn?text=warn-inherited")[0] == 200
        wait_for(lambda: "hello-inherited" in server.stdout.splitlines())
        wait_for(lambda: "warn-inherited" in server.stderr.splitlines())


def test_an_unopenable_stdout_stops_the_server_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "out.log"
    path = write_unit_config(tmp_path, {"module": "unit_keys_app", "stdout": str(missing)})
    result = run_cli("-c", str(path))
    assert result.returncode == 3, result.stderr
    lines = [line for line in result.stderr.splitlines() if "cannot open" in line]
    assert len(lines) == 1, result.stderr
    assert (
        f"application proc (unit_keys_app) failed to load: cannot open stdout {str(missing)!r}: "
        "No such file" in lines[0]
    )
    assert "Traceback" not in result.stderr


def test_an_application_that_is_not_there_is_one_line_and_exit_3(tmp_path: Path) -> None:
    path = write_unit_config(tmp_path, {"module": "blogg.wsgi", "processes": 2})
    cause = f"No module named 'blogg' (not in the working directory {APPS} nor on sys.path)"
    # named as the document names it, with its module
    assert_fails_to_load(run_cli("-c", str(path)), "proc (blogg.wsgi)", cause)


def test_an_application_whose_import_raises_shows_its_frames_then_one_line(
    tmp_path: Path,
) -> None:
    path = write_unit_config(tmp_path, {"module": "proc_import_fail", "processes": 2})
    what = "RuntimeError: proc_import_fail: boom at import time"
    where = f'File "{APPS / "proc_import_fail.py"}", line 3, in <module>'
    shown = [
        "Traceback (most recent call last):",
        f"  {where}",
        '    raise RuntimeError("proc_import_fail: boom at import time")',
        what,
    ]
    named = "proc (proc_import_fail)"
    assert_fails_to_load(run_cli("-c", str(path)), named, f"{what} ({where})", shown)


def test_what_a_unit_document_holds_and_corral_does_not_serve_is_one_warning_at_start(
    tmp_path: Path,
) -> None:
    """An application `type` naming another Python is said at start; a share route and the
    MIME types for shares are served, and said nothing of."""
    path = tmp_path / "unit.json"
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "app.log").write_bytes(b"a line\n")
    document = {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [
            {"match": {"uri": "/static/*"}, "action": {"share": f"{tmp_path}$uri"}},
            {"action": {"pass": "applications/proc"}},
        ],
        "applications": {"proc": {"type": "python 3.9", "module": "proc_apps"}},
        "settings": {"http": {"static": {"mime_types": {"text/x-log": [".log"]}}}},
    }
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as server:
        warnings = [line for line in server.stderr.splitlines() if "warning" in line.lower()]
        type_warning = (
            'corral: warning: $.applications.proc.type: "python 3.9": corral runs the '
            f"application on its own Python, {sys.version_info[0]}.{sys.version_info[1]}"
        )
        assert warnings == [type_warning], server.stderr
        assert server.stderr.index(type_warning) < server.stderr.index("corral 0.1.0")
        status, headers, body = get(server.host, server.port, "/static/app.log")
        assert (status, headers["content-type"], body) == (200, "text/x-log", b"a line\n")
        assert get(server.host, server.port, "/")[0] == 200
        assert server.stop() == 0
    document["applications"]["proc"]["type"] = "python 3"  # nothing unserved: no warning
    path.write_text(json.dumps(document))
    result = run_cli("-c", str(path), "--check-config")
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_a_share_brought_by_the_control_api_serves_files_at_once(tmp_path: Path) -> None:
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "x").write_bytes(b"brought by the control API\n")
    with (
        short_dir() as directory,
        Server("proc_apps", f"--control=unix:{directory}/c.sock") as server,
    ):
        control = Control.of(server)
        listener = control.get("/config/listeners").json
        (address,) = listener
        routes = [
            {"match": {"uri": "/static/*"}, "action": {"share": f"{tmp_path}$uri"}},
            {"action": {"pass": "applications/proc_apps"}},
        ]
        assert control.put("/config/routes", routes).status == 200
        assert control.put(f"/config/listeners/{address}/pass", "routes").status == 200
        status, _, body = get(server.host, server.port, "/static/x")
        assert (status, body) == (200, b"brought by the control API\n")
        assert get(server.host, server.port, "/static/y")[0] == 404
        assert get(server.host, server.port, "/elsewhere")[0] == 200  # the application's
        assert "WARNING" not in server.stderr, server.stderr
        assert server.stop() == 0


def test_factory_is_called_once_per_worker(tmp_path: Path) -> None:
    path = write_unit_config(
        tmp_path,
        {"module": "unit_keys_app", "callable": "create_app", "factory": True, "processes": 2},
    )
    with Server(f"--config={path}", bind=None) as server:
        wait_for(lambda: len(server.worker_pids()) == 2)
        for _ in range(4):
            assert get(server.host, server.port)[2] == b"made 1"
    path = write_unit_config(
        tmp_path, {"module": "unit_keys_app", "callable": "factories", "factory": True}
    )
    result = run_cli("-c", str(path))
    assert result.returncode == 3, result.stderr
    assert "unit_keys_app:factories() returned str, not an application" in result.stderr


def test_thread_stack_size_is_the_request_threads_one(tmp_path: Path) -> None:
    path = write_unit_config(
        tmp_path, {"module": "unit_keys_app", "threads": 4, "thread_stack_size": 262144}
    )
    with Server(f"--config={path}", bind=None) as server:
        status, _, body = get(server.host, server.port, "/stack")
        assert status == 200
        answer = json.loads(body)
        assert answer["thread"].startswith("corral-app")  # a pool thread serves it
        assert answer["stack_size"] == 262144
    for size, needle in [
        (16384, "thread_stack_size: expected int >= 32768 or null, got 16384"),
        (32768 + 1024, "thread_stack_size: expected a multiple of the page size"),
    ]:
        path = write_unit_config(tmp_path, {"thread_stack_size": size})
        result = run_cli("-c", str(path), "--check-config")
        assert result.returncode == 2
        assert_one_line_error(result.stderr, f"$.applications.proc.{needle}")
