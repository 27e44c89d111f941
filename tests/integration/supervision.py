"""Helpers of the supervision tests (test_supervision_*.py): the master's log read as events,
the order rules on them, process ages from /proc, one-shot GETs.

The master logs one line per worker event (``--log-level debug`` adds ``spawned``); the tests
read them back in order from the harness's captured error log:

- ``worker S spawned (pid P, generation G)``
- ``worker S ready (pid P, generation G)``
- ``worker S (pid P) recycled: REASON``
- ``worker S (pid P) exited: HOW`` (a worker retired on purpose; after a clean exit, with
  ``, having served N requests``) and
  ``worker S (pid P) died: HOW after Ns`` (one that was not)
"""

from __future__ import annotations

import http.client
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from tests.integration.server import LISTENING, READY, Server, wait_for

_EVENT = re.compile(
    r"worker (?P<slot>\d+) (?:(?P<kind>spawned|ready) \(pid (?P<pid>\d+), generation (?P<gen>\d+)\)"
    r"|\(pid (?P<pid2>\d+)\) (?P<kind2>recycled|exited|died): (?P<detail>.*?)"
    r"(?:, having served (?P<served>\d+) requests)?$)",
    re.MULTILINE,
)

RECYCLED = re.compile(r"worker \d+ \(pid (\d+)\) recycled: (.*)")


@dataclass(frozen=True)
class Event:
    index: int  # position in the log
    kind: str  # spawned, ready, recycled, exited, died
    slot: int
    pid: int
    generation: int | None  # for spawned and ready
    detail: str  # for recycled, exited, died
    served: int | None = None  # for exited, when the line says it


def events(log: str) -> list[Event]:
    """The worker events of the master's log, in order."""
    found = []
    for index, match in enumerate(_EVENT.finditer(log)):
        if match["kind"]:
            kind, pid, gen, detail = match["kind"], match["pid"], int(match["gen"]), ""
        else:
            kind, pid, gen, detail = match["kind2"], match["pid2"], None, match["detail"]
        served = int(match["served"]) if match["served"] else None
        found.append(Event(index, kind, int(match["slot"]), int(pid), gen, detail, served))
    return found


def first(found: list[Event], kind: str, pid: int) -> Event:
    """The first event of ``kind`` about ``pid``; fails if there is none."""
    for event in found:
        if event.kind == kind and event.pid == pid:
            return event
    raise AssertionError(f"no {kind!r} event for pid {pid}")


def generation_pids(log: str, generation: int) -> list[int]:
    """The pids that became ready in ``generation``."""
    return [e.pid for e in events(log) if e.kind == "ready" and e.generation == generation]


def assert_successor_ready_first(log: str, old_pid: int) -> int:
    """``old_pid`` was recycled, drained, and its successor (the worker spawned for its slot
    after its last recycle line) was ready before ``old_pid`` exited; returns the successor's
    pid."""
    found = events(log)
    exited = first(found, "exited", old_pid)
    recycles = [e for e in found[: exited.index] if e.kind == "recycled" and e.pid == old_pid]
    assert recycles, f"pid {old_pid} exited without being recycled:\n{log}"
    recycled = recycles[-1]
    successor = next(
        (e for e in found[recycled.index :] if e.kind == "spawned" and e.slot == recycled.slot),
        None,
    )
    assert successor is not None, f"no successor spawned for pid {old_pid}:\n{log}"
    ready = first(found, "ready", successor.pid)
    assert ready.index < exited.index, f"pid {old_pid} exited before its successor was ready"
    # drained, not killed, and it says how many requests it served
    assert exited.detail == "exit code 0" and exited.served is not None, exited
    return successor.pid


def process_age(pid: int) -> float:
    """Seconds since ``pid`` started, from /proc (to about 10 ms)."""
    with open(f"/proc/{pid}/stat") as stream:
        start_ticks = int(stream.read().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie does not: it only waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return stream.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def get(server: Server, path: str = "/", timeout: float = 10.0) -> tuple[int, dict, bytes]:
    """One GET on a fresh connection: ``(status, headers with lower-case names, body)``."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return response.status, headers, response.read()
    finally:
        conn.close()


def answering_pid(server: Server, path: str = "/pid") -> int:
    """The worker that answers a GET of ``path`` (an app that names it in X-Worker-Pid)."""
    status, headers, _ = get(server, path)
    assert status == 200
    return int(headers["x-worker-pid"])


def wait_ready_in(server: Server, error_log: Path, workers: int = 1) -> None:
    """As :meth:`Server.wait_ready`, for a server whose error log is the file ``error_log``."""

    def ready():
        if server.proc.poll() is not None:
            raise AssertionError(f"server exited {server.proc.returncode}:\n{server.stderr}")
        text = error_log.read_text() if error_log.exists() else ""
        match = LISTENING.search(text)
        return match and len(set(READY.findall(text))) >= workers and match

    match = wait_for(ready, timeout=20)
    server.host = match.group(1).strip("[]")
    server.port = int(match.group(2))


# -- an application module the tests rewrite ------------------------------------------------

# A module rewritten in place within the same second, at the same size, would be read from a
# stale __pycache__ (its header keeps the source's mtime in seconds and its size): the tests
# rewrite modules that fast, so the servers they start write no bytecode.
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}

APP_TEMPLATE = '''\
"""Written by the supervision tests: answers "VERSION PID"; dies at import on a flag file."""

import os

VERSION = "{version}"

if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash.flag")):
    os._exit(1)


def application(environ, start_response):
    body = f"{{VERSION}} {{os.getpid()}}".encode()
    start_response(
        "200 OK",
        [
            ("Content-Type", "text/plain"),
            ("Content-Length", str(len(body))),
            ("X-Worker-Pid", str(os.getpid())),
        ],
    )
    return [body]
'''


def write_app(directory: Path, version: str) -> Path:
    """``directory/reload_app.py``, answering ``VERSION PID``; with ``crash.flag`` beside it,
    its import ends the process (exit code 1)."""
    path = directory / "reload_app.py"
    path.write_text(APP_TEMPLATE.format(version=version))
    return path
