"""NGINX Unit's perl, ruby, java, go and nodejs applications without a process of their own:
the keys each type takes and the one line its mistakes get, the commands that run them
(Starman, Puma, Jetty), what corral warns it does not apply."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from corral.config import ConfigError, validate_document
from corral.config.app_types import runs_in_workers
from corral.config.unserved import unserved
from corral.external.kinds import KINDS, Place, kind_of
from corral.external.languages import jetty_command, puma_command, starman_command


def document(**keys: Any) -> Any:
    return validate_document({"applications": {"x": keys}})


def app(**keys: Any) -> Any:
    return document(**keys).applications["x"]


@pytest.mark.parametrize(
    "keys",
    [
        {"type": "perl", "script": "app.psgi", "threads": 2, "thread_stack_size": 65536},
        {"type": "perl", "script": "../shared/app.psgi"},  # any path, not one under a root
        {"type": "ruby 3.1", "script": "config.ru", "hooks": "hooks.rb", "processes": 2},
        {
            "type": "java",
            "webapp": "app.war",
            "classpath": ["lib/a.jar"],
            "options": ["-Xmx64m"],
            "unit_jars": "/usr/lib/unit",
        },
        {"type": "go", "executable": "./server"},
        {"type": "nodejs", "executable": "node", "arguments": ["app.js"]},
    ],
)
def test_unit_keys_are_taken_and_the_document_round_trips(keys: dict[str, Any]) -> None:
    doc = document(**keys)
    assert validate_document(msgspec.to_builtins(doc)) == doc
    application = doc.applications["x"]
    assert not runs_in_workers(application)  # a supervised pool runs it
    assert kind_of(application) is KINDS[keys["type"].split()[0]]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"type": "perl"}, '$.applications.x: missing required key "script" (the PSGI file)'),
        ({"type": "ruby"}, '$.applications.x: missing required key "script" (the rack file'),
        ({"type": "java"}, '$.applications.x: missing required key "webapp" (the web appl'),
        ({"type": "go"}, '$.applications.x: missing required key "executable"'),
        (
            {"type": "perl", "script": "a.psgi", "hooks": "h.rb"},
            '$.applications.x.hooks: not for a "perl" application (a key of "ruby" applications;',
        ),
        (
            {"type": "ruby", "script": "config.ru", "module": "m"},
            '$.applications.x.module: not for a "ruby" application (a key of Python applications',
        ),
        (
            {"type": "java", "webapp": "a.war", "root": "/srv"},
            '$.applications.x.root: not for a "java" application (a key of "php" applications',
        ),
        (
            {"type": "java", "webapp": "a.war", "options": {"file": "php.ini"}},
            "$.applications.x.options: expected a list of JVM options (strings), got an object",
        ),
        ({"type": "java", "webapp": "a.war", "options": [1]}, "$.applications.x.options[0]: "),
        ({"type": "java", "webapp": "a.war", "classpath": "a.jar"}, "$.applications.x.classpath"),
        (
            {"type": "php", "root": "/srv", "options": ["-Xmx1g"]},
            '$.applications.x.options: a list of JVM options is for "java" applications',
        ),
        (
            {"module": "m", "webapp": "a.war"},
            """$.applications.x.webapp: a key of "java" applications (this one is 'python')""",
        ),
        (
            {"type": "external", "executable": "p", "hooks": "h.rb"},
            '$.applications.x.hooks: a key of "ruby" applications',
        ),
        ({"type": "ruby", "script": "config.ru", "threads": 0}, "$.applications.x.threads: "),
        ({"type": "perl 5.x", "script": "a.psgi"}, "$.applications.x.type: expected"),
        (
            {"type": "php", "root": "/srv", "script": "../up.php"},
            '$.applications.x.script: expected a path under root, got "../up.php"',
        ),
        (
            {"module": "m", "health_path": "/up"},
            "$.applications.x.health_path: only for applications corral supervises (",
        ),
    ],
)
def test_a_mistake_is_one_line_with_its_path(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        document(**keys)
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


FD = Place("fd", "127.0.0.1:8123", port=8123)


def test_starman_runs_the_psgi_file_with_the_processes_as_its_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("corral.external.languages.run_directory", lambda: str(tmp_path))
    perl = app(type="perl", script="app.psgi", processes=3, working_directory="/srv/app")
    command = starman_command("x", perl, FD)
    module = ("-I", f"{tmp_path}/perl", "-MCorralStarmanWorkers")  # its workers' death signal
    assert (tmp_path / "perl" / "CorralStarmanWorkers.pm").exists()
    # a connection per request: corral's proxy keeps more connections than Starman has workers
    argv = ("starman", *module, "--workers", "3", "--disable-keepalive", "app.psgi")
    assert command.argv == argv
    assert command.env["SERVER_STARTER_PORT"] == "127.0.0.1:8123=3"  # descriptor 3
    assert command.cwd == "/srv/app"
    assert KINDS["perl"].processes is not None and KINDS["perl"].processes(perl) == 1
    recycled = app(type="perl", script="app.psgi", limits={"requests": 100})
    assert starman_command("x", recycled, FD).argv[7:] == ("--max-requests", "100", "app.psgi")


def test_puma_binds_the_address_of_the_socket_it_is_handed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("corral.external.languages.run_directory", lambda: str(tmp_path))
    ruby = app(type="ruby", script="config.ru", threads=4, environment={"RACK_ENV": "x"})
    command = puma_command("x", ruby, FD)
    settings = tmp_path / "puma-settings.rb"
    assert command.argv == (
        "puma",
        "--bind",
        "tcp://127.0.0.1:8123",
        "--threads",
        "4:4",
        "--config",
        str(settings),
        "config.ru",
    )
    # no thread waits on a kept connection for its next request while others have one
    assert "max_fast_inline 0" in settings.read_text().splitlines()
    assert command.env == {"RACK_ENV": "x"}
    assert KINDS["ruby"].listen(ruby) == "fd" and KINDS["ruby"].processes is None


def test_unit_hooks_are_a_puma_configuration_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("corral.external.languages.run_directory", lambda: str(tmp_path))
    ruby = app(type="ruby", script="config.ru", hooks="my#{hooks}.rb", working_directory="/srv")
    argv = puma_command("shop", ruby, FD).argv
    assert argv[argv.index("--config") + 1] == str(tmp_path / "puma-settings.rb")
    config = Path(argv[len(argv) - 1 - argv[::-1].index("--config") + 1])  # the last --config
    assert config.parent == tmp_path and config.name.startswith("shop.puma.")
    text = config.read_text()
    # the paths as Ruby strings, "#{" not interpolated
    assert 'hooks_file, rack_file = "/srv/my\\#{hooks}.rb", "/srv/config.ru"' in text
    assert "Unit.module_eval(File.read(hooks_file), hooks_file, 1)" in text


def test_jetty_deploys_the_webapp_at_the_root_with_the_classpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("corral.external.languages.run_directory", lambda: str(tmp_path))
    java = app(
        type="java",
        webapp="app.war",
        classpath=["lib/a.jar", "/opt/b.jar"],
        options=["-Dk=v"],
        thread_stack_size=1048576,
        working_directory=str(tmp_path),
    )
    place = Place("port", "127.0.0.1:8124", port=8124)
    assert KINDS["java"].listen(java) == "port"
    argv = jetty_command("shop", java, place).argv
    assert argv[:4] == ("java", "-Dk=v", "-Xss1048576", "-jar")
    assert argv[-2:] == ("jetty.http.host=127.0.0.1", "jetty.http.port=8124")
    assert f"jetty.base={tmp_path}/shop.jetty.8124" in argv
    base = tmp_path / "shop.jetty.8124"
    context = (base / "webapps" / "root.xml").read_text()
    assert '<Set name="contextPath">/</Set>' in context
    assert f'<Set name="war">{tmp_path}/app.war</Set>' in context
    assert f'<Set name="extraClasspath">{tmp_path}/lib/a.jar,/opt/b.jar</Set>' in context


def test_what_a_server_does_not_apply_is_warned() -> None:
    doc = validate_document(
        {
            "applications": {
                "p": {"type": "perl", "script": "a.psgi", "threads": 4},
                "r": {"type": "ruby 3.1", "script": "c.ru", "hooks": "h.rb"},
                "j": {"type": "java", "webapp": "a.war", "limits": {"requests": 9}},
            }
        }
    )
    lines = unserved(doc)
    assert any(line.startswith("$.applications.p.threads: not applied") for line in lines)
    assert any(line.startswith("$.applications.r.type: 'ruby 3.1'") for line in lines)
    assert any(line.startswith("$.applications.j.limits.requests:") for line in lines)
    assert len(lines) == 3, lines  # hooks are applied


@pytest.mark.parametrize(
    "app_type",
    [
        "python",
        "python 3.11",
        "python3.11",
        "external",
        "go",
        "nodejs",
        "php",
        "php 8.2",
        "perl",
        "ruby",
        "ruby 3.1",
        "java",
    ],
)
def test_a_program_kind_runs_exactly_what_corral_s_workers_do_not(app_type: str) -> None:
    """`runs_in_workers` alone says which applications a supervised program runs (the master
    asks it without importing the kinds): `kind_of` has a kind for exactly those."""
    app = SimpleNamespace(type=app_type)
    assert (kind_of(app) is None) == runs_in_workers(app)
