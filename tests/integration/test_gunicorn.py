"""Gunicorn's setups run unchanged, on real servers: ``-D`` (a real daemon), a
``gunicorn.conf.py`` (the classic posts' seed file as root with ``user``/``group``, and one
with hooks), ``GUNICORN_CMD_ARGS``, the trust in a local proxy's ``X-Forwarded-*`` headers
that ``--forwarded-allow-ips`` gives by default (behind a real nginx too), ``module:factory(ARGS)``,
``--reuse-port``, ``--capture-output`` and ``-m``. The flag by flag walk is in
tests/unit/test_gunicorn.py."""

from __future__ import annotations

import contextlib
import grp
import http.client
import json
import os
import pwd
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.nginx import running_nginx
from tests.integration.server import (
    APPS,
    LISTENING,
    SRC,
    Server,
    http_get,
    read_response,
    run_cli,
    wait_for,
)
from tests.integration.supervision import alive
from tests.integration.test_hooks import GUNICORN_STYLE
from tests.integration.test_privileges import (
    GROUP,
    USER,
    proc_ids,
)


class Port:
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.host, self.port = host, port


def log_port(log: Path, timeout: float = 20.0) -> int:
    """The TCP port a server whose error log is ``log`` listens on."""

    def found():
        match = LISTENING.search(log.read_text()) if log.exists() else None
        return match and int(match[2])

    return wait_for(found, timeout)


def wait_file_log(log: Path, pattern: str, count: int = 1, timeout: float = 20.0) -> list[str]:
    def found():
        lines = re.findall(pattern, log.read_text()) if log.exists() else []
        return lines if len(lines) >= count else None

    return wait_for(found, timeout)


def stop_daemon(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        wait_for(lambda: not alive(pid), 30)
    except AssertionError:
        os.kill(pid, signal.SIGKILL)
        raise


# -- -D / --daemon -------------------------------------------------------------------------------


@pytest.mark.wallclock
def test_daemon_detaches_and_the_command_returns_once_it_serves(tmp_path):
    pid_file, log = tmp_path / "corral.pid", tmp_path / "error.log"
    started = time.monotonic()
    result = run_cli(
        "basic", "-D", "-p", str(pid_file), "--log-file", str(log), "-b", "127.0.0.1:0", "-w", "2"
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    pid = int(pid_file.read_text())
    try:
        # the command returned once both workers were ready: the port answers at once
        assert len(re.findall(r"worker \d ready", log.read_text())) == 2
        assert time.monotonic() - started < 20
        assert http_get(Port(log_port(log))) == (200, b"Hello, world!")
        # a new session, and not its leader: it can never take a terminal back
        assert os.getsid(pid) not in (os.getsid(0), pid)
        for fd in (0, 1, 2):
            assert os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/null"
        assert f"[{pid}] [INFO] listening on http://127.0.0.1:" in log.read_text()
    finally:
        stop_daemon(pid)
    assert not pid_file.exists()
    assert "shutdown complete" in log.read_text()


def test_a_daemon_that_cannot_start_says_why_in_the_foreground(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        result = run_cli("basic", "-D", "-b", f"127.0.0.1:{port}")
    finally:
        taken.close()
    assert result.returncode == 1
    assert result.stderr == (
        f"corral: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    )
    log = tmp_path / "error.log"
    result = run_cli("proc_import_fail", "-D", "--log-file", str(log), "-b", "127.0.0.1:0")
    assert result.returncode == 3
    assert result.stderr == (
        "corral: error: the daemon stopped before it served (exit code 3); see its error log\n"
    )
    assert "RuntimeError: proc_import_fail: boom at import time" in log.read_text()


def test_a_daemon_keeps_the_redirected_output_with_enable_stdio_inheritance(tmp_path):
    out, pid_file = tmp_path / "out.txt", tmp_path / "corral.pid"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(APPS), str(SRC)]))
    with out.open("w") as stream:
        code = subprocess.run(
            [
                sys.executable,
                "-m",
                "corral",
                "basic",
                "-D",
                "-R",
                "-p",
                str(pid_file),
                "-b",
                "127.0.0.1:0",
                "--access-logfile",
                "-",
            ],
            stdout=stream,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(APPS),
            env=env,
            timeout=30,
        ).returncode
    assert code == 0
    pid = int(pid_file.read_text())
    try:
        assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
        assert os.readlink(f"/proc/{pid}/fd/1") == str(out)
        port = log_port(out)
        assert http_get(Port(port), "/inherited")[0] == 200
        wait_file_log(out, r'"GET /inherited HTTP/1.1" 200')  # the access log, on stdout
    finally:
        stop_daemon(pid)


# -- gunicorn.conf.py ----------------------------------------------------------------------------

SEED = """\
import multiprocessing

bind = "127.0.0.1:0"
workers = 5
user = "{user}"
group = "{group}"
logfile = "{log}"
loglevel = "info"
proc_name = "myproject"
pidfile = "{pid}"
"""


def cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as stream:
        return stream.read().replace(b"\0", b" ").decode().strip()


@pytest.mark.skipif(os.geteuid() != 0, reason="user/group need a master started as root")
def test_the_seed_config_of_the_classic_posts(sandbox, request):
    logs = sandbox.root / "seed"
    logs.mkdir(exist_ok=True)
    log, pid_file = logs / "gunicorn.log", logs / "gunicorn.pid"
    conf = sandbox.apps / "gunicorn.conf.py"
    conf.write_text(SEED.format(user=USER, group=GROUP, log=log, pid=pid_file))
    # the sandbox is the session's: a ./gunicorn.conf.py left there is read by every later
    # server started in it (as Gunicorn reads it without -c), test_privileges.py's among them
    request.addfinalizer(lambda: conf.unlink(missing_ok=True))
    conf.chmod(0o644)
    options = {"python": sandbox.python, "cwd": str(sandbox.apps)}
    env = {"PYTHONPATH": str(sandbox.apps)}
    checked = subprocess.run(
        [sandbox.python, "-m", "corral", "-c", "gunicorn.conf.py", "priv_app", "--check-config"],
        capture_output=True,
        text=True,
        cwd=sandbox.apps,
        env={**os.environ, **env},
        timeout=30,
    )
    assert (checked.returncode, checked.stderr) == (0, "")
    doc = json.loads(checked.stdout)
    assert doc["applications"]["priv_app"]["processes"] == 5
    assert (doc["applications"]["priv_app"]["user"], doc["settings"]["pid"]) == (
        USER,
        str(pid_file),
    )
    with Server(
        "priv_app", "-c", "gunicorn.conf.py", bind=None, log_level=None, wait_ready=False,
        env=env, **options,
    ) as server:  # fmt: skip
        wait_file_log(log, r"worker \d ready", count=5)
        master = server.proc.pid
        assert int(pid_file.read_text()) == master
        port = log_port(log)
        report = json.loads(http_get(Port(port))[1])
        uid, gid = pwd.getpwnam(USER).pw_uid, grp.getgrnam(GROUP).gr_gid
        assert (report["serving"]["uid"], report["serving"]["gid"]) == (uid, gid)
        workers = server.worker_pids()
        assert len(workers) == 5
        assert cmdline(master) == "corral: master [myproject]"
        for pid in workers:
            assert cmdline(pid) == "corral: worker [myproject]"
            real_uid, real_gid, _ = proc_ids(pid)
            assert (real_uid[0], real_gid[0]) == (uid, gid)
        text = log.read_text()
        assert "[DEBUG]" not in text and "[INFO] serving priv_app with 5 worker(s)" in text
        assert server.stderr == "" and server.stdout == ""  # everything went to the logfile
        assert server.stop() == 0
    assert not pid_file.exists()


def test_a_gunicorn_conf_py_with_hooks_runs_once_and_reloads_as_gunicorn(tmp_path):
    runs = tmp_path / "runs"
    conf = tmp_path / "gunicorn.conf.py"
    conf.write_text(
        f"with open({str(runs)!r}, 'a') as _f:\n    _f.write('run\\n')\n" + GUNICORN_STYLE
    )
    # the file's bind (0.0.0.0:8000) is overridden by the flag, as in Gunicorn
    with Server("proc_apps", "-c", str(conf), wait_ready=False, log_level=None) as server:
        server.expected_workers = 4  # the file's workers = 4
        server.wait_ready()
        master = server.proc.pid
        assert runs.read_text() == "run\n"  # read once: its hooks are the same module
        assert len(server.worker_pids()) == 4
        assert f"[{master}] [INFO] Starting with 4 workers" in server.stderr
        assert f"[{master}] [INFO] Server is ready. Spawning workers" in server.stderr
        server.wait_log(r"\[INFO\] Worker spawned \(pid: \d+\)", count=4)
        with server.connect() as sock:
            sock.sendall(b"GET /ctype HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(sock)[0] == 200
        server.wait_log(r"\[DEBUG\] GET /ctype")  # loglevel = "debug": pre_request's line
        server.send(signal.SIGHUP)  # a reload runs the file again, as Gunicorn's does
        server.wait_log(r"reload complete: generation 2 serving with 4 worker")
        assert runs.read_text() == "run\nrun\n"
        assert "warning" not in server.stderr.lower(), server.stderr
        assert server.stop() == 0


# -- ./gunicorn.conf.py, read when no file is named, as Gunicorn does --------------------------

DEFAULT_CONF = """\
bind = "127.0.0.1:0"
workers = 3
proc_name = "from-default-file"


def post_fork(server, worker):
    server.log.info("post_fork of the default file: %s", worker.pid)
"""


def reading_line(conf: Path) -> str:
    return (
        f"reading {conf}: Gunicorn's default config file, found in the working directory "
        "(-c FILE names another, as in Gunicorn)"
    )


def test_gunicorn_conf_py_in_the_working_directory_is_read_and_said_once(tmp_path):
    """The issue's case: `gunicorn app` became `corral app` in the same directory, and the
    file's bind, workers and hooks must not be dropped."""
    conf = tmp_path / "gunicorn.conf.py"
    conf.write_text(DEFAULT_CONF)
    with Server(
        "proc_apps", cwd=str(tmp_path), bind=None, log_level="info", wait_ready=False
    ) as server:
        server.expected_workers = 3  # the file's workers
        server.wait_ready()
        lines = server.stderr.splitlines()
        assert lines[1].endswith(f"[INFO] {reading_line(conf)}"), lines  # under the version
        assert len(server.worker_pids()) == 3
        server.wait_log(r"post_fork of the default file: \d+", count=3)  # its hooks
        assert cmdline(server.proc.pid) == "corral: master [from-default-file]"
        assert http_get(server)[0] == 200
        server.send(signal.SIGHUP)  # read again, as a named file is; not said again
        server.wait_log(r"reload complete: generation 2 serving with 3 worker")
        assert server.stderr.count("reading ") == 1, server.stderr
        assert "warning" not in server.stderr.lower(), server.stderr
        assert server.stop() == 0


def test_check_config_says_it_read_gunicorn_conf_py(tmp_path):
    conf = tmp_path / "gunicorn.conf.py"
    conf.write_text(DEFAULT_CONF + 'wsgi_app = "proc_apps:app"\n')
    result = run_cli("--check-config", cwd=tmp_path)  # the file names the application too
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [f"corral: {reading_line(conf)}"]
    doc = json.loads(result.stdout)
    assert doc["applications"]["proc_apps"]["processes"] == 3
    assert doc["applications"]["proc_apps"]["callable"] == "app"
    assert doc["settings"]["hooks"] == str(conf)


OTHER_TOML = 'workers = 1\nbind = ["127.0.0.1:0"]\n'
UNIT = {
    "listeners": {"127.0.0.1:0": {"pass": "applications/proc"}},
    "applications": {"proc": {"type": "python 3", "module": "proc_apps"}},
}


@pytest.mark.parametrize(
    "named", ["-c other.py", "GUNICORN_CMD_ARGS=-c other.py", "--ini other.ini", "-c unit.json"]
)
def test_a_file_named_replaces_gunicorn_conf_py(tmp_path, named):
    """As in Gunicorn, a file named by -c (or in GUNICORN_CMD_ARGS) is read instead of
    ./gunicorn.conf.py, not over it; so is a uWSGI ini file or a Unit document."""
    (tmp_path / "gunicorn.conf.py").write_text(DEFAULT_CONF)
    (tmp_path / "other.py").write_text('bind = "127.0.0.1:0"\nworkers = 1\n')
    (tmp_path / "other.ini").write_text("[uwsgi]\nhttp-socket = 127.0.0.1:0\nprocesses = 1\n")
    (tmp_path / "unit.json").write_text(json.dumps(UNIT))
    env: dict[str, str] = {}
    args = named.split()
    if named.startswith("GUNICORN_CMD_ARGS="):
        env["GUNICORN_CMD_ARGS"] = named.split("=", 1)[1]
        args = []
    app = [] if named.endswith("unit.json") else ["proc_apps"]
    result = run_cli(*app, *args, "--check-config", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "reading" not in result.stderr and "gunicorn.conf.py" not in result.stderr
    doc = json.loads(result.stdout)
    (application,) = doc["applications"].values()
    assert application.get("processes", 1) == 1, doc
    assert doc["settings"].get("hooks") is None, doc  # nor the default file's post_fork


def test_without_an_app_a_state_directory_runs_and_gunicorn_conf_py_is_a_warning(tmp_path):
    conf = tmp_path / "gunicorn.conf.py"
    conf.write_text(DEFAULT_CONF + 'wsgi_app = "proc_apps:app"\n')
    state = tmp_path / "state"
    result = run_cli("--state-dir", str(state), "--check-config", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"corral: warning: {conf} is not read: without an APP the state directory's "
        "configuration runs (give -c gunicorn.conf.py to serve the file)"
    ]
    assert json.loads(result.stdout)["applications"] == {}


def test_gunicorn_cmd_args_apply_to_a_real_server():
    env = {"GUNICORN_CMD_ARGS": "--workers=2 --threads 3 --name from-env"}
    with Server("basic", workers=None, env=env, wait_ready=False) as server:
        server.expected_workers = 2
        server.wait_ready()
        assert "serving basic with 2 worker(s) x 3 thread(s)" in server.stderr
        assert cmdline(server.proc.pid) == "corral: master [from-env]"
        assert server.stop() == 0


def test_hooks_file_settings_are_named_in_warnings(tmp_path):
    hooks = tmp_path / "gunicorn.conf.py"
    hooks.write_text(GUNICORN_STYLE)
    with Server("proc_apps", "--hooks", str(hooks)) as server:
        assert len(server.worker_pids()) == 1
        for name in ("bind", "workers", "loglevel"):
            line = (
                f"[WARNING] hooks file {str(hooks)!r}: {name} is a Gunicorn setting, not "
                f"applied: --hooks takes only the hooks from it (to apply its settings too, "
                f"give it as -c {hooks})"
            )
            assert line in server.stderr, server.stderr
        assert server.stop() == 0


# -- the trust in a local proxy's headers ----------------------------------------------------------

PROXIED = (
    b"GET /api/items/1 HTTP/1.1\r\nHost: api.example.com\r\n"
    b"X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n\r\n"
)


def ask(server_port: int, source: str = "127.0.0.1", unix: Path | None = None) -> dict:
    if unix is not None:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(unix))
    else:
        sock = socket.socket()
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", server_port))
    with sock:
        sock.settimeout(10)
        sock.sendall(PROXIED)
        status, _, body = read_response(sock)
    assert status == 200
    return json.loads(body)


def test_a_local_proxys_https_reaches_the_app_by_default(tmp_path):
    """A DRF-like app behind a TLS-terminating proxy on the same host builds https:// links,
    as under Gunicorn; a peer that is not 127.0.0.1 or ::1 is not trusted."""
    sock_path = tmp_path / "app.sock"
    with Server("gunicorn_apps:links", "-b", f"unix:{sock_path}") as server:
        trusted = ask(server.port)
        assert trusted == {
            "url": "https://api.example.com/api/items/1",
            "scheme": "https",
            "remote_addr": "203.0.113.7",
        }
        assert ask(server.port, source="127.0.0.2") == {
            "url": "http://api.example.com/api/items/1",
            "scheme": "http",
            "remote_addr": "127.0.0.2",
        }
        assert ask(server.port, unix=sock_path)["scheme"] == "https"  # unix: trusted
        assert server.stop() == 0


def test_forwarded_allow_ips_empty_or_a_unit_document_trust_no_one(tmp_path):
    with Server("gunicorn_apps:links", "--forwarded-allow-ips", "") as server:
        assert ask(server.port)["url"] == "http://api.example.com/api/items/1"
        assert server.stop() == 0
    unit = tmp_path / "unit.json"
    unit.write_text(
        json.dumps(
            {
                "listeners": {"127.0.0.1:0": {"pass": "applications/links"}},
                "applications": {"links": {"module": "gunicorn_apps", "callable": "links"}},
            }
        )
    )
    with Server(f"--config={unit}", bind=None) as server:  # NGINX Unit's rules: no forwarded
        assert ask(server.port) == {
            "url": "http://api.example.com/api/items/1",
            "scheme": "http",
            "remote_addr": "127.0.0.1",
        }
        assert server.stop() == 0


PROXY_LOCATION = """\
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto https;
        }}"""


def test_behind_a_real_nginx_the_app_sees_https(tmp_path):
    with Server("gunicorn_apps:links") as server:
        with running_nginx(tmp_path, PROXY_LOCATION.format(upstream=server.port)) as port:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/api/items/1", headers={"Host": "shop.example.org"})
            answer = json.loads(connection.getresponse().read())
            connection.close()
        assert answer == {
            "url": "https://shop.example.org/api/items/1",
            "scheme": "https",
            "remote_addr": "127.0.0.1",  # the client nginx saw, from X-Forwarded-For
        }
        assert server.stop() == 0


# -- APP as module:factory(ARGS), --reuse-port, --capture-output, -m ------------------------------


@pytest.mark.parametrize("preload", [False, True], ids=["in-workers", "preload"])
def test_app_as_a_factory_call_with_literal_arguments(preload):
    extra = ("--preload",) if preload else ()
    app = "gunicorn_apps:create_app('hi', repeat=2, tone={'warm': True})"
    with Server(app, *extra) as server:
        status, body = http_get(server)
        assert status == 200
        assert json.loads(body) == {"greeting": "hihi", "extra": {"tone": {"warm": True}}}
        assert server.stop() == 0


def test_a_factory_that_rejects_its_arguments_fails_to_load():
    result = run_cli("gunicorn_apps:create_app(1, 2, 3)", "-b", "127.0.0.1:0")
    assert result.returncode == 3
    assert "TypeError: create_app() takes from 0 to 2 positional arguments" in result.stderr


@pytest.mark.parametrize("reuse_port", [True, False], ids=["reuse-port", "default"])
def test_reuse_port_lets_another_socket_bind_the_same_port(reuse_port):
    extra = ("--reuse-port",) if reuse_port else ()
    with Server("basic", *extra) as server:
        other = socket.socket()
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            if reuse_port:
                other.bind(("127.0.0.1", server.port))
            else:
                with pytest.raises(OSError, match="Address already in use"):
                    other.bind(("127.0.0.1", server.port))
        finally:
            other.close()
        assert server.stop() == 0


def test_capture_output_sends_the_apps_prints_to_the_error_log(tmp_path):
    log = tmp_path / "error.log"
    args = ("--capture-output", "--log-file", str(log))
    with Server("gunicorn_apps:chatty", *args, bind="127.0.0.1:0", wait_ready=False) as server:
        wait_file_log(log, r"worker 0 ready")
        assert http_get(Port(log_port(log))) == (200, b"printed")
        wait_file_log(log, r"chatty stdout \d+")
        wait_file_log(log, r"chatty stderr \d+")
        assert server.stop() == 0
    assert "chatty" not in server.stdout + server.stderr  # read to their end


def test_umask_sets_the_unix_socket_mode_as_gunicorn(tmp_path):
    sock_path = tmp_path / "app.sock"
    with Server("basic", "-b", f"unix:{sock_path}", "-m", "007") as server:
        assert stat.S_IMODE(sock_path.stat().st_mode) == 0o770
        assert server.stop() == 0
    with Server("basic", "-b", f"unix:{sock_path}") as server:  # corral's default
        assert stat.S_IMODE(sock_path.stat().st_mode) == 0o600
        assert server.stop() == 0
