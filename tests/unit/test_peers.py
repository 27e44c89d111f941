"""Uvicorn's and Granian's command lines without a server: every flag of ``uvicorn --help``
and ``granian --help`` (the versions below), walked as tests/unit/test_gunicorn.py walks
Gunicorn's, the lists checked against the installed servers' own --help when they are the
versions listed, and the rules of the tables. The processes are in
tests/integration/test_peer_flags.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from corral.config import granian, gunicorn_names, uvicorn
from corral.config.listening import ANY_ADDRESS
from corral.config.settings import SETTINGS
from tests.unit.test_gunicorn import ACCEPTED, REFUSED, WORKS, Check, app, listener, run, walk

UVICORN_VERSION = "0.55.0"
GRANIAN_VERSION = "2.8.9"


def settings(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["settings"]


# Every flag `uvicorn --help` lists in 0.55.0, in its order: (flag, a value for it or None,
# what corral does, a check of the resolved document for those that work). "ENVFILE",
# "LOGCONFIG" and "DIR" stand for what the walk writes (test_gunicorn.py's WRITTEN).
# fmt: off
UVICORN_FLAGS: list[tuple[str, str | None, str, Check | None]] = [
    ("--host", "0.0.0.0", WORKS, lambda d: list(d["listeners"]) == ["0.0.0.0:8000"]),
    ("--port", "9001", WORKS, lambda d: list(d["listeners"]) == ["127.0.0.1:9001"]),
    ("--uds", "/run/app.sock", WORKS, lambda d: list(d["listeners"]) == ["unix:/run/app.sock"]),
    ("--fd", "3", WORKS, lambda d: "fd" not in settings(d)),  # the command line's: below
    ("--reload", None, WORKS, lambda d: settings(d)["reload"] is True),
    ("--reload-dir", "DIR", WORKS, lambda d: settings(d)["reload_dirs"][0].endswith("/src")),
    ("--reload-include", "*.html", WORKS, lambda d: settings(d)["reload_include"] == ["*.html"]),
    ("--reload-exclude", "*.tmp", WORKS, lambda d: settings(d)["reload_exclude"] == ["*.tmp"]),
    ("--reload-delay", "1", ACCEPTED, None),
    ("--workers", "4", WORKS, lambda d: app(d)["processes"] == 4),
    ("--loop", "uvloop", WORKS, lambda d: settings(d)["loop"] == "uvloop"),
    ("--http", "httptools", WORKS, None),  # corral's own parser: nothing else asked
    ("--http2", None, REFUSED, None),
    ("--ws", "websockets-sansio", WORKS, lambda d: settings(d)["ws"] == "websockets"),
    ("--ws-max-size", "1024", WORKS, lambda d: settings(d)["ws_max_size"] == 1024),
    ("--ws-max-queue", "8", WORKS, lambda d: settings(d)["ws_max_queue"] == 8),
    ("--ws-ping-interval", "5", WORKS, lambda d: settings(d)["ws_ping_interval"] == 5),
    ("--ws-ping-timeout", "6", WORKS, lambda d: settings(d)["ws_ping_timeout"] == 6),
    ("--ws-per-message-deflate", "false", WORKS,
     lambda d: settings(d)["ws_per_message_deflate"] is False),
    ("--lifespan", "off", WORKS, lambda d: app(d)["lifespan"] == "off"),
    ("--interface", "asgi3", WORKS, lambda d: app(d)["interface"] == "asgi"),
    ("--env-file", "ENVFILE", WORKS, lambda d: app(d)["environment"] == {"PEER_TEST_A": "1"}),
    ("--log-config", "LOGCONFIG", WORKS,
     lambda d: settings(d)["log_config"].endswith("logging.json")),
    ("--log-level", "trace", WORKS, lambda d: settings(d)["log_level"] == "debug"),
    ("--access-log", None, WORKS, lambda d: d["access_log"]["path"] == "-"),
    ("--no-access-log", None, WORKS, lambda d: d["access_log"]["path"] is None),
    ("--use-colors", None, WORKS, lambda d: settings(d)["use_colors"] is True),
    ("--no-use-colors", None, WORKS, lambda d: settings(d)["use_colors"] is False),
    ("--proxy-headers", None, WORKS, lambda d: "forwarded" in listener(d)),
    ("--no-proxy-headers", None, WORKS, lambda d: "forwarded" not in listener(d)),
    ("--server-header", None, WORKS, lambda d: settings(d)["server_header"] == "corral"),
    ("--no-server-header", None, WORKS, lambda d: settings(d)["server_header"] == ""),
    ("--date-header", None, WORKS, lambda d: settings(d)["date_header"] is True),
    ("--no-date-header", None, WORKS, lambda d: settings(d)["date_header"] is False),
    ("--forwarded-allow-ips", "*", WORKS,
     lambda d: listener(d)["forwarded"]["source"] == ANY_ADDRESS),
    ("--root-path", "/api/", WORKS, lambda d: app(d)["root_path"] == "/api"),
    ("--limit-concurrency", "100", WORKS, lambda d: settings(d)["limit_concurrency"] == 100),
    ("--backlog", "64", WORKS, lambda d: settings(d)["backlog"] == 64),
    ("--limit-max-requests", "100", WORKS, lambda d: app(d)["limits"]["requests"] == 100),
    ("--limit-max-requests-jitter", "10", WORKS, lambda d: app(d)["max_requests_jitter"] == 10),
    ("--timeout-keep-alive", "2", WORKS, lambda d: settings(d)["http"]["idle_timeout"] == 2),
    ("--timeout-graceful-shutdown", "7", WORKS, lambda d: settings(d)["graceful_timeout"] == 7),
    ("--timeout-worker-healthcheck", "12", WORKS, lambda d: settings(d)["timeout"] == 12),
    ("--ssl-keyfile", "key.pem", WORKS, lambda d: settings(d)["keyfile"] == "key.pem"),
    ("--ssl-certfile", "cert.pem", WORKS, lambda d: settings(d)["certfile"] == "cert.pem"),
    ("--ssl-keyfile-password", "secret", WORKS,
     lambda d: settings(d)["keyfile_password"] == "********"),  # set, and shown masked
    ("--ssl-version", "17", WORKS, None),  # Uvicorn's default: TLS, whatever its version
    ("--ssl-cert-reqs", "2", WORKS, lambda d: settings(d)["cert_reqs"] == 2),
    ("--ssl-ca-certs", "ca.pem", WORKS, lambda d: settings(d)["ca_certs"] == "ca.pem"),
    ("--ssl-ciphers", "ECDHE+AESGCM", WORKS, lambda d: settings(d)["ciphers"] == "ECDHE+AESGCM"),
    ("--header", "X-Frame-Options:DENY", WORKS,
     lambda d: settings(d)["headers"] == ["X-Frame-Options: DENY"]),
    ("--version", None, WORKS, None),
    ("--app-dir", "src,lib", WORKS, lambda d: app(d)["path"] == ["src,lib"]),
    ("--h11-max-incomplete-event-size", "16384", WORKS,
     lambda d: settings(d)["limit_request_head"] == 16384),
    ("--reset-contextvars", None, WORKS, None),  # what corral always does
    ("--factory", None, WORKS, lambda d: app(d)["factory"] is True),
    ("--help", None, WORKS, None),
]

# Every flag `granian --help` lists in 2.8.9, in its order.
GRANIAN_FLAGS: list[tuple[str, str | None, str, Check | None]] = [
    ("--host", "::1", WORKS, lambda d: list(d["listeners"]) == ["[::1]:8000"]),
    ("--port", "0", WORKS, lambda d: list(d["listeners"]) == ["127.0.0.1:0"]),
    ("--uds", "/run/app.sock", WORKS, lambda d: list(d["listeners"]) == ["unix:/run/app.sock"]),
    ("--uds-permissions", "660", WORKS, lambda d: settings(d)["unix_socket_mode"] == "0660"),
    ("--interface", "asgi", WORKS, lambda d: app(d)["interface"] == "asgi"),
    ("--http", "1", WORKS, None),
    ("--ws", None, WORKS, lambda d: settings(d)["ws"] == "auto"),
    ("--no-ws", None, WORKS, lambda d: settings(d)["ws"] == "none"),
    ("--workers", "2", WORKS, lambda d: app(d)["processes"] == 2),
    ("--blocking-threads", "8", WORKS, lambda d: app(d)["threads"] == 8),
    ("--blocking-threads-idle-timeout", "60", ACCEPTED, None),
    ("--runtime-threads", "4", ACCEPTED, None),
    ("--runtime-blocking-threads", "4", ACCEPTED, None),
    ("--runtime-mode", "mt", ACCEPTED, None),
    ("--loop", "asyncio", WORKS, lambda d: settings(d)["loop"] == "asyncio"),
    ("--task-impl", "rust", ACCEPTED, None),
    ("--backlog", "256", WORKS, lambda d: settings(d)["backlog"] == 256),
    ("--backpressure", "100", WORKS, lambda d: settings(d)["limit_concurrency"] == 100),
    ("--http1-buffer-size", "65536", WORKS, lambda d: settings(d)["limit_request_head"] == 65536),
    ("--http1-header-read-timeout", "2500", WORKS,
     lambda d: settings(d)["http"]["header_read_timeout"] == 2.5),
    ("--http1-keep-alive", None, WORKS, lambda d: settings(d)["http"]["idle_timeout"] == 5),
    ("--no-http1-keep-alive", None, WORKS, lambda d: settings(d)["http"]["idle_timeout"] == 0),
    ("--http1-pipeline-flush", None, ACCEPTED, None),
    ("--no-http1-pipeline-flush", None, WORKS, None),
    ("--http2-adaptive-window", None, REFUSED, None),
    ("--no-http2-adaptive-window", None, WORKS, None),
    ("--http2-initial-connection-window-size", "2048", REFUSED, None),
    ("--http2-initial-stream-window-size", "2048", REFUSED, None),
    ("--http2-keep-alive-interval", "1000", REFUSED, None),
    ("--http2-keep-alive-timeout", "10", REFUSED, None),
    ("--http2-max-concurrent-streams", "50", REFUSED, None),
    ("--http2-max-frame-size", "32768", REFUSED, None),
    ("--http2-max-headers-size", "1024", REFUSED, None),
    ("--http2-max-send-buffer-size", "2048", REFUSED, None),
    ("--log", None, WORKS, None),
    ("--no-log", None, REFUSED, None),
    ("--log-level", "warn", WORKS, lambda d: settings(d)["log_level"] == "warning"),
    ("--log-config", "LOGCONFIG", WORKS,
     lambda d: settings(d)["log_config"].endswith("logging.json")),
    ("--access-log", None, WORKS, lambda d: d["access_log"]["path"] == "-"),
    ("--no-access-log", None, WORKS, lambda d: d["access_log"]["path"] is None),
    ("--access-log-fmt", "%(addr)s", REFUSED, None),
    ("--ssl-certificate", "cert.pem", WORKS, lambda d: settings(d)["certfile"] == "cert.pem"),
    ("--ssl-keyfile", "key.pem", WORKS, lambda d: settings(d)["keyfile"] == "key.pem"),
    ("--ssl-keyfile-password", "secret", WORKS,
     lambda d: settings(d)["keyfile_password"] == "********"),  # set, and shown masked
    ("--ssl-protocol-min", "tls1.3", WORKS, lambda d: settings(d)["tls_min_version"] == "1.3"),
    ("--ssl-ca", "ca.pem", WORKS, lambda d: settings(d)["ca_certs"] == "ca.pem"),
    ("--ssl-crl", "crl.pem", REFUSED, None),
    ("--ssl-client-verify", None, WORKS, lambda d: settings(d)["cert_reqs"] == 2),
    ("--no-ssl-client-verify", None, WORKS, None),
    ("--url-path-prefix", "/api", WORKS, lambda d: app(d)["prefix"] == "/api"),
    ("--respawn-failed-workers", None, WORKS, None),  # what corral always does
    ("--no-respawn-failed-workers", None, ACCEPTED, None),
    ("--respawn-interval", "1", ACCEPTED, None),
    ("--rss-sample-interval", "5", ACCEPTED, None),
    ("--rss-samples", "3", ACCEPTED, None),
    ("--workers-lifetime", "1h30m", WORKS, lambda d: app(d)["max_worker_lifetime"] == 5400),
    ("--workers-max-rss", "512", WORKS, lambda d: app(d)["max_worker_memory"] == 512),
    ("--workers-kill-timeout", "2m", WORKS, lambda d: settings(d)["graceful_timeout"] == 120),
    ("--factory", None, WORKS, lambda d: app(d)["factory"] is True),
    ("--no-factory", None, WORKS, lambda d: app(d)["factory"] is False),
    ("--working-dir", "/srv", WORKS, lambda d: app(d)["working_directory"] == "/srv"),
    ("--env-files", "ENVFILE", WORKS, lambda d: app(d)["environment"] == {"PEER_TEST_A": "1"}),
    ("--static-path-route", "/static", ACCEPTED, None),  # read with a mount: below
    ("--static-path-mount", "DIR", WORKS,
     lambda d: d["routes"][0]["match"]["uri"] == ["/static", "/static/*"]
     and d["routes"][0]["action"]["expires"] == 86400),
    ("--static-path-dir-to-file", "index.html", ACCEPTED, None),
    ("--static-path-expires", "60", ACCEPTED, None),
    ("--metrics", None, REFUSED, None),
    ("--no-metrics", None, WORKS, None),
    ("--metrics-scrape-interval", "5", REFUSED, None),
    ("--metrics-address", "0.0.0.0", REFUSED, None),
    ("--metrics-port", "9100", REFUSED, None),
    ("--reload", None, WORKS, lambda d: settings(d)["reload"] is True),
    ("--no-reload", None, WORKS, lambda d: settings(d)["reload"] is False),
    ("--reload-paths", "DIR", WORKS, lambda d: settings(d)["reload_dirs"][0].endswith("/src")),
    ("--reload-ignore-dirs", "node_modules", WORKS,
     lambda d: settings(d)["reload_exclude"] == ["node_modules"]),
    ("--reload-ignore-patterns", r".*\.tmp", ACCEPTED, None),
    ("--reload-ignore-paths", "/srv/tmp", WORKS,
     lambda d: settings(d)["reload_exclude"] == ["/srv/tmp"]),
    ("--reload-tick", "100", ACCEPTED, None),
    ("--reload-ignore-worker-failure", None, ACCEPTED, None),
    ("--no-reload-ignore-worker-failure", None, WORKS, None),
    ("--process-name", "blog", WORKS, lambda d: settings(d)["proc_name"] == "blog"),
    ("--pid-file", "/run/app.pid", WORKS, lambda d: settings(d)["pid"] == "/run/app.pid"),
    ("--version", None, WORKS, None),
    ("--help", None, WORKS, None),
]
# fmt: on


@pytest.fixture(autouse=True)
def _no_gunicorn_cmd_args(monkeypatch):
    monkeypatch.delenv("GUNICORN_CMD_ARGS", raising=False)


@pytest.mark.parametrize(
    ("flag", "value", "outcome", "check"), UVICORN_FLAGS, ids=[f for f, *_ in UVICORN_FLAGS]
)
def test_every_uvicorn_flag(capsys, tmp_path, flag, value, outcome, check):
    walk(capsys, tmp_path, flag, value, outcome, check)


@pytest.mark.parametrize(
    ("flag", "value", "outcome", "check"), GRANIAN_FLAGS, ids=[f for f, *_ in GRANIAN_FLAGS]
)
def test_every_granian_flag(capsys, tmp_path, flag, value, outcome, check):
    walk(capsys, tmp_path, flag, value, outcome, check)


@pytest.mark.parametrize(
    ("listed", "table", "version", "pinned"),
    [
        (UVICORN_FLAGS, uvicorn.FLAGS, uvicorn.VERSION, UVICORN_VERSION),
        (GRANIAN_FLAGS, granian.FLAGS, granian.VERSION, GRANIAN_VERSION),
    ],
    ids=["uvicorn", "granian"],
)
def test_the_list_is_every_flag_of_the_table_in_its_order(listed, table, version, pinned):
    assert version == pinned  # the table's docs say which version it lists
    assert [flag for flag, *_ in listed] == [f for entry in table.values() for f in entry.flags]


# -- the servers' own --help -----------------------------------------------------------------

# an option's line in click's help: two spaces, then the flags up to two spaces or the end
_OPTION = re.compile(r"^  (-[^ ].*?)(?: {2,}|$)")


def help_flags(text: str) -> list[str]:
    """The flags of a click command's --help, in order (``--x / --no-x`` gives both)."""
    flags: list[str] = []
    for line in text.splitlines():
        match = _OPTION.match(line)
        if match:
            flags += [word.rstrip(",") for word in match[1].split() if word.startswith("-")]
    return flags


def test_help_flags_reads_clicks_layout():
    text = (
        "Options:\n"
        "  --host TEXT                     Bind socket to this host.  [default:\n"
        "                                  127.0.0.1]\n"
        "  --loop [auto|asyncio|uvloop]\n"
        "                                  Event loop factory.  Not valid with --reload.\n"
        "  --access-log / --no-access-log  Enable/Disable access log.\n"
        "  --help                          Show this message and exit.\n"
    )
    assert help_flags(text) == ["--host", "--loop", "--access-log", "--no-access-log", "--help"]


def _installed(command: str, module: str) -> list[str] | None:
    """How to run ``command``: this interpreter's module when it has it, else the command on
    PATH (a scratch virtualenv's), else None."""
    if (
        subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode
        == 0
    ):
        return [sys.executable, "-m", module]
    found = shutil.which(command)
    return [found] if found else None


@pytest.mark.parametrize(
    ("command", "pinned", "listed"),
    [("uvicorn", UVICORN_VERSION, UVICORN_FLAGS), ("granian", GRANIAN_VERSION, GRANIAN_FLAGS)],
)
def test_the_list_is_the_installed_servers_help(command, pinned, listed):
    """Against the server's own --help: both are in the test extras, pinned to these
    versions."""
    argv = _installed(command, command)
    reinstall = "reinstall the test extras: pip install -e '.[test]'"
    assert argv is not None, f"{command} is not installed: {reinstall}"
    env = dict(os.environ, COLUMNS="80", NO_COLOR="1")
    version = subprocess.run([*argv, "--version"], capture_output=True, text=True, env=env)
    found = re.search(r"\d+\.\d+\.\d+", version.stdout)
    installed = found[0] if found else version.stdout.strip()
    shown = subprocess.run([*argv, "--help"], capture_output=True, text=True, env=env)
    flags = help_flags(shown.stdout)
    ours = [flag for flag, *_ in listed]
    added = sorted(set(flags) - set(ours))
    removed = sorted(set(ours) - set(flags))
    assert installed == pinned, (
        f"{command} {installed} is installed, the list is {pinned}'s: {reinstall} "
        f"(new: {added or 'none'}; gone: {removed or 'none'})"
    )
    assert flags == ours


# -- the rules of the tables -------------------------------------------------------------------


def test_flags_corral_declares_set_the_same_setting_in_every_table():
    """A flag corral declares is the other server's with the same meaning: the tables agree."""
    declared = {flag: s.name for s in SETTINGS for flag in s.all_flags}
    meet = {  # the tables meet where they must (with no flag in common the loop checks nothing)
        "gunicorn": {"-b", "--bind", "-w", "--workers", "-t", "--timeout", "-c", "--config"},
        "uvicorn": {"--host", "--port", "--uds", "--workers", "--root-path", "--header"},
        "granian": {"--host", "--port", "--uds", "--workers", "--interface"},
    }
    for name, table in (("gunicorn", gunicorn_names.NAMES), ("uvicorn", uvicorn.FLAGS),
                        ("granian", granian.FLAGS)):  # fmt: skip
        compared = set()
        for entry in table.values():
            for flag in entry.flags:
                if flag in declared:
                    assert declared[flag] == entry.setting, (flag, entry)
                    compared.add(flag)
        assert meet[name] <= compared, name


def test_a_tables_texts_name_no_other_peer():
    """docs/settings.md shows each table's texts to that server's users: Granian's rows say
    nothing of what Uvicorn does, nor Uvicorn's of Granian."""
    for table, other in ((granian.FLAGS, "Uvicorn"), (uvicorn.FLAGS, "Granian")):
        for flag, entry in table.items():
            assert other not in entry.disposition(), flag


def test_a_flag_two_servers_share_has_one_meaning():
    """What corral does with a flag does not depend on whose command line it came from."""
    tables = (gunicorn_names.NAMES, uvicorn.FLAGS, granian.FLAGS)
    seen: dict[str, Any] = {}
    for table in tables:
        for entry in table.values():
            for flag in entry.flags:
                meaning = (entry.setting, entry.accept)  # `same`: each server its defaults
                assert seen.setdefault(flag, meaning) == meaning, flag
    assert granian.FLAGS["--host"] is uvicorn.FLAGS["--host"]


def test_the_help_shows_corrals_flags_and_hides_the_others(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for shown in ("--host", "--port", "--uds", "--root-path", "--header", "--no-date-header",
                  "--env-file", "--log-config", "--use-colors", "--reload-dir"):  # fmt: skip
        assert shown in out, shown
    for hidden in ("--reload-delay", "--timeout-keep-alive", "--blocking-threads", "--app-dir"):
        assert hidden not in out, hidden


# -- the command lines themselves ----------------------------------------------------------------


def test_uvicorns_usual_command_line(capsys):
    code, out, err = run(
        capsys, "main:app", "--host", "0.0.0.0", "--port", "8000", "--workers", "4",
        "--proxy-headers", "--forwarded-allow-ips", "10.0.0.0/8", "--check-config",
    )  # fmt: skip
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert list(doc["listeners"]) == ["0.0.0.0:8000"]
    assert doc["listeners"]["0.0.0.0:8000"]["forwarded"]["source"] == ["10.0.0.0/8"]
    assert doc["applications"]["main"]["processes"] == 4


def test_granians_usual_command_line(capsys):
    code, out, err = run(
        capsys, "--interface", "asgi", "--host", "0.0.0.0", "--port", "8000", "--workers", "2",
        "--blocking-threads", "1", "--respawn-failed-workers", "--workers-lifetime", "3600",
        "main:app", "--check-config",
    )  # fmt: skip
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert list(doc["listeners"]) == ["0.0.0.0:8000"]
    assert doc["applications"]["main"]["interface"] == "asgi"
    assert doc["applications"]["main"]["max_worker_lifetime"] == 3600


def test_host_and_port_in_a_file(capsys, tmp_path):
    config = tmp_path / "corral.toml"
    config.write_text('app = "main:app"\nhost = "::"\nport = 9000\n')
    code, out, err = run(capsys, "-c", str(config), "--check-config")
    assert (code, err) == (0, "")
    assert list(json.loads(out)["listeners"]) == ["[::]:9000"]


@pytest.mark.parametrize(
    ("args", "listeners"),
    [
        (["--host", "0.0.0.0", "--port", "8001"], ["0.0.0.0:8001"]),
        (["--port", "8003"], ["127.0.0.1:8003"]),  # the file's host goes with its bind
        (["--uds", "/run/a.sock"], ["unix:/run/a.sock"]),
        (["-b", ":8004"], ["0.0.0.0:8004"]),
        ([], ["10.1.2.3:9000"]),
    ],
)
def test_a_flags_address_wins_over_the_files_bind(capsys, tmp_path, args, listeners):
    """Uvicorn's --host/--port beside a gunicorn.conf.py (read by default) or a -c file that
    sets `bind`: the command line's address is the one, as with -b; the file's workers stay.
    (tmp_path is the working directory: tests/unit/conftest.py.)"""
    (tmp_path / "gunicorn.conf.py").write_text('bind = "10.1.2.3:9000"\nworkers = 3\n')
    (tmp_path / "c.toml").write_text('bind = "10.1.2.3:9000"\nworkers = 3\n')
    for config in ([], ["-c", "c.toml"]):
        code, out, err = run(capsys, "basic", *config, *args, "--check-config")
        assert code == 0 and err.count("\n") == (0 if config else 1), err  # "reading ..."
        doc = json.loads(out)
        assert list(doc["listeners"]) == listeners, config
        assert doc["applications"]["basic"]["processes"] == 3


def test_bind_and_host_from_one_source_are_refused(capsys, tmp_path, monkeypatch):
    (tmp_path / "c.toml").write_text('bind = ":9000"\nport = 9001\n')
    code, _, err = run(capsys, "basic", "-c", "c.toml")
    assert (code, err) == (
        2,
        "corral: error: c.toml: $.port: give the address once: --bind, or --host and --port "
        "(or --uds)\n",
    )
    monkeypatch.setenv("GUNICORN_CMD_ARGS", "-b :9000")  # under the command line, as a file
    code, out, err = run(capsys, "basic", "--port", "9002", "--check-config")
    assert (code, err) == (0, "")
    assert list(json.loads(out)["listeners"]) == ["127.0.0.1:9002"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--host", "0.0.0.0", "-b", ":9000"], "--host: give the address once: --bind, or "
         "--host and --port (or --uds)"),
        (["--uds", "/run/a.sock", "--port", "9000"], "--port: --uds listens on the unix socket "
         "only: give one of them"),
        (["--host", "not a host"], '--host: expected HOST:PORT'),
        (["--interface", "rsgi"], '--interface: "rsgi": Granian\'s own interface is not served'),
        (["--interface", "asginl"], '--interface: "asginl" is Granian\'s ASGI without '
         "lifespan: --interface asgi --lifespan off"),
        (["--ws", "wsproto"], '--ws: "wsproto": corral serves WebSocket with the websockets '
         "library's protocol layer: --ws websockets"),
        (["--server-header", "behind"], "unexpected argument \"behind\" (--server-header takes "
         "its value after '=': --server-header=behind)"),
        (["--proxy-protocol", "v3"], '--proxy-protocol: expected "off", "v1", "v2" or "auto" '
         '(a bool in a file), got "v3"'),
        (["--http", "2"], "--http: Uvicorn's and Granian's option is not supported: HTTP/2 is "
         "not supported yet"),
        (["--loop", "rloop"], '--loop: expected one of "auto", "uvloop", "asyncio", got '
         '"rloop"'),
        (["--header", "Date: today"], '--header: "Date": the Date field is the server\'s '
         "(--no-date-header leaves it out)"),
        (["--header", "Content-Length: 3"], '--header: "Content-Length": the server frames'),
        # every name the server owns (corral.http.fields.OWNED) but Server
        (["--header", "Keep-Alive: timeout=99"], '--header: "Keep-Alive": a hop-by-hop field'),
        (["--header", "upgrade: h2c"], '--header: "upgrade": a hop-by-hop field'),
        (["--header", "Connection: close"], '--header: "Connection": the server says whether'),
        (["--header", "no colon"], '--header: expected "Name: value" with a field name'),
        (["--header", "X-A: b\x01"], "--header: expected a value of printable ASCII"),
        (["--root-path", "api"], '--root-path: expected "" or a path beginning with "/", got '
         '"api"'),
        (["--workers-lifetime", "soon"], '--workers-lifetime: expected seconds, or a duration '
         'such as "1h30m", got "soon"'),
        (["--http1-header-read-timeout", "2.5"], "--http1-header-read-timeout: expected "
         'milliseconds (an int), got "2.5"'),
        (["--ssl-certfile", "/nonexistent/c.pem"], "certfile /nonexistent/c.pem: No such file "
         "or directory"),
        # a flag Gunicorn has too: named after every server that has it
        (["--http2-max-frame-size", "1"], "--http2-max-frame-size: Gunicorn's and Granian's "
         "option is not supported: HTTP/2 is not supported yet"),
        (["--env-file", "/nonexistent/.env"], "--env-file: /nonexistent/.env: no such file"),
        (["--reload-dir", "/nonexistent/src"], '--reload-dir: "/nonexistent/src": no such '
         "directory"),
        (["--reload-paths", "/nonexistent"], '--reload-paths: "/nonexistent": no such directory'),
        (["--log-config", "/nonexistent.json"], '--log-config: "/nonexistent.json": no such '
         "file"),
        # the first refused flag in the order given, whoever's it is
        (["--http2", "--ssl-crl", "crl.pem"], "--http2: "),
        (["--ssl-crl", "crl.pem", "--http2"], "--ssl-crl: "),
    ],
)  # fmt: skip
def test_refusals_are_one_line_saying_what_instead(capsys, args, line):
    code, out, err = run(capsys, "basic", *args)
    assert (code, out) == (2, "")
    assert err.startswith(f"corral: error: {line}") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("args", "setting", "value"),
    [
        (["--interface", "asgi", "--ws"], "ws", "auto"),  # Granian's flag alone, then APP
        (["--ws", "none"], "ws", "none"),
        (["--server-header"], "server_header", "corral"),  # Uvicorn's switch, then APP
        (["--server-header=behind"], "server_header", "behind"),
        (["--server-header="], "server_header", ""),
        (["--proxy-protocol"], "proxy_protocol", "auto"),
        (["--proxy-protocol", "v2"], "proxy_protocol", "v2"),
    ],
)
def test_a_flag_whose_value_is_optional_leaves_the_app_after_it(capsys, args, setting, value):
    code, out, err = run(capsys, *args, "basic", "--check-config")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert list(doc["applications"]) == ["basic"]
    assert settings(doc)[setting] == value


def test_a_reload_dir_that_is_not_there_is_one_line_in_a_file_too(capsys, tmp_path):
    (tmp_path / "src").mkdir()
    config = tmp_path / "c.toml"
    config.write_text(f'app = "basic"\nreload_dirs = ["{tmp_path / "src"}", "/nonexistent"]\n')
    code, _, err = run(capsys, "-c", str(config))
    assert (code, err) == (
        2,
        f'corral: error: {config}: $.reload_dirs[1]: "/nonexistent": no such directory\n',
    )


def test_fd_is_the_command_lines_only(capsys, tmp_path):
    """A descriptor is the starting process's: --fd goes to the master, not into the document
    a reload, the control API or a file could change while it is served."""
    from corral.config import ConfigError, parse_command_line, validate_document

    assert parse_command_line(["basic", "--fd", "3"], environ={}).fd == 3
    config = tmp_path / "c.toml"
    config.write_text('app = "basic"\nfd = 3\n')
    code, _, err = run(capsys, "-c", str(config))
    assert (code, err) == (
        2,
        f"corral: error: {config}: $.fd: unknown key (--fd is a command-line option only)\n",
    )
    with pytest.raises(ConfigError, match=r"^\$\.settings\.fd: unknown key"):
        validate_document({"settings": {"fd": 3}})


def head_fields(*args: str) -> str:
    """The prefix a worker would add to every head at a known second, given these flags."""
    from corral.config import load
    from corral.http.fields import head_fields

    settings = load(["basic", *args]).settings
    return head_fields(settings.server, settings.headers, settings.date_header)(784111777.0)


DATE = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"


@pytest.mark.parametrize(
    ("args", "prefix"),
    [
        ((), DATE + "Server: corral\r\n"),
        (("--no-date-header",), "Server: corral\r\n"),
        (("--no-date-header", "--no-server-header"), ""),
        (("--header", " X-A :  b  ", "--header", "server: behind"),
         DATE + "Server: behind\r\nX-A: b\r\n"),  # a Server field replaces corral's
        (("--no-server-header", "--header", "X-A:b", "--header", "X-A: c"),
         DATE + "X-A: b\r\nX-A: c\r\n"),
    ],
)  # fmt: skip
def test_the_fields_added_to_every_head(args, prefix):
    assert head_fields(*args) == prefix


def test_no_proxy_headers_trusts_no_peer_even_a_unix_one(capsys):
    for args in (["--uds", "/run/a.sock"], ["-b", "unix:/run/a.sock"]):
        code, out, _ = run(capsys, "basic", *args, "--no-proxy-headers", "--check-config")
        assert code == 0
        assert "forwarded" not in listener(json.loads(out))


# -- --env-file --------------------------------------------------------------------------------


def test_env_files_under_env_and_the_environment(capsys, tmp_path, monkeypatch):
    from corral.config import envfile

    first, second = tmp_path / "a.env", tmp_path / "b.env"
    first.write_text('PEER_A="one two"  # quoted\nPEER_B=first\nPEER_C=${PEER_A}!\n')
    second.write_text("PEER_B=second\nPEER_D=from-file\nHOME=/elsewhere\n")
    monkeypatch.setattr(envfile, "STARTED_WITH", frozenset({"HOME"}))
    code, out, err = run(
        capsys, "basic", "--env-file", str(first), "--env-file", str(second),
        "-e", "PEER_D=from-flag", "--check-config",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert app(json.loads(out))["environment"] == {
        "PEER_A": "one two",
        "PEER_B": "second",  # a later file wins
        "PEER_C": "one two!",  # python-dotenv's expansion
        "PEER_D": "from-flag",  # --env wins over the files
    }  # HOME: the environment corral started in wins, as in Uvicorn


# -- --log-config --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("bad.json", "{", "bad.json: Expecting property name"),
        ("bad.ini", "[loggers]\nkeys=root\n", "bad.ini: KeyError: 'formatters'"),
        ("bad.yaml", "version: 1\n", "a YAML file needs PyYAML"),
        ("none.json", None, "none.json: cannot read: No such file or directory"),
    ],
)
def test_a_log_config_that_cannot_apply_is_one_line(tmp_path, monkeypatch, name, text, line):
    from corral.observe.errorlog import apply_log_config

    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    if name.endswith(".yaml"):  # a machine without PyYAML (the tests' extras install it)
        monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(ValueError) as raised:
        apply_log_config(str(path))
    message = str(raised.value)
    assert "\n" not in message and line in message, message


def test_a_json_log_config_reconfigures_corrals_logger(tmp_path):
    import logging

    from corral.observe.errorlog import LOGGER_NAME, apply_log_config, setup_error_log

    target = tmp_path / "log.txt"
    config = {
        "formatters": {"bare": {"format": "CONFIGURED %(levelname)s %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(target),
                              "formatter": "bare"}},
        "loggers": {LOGGER_NAME: {"handlers": ["file"], "level": "INFO"}},
    }  # fmt: skip
    path = tmp_path / "logging.cfg"  # JSON by its text, as Gunicorn's --log-config-json
    path.write_text(json.dumps(config))
    other = logging.getLogger("peers.test.other")
    try:
        setup_error_log(os.devnull, "info")
        apply_log_config(str(path))
        logging.getLogger(LOGGER_NAME).info("hello")
        assert not other.disabled  # loggers made before stay enabled
    finally:
        setup_error_log(None, "info")
    assert Path(target).read_text() == "CONFIGURED INFO hello\n"


def test_use_colors_colours_the_level_only(capsys):
    import logging

    from corral.observe.errorlog import LOGGER_NAME, setup_error_log

    try:
        setup_error_log(None, "info", colors=True)
        logger = logging.getLogger(LOGGER_NAME)
        logger.warning("careful")
        logger.log(25, "an unnamed level")
    finally:
        setup_error_log(None, "info")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith("[\x1b[33mWARNING\x1b[0m] careful"), lines
    assert lines[1].endswith("[Level 25] an unnamed level"), lines


@pytest.mark.parametrize(
    ("path", "globs", "directories", "found"),
    [
        ("/srv/app/templates/page.html", ["*.html"], False, True),
        ("/srv/app/templates/page.html", ["templates/*.html"], False, True),
        ("/srv/app/templates/page.html", ["*.txt"], False, False),
        ("/srv/app/node_modules/x/y.py", ["node_modules"], True, True),
        ("/srv/app/node_modules/x/y.py", ["node_modules"], False, False),
        ("/srv/app/tmp/a.py", ["/srv/app/tmp"], True, True),
        ("/srv/app/tmpx/a.py", ["/srv/app/tmp"], True, False),
        ("/srv/app/views.py", ["/srv/app/tmp", "*.html"], True, False),
    ],
)
def test_reload_globs_match_as_pathlib_matches(path, globs, directories, found):
    from corral.master.watch import matches

    assert matches(path, globs, directories=directories) is found
