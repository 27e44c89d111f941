"""Several Python interpreters in one server: an application whose `home` virtualenv was made by
another Python than the master's runs on that Python, its workers spawned (the exec of the
virtualenv's ``bin/python``), not forked (corral.interpreter).

Two interpreters of this machine other than the one running the tests (pyenv's 3.12 and 3.13
here, beside the master's 3.11) each get a real virtualenv with this checkout's corral
installed in it (its pure-Python core: no compiler run per test session). One server runs
three applications behind one listener's routes: one on each of those Pythons and one on the
master's own; the answers say which interpreter, which corral and which parent served them.
The workers' PYTHONPATH holds the test applications only: corral is the virtualenv's own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from corral import __version__
from tests.integration.control import Control, listening_port, short_dir
from tests.integration.server import (
    APPS,
    Server,
    http_get,
    http_json,
    read_all,
    run_cli,
    wait_for,
)
from tests.integration.test_applications import At
from tests.integration.venvs import make_sandbox, make_venv

MASTER = sys.version_info[:2]
OLDEST = (3, 11)  # corral's requires-python
LISTENER = "127.0.0.1:0"


def _version_of(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out[0]), int(out[1])


def other_pythons() -> dict[tuple[int, int], str]:
    """An interpreter for each Python 3.11+ this machine has that is not the master's minor:
    pyenv's versions (``pyenv root``, else ~/.pyenv), then /usr/bin's."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = sorted(root.glob("versions/3.*/bin/python3")) + sorted(
        Path("/usr/bin").glob("python3.[0-9]*")
    )
    found: dict[tuple[int, int], str] = {}
    for path in candidates:
        if not re.fullmatch(r"python3(\.\d+)?", path.name) or not os.access(path, os.X_OK):
            continue
        version = _version_of(str(path))
        if version is not None and version >= OLDEST and version != MASTER:
            found.setdefault(version, str(path))
    return found


@dataclass
class Interpreter:
    version: tuple[int, int]
    base: str  # the interpreter the virtualenv was made from
    home: Path  # the virtualenv, with corral installed
    site: Path  # where its corral is

    @property
    def python(self) -> str:
        return str(self.home / "bin" / "python")


@pytest.fixture(scope="module")
def interpreters(tmp_path_factory) -> list[Interpreter]:
    found = other_pythons()
    if len(found) < 2:
        have = ", ".join(f"{v[0]}.{v[1]} ({p})" for v, p in found.items()) or "none"
        pytest.skip(
            f"needs two Pythons 3.11+ other than the master's {MASTER[0]}.{MASTER[1]} "
            f"(pyenv's or /usr/bin's); found: {have}"
        )
    chosen = sorted(found.items())[-2:]  # the newest two
    roots = [tmp_path_factory.mktemp(f"py{v[0]}{v[1]}") for v, _ in chosen]
    with ThreadPoolExecutor(2) as pool:  # two pip installs at once: mostly waiting
        boxes = list(
            pool.map(
                lambda job: make_sandbox(job[0], [], base=job[1], compiled=False),
                [(root, base) for root, (_, base) in zip(roots, chosen, strict=True)],
            )
        )
    return [
        Interpreter(version, base, Path(box.python).parent.parent, box.site)
        for (version, base), box in zip(chosen, boxes, strict=True)
    ]


def application(name: str, home: Path | None, processes: int = 1) -> dict[str, Any]:
    app: dict[str, Any] = {
        "type": "python",
        "module": "interp_app",
        "processes": processes,
        "environment": {"INTERP_APP": name},
    }
    if home is not None:
        app["home"] = str(home)
    return app


def document(interpreters: list[Interpreter], settings: dict[str, Any] | None = None) -> dict:
    one, two = interpreters
    return {
        "listeners": {LISTENER: {"pass": "routes"}},
        "routes": [
            {"match": {"uri": "/one/*"}, "action": {"pass": "applications/one"}},
            {"match": {"uri": "/two/*"}, "action": {"pass": "applications/two"}},
            {"action": {"pass": "applications/own"}},
        ],
        "applications": {
            "one": application("one", one.home, processes=2),
            "two": application("two", two.home),
            "own": application("own", None),
        },
        "settings": settings or {},
    }


class Running:
    """``corral -c DIR/unit.json`` with the control API, every worker ready."""

    def __init__(self, directory: Path, doc: dict[str, Any]) -> None:
        config = directory / "unit.json"
        config.write_text(json.dumps(doc))
        self.server = Server(
            f"--config={config}",
            f"--control=unix:{directory}/control.sock",
            bind=None,
            wait_ready=False,
            env={"PYTHONPATH": str(APPS)},  # corral itself: each interpreter's own
        )
        workers = sum(
            app["processes"] for app in doc["applications"].values() if app["type"] == "python"
        )
        try:
            self.server.wait_log(r"worker \d+ (?:of \w+ )?ready", count=workers, timeout=45)
        except AssertionError:
            self.server.__exit__()
            raise AssertionError(f"not ready:\n{self.server.stderr}") from None
        except BaseException:  # (a test's timeout, an interrupt): leave no server behind
            self.server.__exit__()
            raise
        self.control = Control(f"unix:{directory}/control.sock")
        self.at = At("127.0.0.1", listening_port(self.server, LISTENER))

    def get(self, path: str) -> dict[str, Any]:
        return http_json(self.at, path)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)  # (its whole process group, workers included)


@pytest.fixture
def running(interpreters) -> Iterator[Running]:
    with short_dir() as directory, Running(directory, document(interpreters, {"timeout": 2})) as r:
        yield r


def exe(pid: int) -> str:
    return os.path.realpath(f"/proc/{pid}/exe")


def assert_served_by(answer: dict[str, Any], app: str, interp: Interpreter, master: int) -> None:
    assert answer["app"] == app, answer
    assert tuple(answer["version"]) == interp.version, answer
    assert answer["executable"] == interp.python, answer
    assert answer["prefix"] == str(interp.home), answer
    assert Path(answer["corral"]).is_relative_to(interp.site), answer  # the virtualenv's corral
    assert answer["ppid"] == master, answer  # a worker of the master, not of another process
    assert exe(answer["pid"]) == os.path.realpath(interp.base), answer


def test_each_application_runs_on_the_python_its_virtualenv_was_made_by(interpreters, running):
    one, two = interpreters
    master = running.server.proc.pid
    pids: dict[str, set[int]] = {"one": set(), "two": set(), "own": set()}
    for _ in range(6):  # new connections: any worker may accept, then hand the request over
        for app, path, interp in (("one", "/one/a", one), ("two", "/two/b", two)):
            answer = running.get(path)
            assert_served_by(answer, app, interp, master)
            pids[app].add(answer["pid"])
        own = running.get("/")
        assert own["app"] == "own" and tuple(own["version"]) == MASTER, own
        assert own["ppid"] == master and exe(own["pid"]) == os.path.realpath(sys.executable)
        pids["own"].add(own["pid"])

    def counted() -> dict[str, Any] | None:  # the heartbeats' counts: at most a second old
        found = running.control.get("/status").json["applications"]
        return found if all(found[app]["requests"]["total"] == 6 for app in pids) else None

    status = wait_for(counted, timeout=5)
    for app, count in (("one", 2), ("two", 1), ("own", 1)):
        assert status[app]["processes"]["running"] == count, status
        assert pids[app] <= {w["pid"] for w in status[app]["workers"]}, status
    assert "Traceback" not in running.server.stderr
    assert running.server.stop() == 0


def test_a_spawned_worker_is_restarted_reloaded_and_stopped_as_a_forked_one(interpreters, running):
    one, two = interpreters
    server = running.server
    master = server.proc.pid
    killed = running.get("/two/x")["pid"]
    os.kill(killed, signal.SIGKILL)
    server.wait_log(rf"\(pid {killed}\) died: signal SIGKILL", timeout=10)
    fresh = wait_for(lambda: _other_worker(running, "/two/x", killed), timeout=20)
    assert_served_by(fresh, "two", two, master)
    # HUP: the configuration read again, every worker replaced by a new generation's
    before = {running.get("/one/y")["pid"] for _ in range(4)}
    server.send(signal.SIGHUP)
    server.wait_log(r"worker \d+ of one ready \(pid \d+, generation 2\)", count=2, timeout=60)
    server.wait_log(r"worker \d+ of two ready \(pid \d+, generation 2\)", timeout=60)
    wait_for(lambda: all(_zombie(pid) for pid in before), timeout=30)  # the old ones retired
    after = running.get("/one/y")
    assert after["pid"] not in before, server.stderr
    assert_served_by(after, "one", one, master)
    workers = server.worker_pids()
    assert server.stop() == 0
    assert all(_zombie(pid) for pid in workers)  # none left behind
    assert "Traceback" not in server.stderr


def _other_worker(running: Running, path: str, gone: int) -> dict[str, Any] | None:
    try:
        answer = running.get(path)
    except OSError:
        return None
    return answer if answer["pid"] != gone else None


def _zombie(pid: int) -> bool:
    """Whether the process ``pid`` is gone (or exited, not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (FileNotFoundError, IndexError):
        return True


def test_a_spawned_worker_whose_loop_is_blocked_is_killed_after_the_timeout(interpreters, running):
    one, _ = interpreters
    server = running.server
    with socket.create_connection((running.at.host, running.at.port), timeout=30) as client:
        client.sendall(b"GET /one/sleep?s=30 HTTP/1.1\r\nHost: t\r\n\r\n")
        line = server.wait_log(
            r"worker \d+ \(pid (\d+)\) timed out: [^\n]*, serving GET /one/sleep\?s=30 "
            r"for [\d.]+s; killing it",
            timeout=15,
        )
        assert read_all(client) == b""  # cut: no answer passed off as one
    pid = int(line[0])
    server.wait_log(rf"\(pid {pid}\) exited", timeout=10)
    server.wait_log(r"worker \d+ of one ready", count=3, timeout=30)  # two, then its successor
    assert_served_by(running.get("/one/z"), "one", one, server.proc.pid)
    assert server.stop() == 0


def test_a_virtualenv_of_another_python_without_corral_is_one_line(interpreters, tmp_path):
    one, _ = interpreters
    bare = make_venv(tmp_path / "bare", base=one.base)  # no corral in it
    with short_dir() as directory:
        config = directory / "unit.json"
        doc = {
            "listeners": {LISTENER: {"pass": "applications/bare"}},
            "applications": {"bare": application("bare", bare, processes=2)},
        }
        config.write_text(json.dumps(doc))
        server = Server(
            f"--config={config}", bind=None, wait_ready=False, env={"PYTHONPATH": str(APPS)}
        )
        assert server.proc.wait(30) == 3, server.stderr
        server.stop()
    err = server.stderr
    python = bare / "bin" / "python"
    cause = (
        f"application bare (interp_app) failed to load: {python} (its home's Python) cannot "
        f"import corral (No module named 'corral'): install corral {__version__} in {bare}; "
        "shutting down"
    )
    lines = [line for line in err.splitlines() if "cannot import corral" in line]
    assert len(lines) == 1 and lines[0].endswith(f"[CRITICAL] {cause}"), err
    assert "Traceback" not in err
    assert "respawning" not in err


def test_a_rate_limit_spawned_workers_would_count_is_refused_in_one_line(interpreters, tmp_path):
    """Their tables' slots are found by a hash each interpreter keys at its start: such a
    limit would not hold, so the document is refused (corral/interpreter/limits.py)."""
    one, _ = interpreters
    limit = {"rate": "1r/m", "burst": 5, "nodelay": True}
    doc = {
        "listeners": {LISTENER: {"pass": "applications/one", "rate_limit": limit}},
        "applications": {"one": application("one", one.home, processes=2)},
    }
    config = tmp_path / "unit.json"
    config.write_text(json.dumps(doc))
    result = run_cli(f"--config={config}")
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f'corral: error: {config}: $.listeners["{LISTENER}"].rate_limit: application "one" '
        "runs on its home's Python, whose workers cannot share this limit's counts yet: drop "
        f"the limit, or make the virtualenv with python{MASTER[0]}.{MASTER[1]} (docs/deploy.md)\n"
    )


def test_a_spawned_worker_proxies_to_an_external_application(interpreters, tmp_path):
    """The external applications' addresses reach a spawned worker on the master's page."""
    one, _ = interpreters
    (tmp_path / "hello.txt").write_bytes(b"Hello, Unit!\n")
    doc = {
        "listeners": {LISTENER: {"pass": "routes"}},
        "routes": [
            {"match": {"uri": "/hello.txt"}, "action": {"pass": "applications/files"}},
            {"action": {"pass": "applications/one"}},
        ],
        "applications": {
            "one": application("one", one.home),  # the only worker: it takes every connection
            "files": {
                "type": "external",
                "executable": sys.executable,
                "arguments": ["-m", "http.server", "{port}", "--bind", "127.0.0.1"],
                "working_directory": str(tmp_path),
            },
        },
    }
    with short_dir() as directory, Running(directory, doc) as running:
        running.server.wait_log(r"files process \d+ ready", timeout=20)
        assert http_get(running.at, "/hello.txt") == (200, b"Hello, Unit!\n")
        assert_served_by(running.get("/"), "one", one, running.server.proc.pid)
        assert running.server.stop() == 0


def test_a_spawned_worker_serves_https_with_the_settings_certificate(interpreters, ca, certificate):
    """The TLS context is made again in the spawned worker, from the document's files."""
    one, _ = interpreters
    chain, key = certificate
    doc = {
        "listeners": {LISTENER: {"pass": "applications/one"}},
        "applications": {"one": application("one", one.home)},
        "settings": {"certfile": str(chain), "keyfile": str(key)},
    }
    with short_dir() as directory, Running(directory, doc) as running:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        with (
            socket.create_connection((running.at.host, running.at.port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            head, _, body = read_all(tls).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), head
        assert_served_by(json.loads(body), "one", one, running.server.proc.pid)
        assert running.server.stop() == 0
