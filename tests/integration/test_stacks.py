"""Live stacks, ``GET /control/applications/NAME/stacks`` and ``corral ctl stacks``, on real
servers: where each worker's threads and tasks are, asked while they serve (issue 12, point 7).

A request held in a function of a known name (``tests/integration/apps/stacks_apps.py``)
must show in its worker's stacks, the answer must come within a second, stopped workers
included, and asking under load must not fail a request.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from typing import Any

import pytest

from tests.integration.control import Control, ctl, short_dir
from tests.integration.load import Load
from tests.integration.server import Server, wait_for
from tests.integration.supervision import get

APP = "stacks_apps"
LIMIT = 1.0  # seconds within which the answer must come (the acceptance's)


def functions(entries: list[dict[str, Any]]) -> set[str]:
    return {frame["function"] for entry in entries for frame in entry["frames"]}


def timed_stacks(control: Control, name: str = APP) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    answer = control.get(f"/control/applications/{name}/stacks")
    elapsed = time.monotonic() - started
    assert answer.status == 200, answer.json
    return elapsed, answer.json


def hold(server: Server, seconds: float) -> threading.Thread:
    """A request waiting ``seconds`` in the application, on a thread of the test."""
    statuses: list[int] = []
    thread = threading.Thread(target=lambda: statuses.append(get(server, f"/hold?s={seconds}")[0]))
    thread.statuses = statuses  # type: ignore[attr-defined]
    thread.start()
    return thread


SERVERS = {
    "wsgi": (f"{APP}:application", ()),
    "wsgi-threads": (f"{APP}:application", ("--threads", "4")),
    "asgi-uvloop": (f"{APP}:asgi_application", ("--loop", "uvloop")),
    "asgi-asyncio": (f"{APP}:asgi_application", ("--loop", "asyncio")),
}


@pytest.mark.wallclock
@pytest.mark.parametrize("kind", SERVERS)
def test_a_held_request_shows_in_its_worker_s_stacks_within_a_second(kind):
    target, extra = SERVERS[kind]
    with short_dir() as directory, Server(
        target, f"--control=unix:{directory}/c.sock", *extra, workers=2
    ) as server:  # fmt: skip
        control = Control.of(server)
        held = hold(server, 3)
        wanted = "awaited_in_asgi" if kind.startswith("asgi") else "held_in_wsgi"

        def seen() -> dict[str, Any] | None:
            elapsed, answer = timed_stacks(control)
            assert elapsed < LIMIT, elapsed
            for worker in answer["workers"]:
                where = worker["tasks"] if kind.startswith("asgi") else worker["threads"]
                if wanted in functions(where or []):
                    return answer
            return None

        answer = wait_for(seen, timeout=2.5)
        assert answer["application"] == APP
        workers = answer["workers"]
        assert sorted(w["pid"] for w in workers) == sorted(server.worker_pids())
        assert [w["slot"] for w in workers] == [0, 1]
        assert all(w["answered"] and w["ready"] and not w["retiring"] for w in workers)
        assert [w["state"] for w in workers] == ["ready"] * len(workers)
        for worker in workers:
            names = [thread["name"] for thread in worker["threads"]]
            assert "MainThread" in names and "corral-stacks" not in names
            if kind.startswith("asgi"):
                assert isinstance(worker["tasks"], list)
            else:
                assert worker["tasks"] is None
            frame = worker["threads"][0]["frames"][-1]
            assert set(frame) == {"file", "line", "function", "code"}
        held.join(10)
        assert held.statuses == [200]  # type: ignore[attr-defined]
        assert server.stop() == 0


@pytest.mark.wallclock
def test_a_stopped_worker_is_listed_unanswered_and_the_answer_still_comes_within_a_second():
    with short_dir() as directory, Server(
        f"{APP}:application", f"--control=unix:{directory}/c.sock", "--timeout", "0", workers=2
    ) as server:  # fmt: skip
        control = Control.of(server)
        stopped, running = sorted(server.worker_pids())
        os.kill(stopped, signal.SIGSTOP)
        try:
            elapsed, answer = timed_stacks(control)
            assert elapsed < LIMIT, elapsed
            by_pid = {worker["pid"]: worker for worker in answer["workers"]}
            assert by_pid[stopped]["answered"] is False
            assert by_pid[stopped]["threads"] == []
            assert by_pid[running]["answered"] is True
        finally:
            os.kill(stopped, signal.SIGCONT)
        # the late answer of the stopped worker is not taken for the next question's
        _, answer = timed_stacks(control)
        assert all(worker["answered"] for worker in answer["workers"])
        assert get(server, "/pid")[0] == 200
        assert server.stop() == 0


@pytest.mark.wallclock
@pytest.mark.parametrize("kind", ["wsgi-threads", "asgi-uvloop"])
def test_asking_for_stacks_under_load_fails_no_request(kind):
    target, extra = SERVERS[kind]
    with short_dir() as directory, Server(
        target, f"--control=unix:{directory}/c.sock", *extra, workers=2
    ) as server:  # fmt: skip
        control = Control.of(server)
        with Load(server, 8, "/pid") as load:
            load.wait_requests(100)
            slowest = 0.0
            for _ in range(15):
                elapsed, answer = timed_stacks(control)
                slowest = max(slowest, elapsed)
                assert all(worker["answered"] for worker in answer["workers"])
            load.wait_requests(100)
        assert not load.failures, (load.summary(), load.failures[:5])
        assert len(load.ok) > 200
        assert slowest < LIMIT, slowest
        assert server.stop() == 0


def test_a_worker_hanging_at_import_shows_where():
    """The stacks' thread starts before the application is imported."""
    with short_dir() as directory, Server(
        "chaos_app", f"--control=unix:{directory}/c.sock", "--startup-timeout", "20"
    ) as server:  # fmt: skip
        control = Control.of(server)
        change = threading.Thread(
            target=control.put, args=("/config/applications/chaos_app/module", "proc_hang_import")
        )
        change.start()
        server.wait_log(r"worker 0 spawned")

        def importing() -> dict[str, Any] | None:
            _, answer = timed_stacks(control, "chaos_app")
            for worker in answer["workers"]:
                for thread in worker["threads"]:
                    if any(f["file"].endswith("proc_hang_import.py") for f in thread["frames"]):
                        return worker
            return None

        worker = wait_for(importing, timeout=5)
        assert worker["ready"] is False
        assert worker["state"] == "starting"
        assert server.stop() == 0
        change.join(30)


def test_unknown_application_and_methods():
    with short_dir() as directory, Server(
        f"{APP}:application", f"--control=unix:{directory}/c.sock"
    ) as server:  # fmt: skip
        control = Control.of(server)
        answer = control.get("/control/applications/nope/stacks")
        assert answer.status == 404
        assert answer.json["error"] == "Value doesn't exist."
        answer = control.request("POST", f"/control/applications/{APP}/stacks", b"")
        assert answer.status == 405
        assert server.stop() == 0


def test_ctl_stacks_prints_each_worker_s_threads_as_a_traceback():
    with short_dir() as directory, Server(
        f"{APP}:application", f"--control=unix:{directory}/c.sock", "--threads", "2", workers=2
    ) as server:  # fmt: skip
        Control.of(server)
        held = hold(server, 3)
        socket_option = f"--socket=unix:{directory}/c.sock"

        def printed() -> str | None:
            result = ctl(socket_option, "stacks", APP)
            assert result.returncode == 0, result.stderr
            return result.stdout if "held_in_wsgi" in result.stdout else None

        text = wait_for(printed, timeout=5)
        for pid in server.worker_pids():
            assert re.search(rf"^{APP}: worker [01] \(pid {pid}, ready\):$", text, re.M), text
        assert re.search(r'^    File ".*stacks_apps\.py", line \d+, in held_in_wsgi$', text, re.M)
        assert re.search(r"^      time\.sleep\(seconds\)$", text, re.M)
        # without APP: every application's; --json: the API's answers
        every = ctl(socket_option, "stacks")
        assert every.returncode == 0 and f"{APP}: worker 0" in every.stdout
        raw = ctl(socket_option, "stacks", APP, "--json")
        assert raw.returncode == 0 and '"answered": true' in raw.stdout
        missing = ctl(socket_option, "stacks", "nope")
        assert missing.returncode == 1
        assert missing.stderr.startswith("corral ctl: error 404: ")
        assert missing.stderr.count("\n") == 1
        held.join(10)
        assert server.stop() == 0
