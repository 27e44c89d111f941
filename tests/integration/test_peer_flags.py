"""Uvicorn's and Granian's flags that change what a server does, on real processes: one server
per interface (and per core) checks several of them at once. What each flag of theirs sets or
refuses is walked without a server in tests/unit/test_peers.py.

The applications (apps/app_dir/peer_apps.py) are not on the Python path the servers get: they
import through ``--app-dir`` only, and answer with where they were told they are mounted and
the environment the ``--env-file`` gave them.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.integration.server import APPS, Server, http_get, run_cli, wait_for
from tests.integration.supervision import alive
from tests.integration.test_supervision_reload import change_until_reloaded
from tests.integration.test_supervision_signals import read_pid

APP_DIR = APPS / "app_dir"
# PEER_KEPT is in the environment corral starts in too: that value wins, as in Uvicorn
STARTED_WITH = {"PEER_KEPT": "from-the-environment"}


def env_file(directory: Path) -> Path:
    path = directory / ".env"
    path.write_text("# as a project keeps it\nPEER_FROM_FILE='yes'\nPEER_KEPT=from-the-file\n")
    return path


def get(server: Server, path: str) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The header fields (names lower-cased) and the JSON of a GET."""
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.status == 200
        fields = [(name.lower(), value) for name, value in response.getheaders()]
        return fields, json.loads(response.read())
    finally:
        connection.close()


def values(fields: list[tuple[str, str]], name: str) -> list[str]:
    return [value for field, value in fields if field == name]


@pytest.mark.usefixtures("each_core")
def test_an_asgi_application_under_uvicorns_flags(tmp_path):
    with Server(
        "peer_apps:asgi",
        "--app-dir", str(APP_DIR),
        "--interface", "asgi3",
        "--host", "127.0.0.1", "--port", "0",
        "--root-path", "/api",
        "--header", "X-Frame-Options: DENY",
        "--header", "Server: behind",
        "--no-date-header",
        "--env-file", str(env_file(tmp_path)),
        "--use-colors",
        bind=None,
        env=STARTED_WITH,
    ) as server:  # fmt: skip
        fields, seen = get(server, "/items?page=2")
        # the path the proxy took off, put back in front
        assert seen["root_path"] == "/api"
        assert seen["path"] == "/api/items"
        assert seen["raw_path"] == "/api/items"
        assert seen["env"] == {"PEER_FROM_FILE": "yes", "PEER_KEPT": "from-the-environment"}
        assert values(fields, "x-frame-options") == ["DENY"]
        assert values(fields, "server") == ["behind"]
        assert values(fields, "date") == []
        assert "[\x1b[32mINFO\x1b[0m] listening on http://127.0.0.1:" in server.stderr
        assert server.stop() == 0


@pytest.mark.usefixtures("each_core")
def test_a_wsgi_application_under_uvicorns_and_granians_flags(tmp_path):
    log = tmp_path / "corral.log"
    config = tmp_path / "logging.json"
    config.write_text(log_config(log, "CUSTOM %(levelname)s %(message)s"))
    with Server(
        "peer_apps:wsgi",
        "--app-dir", str(APP_DIR),
        "--port", "0",
        "--root-path", "/api/",
        "--url-path-prefix", "/v1",  # Granian's: NGINX Unit's prefix, matched in the path
        "--no-server-header",
        "--header", "X-A: b",
        "--log-config", str(config),
        "--env-files", str(env_file(tmp_path)),
        bind=None,
        env=STARTED_WITH,
        log_file=log,
    ) as server:  # fmt: skip
        fields, seen = get(server, "/v1/items")
        assert (seen["script_name"], seen["path_info"]) == ("/api/v1", "/items")
        _, seen = get(server, "/other")  # not under the prefix: the root path still is
        assert (seen["script_name"], seen["path_info"]) == ("/api", "/other")
        assert seen["env"] == {"PEER_FROM_FILE": "yes", "PEER_KEPT": "from-the-environment"}
        assert values(fields, "server") == []
        assert len(values(fields, "date")) == 1
        assert values(fields, "x-a") == ["b", "from-the-app"]  # beside, as Uvicorn sends it
        assert server.stop() == 0
    lines = log.read_text().splitlines()
    assert lines and all(line.startswith("CUSTOM ") for line in lines), lines
    assert any(re.fullmatch(r"CUSTOM INFO worker 0 ready .*", line) for line in lines), lines


def test_uvicorns_address_wins_over_the_bind_of_gunicorn_conf_py(tmp_path):
    """A project that keeps a gunicorn.conf.py (read by default) and is started with Uvicorn's
    --host and --port listens where the command line says, as with -b."""
    unused = tmp_path / "from-the-file.sock"
    (tmp_path / "gunicorn.conf.py").write_text(f"bind = 'unix:{unused}'\n")
    with Server(
        "peer_apps:wsgi", "--app-dir", str(APP_DIR), "--host", "127.0.0.1", "--port", "0",
        bind=None, cwd=str(tmp_path),
    ) as server:  # fmt: skip
        get(server, "/items")
        assert not unused.exists()
        assert f"reading {tmp_path / 'gunicorn.conf.py'}: Gunicorn's default" in server.stderr
        assert server.stop() == 0


def log_config(log: Path, form: str) -> str:
    """A dictConfig (JSON) sending corral's log to ``log`` with the format ``form``."""
    handler = {"class": "logging.FileHandler", "filename": str(log), "formatter": "custom"}
    return json.dumps(
        {
            "version": 1,
            "formatters": {"custom": {"format": form}},
            "handlers": {"file": handler},
            "loggers": {"corral": {"handlers": ["file"], "level": "DEBUG"}},
        }
    )


def test_a_log_config_is_read_again_on_a_reload(tmp_path):
    log, config = tmp_path / "corral.log", tmp_path / "logging.json"
    config.write_text(log_config(log, "FIRST %(message)s"))
    with Server("basic", "--log-config", str(config), log_file=log) as server:
        config.write_text(log_config(log, "EDITED %(message)s"))
        server.send(signal.SIGHUP)
        server.wait_log(r"EDITED reload complete: generation 2")
        assert server.stop() == 0
    assert "FIRST worker 0 ready" in log.read_text()


def test_reload_dir_include_and_exclude_are_what_reload_watches(tmp_path):
    pytest.importorskip("watchfiles", reason="--reload needs watchfiles (the test extra)")
    watched = tmp_path / "watched"
    watched.mkdir()

    def change() -> None:  # both each time: an excluded file that counted would name itself
        (watched / "a_skipped.py").write_text("x = 1\n")  # first in order: see wait_log
        (watched / "z_page.html").write_text("<p>changed</p>\n")

    with Server(
        "basic", "--reload", "--reload-dir", str(watched), "--reload-include", "*.html",
        "--reload-exclude", "a_skip*",
    ) as server:  # fmt: skip
        # the working directory and the Python path are not watched: the directory given is
        server.wait_log(rf"reload: watching {re.escape(str(watched))} for changes\n")
        change_until_reloaded(server, change, 2)
        assert "z_page.html changed" in server.stderr  # the watcher names the first path
        assert "a_skipped.py changed" not in server.stderr
        assert server.stop() == 0


def test_fd_serves_on_the_socket_it_names():
    with contextlib.closing(socket.socket()) as given:
        given.bind(("127.0.0.1", 0))  # bound, not listening: corral listens, as Uvicorn does
        fd, port = given.fileno(), given.getsockname()[1]
        with Server("basic", "--fd", str(fd), bind=None, pass_fds=(fd,)) as server:
            assert server.port == port
            assert f"listening on http://127.0.0.1:{port} (from --fd {fd})" in server.stderr
            assert f"--fd {fd}: not binding 127.0.0.1:8000" in server.stderr
            assert http_get(server)[0] == 200
            assert server.stop() == 0


def test_fd_is_still_named_after_a_usr2_upgrade(tmp_path):
    """The new master serves the socket --fd handed the old one, and its log says so (it said
    "from systemd")."""
    pidfile = tmp_path / "corral.pid"
    with contextlib.closing(socket.socket()) as given:
        given.bind(("127.0.0.1", 0))
        fd, port = given.fileno(), given.getsockname()[1]
        with Server(
            "basic", "--fd", str(fd), "--pid", str(pidfile), bind=None, pass_fds=(fd,)
        ) as server:
            old = server.proc.pid
            server.send(signal.SIGUSR2)
            new = wait_for(lambda: (pid := read_pid(pidfile)) not in (0, old) and pid)
            try:
                assert server.proc.wait(15) == 0  # the old master drained and left
                listening = f"listening on http://127.0.0.1:{port} (from --fd {fd})"
                server.wait_log(re.escape(listening), count=2)
                assert "from systemd" not in server.stderr
                assert http_get(server)[0] == 200
            finally:
                os.kill(new, signal.SIGTERM)
        wait_for(lambda: not alive(new))


def test_fd_that_is_no_socket_is_one_line():
    result = run_cli("basic", "--fd", "99")
    assert result.returncode == 2
    assert result.stderr == "corral: error: --fd: fd 99 is not a socket (Bad file descriptor)\n"
