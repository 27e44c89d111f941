"""`corral ctl` with several ``--socket``: one change to three real corral instances, each
with its own control socket and listener, checked over HTTP on each.

Every instance serves routed_apps' ``app_a`` (each answer starts ``app=a``); the change makes
it ``app_b``. With ``ROUTED_SLOW_START`` naming a file that holds a number of seconds, a new
worker's import sleeps that long, and the API answers a change only once the new worker
serves: so whether `corral ctl` asked the instances at once or one after the other shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.integration.control import ROOT, Control, ctl, listening_port, short_dir
from tests.integration.server import Server, wait_for
from tests.integration.supervision import get

DONE = {"success": "Reconfiguration done."}
DOCUMENT = {
    "listeners": {"127.0.0.1:0": {"pass": "applications/routed"}},
    "applications": {"routed": {"module": "routed_apps", "callable": "app_a"}},
}
CALLABLE = "/config/applications/routed/callable"


@dataclass
class Instance:
    server: Server
    address: str  # its control socket, as `corral ctl --socket` takes it


@dataclass
class Fleet:
    instances: list[Instance]
    directory: Path  # short: unix socket paths fit
    slow_start: Path  # write a number of seconds here to make new workers that slow to start

    @property
    def addresses(self) -> list[str]:
        return [instance.address for instance in self.instances]


@contextmanager
def fleet(count: int = 3) -> Iterator[Fleet]:
    """``count`` corral instances, each started empty with its own state directory (so its
    own control socket), then given DOCUMENT through its API: a listener on an ephemeral
    loopback port, whose real port each server then knows."""
    with short_dir() as directory, ExitStack() as stack:
        slow_start = directory / "slow"
        instances = []
        for index in range(count):
            server = stack.enter_context(
                Server(
                    f"--state-dir={directory / str(index)}",
                    bind=None,
                    wait_ready=False,
                    env={"ROUTED_SLOW_START": str(slow_start)},
                )
            )
            server.wait_log("no application configured: waiting for the control API")
            control = Control.of(server)
            answer = control.put("/config", DOCUMENT)
            assert answer.status == 200, answer.raw
            server.port = listening_port(server, "127.0.0.1:0")
            instances.append(Instance(server, control.address))
        yield Fleet(instances, directory, slow_start)
        for instance in instances:
            assert instance.server.stop() == 0


def serving(instance: Instance) -> str:
    """Which application answers ``GET /`` on the instance's listener: ``a`` or ``b``."""
    status, _, body = get(instance.server, "/")
    assert status == 200, body
    return body.decode().split()[0].removeprefix("app=")


@contextmanager
def ctl_running(*args: str) -> Iterator[subprocess.Popen[str]]:
    """``corral ctl ARGS`` started, to watch the instances while it runs."""
    with subprocess.Popen(
        [sys.executable, "-m", "corral", "ctl", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    ) as running:
        try:
            yield running
        finally:
            if running.poll() is None:
                running.kill()


def sockets(*addresses: str) -> list[str]:
    return [argument for address in addresses for argument in ("--socket", address)]


def test_a_change_goes_to_every_instance_and_each_serves_it():
    with fleet() as three:
        assert [serving(instance) for instance in three.instances] == ["a", "a", "a"]
        # the value from standard input: read once, the same bytes sent to each instance
        done = ctl(*sockets(*three.addresses), "put", CALLABLE, "-", stdin='"app_b"')
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        assert [serving(instance) for instance in three.instances] == ["b", "b", "b"]
        outcomes = json.loads(done.stdout)
        assert list(outcomes) == three.addresses  # in the order the sockets were given
        assert outcomes == {address: {"status": 200, "answer": DONE} for address in three.addresses}
        assert done.stdout.startswith(f'{{\n    "{three.addresses[0]}": {{\n        "status"')

        # get, of several: each instance's own value
        read = ctl(*sockets(*reversed(three.addresses)), "get", CALLABLE)
        assert (read.returncode, read.stderr) == (0, "")
        assert list(json.loads(read.stdout).items()) == [
            (address, {"status": 200, "answer": "app_b"}) for address in reversed(three.addresses)
        ]

        # an error answer from every instance: each a line on stderr, with its address
        missing = ctl(*sockets(*three.addresses[:2]), "get", "/config/nope")
        assert missing.returncode == 1
        error = "Value doesn't exist. /config/nope does not exist"
        assert json.loads(missing.stdout) == {
            address: {"status": 404, "error": error} for address in three.addresses[:2]
        }
        assert missing.stderr.splitlines() == [
            f"corral ctl: {address}: error 404: {error}" for address in three.addresses[:2]
        ]


def test_an_instance_out_of_reach_fails_alone_and_the_others_change():
    with fleet() as three:
        first, _, third = three.instances
        nowhere = f"unix:{three.directory}/nothing-listens.sock"
        addresses = [first.address, nowhere, third.address]
        done = ctl(*sockets(*addresses), "put", CALLABLE, '"app_b"')
        assert done.returncode == 1, done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith(
            f"corral ctl: {nowhere}: error: cannot reach the control API at {nowhere}: "
            "No such file or directory; "
        ), line
        outcomes = json.loads(done.stdout)
        assert list(outcomes) == addresses
        assert outcomes[first.address] == outcomes[third.address] == {"status": 200, "answer": DONE}
        assert outcomes[nowhere]["status"] is None
        assert line.endswith(outcomes[nowhere]["error"])
        assert [serving(first), serving(three.instances[1]), serving(third)] == ["b", "a", "b"]


def test_one_at_a_time_stops_at_the_first_failure_and_leaves_the_rest_as_they_were():
    with fleet() as three:
        first, _, third = three.instances
        nowhere = f"unix:{three.directory}/nothing-listens.sock"
        addresses = [first.address, nowhere, third.address]
        done = ctl(*sockets(*addresses), "--one-at-a-time", "put", CALLABLE, '"app_b"')
        assert done.returncode == 1
        assert len(done.stderr.splitlines()) == 1  # the failure; the skipped one did not fail
        assert done.stderr.startswith(f"corral ctl: {nowhere}: error: cannot reach"), done.stderr
        outcomes = json.loads(done.stdout)
        assert list(outcomes) == addresses
        assert outcomes[first.address] == {"status": 200, "answer": DONE}
        assert outcomes[nowhere]["status"] is None
        assert outcomes[third.address] == {"skipped": f"not tried: {nowhere} failed before it"}
        assert serving(first) == "b"
        assert serving(third) == "a"  # really not asked
        assert f"control API: PUT {CALLABLE}" not in third.server.stderr


def test_at_once_by_default_one_after_the_other_when_asked():
    """Each instance's change takes ``delay`` seconds (its new worker's import). One at a time,
    the three take at least three times that. At once, every instance has the request before
    any answers it (each logs ``reconfiguring`` when a change arrives, and its
    ``control API: PUT ...: 200`` line just before it answers)."""
    delay = 2.0
    with fleet() as three:
        three.slow_start.write_text(str(delay))
        started = time.monotonic()
        one_by_one = ctl(*sockets(*three.addresses), "--one-at-a-time", "put", CALLABLE, '"app_b"')
        took = time.monotonic() - started
        assert one_by_one.returncode == 0, one_by_one.stderr
        assert took >= 3 * delay, took
        assert [serving(instance) for instance in three.instances] == ["b", "b", "b"]

        arrived, answered = f"reconfiguring (PUT {CALLABLE})", f"control API: PUT {CALLABLE}: 200"
        servers = [instance.server for instance in three.instances]
        assert [server.stderr.count(answered) for server in servers] == [1, 1, 1]
        with ctl_running(*sockets(*three.addresses), "put", CALLABLE, '"app_a"') as at_once:
            wait_for(lambda: all(server.stderr.count(arrived) == 2 for server in servers), 30)
            assert [server.stderr.count(answered) for server in servers] == [1, 1, 1]
            out, err = at_once.communicate(timeout=60)
        assert at_once.returncode == 0, err
        assert json.loads(out) == {
            address: {"status": 200, "answer": DONE} for address in three.addresses
        }
        assert [serving(instance) for instance in three.instances] == ["a", "a", "a"]


def test_what_several_sockets_cannot_do_is_a_usage_error():
    """top and stacks read one instance; an address given twice would hide one outcome; a
    wrong address among several is refused before any instance is asked."""
    with short_dir() as directory:
        one, two = f"unix:{directory}/a.sock", f"unix:{directory}/b.sock"
        for args, line in [
            (("top", "--once"), "top reads one instance: give one --socket, not 2"),
            (("stacks",), "stacks reads one instance: give one --socket, not 2"),
        ]:
            refused = ctl(*sockets(one, two), *args)
            assert refused.returncode == 2, refused.stderr
            assert (refused.stdout, refused.stderr) == ("", f"corral ctl: error: {line}\n")
        twice = ctl(*sockets(one, two, one), "get", "/config")
        assert (twice.returncode, twice.stderr) == (
            2,
            f"corral ctl: error: --socket {one}: given twice\n",
        )
        wrong = ctl(*sockets(one, "x:y"), "get", "/config")
        assert wrong.returncode == 2
        assert (
            wrong.stderr
            == "corral ctl: error: --socket x:y: expected unix:PATH, a path, or HOST:PORT\n"
        )
        # one socket: as before, --one-at-a-time changes nothing
        alone = ctl("--socket", one, "--one-at-a-time", "get", "/config")
        assert alone.returncode == 1 and alone.stdout == ""
        assert alone.stderr.startswith(f"corral ctl: error: cannot reach the control API at {one}")
