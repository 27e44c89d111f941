"""Gunicorn's names without a server: every flag of ``gunicorn --help`` (23 to 27), the
``gunicorn.conf.py`` reader, ``GUNICORN_CMD_ARGS`` and the environment defaults, the APP call
syntax and the "did you mean" rule. The processes are in tests/integration/test_gunicorn.py."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from corral import cli
from corral.config import parse_command_line
from corral.config.document import did_you_mean
from corral.config.gunicorn_names import NAMES

Check = Callable[[dict[str, Any]], bool]


def app(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["applications"]["basic"]


def listener(doc: dict[str, Any]) -> dict[str, Any]:
    return next(iter(doc["listeners"].values()))


WORKS, REFUSED, ACCEPTED = "works", "refused", "accepted"

# Every flag `gunicorn --help` lists in 23.0, 24.1, 25.3, 26.2 and 27.0 (the later versions add
# some; none was removed): (flag, a value for it or None, what corral does, a check of the
# resolved document for those that work).
# fmt: off
GUNICORN_FLAGS: list[tuple[str, str | None, str, Check | None]] = [
    ("-h", None, WORKS, None),
    ("--help", None, WORKS, None),
    ("-v", None, WORKS, None),
    ("--version", None, WORKS, None),
    ("-c", "CONFIG", WORKS, lambda d: app(d)["processes"] == 3),
    ("--config", "CONFIG", WORKS, lambda d: app(d)["processes"] == 3),
    ("-b", "127.0.0.1:9001", WORKS, lambda d: list(d["listeners"]) == ["127.0.0.1:9001"]),
    ("--bind", "[::1]:9001", WORKS, lambda d: list(d["listeners"]) == ["[::1]:9001"]),
    ("--backlog", "64", WORKS, lambda d: d["settings"]["backlog"] == 64),
    ("-w", "4", WORKS, lambda d: app(d)["processes"] == 4),
    ("--workers", "4", WORKS, lambda d: app(d)["processes"] == 4),
    ("-k", "gthread", WORKS, lambda d: app(d)["protocol"] == "wsgi"),
    ("--worker-class", "sync", WORKS, lambda d: app(d)["protocol"] == "wsgi"),
    ("--threads", "8", WORKS, lambda d: app(d)["threads"] == 8),
    ("--worker-connections", "500", ACCEPTED, None),
    ("--max-requests", "100", WORKS, lambda d: app(d)["limits"]["requests"] == 100),
    ("--max-requests-jitter", "10", WORKS, lambda d: app(d)["max_requests_jitter"] == 10),
    ("-t", "12", WORKS, lambda d: d["settings"]["timeout"] == 12),
    ("--timeout", "12", WORKS, lambda d: d["settings"]["timeout"] == 12),
    ("--graceful-timeout", "7", WORKS, lambda d: d["settings"]["graceful_timeout"] == 7),
    ("--keep-alive", "2", WORKS, lambda d: d["settings"]["http"]["idle_timeout"] == 2),
    ("--limit-request-line", "0", WORKS, lambda d: d["settings"]["limit_request_line"] == 65536),
    ("--limit-request-fields", "50", WORKS, lambda d: d["settings"]["limit_request_fields"] == 50),
    ("--limit-request-field_size", "0", WORKS,
     lambda d: d["settings"]["limit_request_field_size"] == 65536),
    ("--reload", None, WORKS, lambda d: d["settings"]["reload"] is True),
    ("--reload-engine", "poll", REFUSED, None),
    ("--reload-extra-file", "templates/a.html", WORKS,
     lambda d: d["settings"]["touch_reload"] == ["templates/a.html"]),
    ("--spew", None, REFUSED, None),
    ("--check-config", None, WORKS, None),
    ("--print-config", None, WORKS, None),
    ("--preload", None, WORKS, lambda d: app(d)["preload"] is True),
    ("--no-sendfile", None, REFUSED, None),
    ("--reuse-port", None, WORKS, lambda d: d["settings"]["reuse_port"] is True),
    ("--chdir", "/srv", WORKS, lambda d: app(d)["working_directory"] == "/srv"),
    ("-D", None, WORKS, lambda d: d["settings"]["daemon"] is True),
    ("--daemon", None, WORKS, lambda d: d["settings"]["daemon"] is True),
    ("-e", "A=1", WORKS, lambda d: app(d)["environment"] == {"A": "1"}),
    ("--env", "A=1", WORKS, lambda d: app(d)["environment"] == {"A": "1"}),
    ("-p", "/run/app.pid", WORKS, lambda d: d["settings"]["pid"] == "/run/app.pid"),
    ("--pid", "/run/app.pid", WORKS, lambda d: d["settings"]["pid"] == "/run/app.pid"),
    ("--worker-tmp-dir", "/dev/shm", ACCEPTED, None),
    ("-u", "nobody", WORKS, lambda d: app(d)["user"] == "nobody"),
    ("--user", "65534", WORKS, lambda d: app(d)["user"] == "65534"),
    ("-g", "nogroup", WORKS, lambda d: app(d)["group"] == "nogroup"),
    ("--group", "65534", WORKS, lambda d: app(d)["group"] == "65534"),
    ("-m", "007", WORKS, lambda d: d["settings"]["unix_socket_mode"] == "0770"),
    ("--umask", "0o117", WORKS, lambda d: d["settings"]["unix_socket_mode"] == "0660"),
    ("--initgroups", None, WORKS, None),
    ("--forwarded-allow-ips", "10.0.0.0/8,192.0.2.1", WORKS,
     lambda d: listener(d)["forwarded"]["source"] == ["10.0.0.0/8", "192.0.2.1"]),
    ("--access-logfile", "-", WORKS, lambda d: d["access_log"]["path"] == "-"),
    ("--disable-redirect-access-to-syslog", None, REFUSED, None),
    ("--access-logformat", "%(h)s %(r)s", WORKS,
     lambda d: d["access_log"]["format"] == "%(h)s %(r)s"),
    ("--error-logfile", "/var/log/e.log", WORKS,
     lambda d: d["settings"]["error_logfile"] == "/var/log/e.log"),
    ("--log-file", "/var/log/e.log", WORKS,
     lambda d: d["settings"]["error_logfile"] == "/var/log/e.log"),
    ("--log-level", "DEBUG", WORKS, lambda d: d["settings"]["log_level"] == "debug"),
    ("--capture-output", None, WORKS, lambda d: app(d)["stdout"] is None),  # error log is "-"
    ("--logger-class", "myproject.logging.Logger", REFUSED, None),
    ("--log-config", "LOGCONFIG", WORKS,
     lambda d: d["settings"]["log_config"].endswith("logging.json")),
    ("--log-config-json", "LOGCONFIG", WORKS,
     lambda d: d["settings"]["log_config"].endswith("logging.json")),
    ("--log-syslog-to", "udp://127.0.0.1:514", REFUSED, None),
    ("--log-syslog", None, REFUSED, None),
    ("--log-syslog-prefix", "app", REFUSED, None),
    ("--log-syslog-facility", "local0", REFUSED, None),
    ("-R", None, WORKS, lambda d: d["settings"]["enable_stdio_inheritance"] is True),
    ("--enable-stdio-inheritance", None, WORKS,
     lambda d: d["settings"]["enable_stdio_inheritance"] is True),
    ("--statsd-host", "localhost:8125", REFUSED, None),
    ("--dogstatsd-tags", "env:prod", REFUSED, None),
    ("--statsd-prefix", "app", REFUSED, None),
    ("-n", "blog", WORKS, lambda d: d["settings"]["proc_name"] == "blog"),
    ("--name", "blog", WORKS, lambda d: d["settings"]["proc_name"] == "blog"),
    ("--pythonpath", "/srv/a,/srv/b", WORKS, lambda d: app(d)["path"] == ["/srv/a", "/srv/b"]),
    ("--paste", "production.ini", REFUSED, None),
    ("--paster", "production.ini", REFUSED, None),
    ("--keyfile", "key.pem", WORKS, lambda d: d["settings"]["keyfile"] == "key.pem"),
    ("--certfile", "cert.pem", WORKS, lambda d: d["settings"]["certfile"] == "cert.pem"),
    ("--ssl-version", "TLSv1_2", ACCEPTED, None),  # ignored, as Gunicorn 21 and later do
    ("--cert-reqs", "2", WORKS, lambda d: d["settings"]["cert_reqs"] == 2),
    ("--ca-certs", "ca.pem", WORKS, lambda d: d["settings"]["ca_certs"] == "ca.pem"),
    ("--suppress-ragged-eofs", None, WORKS, None),  # Gunicorn's default: nothing asked
    ("--do-handshake-on-connect", None, ACCEPTED, None),
    ("--ciphers", "TLSv1.2", WORKS, lambda d: d["settings"]["ciphers"] == "TLSv1.2"),
    ("--paste-global", "FOO=1", REFUSED, None),
    ("--permit-obsolete-folding", None, REFUSED, None),
    ("--strip-header-spaces", None, REFUSED, None),
    ("--permit-unconventional-http-method", None, REFUSED, None),
    ("--permit-unconventional-http-version", None, REFUSED, None),
    ("--casefold-http-method", None, REFUSED, None),
    ("--forwarder-headers", "SCRIPT_NAME", REFUSED, None),
    ("--header-map", "dangerous", WORKS,
     lambda d: d["settings"]["http"]["discard_unsafe_fields"] is False),
    # 24
    ("--enable-backlog-metric", None, REFUSED, None),
    ("--protocol", "uwsgi", REFUSED, None),
    ("--uwsgi-allow-from", "10.0.0.1", REFUSED, None),
    ("--asgi-loop", "uvloop", WORKS, lambda d: d["settings"]["loop"] == "uvloop"),
    ("--asgi-lifespan", "on", WORKS, lambda d: app(d)["lifespan"] == "on"),
    ("--root-path", "/api", WORKS, lambda d: app(d)["root_path"] == "/api"),
    # 26
    ("--http-protocols", "h2,h1", REFUSED, None),
    ("--http2-max-concurrent-streams", "10", REFUSED, None),
    ("--http2-initial-window-size", "1000", REFUSED, None),
    ("--http2-max-frame-size", "20000", REFUSED, None),
    ("--http2-max-header-list-size", "1000", REFUSED, None),
    ("--asgi-disconnect-grace-period", "1", ACCEPTED, None),
    ("--http-parser", "python", REFUSED, None),
    ("--dirty-app", "app:Dirty", REFUSED, None),
    ("--dirty-workers", "2", REFUSED, None),
    ("--dirty-timeout", "10", REFUSED, None),
    ("--dirty-threads", "2", REFUSED, None),
    ("--dirty-graceful-timeout", "5", REFUSED, None),
    ("--control-socket", "/tmp/g.ctl", REFUSED, None),
    ("--control-socket-mode", "0660", REFUSED, None),
    ("--no-control-socket", None, WORKS, None),
    ("--proxy-protocol", None, WORKS, lambda d: d["settings"]["proxy_protocol"] == "auto"),
    ("--proxy-allow-from", "10.0.0.0/8",
     WORKS, lambda d: d["settings"]["proxy_allow_from"] == ["10.0.0.0/8"]),
    # 27
    ("--http2-cleartext", "on", REFUSED, None),
    ("--websocket-max-message-size", "1024", WORKS,
     lambda d: d["settings"]["ws_max_size"] == 1024),
]
# fmt: on


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_list_is_every_flag_of_the_table() -> None:
    listed = {flag for flag, *_ in GUNICORN_FLAGS}
    assert len(listed) == len(GUNICORN_FLAGS)
    table = {flag for entry in NAMES.values() for flag in entry.flags}
    assert listed == table | {"-h", "--help", "-v", "--version"}


@pytest.mark.parametrize(
    "worker_class",
    ["uvicorn.workers.UvicornWorker", "uvicorn_worker.UvicornH11Worker", "asgi",
     "gunicorn.workers.gasgi.ASGIWorker"],
)  # fmt: skip
def test_an_asgi_worker_class_is_the_asgi_protocol(capsys, monkeypatch, worker_class):
    monkeypatch.delenv("GUNICORN_CMD_ARGS", raising=False)
    code, out, err = run(capsys, "basic", "-k", worker_class, "--print-config")
    assert code == 0, err
    assert app(json.loads(out))["protocol"] == "asgi"


@pytest.mark.parametrize(
    ("flag", "value", "outcome", "check"), GUNICORN_FLAGS, ids=[f for f, *_ in GUNICORN_FLAGS]
)
def test_every_gunicorn_flag(capsys, tmp_path, monkeypatch, flag, value, outcome, check):
    monkeypatch.delenv("GUNICORN_CMD_ARGS", raising=False)
    walk(capsys, tmp_path, flag, value, outcome, check)


def walk(capsys, tmp_path, flag: str, value: str | None, outcome: str, check: Check | None):
    """``corral FLAG [VALUE] basic --check-config``, the same as with the flag after the APP:
    what it prints is what `outcome` says. The walk of Gunicorn's flags, Uvicorn's and
    Granian's (tests/unit/test_peers.py). A value that names a file or a directory is written
    first: CONFIG (a gunicorn.conf.py), LOGCONFIG, ENVFILE, DIR."""
    if value in WRITTEN:
        name, content = WRITTEN[value]
        path = tmp_path / name
        path.mkdir() if content is None else path.write_text(content)
        value = str(path)
    args = [flag] if value is None else [flag, value]
    # before the APP too: a flag whose value is optional (--ws) leaves the APP alone
    code, out, err = run(capsys, *args, "basic", "--check-config")
    assert run(capsys, "basic", *args, "--check-config") == (code, out, err)
    if outcome == REFUSED:
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith(f"corral: error: {flag}: "), err
        assert "not supported" in err or "no counterpart" in err, err
        return
    assert code == 0, err
    if flag in ("-h", "--help"):
        assert out.startswith("usage: corral")
        return
    if flag in ("-v", "--version"):
        assert out.startswith("corral ")
        return
    if outcome == ACCEPTED:
        assert err.count("\n") == 1 and err.startswith(f"corral: warning: {flag}: "), err
        assert "option has no effect: " in err, err
    else:
        assert err == ""
    doc = json.loads(out)
    if check is not None:
        assert check(doc), doc


# the files and directories a walked flag's value names: (name, content; None: a directory)
WRITTEN = {
    "CONFIG": ("gunicorn.conf.py", "workers = 3\n"),
    "LOGCONFIG": ("logging.json", '{"version": 1}'),
    "ENVFILE": (".env", "# the variables of the application\nexport PEER_TEST_A=1\n"),
    "DIR": ("src", None),
}


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["-k", "gevent"], '--worker-class: "gevent": corral has no gevent, eventlet or tornado'),
        (["-k", "eventlet"], '--worker-class: "eventlet": corral has no gevent'),
        (["-k", "tornado"], '--worker-class: "tornado": corral has no gevent'),
        (["-k", "mine.Worker"], '--worker-class: unknown worker class "mine.Worker"'),
        (["-m", "0o1000"], "--umask: expected a mask from 0 to 0o777, got 512"),
        (["--forwarded-allow-ips", "10.0.0.300"], "--forwarded-allow-ips: expected an IP "
         'address or a CIDR network, got "10.0.0.300"'),
        (["--limit-request-line", "10"], "--limit-request-line: expected 0 or int from 64"),
        (["--header-map", "refuse"], '--header-map: corral drops header fields whose names '
         'have "_"'),
        # the first refused flag in the order given
        (["--spew", "--statsd-host", "h:8125"], "--spew: "),
        (["--statsd-host", "h:8125", "--spew"], "--statsd-host: "),
    ],
)  # fmt: skip
def test_refusals_are_one_line(capsys, args, line):
    code, out, err = run(capsys, "basic", *args)
    assert (code, out) == (2, "")
    assert err.startswith(f"corral: error: {line}") and err.count("\n") == 1, err


def test_values_that_ask_for_what_corral_does_are_taken_silently(capsys):
    for args in (
        ["--reload-engine", "auto"],
        ["--protocol", "http"],
        ["--http-protocols", "h1"],
        ["--http-parser", "auto"],
        ["--worker-connections", "1000"],  # Gunicorn's default: nothing asked
        ["-m", "0"],  # Gunicorn's default umask: corral's socket mode stays
        ["--header-map", "drop"],
    ):
        code, out, err = run(capsys, "basic", *args, "--check-config")
        assert (code, err) == (0, ""), args
        assert json.loads(out)["settings"]["unix_socket_mode"] == "0600"


def test_a_corral_flag_wins_over_a_gunicorn_flag_for_the_same_setting(capsys):
    code, out, _ = run(capsys, "basic", "-m", "007", "--unix-socket-mode", "0600", "--check-config")
    assert code == 0 and json.loads(out)["settings"]["unix_socket_mode"] == "0600"


# -- did you mean ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "choices", "hint"),
    [
        ("--daemon", ["--env", "--workers"], ""),
        ("--worker-class", ["--workers", "--threads"], ""),
        ("--certfile", ["--error-logfile", "--access-logfile"], ""),
        ("--ini", ["--bind"], ""),
        ("--env-file", ["--log-file"], ""),
        ("--wokers", ["--workers"], ' (did you mean "--workers"?)'),
        ("--worker-clas", ["--workers", "--worker-class"], ' (did you mean "--worker-class"?)'),
        ("--logfile", ["--log-file"], ' (did you mean "--log-file"?)'),
        ("--daemonize", ["--daemon", "--env"], ' (did you mean "--daemon"?)'),
        ("--limit-request-feild-size",
         ["--limit-request-field_size", "--limit-request-field-size"],
         ' (did you mean "--limit-request-field-size"?)'),
        ("maximum", ["max", "spare"], ' (did you mean "max"?)'),
    ],
)  # fmt: skip
def test_did_you_mean_only_for_a_close_name_of_the_same_shape(word, choices, hint):
    assert did_you_mean(word, choices) == hint


def test_unknown_flags_get_no_misleading_suggestion(capsys):
    for flag in ("--secret-key", "--ssl-cert"):
        code, _, err = run(capsys, "basic", flag, "x")
        assert code == 2 and err == f"corral: error: {flag}: unknown option\n"


# -- APP as module:factory(ARGS) ----------------------------------------------------------------


def test_app_with_gunicorn_call_syntax_is_a_factory_with_arguments(capsys):
    code, out, err = run(capsys, "gunicorn_apps:create_app('hi', repeat=2, tags=[1, None])",
                         "--check-config")  # fmt: skip
    assert code == 0, err
    application = json.loads(out)["applications"]["gunicorn_apps"]
    assert application["callable"] == "create_app"
    assert application["factory"] == {"args": ["hi"], "kwargs": {"repeat": 2, "tags": [1, None]}}
    code, out, err = run(capsys, "gunicorn_apps:create_app()", "--check-config")
    assert json.loads(out)["applications"]["gunicorn_apps"]["factory"] == {"args": [], "kwargs": {}}


@pytest.mark.parametrize(
    ("app_arg", "line"),
    [
        ("m:f(x)", "APP: f(x): the arguments must be literals"),
        ("m:f(**kw)", "APP: f(**kw): the arguments must be literals, not **mapping"),
        ("m:f(b'x')", "APP: f(b'x'): bytes cannot be an argument"),
        ("m:f(1", 'APP: expected "module:callable", "module" or "module:factory(ARGS)"'),
        ("m:f()()", "APP: f()(): not a call with literal arguments"),
    ],
)
def test_bad_factory_calls_are_one_line(capsys, app_arg, line):
    code, _, err = run(capsys, app_arg)
    assert code == 2 and err.startswith(f"corral: error: {line}") and err.count("\n") == 1, err


# -- gunicorn.conf.py ----------------------------------------------------------------------------


def document(path: Path, *argv: str, environ: dict[str, str] | None = None):
    warnings: list[str] = []
    command = parse_command_line(["-c", str(path), *argv], environ=environ or {})
    return json.loads(_dump(command.document(warn=warnings.append))), warnings


def _dump(doc: Any) -> str:
    from corral.config import dump_document

    return dump_document(doc)


def write(tmp_path: Path, source: str, name: str = "gunicorn.conf.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


SEED = """\
    # gunicorn.conf.py, as the classic posts write it
    import multiprocessing

    bind = "127.0.0.1:8001"
    workers = 5
    user = "nobody"
    group = "nogroup"
    logfile = "/var/log/gunicorn/app.log"
    loglevel = "warning"
    proc_name = "myproject"
    pidfile = "/tmp/myproject.pid"
    cores = multiprocessing.cpu_count()
    """


def test_the_seed_config_of_the_classic_posts(tmp_path):
    doc, warnings = document(write(tmp_path, SEED), "basic")
    assert warnings == []
    assert list(doc["listeners"]) == ["127.0.0.1:8001"]
    application = doc["applications"]["basic"]
    assert (application["processes"], application["user"], application["group"]) == (
        5,
        "nobody",
        "nogroup",
    )
    settings = doc["settings"]
    assert settings["error_logfile"] == "/var/log/gunicorn/app.log"
    assert (settings["log_level"], settings["proc_name"]) == ("warning", "myproject")
    assert settings["pid"] == "/tmp/myproject.pid"
    assert settings["hooks"] is None  # no hook in it


EVERY_MAPPED_NAME = """\
    import os
    wsgi_app = "gunicorn_apps:create_app('x')"
    bind = ["127.0.0.1:8002", "unix:/tmp/gc.sock"]
    backlog = 100
    workers = 3
    worker_class = "gthread"
    threads = 4
    max_requests = 1000
    max_requests_jitter = 50
    timeout = 60
    graceful_timeout = 20
    keepalive = 3
    limit_request_line = 4094
    limit_request_fields = 50
    limit_request_field_size = 0
    reload = False
    reload_extra_files = ["templates/base.html"]
    preload_app = True
    reuse_port = True
    chdir = "/srv/app"
    daemon = False
    raw_env = ["DJANGO_SETTINGS_MODULE=site.settings", "A=1"]
    pidfile = None
    user = 1000
    group = 1000
    umask = 0o027
    forwarded_allow_ips = "10.0.0.1,192.168.0.0/16"
    pythonpath = "/srv/lib,/srv/vendor"
    accesslog = "-"
    access_log_format = '%(h)s "%(r)s" %(s)s'
    errorlog = "/tmp/error.log"
    loglevel = "debug"
    capture_output = True
    enable_stdio_inheritance = True
    proc_name = "site"
    header_map = "dangerous"
    """


def test_every_setting_with_a_counterpart(tmp_path):
    doc, warnings = document(write(tmp_path, EVERY_MAPPED_NAME))
    assert warnings == []
    assert doc["listeners"] == {
        "127.0.0.1:8002": {
            "pass": "applications/gunicorn_apps",
            "forwarded": {
                "client_ip": "X-Forwarded-For",
                "protocol": "X-Forwarded-Proto",
                "source": ["10.0.0.1", "192.168.0.0/16"],
                "recursive": False,
            },
        },
        "unix:/tmp/gc.sock": {
            "pass": "applications/gunicorn_apps",
            "forwarded": {
                "client_ip": "X-Forwarded-For",
                "protocol": "X-Forwarded-Proto",
                "source": "unix",
                "recursive": False,
            },
        },
    }
    a = doc["applications"]["gunicorn_apps"]
    assert (a["callable"], a["factory"]) == ("create_app", {"args": ["x"], "kwargs": {}})
    assert (a["processes"], a["threads"], a["protocol"], a["preload"]) == (3, 4, "wsgi", True)
    assert a["limits"]["requests"] == 1000 and a["max_requests_jitter"] == 50
    assert a["working_directory"] == "/srv/app" and a["path"] == ["/srv/lib", "/srv/vendor"]
    assert a["environment"] == {"DJANGO_SETTINGS_MODULE": "site.settings", "A": "1"}
    assert (a["user"], a["group"]) == ("1000", "1000")
    assert a["stdout"] == a["stderr"] == "/tmp/error.log"  # capture_output
    s = doc["settings"]
    assert (s["backlog"], s["timeout"], s["graceful_timeout"]) == (100, 60, 20)
    assert s["http"]["idle_timeout"] == 3 and s["http"]["discard_unsafe_fields"] is False
    assert (s["limit_request_line"], s["limit_request_fields"]) == (4094, 50)
    assert s["limit_request_field_size"] == 65536
    assert (s["reload"], s["touch_reload"]) == (False, ["templates/base.html"])
    assert (s["reuse_port"], s["daemon"], s["pid"]) == (True, False, None)
    assert s["unix_socket_mode"] == "0750"
    assert (s["error_logfile"], s["log_level"], s["proc_name"]) == (
        "/tmp/error.log",
        "debug",
        "site",
    )
    assert s["enable_stdio_inheritance"] is True
    assert doc["access_log"] == {"path": "-", "format": '%(h)s "%(r)s" %(s)s'}


# Gunicorn's examples/example_config.py, as people copy it: defaults written out, and hooks.
TEMPLATE = """\
    bind = '127.0.0.1:8000'
    backlog = 2048
    workers = 1
    worker_class = 'sync'
    worker_connections = 1000
    timeout = 30
    keepalive = 2
    spew = False
    daemon = False
    raw_env = []
    pidfile = None
    umask = 0
    user = None
    group = None
    tmp_upload_dir = None
    errorlog = '-'
    loglevel = 'info'
    accesslog = '-'
    access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
    proc_name = None
    secure_scheme_headers = {'X-FORWARDED-PROTO': 'https'}
    initgroups = False
    sendfile = None

    def post_fork(server, worker):
        server.log.info("Worker spawned (pid: %s)", worker.pid)

    def pre_fork(server, worker):
        pass

    def pre_exec(server):
        server.log.info("Forked child, re-executing.")

    def when_ready(server):
        server.log.info("Server is ready. Spawning workers")

    def worker_int(worker):
        worker.log.info("worker received INT or QUIT signal")

    def worker_abort(worker):
        worker.log.info("worker received SIGABRT signal")
    """


def test_gunicorns_example_config_runs_without_a_warning_and_is_the_hooks_file(tmp_path):
    path = write(tmp_path, TEMPLATE)
    doc, warnings = document(path, "basic")
    assert warnings == []
    assert doc["settings"]["hooks"] == str(path.resolve())  # the file is the hooks file
    assert doc["settings"]["unix_socket_mode"] == "0600"  # umask 0: corral's default kept


def test_names_that_are_not_gunicorn_settings_are_ignored(tmp_path):
    path = write(
        tmp_path,
        """\
        import os, multiprocessing
        from os import path as _path
        _private = "x"
        cores = multiprocessing.cpu_count()
        max_worker_memory = 200  # corral's own name: not read from a Gunicorn file
        WORKERS = 9  # Gunicorn's names are lower case
        def helper():
            return 1
        class Thing:
            pass
        workers = cores * 0 + 2
        """,
    )
    doc, warnings = document(path, "basic")
    assert warnings == []
    application = doc["applications"]["basic"]
    assert (application["processes"], application["max_worker_memory"]) == (2, 0)


def test_each_unsupported_name_is_one_warning_saying_what_corral_does(tmp_path):
    path = write(
        tmp_path,
        """\
        spew = True
        statsd_host = "localhost:8125"
        syslog = True
        worker_connections = 50
        sendfile = False
        worker_tmp_dir = "/dev/shm"
        header_map = "refuse"
        check_config = True
        def ssl_context(config, default):
            return default
        def on_dirty_starting(arbiter):
            pass
        """,
    )
    doc, warnings = document(path, "basic")
    at = f"{path}: "
    assert [line.partition(":")[2].partition(":")[0].strip() for line in warnings] == [
        "spew",
        "statsd_host",
        "syslog",
        "worker_connections",
        "sendfile",
        "worker_tmp_dir",
        "header_map",
        "check_config",
        "ssl_context",
        "on_dirty_starting",
    ]
    assert all(line.startswith(at) for line in warnings)
    assert warnings[0] == (
        f"{at}spew: Gunicorn's setting is ignored: no line tracing: call sys.settrace in a "
        "post_fork hook"
    )
    assert "StatsD is not supported" in warnings[1] and "/metrics" in warnings[1]
    assert (
        warnings[7]
        == f"{at}check_config: ignored in a file: --print-config is a command-line option"
    )
    assert "corral makes the TLS context from certfile" in warnings[8]
    assert doc["applications"]["basic"]["processes"] == 1


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ('workers = "two"\n', 'workers: expected int >= 1 or "auto", got "two"'),
        ("bind = 8000\n", "bind: expected HOST:PORT"),
        ("umask = 'x'\n", 'umask: expected an int or a string such as "0o007"'),
        ('worker_class = "gevent"\n', 'worker_class: "gevent": corral has no gevent'),
        ("def post_fork(server):\n    pass\n",
         "post_fork must accept 2 argument(s) (server, worker)"),
        ("workers = 1 / 0\n", "failed to import: "),
    ],
)  # fmt: skip
def test_a_bad_config_file_is_one_line(tmp_path, capsys, source, line):
    path = write(tmp_path, source)
    code, out, err = run(capsys, "-c", str(path), "basic", "--check-config")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1, err
    assert err.startswith("corral: error: ") and line in err, err
    assert str(path.name) in err


def test_a_failing_config_file_names_its_line(tmp_path, capsys):
    path = write(tmp_path, "bind = ':8000'\nworkers = undefined_name\n")
    code, _, err = run(capsys, "-c", str(path), "basic")
    assert code == 2
    assert err == (
        f"corral: error: config file {str(path)!r} failed to import: {path}:2: "
        "NameError: name 'undefined_name' is not defined\n"
    )


def test_flags_and_gunicorn_cmd_args_apply_over_the_file(tmp_path):
    path = write(tmp_path, "workers = 2\nthreads = 2\nbind = ':9000'\nloglevel = 'debug'\n")
    environ = {"GUNICORN_CMD_ARGS": "--threads 3 -b 127.0.0.1:9100 --log-level=warning"}
    doc, _ = document(path, "basic", "--log-level", "error", environ=environ)
    application = doc["applications"]["basic"]
    assert (application["processes"], application["threads"]) == (2, 3)
    assert list(doc["listeners"]) == ["127.0.0.1:9100"]
    assert doc["settings"]["log_level"] == "error"


def test_gunicorn_cmd_args_may_name_the_config_file_and_the_app(tmp_path):
    path = write(tmp_path, "workers = 4\n")
    command = parse_command_line([], environ={"GUNICORN_CMD_ARGS": f"-c {path} basic"})
    doc = command.document(warn=lambda line: None)
    assert doc.applications["basic"].workers == 4


@pytest.mark.parametrize(
    ("argv", "environ", "read"),
    [
        (["basic"], {}, "gunicorn.conf.py"),
        ([], {}, "gunicorn.conf.py"),  # the file may name the application (wsgi_app)
        (["basic", "--control", "unix:/tmp/c.sock"], {}, "gunicorn.conf.py"),
        (["basic", "-c", "other.py"], {}, "other.py"),
        (["basic"], {"GUNICORN_CMD_ARGS": "-c other.py"}, "other.py"),
        (["basic", "--ini", "other.ini"], {}, None),
        (["--emperor", "vassals"], {}, None),
        (["--state-dir", "state"], {}, None),  # its saved configuration: a warning says so
    ],
)
def test_which_command_lines_read_gunicorn_conf_py(tmp_path, argv, environ, read):
    """Gunicorn's order: -c, then GUNICORN_CMD_ARGS's -c, then ./gunicorn.conf.py; corral's
    own files (--ini, --emperor's directory, a state directory) replace it too."""
    (tmp_path / "gunicorn.conf.py").write_text("workers = 3\n")
    command = parse_command_line(argv, environ=environ, cwd=str(tmp_path))
    found = read == "gunicorn.conf.py"
    assert command.config == (str(tmp_path / read) if found else read)
    assert command.default_config is found
    assert (command.config_note is not None) is found
    unread = [line for line in command.warnings if "gunicorn.conf.py is not read" in line]
    assert len(unread) == (argv[:1] == ["--state-dir"])
    assert parse_command_line(argv, environ=environ, cwd=str(tmp_path / "x")).config == (
        None if found else read
    )  # no file there: nothing is read by default


def test_gunicorn_cmd_args_errors_say_where(capsys, monkeypatch):
    monkeypatch.setenv("GUNICORN_CMD_ARGS", "-w two")
    code, _, err = run(capsys, "basic")
    assert (code, err) == (
        2,
        'corral: error: GUNICORN_CMD_ARGS: --workers: expected int >= 1 or "auto", got "two"\n',
    )
    monkeypatch.setenv("GUNICORN_CMD_ARGS", "--certfile 'c.pem")
    code, _, err = run(capsys, "basic")
    assert (code, err) == (2, "corral: error: GUNICORN_CMD_ARGS: No closing quotation\n")


def test_environment_defaults_are_under_the_file(tmp_path):
    environ = {"WEB_CONCURRENCY": "3", "FORWARDED_ALLOW_IPS": "*"}
    empty = write(tmp_path, "loglevel = 'info'\n", "empty.conf.py")
    doc, _ = document(empty, "basic", environ=environ)
    assert doc["applications"]["basic"]["processes"] == 3
    assert listener(doc)["forwarded"]["source"] == ["0.0.0.0/0", "::/0"]
    overrides = write(tmp_path, "workers = 2\nforwarded_allow_ips = ''\n", "set.conf.py")
    doc, _ = document(overrides, "basic", environ=environ)
    assert doc["applications"]["basic"]["processes"] == 2
    assert "forwarded" not in listener(doc)  # no trusted peer on TCP


def test_a_python_module_config(tmp_path, monkeypatch):
    package = tmp_path / "deploy_conf_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "gunicorn_settings.py").write_text(
        "workers = 6\ndef on_starting(server):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    command = parse_command_line(["-c", "python:deploy_conf_pkg.gunicorn_settings", "basic"], {})
    doc = command.document(warn=lambda line: None)
    assert doc.applications["basic"].workers == 6
    assert doc.settings.hooks == "deploy_conf_pkg.gunicorn_settings"


def test_the_file_runs_once_and_its_hooks_are_the_hooks(tmp_path):
    from corral.hooks import Hooks

    runs = tmp_path / "runs"
    path = write(
        tmp_path,
        f"""\
        with open({str(runs)!r}, "a") as f:
            f.write("run\\n")
        workers = 2
        def on_starting(server):
            pass
        """,
    )
    command = parse_command_line(["-c", str(path), "basic"], {})
    doc = command.document(warn=lambda line: None)
    hooks = Hooks()
    hooks.load(doc.settings.hooks)
    assert list(hooks.functions) == ["on_starting"]
    assert runs.read_text() == "run\n"


def test_a_hooks_file_warns_for_each_gunicorn_setting_it_holds(tmp_path):
    import logging

    from corral.hooks import Hooks

    source = "bind = ':8000'\nworkers = 4\nthreads = 2\ndef on_exit(server):\n    pass\n"
    path = write(tmp_path, source, "hooks.py")
    hooks = Hooks()
    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    hooks.log.addHandler(handler)
    try:
        hooks.load(str(path))
    finally:
        hooks.log.removeHandler(handler)
    assert seen == [
        f"hooks file {str(path)!r}: {name} is a Gunicorn setting, not applied: --hooks takes "
        f"only the hooks from it (to apply its settings too, give it as -c {path})"
        for name in ("bind", "workers", "threads")
    ]
    assert list(hooks.functions) == ["on_exit"]


def test_unit_documents_keep_their_forwarded(tmp_path):
    path = tmp_path / "unit.json"
    path.write_text(
        '{"listeners": {"127.0.0.1:8000": {"pass": "applications/a"}},'
        ' "applications": {"a": {"module": "basic"}}}'
    )
    doc = parse_command_line(["-c", str(path)], {}).document()
    assert doc.listeners["127.0.0.1:8000"].forwarded is msgspec_unset()


def msgspec_unset() -> Any:
    import msgspec

    return msgspec.UNSET


def test_forwarded_allow_ips_needs_the_command_lines_listeners(tmp_path, capsys):
    path = tmp_path / "unit.json"
    path.write_text('{"listeners": {}, "applications": {}}')
    code, _, err = run(capsys, "-c", str(path), "--forwarded-allow-ips", "*")
    assert code == 2 and "is a whole document" in err


def test_no_warning_is_lost_on_a_reload(tmp_path):
    """A reload reads the file again: its warnings go to the callback given (the log)."""
    path = write(tmp_path, "spew = True\n")
    command = parse_command_line(["-c", str(path), "basic", "--worker-tmp-dir", "/x"], {})
    seen: list[str] = []
    command.document(warn=seen.append)
    command.document(warn=seen.append)
    assert len(seen) == 4 and seen[0] == seen[2] and seen[1] == seen[3]


def test_cwd_is_importable_while_the_file_runs(tmp_path, monkeypatch):
    (tmp_path / "deploy_settings_mod.py").write_text("WORKERS = 7\n")
    path = write(tmp_path, "from deploy_settings_mod import WORKERS\nworkers = WORKERS\n")
    monkeypatch.chdir(tmp_path)
    doc, _ = document(Path("gunicorn.conf.py"), "basic")
    assert doc["applications"]["basic"]["processes"] == 7
    assert str(tmp_path) not in os.sys.path
    assert path.exists()
