"""corral.config: declarations, bind parsing, load() from flags and files, the document, docs."""

import json
import os
import pickle
import re
import socket
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from corral import __version__, config
from corral.config import (
    SETTINGS,
    ConfigError,
    Document,
    LogLevel,
    Scope,
    document_builtins,
    dump_document,
    load,
    parse_bind,
    validate_document,
)
from corral.config import docs as config_docs
from corral.config.errors import Invalid
from corral.config.settings import SECTIONS, Action
from corral.config.unserved import unserved
from corral.config.values import describe

ROOT = Path(__file__).resolve().parents[2]
# The `forwarded` every listener of the command line gets: Gunicorn's forwarded_allow_ips
GUNICORN_TRUST = {
    "client_ip": "X-Forwarded-For",
    "protocol": "X-Forwarded-Proto",
    "source": ["127.0.0.1", "::1"],
    "recursive": False,
}


def error_of(argv: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        load(argv)
    message = str(info.value)
    assert "\n" not in message
    return message


# -- the declarations --------------------------------------------------------------------------


def test_every_setting_is_declared_once_with_a_known_section() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    flags = [flag for s in SETTINGS for flag in s.flags]
    assert len(flags) == len(set(flags))
    sections = {title for title, _ in SECTIONS}
    for setting in SETTINGS:
        assert setting.section in sections, setting.name
        assert setting.doc, setting.name
        document_only = setting.name in {
            "server_version",
            "discard_unsafe_fields",
            "static",
            "compression",
            "stdout",
            "stderr",
            "thread_stack_size",
            "factory",
            # an external application's (config/app_types.py): no command line runs one
            *("executable", "arguments", "listen", "health_path", "health_interval"),
        }
        assert setting.flags or setting.action is Action.POSITIONAL or document_only


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_defaults_are_valid_in_both_forms(setting: config.Setting) -> None:
    if setting.default is None:
        return
    assert msgspec.convert(setting.default, setting.input_type) == setting.default
    if setting.scope not in (Scope.SERVER, Scope.APPLICATION, Scope.DOCUMENT):
        return  # APP and bind shape the document instead of being fields
    resolved = setting.document_default()
    converted = msgspec.convert(resolved, setting.type, strict=True)
    assert converted == resolved
    assert type(converted) is type(resolved)


def test_document_fields_come_from_the_declarations() -> None:
    doc = load(["app", "--access-logfile", "-"])
    data = msgspec.to_builtins(doc)
    roots = {
        Scope.SERVER: (doc.settings, data["settings"]),
        Scope.APPLICATION: (doc.applications["app"], data["applications"]["app"]),
        Scope.DOCUMENT: (doc, data),
    }
    first_steps: dict[Scope, set[str]] = {scope: set() for scope in roots}
    for setting in SETTINGS:
        if setting.scope not in roots:
            continue
        struct, node = roots[setting.scope]
        for step in setting.path:
            node = node[step]  # the value sits at the setting's document path...
        view = setting.view or (lambda value: value)
        # ...and the runtime reads it under the setting's name
        assert msgspec.to_builtins(getattr(struct, setting.name)) == view(node), setting.name
        first_steps[setting.scope].add(setting.path[0])
    assert set(data["settings"]) == first_steps[Scope.SERVER]
    unit_only = {"type", "module", "callable", "protocol"}
    assert set(data["applications"]["app"]) == first_steps[Scope.APPLICATION] | unit_only
    assert set(data) == first_steps[Scope.DOCUMENT] | {
        "listeners",
        "applications",
        "upstreams",
        "settings",
    }


def test_settings_defaults_match_the_brief() -> None:
    settings = load(["app"]).settings
    assert settings.graceful_timeout == 30.0
    assert settings.timeout == 30.0
    assert settings.keep_alive == 5.0
    assert settings.header_timeout == 30.0
    assert settings.limit_request_line == 8190
    assert settings.limit_request_fields == 100
    assert settings.limit_request_field_size == 8190
    assert settings.limit_request_body == 1073741824
    assert settings.body_buffer_size == 1048576
    assert settings.server_header == "corral"
    assert settings.backlog == 2048
    assert settings.unix_socket_mode == 0o600
    assert load(["app"]).access_logfile is None
    assert load(["app"]).access_logformat == (
        '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
    )
    assert settings.error_logfile == "-"
    assert settings.log_level is LogLevel.INFO
    assert settings.pid is None
    assert settings.proc_name is None


def test_describe() -> None:
    by_name = {s.name: s for s in SETTINGS}
    assert by_name["workers"].expected == 'int >= 1 or "auto"'
    assert describe(by_name["workers"].type) == "int >= 1 or object {max, spare, idle_timeout}"
    assert by_name["limit_request_line"].expected == "0 or int from 64 to 65536"
    assert by_name["header_timeout"].expected == "number > 0 and <= 86400"
    assert by_name["pid"].expected == "non-empty string"
    assert describe(LogLevel).startswith('one of "debug", "info"')


# -- parse_bind ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "family"),
    [
        ("127.0.0.1:8000", "127.0.0.1:8000", socket.AF_INET),
        ("localhost:9000", "127.0.0.1:9000", socket.AF_INET),
        ("LOCALHOST:9000", "127.0.0.1:9000", socket.AF_INET),
        (":8000", "0.0.0.0:8000", socket.AF_INET),
        ("8000", "127.0.0.1:8000", socket.AF_INET),
        ("0", "127.0.0.1:0", socket.AF_INET),
        ("10.0.0.1", "10.0.0.1:8000", socket.AF_INET),
        ("[::1]:8000", "[::1]:8000", socket.AF_INET6),
        ("[0:0::1]:80", "[::1]:80", socket.AF_INET6),
        ("[::]:0", "[::]:0", socket.AF_INET6),
        ("[::1]", "[::1]:8000", socket.AF_INET6),
        ("tcp://127.0.0.1:1", "127.0.0.1:1", socket.AF_INET),
        ("unix:/tmp/x.sock", "unix:/tmp/x.sock", socket.AF_UNIX),
        ("unix:///tmp/x.sock", "unix:/tmp/x.sock", socket.AF_UNIX),
        ("unix:rel.sock", "unix:rel.sock", socket.AF_UNIX),
    ],
)
def test_parse_bind(text: str, key: str, family: socket.AddressFamily) -> None:
    address = parse_bind(text)
    assert str(address) == key
    assert address.family == family
    assert str(parse_bind(str(address))) == key  # normalized form is a fixed point


def test_parse_bind_fields() -> None:
    tcp = parse_bind("[::1]:8080")
    assert (tcp.kind, tcp.host, tcp.port, tcp.path) == ("tcp", "::1", 8080, None)
    assert tcp.sockaddr == ("::1", 8080)
    unix = parse_bind("unix:/run/app.sock")
    assert (unix.kind, unix.host, unix.port, unix.path) == ("unix", "", 0, "/run/app.sock")
    assert unix.sockaddr == "/run/app.sock"


@pytest.mark.parametrize(
    "text",
    ["", "unix:", "::1:80", "[::1", "[::1]x", "[127.0.0.1]:80", ":65536", ":-1", "a:b",
     "1.2.3.4:8o", "fd://3", "under_score:80", "unix:/a\0b"],
)  # fmt: skip
def test_parse_bind_rejects(text: str) -> None:
    with pytest.raises(Invalid):
        parse_bind(text)


# -- load(): the command line --------------------------------------------------------------------


def test_minimal_command_line() -> None:
    doc = load(["myproj.wsgi:application"])
    assert list(doc.listeners) == ["127.0.0.1:8000"]
    assert doc.listeners["127.0.0.1:8000"].pass_ == "applications/myproj.wsgi"
    app = doc.applications["myproj.wsgi"]
    assert (app.module, app.callable) == ("myproj.wsgi", "application")
    assert (app.workers, app.threads, app.preload) == (1, 1, False)
    assert (app.chdir, app.pythonpath, app.env, app.user, app.group) == (None, [], {}, None, None)


def test_module_without_callable() -> None:
    doc = load(["hello"])
    assert doc.applications["hello"].callable is None


def test_every_flag() -> None:
    doc = load(
        [
            "pkg.mod:make.app",
            "-b", ":0", "--bind", "[::1]:0", "-b", "unix:/tmp/c.sock",
            "-w", "3", "--threads", "4", "--preload", "--chdir", "/srv", "--pythonpath", "a, b,",
            "-e", "A=1", "--env", "B=x=y", "--user", "nobody", "--group", "nogroup",
            "--graceful-timeout", "1.5", "-t", "0", "--keep-alive", "2", "--header-timeout", "7",
            "--limit-request-line", "4094", "--limit-request-fields", "50",
            "--limit-request-field_size", "1000", "--limit-request-body", "0",
            "--body-buffer-size", "10", "--server-header=", "--backlog", "16",
            "--unix-socket-mode", "0660", "--access-logfile", "-", "--access-logformat", "%(h)s",
            "--error-logfile", "err.log", "--log-level", "WARNING", "--pid", "x.pid", "-n", "web",
        ]
    )  # fmt: skip
    assert list(doc.listeners) == ["0.0.0.0:0", "[::1]:0", "unix:/tmp/c.sock"]
    app = doc.applications["pkg.mod"]
    assert (app.module, app.callable, app.workers, app.threads) == ("pkg.mod", "make.app", 3, 4)
    assert (app.preload, app.chdir, app.pythonpath) == (True, "/srv", ["a", "b"])
    assert app.env == {"A": "1", "B": "x=y"}
    assert (app.user, app.group) == ("nobody", "nogroup")
    s = doc.settings
    assert (s.graceful_timeout, s.timeout, s.keep_alive, s.header_timeout) == (1.5, 0, 2, 7)
    assert (s.limit_request_line, s.limit_request_fields) == (4094, 50)
    assert (s.limit_request_field_size, s.limit_request_body, s.body_buffer_size) == (1000, 0, 10)
    assert (s.server_header, s.backlog, s.unix_socket_mode) == ("", 16, 0o660)
    assert (doc.access_logfile, doc.access_logformat, s.error_logfile) == ("-", "%(h)s", "err.log")
    assert (s.log_level, s.pid, s.proc_name) == (LogLevel.WARNING, "x.pid", "web")


def test_field_size_flag_has_both_spellings() -> None:
    doc = load(["a", "--limit-request-field-size", "999"])
    assert doc.settings.limit_request_field_size == 999


def test_workers_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("corral.config.values._cpu_count", lambda: 7)
    assert load(["a", "-w", "auto"]).applications["a"].workers == 7


def test_last_store_flag_wins() -> None:
    assert load(["a", "-w", "2", "-w", "5"]).applications["a"].workers == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["a", "-w", "two"], '--workers: expected int >= 1 or "auto", got "two"'),
        (["a", "--workers", "0"], '--workers: expected int >= 1 or "auto", got "0"'),
        (["a", "--threads", "1.5"], '--threads: expected int >= 1, got "1.5"'),
        (["a", "-t", "-1"], '--timeout: expected number from 0 to 86400, got "-1"'),
        (["a", "-t", "nan"], '--timeout: expected number from 0 to 86400, got "nan"'),
        (["a", "--limit-request-line", "10"], "--limit-request-line: expected 0 or int from 64"),
        (["a", "--log-level", "loud"], '--log-level: expected one of "debug", "info"'),
        (["a", "--unix-socket-mode", "0999"], "--unix-socket-mode: expected an octal mode"),
        (["a", "--server-header=a\r\nX: y"], "--server-header: expected printable ASCII"),
        (["a", "-e", "NOEQUALS"], '--env: expected KEY=VALUE, got "NOEQUALS"'),
        (["a", "-e", "=v"], "--env: expected a variable name"),
        (["a", "-b", "::1:80"], "--bind: expected HOST:PORT"),
        (["a", "-b", ":1", "-b", "0.0.0.0:1"], "--bind: 0.0.0.0:1 is given twice"),
        (["a", "--pid", ""], '--pid: expected non-empty string, got ""'),
        (["a", "-w"], "--workers: expected a value"),
        (["a", "--preload=yes"], "--preload: takes no value"),
        (["a", "--wokers", "3"], '--wokers: unknown option (did you mean "--workers"?)'),
        (["a", "--wor=3"], "--wor: unknown option"),
        (["a", "b"], 'unexpected argument "b"'),
        (["a:b(x)"], "APP: b(x): the arguments must be literals"),
        (["a:b("], 'APP: expected "module:callable", "module" or "module:factory(ARGS)"'),
        (["1abc"], 'APP: expected "module:callable"'),
        ([], "missing APP"),
        (["-w", "2"], "missing APP"),
    ],
)
def test_command_line_errors_are_one_line(argv: list[str], message: str) -> None:
    assert error_of(argv).startswith(message)


def test_abbreviated_flags_are_not_accepted() -> None:
    assert "unknown option" in error_of(["a", "--work", "2"])


# -- load(): config files ------------------------------------------------------------------------


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_toml_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "c.toml",
        'app = "proj.wsgi:app"\nworkers = 4\nbind = [":8000", "unix:/tmp/p.sock"]\n'
        "limit_request_line = 4094\ntimeout = 10\nunix_socket_mode = 0o660\n"
        'env = { A = "1" }\npythonpath = ["src", "lib"]\npreload = true\nlog_level = "DEBUG"\n'
        'proc_name = "p"\n',
    )
    doc = load(["-c", path])
    assert list(doc.listeners) == ["0.0.0.0:8000", "unix:/tmp/p.sock"]
    app = doc.applications["proj.wsgi"]
    assert (app.callable, app.workers, app.env, app.pythonpath, app.preload) == (
        "app", 4, {"A": "1"}, ["src", "lib"], True,
    )  # fmt: skip
    s = doc.settings
    assert (s.limit_request_line, s.timeout, s.unix_socket_mode) == (4094, 10.0, 0o660)
    assert isinstance(s.timeout, float)
    assert (s.log_level, s.proc_name) == (LogLevel.DEBUG, "p")


def test_json_file(tmp_path: Path) -> None:
    data = {"app": "m", "bind": "127.0.0.1:0", "env": ["K=V"], "unix_socket_mode": "660",
            "workers": "auto", "chdir": None, "pythonpath": "x,y"}  # fmt: skip
    doc = load(["--config", write(tmp_path, "c.json", json.dumps(data))])
    assert list(doc.listeners) == ["127.0.0.1:0"]
    app = doc.applications["m"]
    assert (app.env, app.chdir, app.pythonpath) == ({"K": "V"}, None, ["x", "y"])
    assert app.workers >= 1
    assert doc.settings.unix_socket_mode == 0o660


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "c.toml", 'app = "a"\nworkers = 4\nbind = [":1"]\nthreads = 2\n')
    doc = load(["-c", path, "other:app", "-w", "2", "-b", ":2"])
    assert list(doc.applications) == ["other"]
    app = doc.applications["other"]
    assert (app.workers, app.threads) == (2, 2)
    assert list(doc.listeners) == ["0.0.0.0:2"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("c.toml", 'app = "a"\nworkers = "two"\n',
         '$.workers: expected int >= 1 or "auto", got "two"'),
        ("c.toml", 'app = "a"\nwokers = 2\n', '$.wokers: unknown key (did you mean "workers"?)'),
        ("c.toml", 'app = "a"\nname = "x"\n', '$.name: unknown key (did you mean "proc_name"?)'),
        ("c.toml", 'app = "a"\nlimit-request-line = 100\n',
         '$["limit-request-line"]: unknown key (did you mean "limit_request_line"?)'),
        ("c.toml", 'app = "a"\nconfig = "x.toml"\n',
         "$.config: unknown key (--config is a command-line option only)"),
        ("c.toml", 'app = "a"\nbind = [":1", 2]\n', "$.bind[1]: expected string, got 2"),
        ("c.toml", 'app = "a"\nbind = [":1", "nope:x"]\n', '$.bind[1]: expected HOST:PORT'),
        ("c.toml", 'app = "a"\nbind = []\n', "$.bind: expected at least one address, got []"),
        ("c.toml", 'app = "a"\nenv = { A = 1 }\n', '$.env["A"]: expected a string without NUL'),
        ("c.toml", 'app = "a"\npreload = "yes"\n', '$.preload: expected true or false, got "yes"'),
        ("c.toml", 'app = "a"\ntimeout = "5"\n', '$.timeout: expected number from 0 to 86400'),
        ("c.toml", "app = 3\n", '$.app: expected "module:callable", "module" or "module:'),
        ("c.toml", "workers = 2\n", "missing APP"),
        ("c.toml", "app = \n", "invalid TOML: "),
        ("c.json", '{"app": "a",}', "invalid JSON: "),
        ("c.json", '["a"]', '$: expected an object, got ["a"]'),
        ("c.json", '{"app": "a", "workers": null}', "$.workers: expected int >= 1"),
        ("c.yaml", "app: a\n", "unsupported config file type"),
    ],
)  # fmt: skip
def test_file_errors_name_the_file_and_the_key(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = write(tmp_path, name, text)
    error = error_of(["-c", path])
    assert message in error
    if message != "missing APP":
        assert error.startswith(path + ": ")


def test_every_unknown_key_of_a_file_is_named_at_once(tmp_path: Path) -> None:
    flat = write(tmp_path, "c.toml", 'app = "a"\nwokers = 2\nmax_request = 5\nthreads = 2\n')
    assert error_of(["-c", flat]) == (
        f'{flat}: $.wokers: unknown key (did you mean "workers"?); '
        '$.max_request: unknown key (did you mean "max_requests"?)'
    )
    document = {
        "listeners": {"*:8080": {"pass": "applications/a"}},
        "applications": {"a": {"module": "m", "workers": 2, "procesess": 1}},
    }
    path = write(tmp_path, "unit.json", json.dumps(document))
    assert error_of(["-c", path]) == (
        f"{path}: "
        '$.applications.a.workers: unknown key (the document calls it "processes", as NGINX '
        'Unit); $.applications.a.procesess: unknown key (did you mean "processes"?)'
    )


def test_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "none.toml")
    assert error_of(["-c", path]) == f"{path}: cannot read: No such file or directory"


def test_flags_are_checked_before_the_file_is_read(tmp_path: Path) -> None:
    assert error_of(["-c", str(tmp_path / "none.toml"), "a", "-w", "x"]).startswith("--workers")


# -- the document ---------------------------------------------------------------------------------


def test_document_round_trips_through_json_and_pickle() -> None:
    doc = load(["a:b", "-b", "[::1]:0", "-e", "K=V", "--log-level", "error"])
    assert msgspec.json.decode(msgspec.json.encode(doc), type=Document) == doc
    assert validate_document(json.loads(dump_document(doc))) == doc
    assert pickle.loads(pickle.dumps(doc)) == doc
    assert json.loads(dump_document(doc))["listeners"] == {
        "[::1]:0": {"pass": "applications/a", "forwarded": GUNICORN_TRUST}
    }


def test_file_modes_are_shown_in_octal_and_taken_back() -> None:
    doc = load(["a:b", "-b", "unix:/tmp/a.sock", "--unix-socket-mode", "660"])
    assert doc.settings.unix_socket_mode == 0o660
    shown = json.loads(dump_document(doc))
    assert shown["settings"]["unix_socket_mode"] == "0660"
    assert validate_document(shown) == doc  # what --check-config prints runs as it is
    shown["settings"]["unix_socket_mode"] = 0o640  # an int (TOML's 0o640) is taken as is
    assert validate_document(shown).settings.unix_socket_mode == 0o640
    shown["settings"]["unix_socket_mode"] = "0999"
    with pytest.raises(ConfigError, match=r"^\$\.settings\.unix_socket_mode: expected an octal"):
        validate_document(shown)


def test_document_is_frozen() -> None:
    doc = load(["a"])
    with pytest.raises(AttributeError):
        doc.settings.timeout = 1.0  # type: ignore[misc]


def test_validate_document_minimal() -> None:
    doc = validate_document({"applications": {"main": {"module": "app"}}})
    assert doc.listeners == {}
    assert doc.applications["main"].workers == 1
    assert doc.settings == config.Settings()


def test_validate_document_normalizes_listener_keys() -> None:
    doc = validate_document(
        {
            "listeners": {"localhost:80": {"pass": "applications/main"}},
            "applications": {"main": {"module": "app"}},
        }
    )
    assert list(doc.listeners) == ["127.0.0.1:80"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"applications": {"main": {"module": "m", "processes": "two"}}},
         '$.applications.main.processes: expected int >= 1 or object {max, spare, idle_timeout}, '
         'got "two"'),
        ({"applications": {"main": {"module": "m", "processes": 0}}},
         "$.applications.main.processes: expected int >= 1 or object"),
        ({"applications": {"blog": {"module": "m", "processes": {"spare": "x"}}}},
         '$.applications.blog.processes.spare: expected int >= 0, got "x"'),
        ({"applications": {"blog": {"module": "m", "processes": {"max": 0}}}},
         "$.applications.blog.processes.max: expected int >= 1, got 0"),
        ({"applications": {"blog": {"module": "m", "processes": {"max": 2, "spare": 3}}}},
         "$.applications.blog.processes.spare: expected at most max (2), got 3"),
        ({"applications": {"blog": {"module": "m", "processes": {"spare": 2}}}},
         "$.applications.blog.processes.spare: expected at most max (1), got 2"),
        ({"applications": {"blog": {"module": "m", "processes": {"idle_timeout": -1}}}},
         "$.applications.blog.processes.idle_timeout: expected number from 0 to 86400, got -1"),
        ({"applications": {"blog": {"module": "m", "processes": {"maximum": 2}}}},
         '$.applications.blog.processes.maximum: unknown key (did you mean "max"?)'),
        ({"applications": {"my.app": {"module": "m", "threads": 0}}},
         '$.applications["my.app"].threads: expected int >= 1, got 0'),
        ({"applications": {"main": {"module": "m", "procesess": 2}}},
         '$.applications.main.procesess: unknown key (did you mean "processes"?)'),
        ({"applications": {"main": {"module": "m", "workers": 2}}},
         '$.applications.main.workers: unknown key (the document calls it "processes", as '
         "NGINX Unit)"),
        ({"applications": {"main": {"module": "m", "request_timeout": 2}}},
         '$.applications.main.request_timeout: unknown key (the document calls it '
         '"limits.timeout", as NGINX Unit)'),
        ({"applications": {"main": {}}}, '$.applications.main: missing required key "module"'),
        ({"applications": {"main": {"module": "m", "environment": {"A": 1}}}},
         '$.applications.main.environment: expected string in every entry, got {"A":1}'),
        ({"applications": {"main": {"module": "m", "path": ["a", 2]}}},
         "$.applications.main.path[1]: expected string, got 2"),
        ({"applications": {"main": {"module": "m", "path": 2}}},
         "$.applications.main.path: expected list of strings or string, got 2"),
        ({"applications": {"main": {"module": "m", "working_directory": ""}}},
         '$.applications.main.working_directory: expected non-empty string or null, got ""'),
        ({"applications": {"main": {"module": "m", "limits": {"timeout": "x"}}}},
         '$.applications.main.limits.timeout: expected number from 0 to 86400, got "x"'),
        ({"applications": {"main": {"module": "m", "limits": {"requests": -1}}}},
         "$.applications.main.limits.requests: expected int >= 0, got -1"),
        ({"applications": {"main": {"module": "m", "limits": {"shm": 1}}}},
         "$.applications.main.limits.shm: unknown key"),
        ({"applications": {"main": {"module": "m", "type": "cobol"}}},
         '$.applications.main.type: expected "python" (or "python 3", "python 3.11", '
         '"python3.11"...), "external", "go", "nodejs", "php", "perl", "ruby" or "java" (or '
         '"php 8.2", "ruby 3.1"...), got "cobol"'),
        ({"applications": {"main": {"module": "m", "type": "php"}}},
         "$.applications.main.module: a key of Python applications (this one is 'php')"),
        ({"applications": {"main": {"module": "m", "type": "python 2.7"}}},
         '$.applications.main.type: expected "python"'),
        ({"applications": {"main": {"module": "m", "protocol": "rack"}}},
         '$.applications.main.protocol: expected "wsgi" or "asgi", got "rack"'),
        *(({"applications": {"main": {"module": "m", key: value}}},
           f'$.applications.main.{key}: NGINX Unit\'s "{key}" is not supported by corral')
          for key, value in (("isolation", {}),)),
        ({"applications": {"main": {"module": "m", "stdout": ""}}},
         '$.applications.main.stdout: expected non-empty string or null, got ""'),
        ({"applications": {"main": {"module": "m", "thread_stack_size": 1}}},
         "$.applications.main.thread_stack_size: expected int >= 32768 or null, got 1"),
        ({"applications": {"main": {"module": "m", "thread_stack_size": 40000}}},
         "$.applications.main.thread_stack_size: expected a multiple of the page size"),
        ({"applications": {"main": {"module": "m", "factory": "yes"}}},
         '$.applications.main.factory: expected true or false or object {args, kwargs}, '
         'got "yes"'),
        ({"applications": {"main": {"module": "m", "targets": {"t": {"module": "m"}}}}},
         '$.applications.main.module: not allowed with "targets" (give it per target)'),
        ({"applications": {"main": {"prefix": "/p", "targets": {"t": {"module": "m"}}}}},
         '$.applications.main.prefix: not allowed with "targets" (give it per target)'),
        ({"applications": {"main": {"targets": {}}}},
         "$.applications.main.targets: expected at least one target, got {}"),
        ({"applications": {"main": {"callable": "f"}}},
         '$.applications.main: missing required key "module" (or "targets")'),
        ({"applications": {"main": {"module": "m", "prefix": "p"}}},
         '$.applications.main.prefix: expected a path beginning with "/", got "p"'),
        ({"applications": {"main": {"targets": {"t": {"module": "m", "prefix": "p"}}}}},
         '$.applications.main.targets.t.prefix: expected a path beginning with "/", got "p"'),
        ({"listeners": {":80": {"pass": "applications/main/nope"}},
          "applications": {"main": {"targets": {"t": {"module": "m"}}}}},
         "$.listeners[\":80\"].pass: 'applications/main/nope' names no target of application "
         "'main'"),
        ({"settings": {"http": {"idle_timeout": "x"}}},
         '$.settings.http.idle_timeout: expected number from 0 to 86400, got "x"'),
        ({"settings": {"http": {"header_read_timeout": 0}}},
         "$.settings.http.header_read_timeout: expected number > 0 and <= 86400, got 0"),
        ({"settings": {"http": {"max_body_size": -1}}},
         "$.settings.http.max_body_size: expected int >= 0, got -1"),
        ({"settings": {"http": {"server_version": "yes"}}},
         '$.settings.http.server_version: expected true or false, got "yes"'),
        ({"settings": {"http": {"log_route": True}}},
         '$.settings.http.log_route: NGINX Unit\'s "log_route" is not supported by corral'),
        ({"settings": {"http": {"static": {"mime_types": {"text/x": 1}}}}},
         "$.settings.http.static.mime_types"),
        ({"settings": {"keep_alive": 1}},
         '$.settings.keep_alive: unknown key (the document calls it "http.idle_timeout", as '
         "NGINX Unit)"),
        ({"access_log": 5}, '$.access_log: expected a path or an object {"path", "format"}, got 5'),
        ({"access_log": {"path": "x", "format": "$remote_addr $bytes_sent"}},
         "$.access_log.format: $bytes_sent: not a variable corral can write"),
        ({"access_log": {"path": "x", "format": "%(zz)s"}},
         "$.access_log.format: unknown access log token %(zz)s"),
        ({"access_log": {"path": "x", "if": "$status"}},
         '$.access_log.if: NGINX Unit\'s "if" is not supported by corral'),
        ({"upstreams": {"u": {"servers": {}}}}, "$.upstreams.u.servers: expected at least one"),
        ({"upstreams": {"u": {"servers": {"127.0.0.1:80": {"weight": "2"}}}}},
         '$.upstreams.u.servers["127.0.0.1:80"].weight: expected a number from 0 to 1000000'),
        ({"routes": None}, "$.routes: expected an array of route steps or an object of named "),
        ({"routes": [{"action": {"pass": "applications/nope"}}], "applications": {}},
         "$.routes[0].action.pass: 'applications/nope' names no application of the "),
        ({"routes": {"main": [{"action": {"proxy": "http://x"}}]}}, "$.routes.main[0].action"),
        # a route's name is spelled as a listener's address: one path spelling
        ({"routes": {"my-site": [{"action": {"proxy": "http://x"}}]}},
         '$.routes["my-site"][0].action.proxy: expected host:port with a port from 1 to 65535'),
        ({"listeners": {":80": {"pass": "routes"}}}, '$.listeners[":80"].pass: \'routes\' names '
         "no route of the configuration"),
        ({"listeners": {":80": {"pass": "routes"}}, "routes": {"a": []}},
         '$.listeners[":80"].pass: \'routes\' names no route of the configuration'),
        ({"listeners": {":80": {"pass": "routes/b"}}, "routes": {"a": []}},
         '$.listeners[":80"].pass: \'routes/b\' names no route of the configuration'),
        # Unit's listener tls: its shape here, its certificates in the store (control API)
        ({"listeners": {":80": {"pass": "applications/m", "tls": {}}}},
         '$.listeners[":80"].tls: missing required key "certificate"'),
        ({"listeners": {":80": {"pass": "applications/m", "tls": {"certificate": []}}}},
         '$.listeners[":80"].tls.certificate: expected a certificate\'s name or a list of names'),
        ({"listeners": {":80": {"pass": "applications/m", "tls": {"certificate": ["a", 2]}}}},
         '$.listeners[":80"].tls.certificate[1]: expected string, got 2'),
        ({"listeners": {":80": {"pass": "a", "tls": {"certificate": "a", "sesion": {}}}}},
         '$.listeners[":80"].tls.sesion: unknown key (did you mean "session"?)'),
        ({"listeners": {":80": {"pass": "a", "tls": {"certificate": "a",
                                                      "session": {"timeout": 0}}}}},
         '$.listeners[":80"].tls.session.timeout: expected int > 0, got 0'),
        ({"listeners": {":80": {"pass": "a", "tls": {"certificate": "a",
                                                      "session": {"cache_size": -1}}}}},
         '$.listeners[":80"].tls.session.cache_size: expected int >= 0, got -1'),
        ({"listeners": {":80": {"pass": "a", "tls": {"certificate": "a",
                                                      "session": {"tickets": "c2hvcnQ="}}}}},
         '$.listeners[":80"].tls.session: tickets: "c2hvcnQ=" is 5 bytes: a key is 48 or 80'),
        ({"listeners": {":80": {"pass": "a", "tls": {"certificate": "a",
                                                      "session": {"tickets": ["%%"]}}}}},
         '$.listeners[":80"].tls.session: tickets: "%%" is not base64'),
        ({"listeners": {":80": {"pass": "a", "tls": {"certificate": "a",
                                                      "conf_commands": {"Protocol": 1}}}}},
         '$.listeners[":80"].tls.conf_commands: expected string in every entry'),
        ({"listeners": {":80": {"pass": "applications/m", "forwarded": {"source": "unix"}}},
          "applications": {"m": {"module": "m"}}},
         '$.listeners[":80"].forwarded: needs "client_ip" or "protocol" (a header name)'),
        ({"listeners": {":80": {"pass": "applications/m", "forwarded": {"client_ip": "X"}}},
          "applications": {"m": {"module": "m"}}},
         '$.listeners[":80"].forwarded: missing required key "source"'),
        ({"listeners": {":80": {"pass": "applications/m",
                                "forwarded": {"client_ip": "X", "source": ["10.0.0.0/33"]}}},
          "applications": {"m": {"module": "m"}}},
         '$.listeners[":80"].forwarded.source[0]: '),
        ({"listeners": {":80": {"pass": "applications/m",
                                "forwarded": {"client_ip": "X Y", "source": "unix"}}},
          "applications": {"m": {"module": "m"}}},
         '$.listeners[":80"].forwarded.client_ip: expected header field name, got "X Y"'),
        ({"applications": {"main": {"module": "not a module"}}},
         '$.applications.main.module: expected dotted Python module name, got "not a module"'),
        ({"settings": {"log_level": "INFO"}}, '$.settings.log_level: expected one of "debug"'),
        ({"settings": {"timeout": "5"}}, '$.settings.timeout: expected number from 0 to 86400'),
        ({"settings": {"server_header": "a\nb"}}, "$.settings.server_header: expected printable"),
        ({"setings": {}}, '$.setings: unknown key (did you mean "settings"?)'),
        ({"listeners": {"x:y": {"pass": "applications/m"}}}, '$.listeners["x:y"]: expected'),
        ({"listeners": {":80": {"pass": "applications/m"}}},
         '$.listeners[":80"].pass: expected an application (defined: none), got'),
        ({"listeners": {":80": {}}}, '$.listeners[":80"]: missing required key "pass"'),
        ([], "$: expected an object, got []"),
        ({"applications": []}, "$.applications: expected an object, got []"),
    ],
)  # fmt: skip
def test_validate_document_errors(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_document(data)
    assert str(info.value).startswith(message)


def test_listener_pass_must_name_an_application() -> None:
    with pytest.raises(ConfigError, match=r'defined: "applications/main"\), got "applications/x"'):
        validate_document(
            {
                "listeners": {":80": {"pass": "applications/x"}},
                "applications": {"main": {"module": "m"}},
            }
        )


def test_same_address_twice_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"0\.0\.0\.0:80 is listed twice"):
        validate_document(
            {
                "listeners": {
                    ":80": {"pass": "applications/m"},
                    "0.0.0.0:80": {"pass": "applications/m"},
                },
                "applications": {"m": {"module": "m"}},
            }
        )


# -- import weight and docs -----------------------------------------------------------------------


def test_importing_config_does_not_import_the_command_line_machinery() -> None:
    code = (
        "import sys, corral.config; "
        "print(sorted(m for m in ('argparse', 'tomllib', 'json', 'difflib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_committed_settings_doc_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert committed == config_docs.render(), (
        "docs/settings.md is stale: run `python -m corral.config.docs > docs/settings.md`"
    )


def test_committed_structs_stub_is_up_to_date() -> None:
    """The stub type checkers and editors read for the document's generated structs."""
    from corral.config import stubs

    committed = (ROOT / "src" / "corral" / "config" / "_structs.pyi").read_text(encoding="utf-8")
    assert committed == stubs.stub(), (
        "src/corral/config/_structs.pyi is stale: run "
        "`python -m corral.config.stubs > src/corral/config/_structs.pyi`"
    )


def test_the_stub_names_every_field_of_the_runtime_structs() -> None:
    import msgspec

    from corral.config import document, stubs

    text = stubs.stub()
    for name in stubs.GENERATED:
        struct = getattr(document, name)
        body = text.split(f"class {name}(", 1)[1].split("\nclass ", 1)[0]
        for field in msgspec.structs.fields(struct):
            assert f"\n    {field.name}: " in body, (name, field.name)
    # a setting the document keeps elsewhere (limits.timeout) is read under its flat name
    assert "    def request_timeout(self) -> float: ..." in text
    assert "    def entry_points(self) -> tuple[EntryPoint, ...]: ..." in text


def test_docs_list_every_setting_and_flag() -> None:
    text = config_docs.render()
    for setting in SETTINGS:
        for flag in setting.flags:
            assert f"`{flag}" in text
        if setting.in_file:
            assert f"| `{setting.name}` |" in text


def test_request_timeout_must_end_before_the_master_timeout() -> None:
    """The master's timeout also watches requests: a longer request deadline is an error."""
    with pytest.raises(ConfigError) as caught:
        load(["pkg:app", "--request-timeout", "26"])  # + grace 5 >= timeout 30
    message = str(caught.value)
    assert message.startswith("$.applications.pkg.limits.timeout: limits.timeout (26s)")
    assert "timeout (30s)" in message
    assert load(["pkg:app", "--request-timeout", "24"]).applications["pkg"].request_timeout == 24
    assert load(["pkg:app", "--request-timeout", "26", "-t", "60"])
    assert load(["pkg:app", "--request-timeout", "26", "-t", "0"])  # the master's check is off


def test_unit_listener_forms_load() -> None:
    """NGINX Unit's "*:PORT" keys and its older {"application": NAME} listener form."""
    doc = config.validate_document(
        {
            "listeners": {"*:8300": {"application": "blog"}},
            "applications": {"blog": {"module": "blog.wsgi"}},
        }
    )
    assert list(doc.listeners) == ["0.0.0.0:8300"]
    assert doc.listeners["0.0.0.0:8300"].pass_ == "applications/blog"
    assert str(config.parse_bind("*:8000")) == "0.0.0.0:8000"
    with pytest.raises(ConfigError) as caught:
        config.validate_document(
            {
                "listeners": {"*:8300": {"application": "nope"}},
                "applications": {"blog": {"module": "blog.wsgi"}},
            }
        )
    assert 'got "applications/nope"' in str(caught.value)


# -- NGINX Unit's configuration files ----------------------------------------------------------

UNIT_CONFIG = Path(__file__).with_name("unit_config.json")


def test_a_real_unit_config_validates_and_prints_back_in_the_canonical_shape() -> None:
    """Several listeners (the older "application" key too), named routes, two applications,
    settings.http and an access log in Unit's format: loaded as they are."""
    result = subprocess.run(
        [sys.executable, "-m", "corral", "-c", str(UNIT_CONFIG), "--check-config"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    # its settings.http.static is kept, for its shares: nothing to warn of
    assert (result.returncode, result.stderr) == (0, "")
    printed = json.loads(result.stdout)
    given = json.loads(UNIT_CONFIG.read_text())
    assert printed["listeners"] == {
        "0.0.0.0:8300": {"pass": "routes/main"},
        "127.0.0.1:8301": {"pass": "applications/blog"},  # was {"application": "blog"}
        "[::1]:8302": given["listeners"]["[::1]:8302"],
        "unix:/tmp/unit.sock": {"pass": "routes/main"},
    }
    assert printed["routes"] == given["routes"]  # kept as given
    blog, shop = printed["applications"]["blog"], printed["applications"]["shop"]
    for name, app in (("blog", blog), ("shop", shop)):
        for key, value in given["applications"][name].items():
            assert app[key] == value, (name, key)  # every key kept, in Unit's spelling
    assert blog["processes"] == {"max": 4, "spare": 2, "idle_timeout": 20}
    assert shop["limits"] == {"timeout": 0, "requests": 0}  # defaults filled in
    assert printed["settings"]["http"] == given["settings"]["http"]
    assert printed["settings"]["timeout"] == 30  # corral's own settings beside Unit's
    assert printed["access_log"] == given["access_log"]
    doc = validate_document(printed)
    assert validate_document(given) == doc
    assert msgspec.json.decode(msgspec.json.encode(doc), type=Document) == doc
    assert document_builtins(doc) == printed  # what --check-config prints (modes in octal)
    # the runtime's names over Unit's keys
    app = doc.applications["blog"]
    assert (app.workers, app.dynamic.max, app.chdir, app.pythonpath) == (
        2,
        4,
        "/srv/blog",
        ["/srv/blog"],
    )
    assert (app.env, app.request_timeout, app.max_requests, app.threads) == (
        {"DJANGO_SETTINGS_MODULE": "blog.settings"},
        10,
        1000,
        2,
    )
    shop_app = doc.applications["shop"]
    assert (shop_app.workers, shop_app.dynamic, shop_app.pythonpath) == (
        3,
        None,
        ["/srv/shop", "/srv/lib"],
    )
    s = doc.settings
    assert (s.header_timeout, s.body_timeout, s.send_timeout, s.keep_alive) == (10, 20, 30, 60)
    assert (s.limit_request_body, s.server) == (1048576, f"corral/{__version__}")
    assert doc.access_logfile == "/tmp/access.log"
    assert doc.access_logformat == (
        '%(h)s - - [%({time_local}u)s] "%(r)s" %(s)s %(B)s "%(f)s" "%(a)s"'
    )


def test_access_log_as_a_path_and_python_type_spellings() -> None:
    for spelling in ("python", "python 3", "python3", "python 3.11", "python3.11", "python 3.6"):
        doc = validate_document(
            {"applications": {"a": {"type": spelling, "module": "m"}}, "access_log": "/x.log"}
        )
        assert doc.applications["a"].type == spelling  # kept as given
        assert (doc.access_log.path, doc.access_logfile) == ("/x.log", "/x.log")


def test_server_header_and_server_version() -> None:
    def server(*args: str) -> str:
        return load(["app", *args]).settings.server

    assert server() == "corral"
    assert server("--server-header=edge") == "edge"
    versioned = validate_document({"settings": {"http": {"server_version": True}}})
    assert versioned.settings.server == f"corral/{__version__}"
    hidden = {"settings": {"server_header": "", "http": {"server_version": True}}}
    assert validate_document(hidden).settings.server == ""


def test_unit_access_log_formats_translate_to_ours() -> None:
    from corral.observe.accesslog import FormatError, from_unit_format

    assert from_unit_format('%(h)s "%(r)s"') == '%(h)s "%(r)s"'  # no "$": ours, as is
    assert from_unit_format("$remote_addr $status 100%") == "%(h)s %(s)s 100%%"
    assert from_unit_format("${method}x $header_x_real_ip $dollar") == "%(m)sx %({x-real-ip}i)s $"
    assert from_unit_format("$request_uri $uri $host $request_time") == (
        "%({request_uri}u)s %({uri}u)s %({host}u)s %(L)s"
    )
    for bad, words in (("$bytes_sent", "$bytes_sent: not a variable"), ("a $ b", "without")):
        with pytest.raises(FormatError, match=re.escape(words)):
            from_unit_format(bad)


def test_the_default_access_log_format_compiles() -> None:
    """parse_access_format and the document's check take it as it is, without compiling it
    (a server without an access log never imports corral.observe.accesslog)."""
    from corral.config.values import DEFAULT_ACCESS_LOGFORMAT
    from corral.observe.accesslog import compile_format, from_unit_format

    assert compile_format(from_unit_format(DEFAULT_ACCESS_LOGFORMAT)) is not None
    assert load(["app"]).access_logformat == DEFAULT_ACCESS_LOGFORMAT


def test_shares_in_named_route_tables_are_served_and_said_nothing_of() -> None:
    """Shares are served (corral.actions.share): `unserved` has nothing to say of them, in
    any table."""
    share = {"action": {"share": "/srv/www$uri"}}
    doc = validate_document(
        {
            "listeners": {"127.0.0.1:8080": {"pass": "routes/main"}},
            "routes": {
                "main": [{"match": {"uri": "/app/*"}, "action": {"pass": "routes/my-site"}}],
                "my-site": [{"action": {"pass": "applications/app"}}, share, share],
            },
            "applications": {"app": {"type": "python", "module": "app"}},
        }
    )
    assert unserved(doc) == []
