"""A worker imports what its configuration runs, nothing more (issue 36, point 5: lean workers).

A worker's memory is mostly what its process imported: every module of its import graph costs
every worker. A plain WSGI or ASGI worker (no routes, TLS, shares, proxies, php, externals,
limits) imports the request core, its adapter and logging; each subsystem is imported where a
worker's configuration first uses it. Each case runs in a real interpreter, with each core:
the modules the master imports before its fork (`corral.server.worker`), then a worker run as
the fork runs it (`run_worker`) on a listener, answering one request; the configuration's own
modules (the master's) are forgotten before the worker runs, so that a worker's import of one
shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from corral import core as core_choice
from tests.cores import CORES

# none of these is a plain worker's import
NOT_PLAIN = [
    "corral.actions.application",
    "corral.actions.external",
    "corral.actions.fastcgi",
    "corral.actions.limited",
    "corral.actions.proxy",
    "corral.actions.share",
    "corral.actions.upstreams",
    "corral.config.document",
    "corral.external",
    "corral.fastcgi",
    "corral.filters.connlimit",
    "corral.filters.forwarded",
    "corral.filters.gate",
    "corral.filters.ratelimit",
    "corral.http.uwsgi",
    "corral.php",
    "corral.routing",
    "corral.server.acceptor",
    "corral.server.handoff",
    "corral.server.proxied",
    "corral.server.renewal",
    "corral.server.routed",
    "corral.server.stacks",
    "corral.server.tlsdoor",
    "corral.static",
    "corral.tls",
    "ctypes",
    "glob",
    "hashlib",
    "httptools",
    "json",
    "mimetypes",
    "pathlib",
    "sysconfig",
]
NOT_WSGI = ["corral.apps.asgi.adapter", "corral.apps.asgi.lifespan", "corral.apps.asgi.runner"]
NOT_ASGI = ["corral.apps.wsgi.runner", "corral.apps.wsgi.environ", "corral.apps.wsgi.response"]

# the application: its answer names which of LEAN_NAMES are imported (without json, one of them)
APP = """
import os
import sys

NAMES = os.environ["LEAN_NAMES"].split()


def loaded():
    return " ".join(name for name in NAMES if name in sys.modules).encode()


def wsgi(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [loaded()]


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            kind = message["type"].rpartition(".")[2]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": loaded()})
"""

# the master's part (its import of the worker module, its configuration), then the worker's
WORKER = """
import os
import socket
import sys
import threading

import asyncio

import corral.server.needs  # the master's imports, before its fork (master/child.py)
import corral.server.worker as worker
from corral.server.plan import ListenerSpec

names = os.environ["LEAN_NAMES"].split()
at_import = [name for name in names if name in sys.modules]

from corral.config import load  # the master's

doc = load([sys.argv[1], "-b", "127.0.0.1:0"])
name = next(iter(doc.applications))
for module in list(sys.modules):  # the master's imports: the worker's own import shows
    if module in names:
        del sys.modules[module]
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
beat_read, beat_write = os.pipe()
spec = worker.WorkerSpec(
    application=doc.applications[name],
    settings=doc.settings,
    listeners=[ListenerSpec(sock)],
    heartbeat_fd=beat_write,
    app_name=name,
)


def client():
    said = b""
    while b"ready" not in said:
        said += os.read(beat_read, 4096)
    with socket.create_connection(sock.getsockname()) as conn:
        conn.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
        answer = b""
        while data := conn.recv(65536):
            answer += data
    import corral.core

    print(corral.core.NAME)
    print(" ".join(at_import))
    print(answer.partition(b"\\r\\n\\r\\n")[2].decode())
    sys.stdout.flush()
    os._exit(0)


threading.Thread(target=client, daemon=True).start()
worker.run_worker(spec)
"""


def _env(core: str, names: list[str]) -> dict[str, str]:
    if core == "compiled" and not core_choice.NATIVE:
        if core_choice.REQUESTED_PYTHON:
            pytest.skip("CORRAL_NO_EXTENSIONS=1: this process runs the Python core")
        pytest.fail(f"the compiled core does not run: {core_choice.NAME}")
    env = {**os.environ, "LEAN_NAMES": " ".join(names)}
    env["CORRAL_NO_EXTENSIONS"] = "1" if core == "python" else "0"
    return env


def _run(core: str, tmp_path: Path, code: str, args: list[str], names: list[str]) -> list[str]:
    (tmp_path / "lean_app.py").write_text(APP)
    root = Path(__file__).resolve().parents[2]
    env = _env(core, names)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(root), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.splitlines()


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("interface", ["wsgi", "asgi"])
def test_a_plain_worker_imports_only_what_it_runs(
    core: str, interface: str, tmp_path: Path
) -> None:
    names = NOT_PLAIN + (NOT_WSGI if interface == "wsgi" else NOT_ASGI)
    lines = _run(core, tmp_path, WORKER, [f"lean_app:{interface}"], names)
    name, at_import, served = lines[0], lines[1].split(), lines[2].split()
    assert ("compiled" in name) == (core == "compiled"), name
    # what the master's fork shares: none of a subsystem's modules, nor either adapter's
    assert at_import == []
    # what the worker imported itself as it started and answered: its own adapter only
    assert served == [], f"a plain {interface} worker imported {served}"


# what a configuration that has them imports, each where it is first used
USED = """
import json
import socket
import sys
from types import SimpleNamespace

import corral.server.worker as worker
from corral.server import needs

loaded = {}
before = set(sys.modules)

from corral.routing import compile_routes
from corral.server.routed import Routing

router = compile_routes([{"action": {"return": 204}}])
Routing(router, "app", {}, timeout=1.0, log=None)
loaded["returns"] = sorted(set(sys.modules) - before)

before = set(sys.modules)
router = compile_routes(
    [
        {"match": {"uri": "/static/*"}, "action": {"share": "/srv$uri"}},
        {"action": {"proxy": "http://127.0.0.1:9"}},
    ]
)
Routing(router, "app", {}, timeout=1.0, log=None)
loaded["routes"] = sorted(set(sys.modules) - before)

plain = SimpleNamespace(
    socket=None, pass_target=None, forwarded=None, proxy=None, protocol="http", tls=None,
    limiter=None, gate=None, conn_limit=None, tally=None, health=None,
)
tls = SimpleNamespace(**{**vars(plain), "tls": object(), "proxy": ("v1", ())})
uwsgi = SimpleNamespace(**{**vars(plain), "protocol": "uwsgi", "limiter": object()})
application = SimpleNamespace(interface="wsgi", protocol=None, request_timeout=0)
pool = SimpleNamespace(
    name="app", application=application, listeners=[plain, tls, uwsgi], board=None,
    handoff=None, router=None, total_conns=None,
)
before = set(sys.modules)
needs.share(pool)  # (the master's, before it forks the pool's workers)
loaded["listeners"] = sorted(set(sys.modules) - before)

from corral.actions.external import speaker

before = set(sys.modules)
speaker("fastcgi")
loaded["php"] = sorted(set(sys.modules) - before)
print(json.dumps(loaded))
"""


@pytest.mark.parametrize("core", CORES)
def test_what_a_configuration_uses_is_imported_when_it_is_used(core: str, tmp_path: Path) -> None:
    (lines,) = _run(core, tmp_path, textwrap.dedent(USED), [], [])[-1:]
    loaded = json.loads(lines)
    # a table that only answers: its handlers, neither the proxy nor the file engine
    returns = loaded["returns"]
    assert "corral.actions.application" in returns  # (respond's: every worker's)
    assert "corral.actions.proxy" not in returns and "corral.static.files" not in returns
    routes = loaded["routes"]  # ... one that shares and proxies: theirs
    for name in ("corral.actions.share", "corral.actions.proxy", "corral.static.files"):
        assert name in routes
    listeners = loaded["listeners"]
    for name in (
        "corral.server.tlsdoor",
        "corral.server.renewal",
        "corral.server.proxied",
        "corral.http.uwsgi",
        "corral.filters.ratelimit",
        "corral.apps.wsgi.runner",
    ):
        assert name in listeners
    assert "corral.apps.asgi.adapter" not in listeners
    assert "corral.actions.fastcgi" in loaded["php"]
