"""The `corral` command on real processes: flags, config files, app loading, binds."""

from __future__ import annotations

import email
import http.client
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from corral import core
from corral.config.settings import SECTIONS
from tests.integration.server import APPS, Server, read_all, run_cli, wait_for

SRC = Path(__file__).resolve().parents[2] / "src"


def get(
    host: str, port: int, path: str = "/", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def info(server: Server) -> dict:
    status, _, body = get(server.host, server.port, "/info")
    assert status == 200
    return json.loads(body)


def unix_get(path: str, target: str = "/") -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return read_all(sock)


@pytest.fixture
def short_tmp():
    """A short directory under /tmp (unix socket paths are limited to ~107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="corral-", dir="/tmp") as path:
        yield Path(path)


def assert_one_line_error(stderr: str, *needles: str) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("corral: error: "), stderr
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0], (needle, stderr)


# -- the command itself -------------------------------------------------------------------


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"corral 0.1.0 ({core.NAME})"
    assert result.stderr == ""


def test_help():
    """It opens with what corral serves, examples and where the documentation is, then the
    options in their groups, headed by name (the sections of the settings, in order)."""
    result = run_cli("-h", env={"COLUMNS": "80"})  # the width a terminal has by default
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    lines = out.splitlines()
    assert lines[:2] == ["usage: corral [OPTIONS] [APP]", "       corral ctl COMMAND ..."]
    at = lines.index("examples:")
    examples = lines[at + 1 : lines.index("", at)]
    assert len(examples) >= 5, examples
    assert examples[0].split("  ")[1] == "corral myproject.wsgi -w 4 -b 0.0.0.0:8000"
    assert all(line.startswith("  corral ") for line in examples), examples
    pointer = " ".join(out.split("The documentation is ", 1)[1].split("\n\n")[0].split())
    # run from the checkout, without its pages installed: its docs/ (test_build.py's wheel
    # names where it installs them)
    docs = Path(__file__).resolve().parents[2] / "docs"
    assert pointer.startswith(f"in {docs}: settings.md (every setting"), pointer
    assert "architecture.md (" in pointer, pointer
    headings = [line[:-1] for line in lines if line and line[0] != " " and line.endswith(":")]
    assert headings[0] == "examples"
    assert headings[1:] == [title for title, _ in SECTIONS], headings
    first = lines.index("Application:")
    assert at < first and "-w INT, --workers INT" in out[out.index("Application:") :]
    for flag in ("--workers", "--bind", "--threads", "--access-logfile", "--check-config"):
        assert flag in out


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["-w", "two"], ["--workers", "expected int >= 1", '"two"']),
        (["--keep-alive", "-1"], ["--keep-alive", "expected number from 0", '"-1"']),
        (["--no-such-flag"], ["--no-such-flag", "unknown"]),
        (["--threads", "0"], ["--threads", "expected int >= 1"]),
    ],
    ids=["workers-two", "keep-alive-negative", "unknown-flag", "threads-zero"],
)
def test_bad_flag_is_one_line_exit_2(args, needles):
    result = run_cli("proc_apps", "-b", "127.0.0.1:0", *args)
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result.stderr, *needles)
    assert result.stdout == ""


def test_check_config_prints_json():
    result = run_cli(
        "proc_apps", "--check-config", "-w", "3", "--threads", "4", "-b", "127.0.0.1:9999"
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    app = doc["applications"]["proc_apps"]
    assert app["processes"] == 3
    assert app["threads"] == 4
    assert list(doc["listeners"]) == ["127.0.0.1:9999"]


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["proc_apps", "--check-config"]])
def test_output_into_a_closed_pipe_ends_quietly(args):
    """``corral --check-config | head -1``: the reader goes before corral writes; corral
    ends with 0 and nothing on stderr, not a BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before corral starts: its first write fails with EPIPE
    try:
        result = subprocess.run(
            [sys.executable, "-m", "corral", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=APPS,
            timeout=30,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_check_config_invalid_exits_2(tmp_path):
    result = run_cli("proc_apps", "--check-config", "--timeout", "soon")
    assert result.returncode == 2
    assert_one_line_error(result.stderr, "--timeout")
    assert result.stdout == ""
    bad = tmp_path / "bad.toml"
    bad.write_text('app = "proc_apps"\nworkers = "two"\n')
    result = run_cli("--check-config", "-c", str(bad))
    assert result.returncode == 2
    assert_one_line_error(result.stderr, "bad.toml", "$.workers")
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"app": "proc_apps", "wrokers": 2}))
    result = run_cli("--check-config", "-c", str(unknown))
    assert result.returncode == 2
    assert_one_line_error(result.stderr, "unknown.json", "wrokers")


def test_default_bind_is_loopback_8000():
    result = run_cli("proc_apps", "--check-config")
    assert result.returncode == 0, result.stderr
    assert list(json.loads(result.stdout)["listeners"]) == ["127.0.0.1:8000"]


def test_workers_auto_resolves_to_cpu_count_in_check_config():
    result = run_cli("proc_apps", "--check-config", "-w", "auto")
    assert result.returncode == 0, result.stderr
    workers = json.loads(result.stdout)["applications"]["proc_apps"]["processes"]
    assert workers == len(os.sched_getaffinity(0))


def _console_script() -> str | None:
    beside = Path(sys.executable).with_name("corral")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("corral")


def test_console_script_matches_python_m():
    script = _console_script()
    if script is None:
        pytest.skip(
            "no `corral` console script next to sys.executable or on PATH: "
            "the package is not installed as a script in this environment"
        )
    for args in (["--version"], ["proc_apps", "--check-config", "-w", "2"], ["x", "-w", "two"]):
        via_module = run_cli(*args)
        via_script = run_cli(*args, argv0=[script])
        assert via_script.returncode == via_module.returncode, via_script.stderr
        assert via_script.stdout == via_module.stdout
        assert via_script.stderr == via_module.stderr


# -- config files ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["toml", "json"])
def test_config_file_configures_running_server(tmp_path, kind):
    keys = {
        "app": "proc_apps",
        "bind": ["127.0.0.1:0"],
        "server_header": "FromFile",
        "threads": 2,
        "env": {"PROC_FROM_FILE": kind},
    }
    path = tmp_path / f"corral.{kind}"
    if kind == "json":
        path.write_text(json.dumps(keys))
    else:
        path.write_text(
            'app = "proc_apps"\nbind = ["127.0.0.1:0"]\nserver_header = "FromFile"\n'
            f'threads = 2\nenv = {{ PROC_FROM_FILE = "{kind}" }}\n'
        )
    # no APP argument and no -b: both come from the file
    with Server(f"--config={path}", bind=None) as server:
        assert server.port not in (0, 8000)  # the file's port 0, not the default 8000
        status, headers, body = get(server.host, server.port, "/")
        assert status == 200
        assert body == b"Hello, world!"
        assert headers["server"] == "FromFile"
        assert info(server)["environ"]["PROC_FROM_FILE"] == kind
        assert "2 thread(s)" in server.stderr
        assert server.stop() == 0


def test_flags_override_config_file(tmp_path):
    path = tmp_path / "corral.toml"
    path.write_text('app = "proc_apps"\nserver_header = "FromFile"\nbind = "127.0.0.1:8000"\n')
    with Server(f"--config={path}", "--server-header=FromFlag") as server:
        assert server.port != 8000
        _, headers, _ = get(server.host, server.port, "/")
        assert headers["server"] == "FromFlag"
        assert server.stop() == 0


# -- finding and loading the application ------------------------------------------------


def test_module_without_callable_prefers_application():
    with Server("proc_apps") as server:
        assert info(server)["callable"] == "application"
        assert server.stop() == 0


def test_module_without_callable_falls_back_to_app():
    with Server("proc_app_only") as server:
        assert get(server.host, server.port, "/")[2] == b"found app"
        assert server.stop() == 0


def test_explicit_callable():
    with Server("proc_apps:app") as server:
        assert get(server.host, server.port, "/")[2] == b"from app"
        assert server.stop() == 0


# -- an application that cannot load: one line, exit 3 -------------------------------------

LOG_LINE = re.compile(r"\[[^]]+\] \[\d+\] \[([A-Z]+)\] (.*)")
LOAD_MODES = {"w1": ("-w", "1"), "w3": ("-w", "3"), "w3-preload": ("-w", "3", "--preload")}


def assert_fails_to_load(result, name: str, cause: str, shown: list[str] = ()) -> None:
    """``result`` (a server that ran to its end) stopped with exit status 3 after it said the
    application's frames ``shown`` (a traceback's lines, caret lines left out) and then one
    line naming the application ``name`` and the ``cause``: between its usual start and stop
    lines, or alone with ``--preload``; the same words either way. Nothing of corral's own
    frames, nor importlib's."""
    assert result.returncode == 3, result.stderr
    assert "/corral/" not in result.stderr and "importlib" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip(" ^~")]
    if "--preload" in result.args:  # before the server began
        failed = f"corral: error: application {name} failed to load: {cause}"
        assert lines == [*shown, failed], result.stderr
        return
    said = [(m.group(1), m.group(2)) if (m := LOG_LINE.fullmatch(x)) else x for x in lines]
    started = [what.split(" ")[0] for _, what in said[:3]]
    assert started == ["corral", "listening", "serving"], result.stderr
    worker = [("ERROR", f"application {name} failed to load:"), *shown] if shown else []
    assert said[3:] == [
        *worker,
        ("CRITICAL", f"application {name} failed to load: {cause}; shutting down"),
        ("INFO", "shutdown complete"),
    ], result.stderr


ONE_LINE_FAILURES = {
    "no module": (
        ["blogg.wsgi"],
        "blogg.wsgi",
        f"No module named 'blogg' (not in the working directory {APPS} nor on sys.path)",
    ),
    "no module in a package": (
        ["email.nothing_here"],
        "email.nothing_here",
        f"No module named 'email.nothing_here' (package 'email' is "
        f"{os.path.dirname(email.__file__)})",
    ),
    "in a module, not a package": (
        ["proc_apps.wsgi:app"],
        "proc_apps.wsgi",
        "No module named 'proc_apps.wsgi': 'proc_apps' is a module, not a package",
    ),
    "no attribute": (
        ["proc_no_callable"],
        "proc_no_callable",
        "module 'proc_no_callable' has no attribute 'application' or 'app'",
    ),
    "no named attribute": (
        ["proc_apps:nothing_here"],
        "proc_apps",
        "module 'proc_apps' has no attribute 'nothing_here'",
    ),
    "factory not callable": (
        ["proc_no_callable:something_else", "--factory"],
        "proc_no_callable",
        "proc_no_callable:something_else is not callable",
    ),
    "factory returns no application": (
        ["proc_no_callable:make_nothing", "--factory"],
        "proc_no_callable",
        "proc_no_callable:make_nothing() returned int, not an application",
    ),
}


@pytest.mark.parametrize("mode", LOAD_MODES)
@pytest.mark.parametrize("case", ONE_LINE_FAILURES)
def test_an_application_that_is_not_there_is_one_line_and_exit_3(case, mode):
    args, name, cause = ONE_LINE_FAILURES[case]
    result = run_cli(*args, "-b", "127.0.0.1:0", *LOAD_MODES[mode], timeout=30)
    assert_fails_to_load(result, name, cause)
    assert "Traceback" not in result.stderr and "respawning" not in result.stderr


@pytest.mark.wallclock
@pytest.mark.parametrize("mode", LOAD_MODES)
@pytest.mark.parametrize("module", ["proc_import_fail", "proc_import_missing"])
def test_an_import_that_raises_shows_the_application_s_frames_then_one_line(module, mode):
    started = time.monotonic()
    result = run_cli(module, "-b", "127.0.0.1:0", *LOAD_MODES[mode], timeout=30)
    elapsed = time.monotonic() - started
    if module == "proc_import_fail":
        line = 'raise RuntimeError("proc_import_fail: boom at import time")'
        what = "RuntimeError: proc_import_fail: boom at import time"
    else:
        line = "import corral_test_dependency_not_installed  # noqa: F401"
        what = "ModuleNotFoundError: No module named 'corral_test_dependency_not_installed'"
    path = APPS / f"{module}.py"
    shown = [
        "Traceback (most recent call last):",
        f'  File "{path}", line 3, in <module>',
        f"    {line}",
        what,
    ]
    cause = f'{what} (File "{path}", line 3, in <module>)'
    assert_fails_to_load(result, module, cause, shown)
    assert "respawning" not in result.stderr
    assert elapsed < 5, elapsed  # the master stops at the first failure: no retry


def test_chdir_pythonpath_env_reach_the_app(tmp_path):
    workdir = tmp_path / "work"
    extra_a = tmp_path / "lib_a"
    extra_b = tmp_path / "lib_b"
    for directory in (workdir, extra_a, extra_b):
        directory.mkdir()
    # an application importable only through --pythonpath
    (extra_b / "proc_tmp_pathapp.py").write_text(
        "import os, json\n"
        "def application(environ, start_response):\n"
        "    body = json.dumps({'cwd': os.getcwd(), 'k': os.environ.get('PROC_K')}).encode()\n"
        "    start_response('200 OK', [('Content-Type', 'application/json')])\n"
        "    return [body]\n"
    )
    with Server(
        "proc_apps",
        "--chdir",
        str(workdir),
        "--pythonpath",
        f"{extra_a},{extra_b}",
        "-e",
        "PROC_K=V1",
        "-e",
        "PROC_EQ=a=b",
    ) as server:
        data = info(server)
        assert os.path.realpath(data["cwd"]) == os.path.realpath(workdir)
        assert str(extra_a) in data["sys_path"]
        assert str(extra_b) in data["sys_path"]
        assert data["environ"]["PROC_K"] == "V1"
        assert data["environ"]["PROC_EQ"] == "a=b"
        assert server.stop() == 0
    with Server(
        "proc_tmp_pathapp", "--pythonpath", str(extra_b), "-e", "PROC_K=V2", "--chdir", "/"
    ) as server:
        status, _, body = get(server.host, server.port, "/")
        assert status == 200
        assert json.loads(body) == {"cwd": "/", "k": "V2"}
        assert server.stop() == 0


# -- binds ----------------------------------------------------------------------------------


def test_bind_ipv4_loopback():
    with Server("proc_apps", bind="127.0.0.1:0") as server:
        assert server.host == "127.0.0.1"
        assert server.port > 0
        assert get(server.host, server.port, "/")[0] == 200
        assert server.stop() == 0


def _ipv6_loopback_available() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def test_bind_ipv6_loopback():
    if not _ipv6_loopback_available():
        pytest.skip("this machine has no IPv6 loopback (socket.has_ipv6 false or ::1 unbindable)")
    with Server("proc_apps", bind="[::1]:0") as server:
        assert server.host == "::1"
        with server.connect() as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            response = read_all(sock)
        assert response.startswith(b"HTTP/1.1 200 ")
        assert response.endswith(b"Hello, world!")
        assert server.stop() == 0


def _wait_unix_ready(server: Server, path: Path) -> None:
    server.wait_log(r"listening on unix:", timeout=20)
    server.wait_log(r"worker \d+ ready", timeout=20)
    wait_for(path.exists, timeout=5)


@pytest.mark.parametrize(("flags", "mode"), [((), 0o600), (("--unix-socket-mode", "0660"), 0o660)])
def test_bind_unix_socket_and_mode(short_tmp, flags, mode):
    path = short_tmp / "s.sock"
    with Server("proc_apps", "-b", f"unix:{path}", *flags, bind=None, wait_ready=False) as server:
        _wait_unix_ready(server, path)
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        assert stat.S_IMODE(os.stat(path).st_mode) == mode
        response = unix_get(str(path))
        assert response.startswith(b"HTTP/1.1 200 ")
        assert response.endswith(b"Hello, world!")
        assert server.stop() == 0
    assert not path.exists()  # removed at exit


def test_several_binds_all_answer(short_tmp):
    path = short_tmp / "multi.sock"
    with Server("proc_apps", "-b", f"unix:{path}") as server:
        wait_for(path.exists, timeout=5)
        assert get(server.host, server.port, "/")[2] == b"Hello, world!"
        assert unix_get(str(path)).endswith(b"Hello, world!")
        assert len(re.findall(r"listening on ", server.stderr)) == 2
        assert server.stop() == 0


def test_port_in_use_one_line_exit_1():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run_cli("proc_apps", "-b", f"127.0.0.1:{port}", timeout=20)
    assert result.returncode == 1, result.stderr
    assert_one_line_error(result.stderr, str(port))
    assert "in use" in result.stderr.lower()


def test_unix_socket_in_use_is_refused(short_tmp):
    path = short_tmp / "busy.sock"
    with Server("proc_apps", "-b", f"unix:{path}", bind=None, wait_ready=False) as first:
        _wait_unix_ready(first, path)
        result = run_cli("proc_apps", "-b", f"unix:{path}", timeout=20)
        assert result.returncode == 1, result.stderr
        assert_one_line_error(result.stderr, str(path))
        # the first server's socket is untouched
        assert unix_get(str(path)).endswith(b"Hello, world!")
        assert first.stop() == 0


def test_bad_access_log_format_is_a_config_error():
    result = run_cli("proc_apps", "--access-logformat", "%(h)s %(nope)s", "--check-config")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--access-logformat" in lines[0] and "nope" in lines[0], lines


def test_reload_without_watchfiles_is_one_line_and_exit_2():
    """--reload names the package it needs; the import is made to fail as if not installed."""
    code = (
        "import sys; sys.modules['watchfiles'] = None; from corral.cli import main; "
        "sys.exit(main(['basic', '-b', '127.0.0.1:0', '--reload']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(APPS),
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(APPS), str(SRC)])},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "corral: error: --reload needs the watchfiles package: "
        f"{sys.executable} -m pip install watchfiles\n"
    )
