"""corral.control.options and .state: when the API is on, where, and the saved document;
the command line's empty start (no APP, no config file)."""

import json
import os
import stat
import subprocess
import sys

import pytest

from corral.config import ConfigError, load, validate_document
from corral.control import options, state


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corral", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )


# -- options ---------------------------------------------------------------------------------


def test_the_api_is_off_unless_asked_for():
    assert options.resolve(None, None, None, names_an_application=True) is None
    assert options.resolve(None, None, None, names_an_application=False) is None


def test_state_dir_alone_puts_the_socket_in_it(tmp_path):
    found = options.resolve(None, None, str(tmp_path / "state"), names_an_application=False)
    assert found is not None
    assert str(found.address) == f"unix:{tmp_path}/state/control.sock"
    assert found.state_file == f"{tmp_path}/state/conf.json"
    assert found.owns_config and found.token is None


def test_relative_paths_are_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = options.resolve("unix:api.sock", None, "state", names_an_application=True)
    assert found is not None
    assert str(found.address) == f"unix:{tmp_path}/api.sock"
    assert found.state_dir == f"{tmp_path}/state"
    assert not found.owns_config  # an APP on the command line keeps it the source


def test_default_state_dir(monkeypatch):
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    expected = "/var/lib/corral" if os.geteuid() == 0 else "/home/someone/.local/state/corral"
    assert options.default_state_dir() == expected


@pytest.mark.parametrize(
    ("given", "address"),
    [
        ("127.0.0.1:9000", "127.0.0.1:9000"),
        (":9000", "127.0.0.1:9000"),  # loopback unless a host says otherwise
        ("9000", "127.0.0.1:9000"),
        ("0.0.0.0:9000", "0.0.0.0:9000"),
        ("[::1]:9000", "[::1]:9000"),
    ],
)
def test_tcp_addresses(given, address):
    found = options.resolve(given, "secret", None, names_an_application=True)
    assert found is not None and str(found.address) == address


def test_tcp_needs_a_token():
    with pytest.raises(ConfigError) as caught:
        options.resolve("127.0.0.1:9000", None, None, names_an_application=True)
    assert "--control-token" in str(caught.value)
    assert "\n" not in str(caught.value)


# -- state -----------------------------------------------------------------------------------


def test_make_state_dir_is_private(tmp_path):
    path = tmp_path / "a" / "state"
    state.make_state_dir(str(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    state.make_state_dir(str(path))  # again: nothing to do
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="cannot create it"):
        state.make_state_dir(str(tmp_path / "file" / "x"))


def test_save_and_load(tmp_path):
    path = str(tmp_path / "conf.json")
    assert state.load(path) is None
    doc = load(["blog:app", "-w", "3", "-b", "127.0.0.1:8123"])
    state.save(path, doc)
    assert state.load(path) == doc
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(tmp_path) == ["conf.json"]  # no temporary file left
    smaller = validate_document({})
    state.save(path, smaller)
    assert state.load(path) == smaller


def test_load_refuses_a_broken_file(tmp_path):
    path = tmp_path / "conf.json"
    path.write_text('{"applications": {"a": {"module": "a", "processes": {"max": 0}}}}')
    with pytest.raises(ConfigError) as caught:
        state.load(str(path))
    assert str(caught.value) == f"{path}: $.applications.a.processes.max: expected int >= 1, got 0"
    path.write_text("{")
    with pytest.raises(ConfigError, match="invalid JSON"):
        state.load(str(path))


# -- the command line ------------------------------------------------------------------------


def test_empty_start_with_server_settings(tmp_path):
    result = run("--state-dir", str(tmp_path), "--keep-alive", "9", "--check-config")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["listeners"], doc["applications"]) == ({}, {})
    assert doc["settings"]["http"]["idle_timeout"] == 9


def test_saved_configuration_with_flags_over_it(tmp_path):
    saved = load(["blog:app", "-w", "3", "--keep-alive", "2", "--timeout", "50"])
    state.save(str(tmp_path / "conf.json"), saved)
    result = run("--state-dir", str(tmp_path), "--keep-alive", "7", "--check-config")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["applications"]["blog"]["processes"] == 3
    assert (doc["settings"]["http"]["idle_timeout"], doc["settings"]["timeout"]) == (7, 50)


def test_an_app_given_ignores_the_saved_configuration(tmp_path):
    state.save(str(tmp_path / "conf.json"), load(["blog:app", "-w", "3"]))
    result = run("shop:app", "--state-dir", str(tmp_path), "--check-config")
    assert result.returncode == 0, result.stderr
    assert list(json.loads(result.stdout)["applications"]) == ["shop"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("-w", "3"), "corral: error: --workers: needs an APP; "),
        (("-b", ":9000"), "corral: error: --bind: needs an APP; "),
        (("--control", "127.0.0.1:0"), "corral: error: --control 127.0.0.1:0: a TCP control"),
        (("--control", "unix:"), "corral: error: --control: expected unix:PATH"),
    ],
)
def test_command_line_errors(tmp_path, args, line):
    result = run("--state-dir", str(tmp_path), *args)
    assert result.returncode == 2
    assert result.stderr.startswith(line), result.stderr
    assert result.stderr.count("\n") == 1


def test_a_broken_saved_file_is_one_line(tmp_path):
    (tmp_path / "conf.json").write_text("[1, 2]")
    result = run("--state-dir", str(tmp_path))
    assert result.returncode == 2
    assert (
        result.stderr == f"corral: error: {tmp_path}/conf.json: $: expected an object, got [1,2]\n"
    )


def test_without_anything_the_app_is_still_missing():
    result = run()
    assert result.returncode == 2
    assert result.stderr.startswith("corral: error: missing APP")
    assert "--state-dir" in result.stderr
