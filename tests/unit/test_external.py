"""The pieces of external applications that need no process of their own: which keys each
type takes, the listen mode, the substitutions, the environment, the workers' board."""

from __future__ import annotations

import os
from typing import Any

import msgspec
import pytest

from corral.config import ConfigError, validate_document
from corral.config.app_types import listen_mode
from corral.external.board import Board
from corral.external.kinds import Place, external_command, substitute
from corral.external.spawn import environment


def app(**keys: Any) -> Any:
    doc = validate_document({"applications": {"x": {"type": "external", **keys}}})
    return doc.applications["x"]


@pytest.mark.parametrize(
    ("keys", "mode"),
    [
        ({"arguments": ["serve"]}, "fd"),
        ({"arguments": ["--port={port}"]}, "port"),
        ({"arguments": ["--bind", "unix:{socket}"]}, "unix"),
        ({"arguments": ["serve"], "listen": "port"}, "port"),
    ],
)
def test_the_listen_mode_is_said_or_follows_the_arguments(keys: dict[str, Any], mode: str):
    assert listen_mode(app(executable="prog", **keys)) == mode


def test_the_document_round_trips_with_an_external_application():
    doc = validate_document(
        {"applications": {"x": {"type": "external", "executable": "prog", "processes": 2}}}
    )
    assert validate_document(msgspec.to_builtins(doc)) == doc


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"type": "external"}, '$.applications.x: missing required key "executable"'),
        ({"type": "external", "executable": "p", "threads": 2}, "$.applications.x.threads: not"),
        ({"module": "m", "arguments": ["a"]}, '$.applications.x.arguments: only for "type"'),
        ({"module": "m", "listen": "fd"}, '$.applications.x.listen: only for "type"'),
        (
            {"type": "external", "executable": "p", "arguments": ["{socket}"], "listen": "port"},
            '$.applications.x.arguments[0]: {socket} is not given with "listen": "port"',
        ),
    ],
)
def test_each_type_takes_its_own_keys(keys: dict[str, Any], message: str):
    with pytest.raises(ConfigError) as caught:
        validate_document({"applications": {"x": keys}})
    assert str(caught.value).startswith(message)


def test_the_command_substitutes_the_place():
    port = Place("port", "127.0.0.1:8123", port=8123)
    command = external_command("x", app(executable="prog", arguments=["-p", "{port}"]), port)
    assert command.argv == ("prog", "-p", "8123")
    unix = Place("unix", "unix:/run/x.sock", path="/run/x.sock")
    assert substitute("unix:{socket}", unix) == "unix:/run/x.sock"
    assert substitute("{port}", unix) == "{port}"  # not given in this mode: left as written


def test_the_environment_hands_the_socket_over_by_mode(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LISTEN_FDS", "7")  # corral's own activation is not the program's
    command = external_command("x", app(executable="p", environment={"A": "1"}), Place("fd", ""))
    env = environment("web", command, Place("fd", "127.0.0.1:1", port=1))
    assert (env["A"], env["LISTEN_FDS"], env["LISTEN_FDNAMES"]) == ("1", "1", "web")
    assert "LISTEN_PID" not in env and "PORT" not in env  # the pid is the child's, set there
    env = environment("web", command, Place("port", "127.0.0.1:8123", port=8123))
    assert env["PORT"] == "8123" and "LISTEN_FDS" not in env


def test_the_board_is_read_by_a_process_forked_before_it_was_written():
    board = Board()
    assert board.ready("web") == []
    read, write = os.pipe()
    go_read, go_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.read(go_read, 1)
        found = board.ready("web"), board.next_address("web"), board.next_address("web")
        os.write(write, repr(found).encode())
        os._exit(0)
    board.publish({"web": ["127.0.0.1:1", "unix:/x"]})
    os.write(go_write, b"x")
    assert os.read(read, 1000).decode() == "(['127.0.0.1:1', 'unix:/x'], '127.0.0.1:1', 'unix:/x')"
    assert os.waitpid(pid, 0)[1] == 0
    board.publish({"web": []})
    assert board.next_address("web") is None


def test_a_kind_may_run_another_number_of_processes_than_the_applications():
    from corral.external.kinds import KINDS
    from corral.external.supervisor import ExternalPool

    external = KINDS["external"]
    application = app(executable="prog", processes={"max": 3, "spare": 1})
    assert ExternalPool("x", application, external).count == 3  # the object form: its max
    one = external._replace(processes=lambda app: 1)
    assert ExternalPool("x", application, one).count == 1
