"""The control API on real processes: the socket and its token, path operations, changes
applied through a new generation (answered once it serves, or rolled back with the cause),
serialised changes, restart, persistence in the state directory, USR2, and `corral ctl`.

The servers log at debug level; the order checks read the master's lines:
``reconfiguring (METHOD PATH)``, ``reload complete: generation N ...``, ``reload failed: ...``
and ``control API: METHOD PATH: STATUS``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.control import Control, ctl, listening_port, short_dir
from tests.integration.load import Load
from tests.integration.server import APPS, Server, read_all, wait_for
from tests.integration.supervision import alive, events, generation_pids, get
from tests.unit.test_config import GUNICORN_TRUST

ROOT = Path(__file__).resolve().parents[2]
DONE = {"success": "Reconfiguration done."}


def empty_server(state_dir: Path, *args: str) -> Server:
    server = Server(f"--state-dir={state_dir}", *args, bind=None, wait_ready=False)
    server.wait_log("no application configured: waiting for the control API")
    return server


def app_document(module: str, workers: int = 1, listener: str = "127.0.0.1:0") -> dict:
    return {
        "listeners": {listener: {"pass": f"applications/{module}"}},
        "applications": {module: {"module": module, "processes": workers}},
    }


def spawn_count(server: Server) -> int:
    return len(re.findall(r"worker \d+ spawned", server.stderr))


def lines_in_order(log: str, *patterns: str) -> bool:
    """Each pattern matches a line after the line the one before it matched."""
    position = 0
    for pattern in patterns:
        match = re.compile(pattern, re.M).search(log, position)
        if match is None:
            return False
        position = match.end()
    return True


# -- the socket ----------------------------------------------------------------------------


def test_empty_start_waits_on_a_private_socket():
    with short_dir() as directory:
        state_dir = directory / "state"
        with empty_server(state_dir) as server:
            control = Control.of(server)
            path = state_dir / "control.sock"
            assert control.address == f"unix:{path}"
            assert stat.S_ISSOCK(path.stat().st_mode)
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
            config = control.get("/config").json
            assert (config["listeners"], config["applications"]) == ({}, {})
            assert control.get("/status").json == {
                "connections": {"accepted": 0, "active": 0, "idle": 0, "closed": 0},
                "requests": {"total": 0},
                "applications": {},
                "readiness": "ready",  # nothing to serve, nothing to wait for
            }
            assert server.worker_pids() == []
            server.send(signal.SIGTTIN)  # no application: nothing to start
            server.wait_log("SIGTTIN: no application configured; ignored")
            assert server.stop() == 0
        assert not path.exists()
        assert not (state_dir / "conf.json").exists()  # nothing was applied


def test_tcp_needs_a_token_and_every_request_carries_it():
    result = subprocess.run(
        [sys.executable, "-m", "corral", "proc_apps", "--control", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert result.returncode == 2
    assert result.stderr.startswith("corral: error: --control 127.0.0.1:0: a TCP control")
    assert result.stderr.count("\n") == 1
    with Server("proc_apps", "--control", ":0", "--control-token", "s3cret") as server:
        control = Control.of(server)
        assert control.address.startswith("http://127.0.0.1:")  # loopback unless told
        before = control.get("/config", token="s3cret").json
        for token in (None, "wrong", "s3cret2", "s3cre", ""):
            answer = control.get("/config", token=token)
            assert answer.status == 401, token
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert answer.json["error"] == "Unauthorized."
        basic = control.get("/config", headers=(("Authorization", "Basic czNjcmV0"),))
        assert basic.status == 401
        refused = control.put("/config/applications/proc_apps/processes", 3, token="wrong")
        assert refused.status == 401
        assert control.get("/config", token="s3cret").json == before
        # corral ctl, with the token as an option or from the environment
        address = control.address.removeprefix("http://")
        ok = ctl("--socket", address, "--token", "s3cret", "get", "/config/applications")
        assert ok.returncode == 0 and list(json.loads(ok.stdout)) == ["proc_apps"]
        ok = ctl("--socket", address, "status", env={"CORRAL_CONTROL_TOKEN": "s3cret"})
        assert ok.returncode == 0, ok.stderr
        refused = ctl("--socket", address, "--token", "nope", "get", "/config")
        assert refused.returncode == 1
        assert refused.stderr.startswith("corral ctl: error 401: Unauthorized.")
        assert server.stop() == 0, server.stderr[-3000:]
    # the log read to its end (a line still in the pipe would pass unseen while it runs)
    assert "reconfiguring" not in server.stderr


# -- reading -------------------------------------------------------------------------------


def test_get_config_is_the_command_lines_document():
    with (
        short_dir() as directory,
        Server(
            "proc_apps", f"--control=unix:{directory}/c.sock", "--threads", "2", workers=2
        ) as server,
    ):
        control = Control.of(server)
        check = subprocess.run(
            [*server.argv, "--check-config"],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=APPS,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
        assert check.returncode == 0, check.stderr
        assert control.get("/config").json == json.loads(check.stdout)
        assert control.get("/config/applications/proc_apps/processes").json == 2
        listener = {"pass": "applications/proc_apps", "forwarded": GUNICORN_TRUST}
        assert control.get("/config/listeners/127.0.0.1:0").json == listener
        assert control.get("/config/listeners/127.0.0.1%3A0/").json == listener
        assert control.get("/config/settings/log_level").json == "debug"
        root = control.get("/").json
        assert root["config"] == json.loads(check.stdout)
        running = root["status"]["applications"]["proc_apps"]["processes"]["running"]
        assert running == 2
        assert server.stop() == 0


def test_errors_404_and_405():
    with (
        short_dir() as directory,
        Server("proc_apps", f"--control=unix:{directory}/c.sock") as server,
    ):
        control = Control.of(server)
        answer = control.get("/config/applications/nope")
        assert answer.status == 404
        assert answer.json == {
            "error": "Value doesn't exist.",
            "detail": "/config/applications/nope does not exist",
            "path": "/config/applications/nope",
        }
        for method, path in [
            ("GET", "/nope"),
            ("GET", "/configuration"),
            ("GET", "/config/applications/proc_apps/processes/x"),
            ("GET", "/status/applications/nope"),
            ("DELETE", "/config/applications/nope"),
            ("PUT", "/config/nope/x"),
            ("GET", "/control/applications/nope/restart"),
            ("GET", "/control/nope"),
        ]:
            assert control.request(method, path, b"1" if method == "PUT" else None).status == 404
        for method, path, allow in [
            ("POST", "/config", "GET, PUT, DELETE"),
            ("POST", "/config/applications", "GET, PUT, DELETE"),
            ("PATCH", "/config", "GET, PUT, POST, DELETE"),
            ("PUT", "/status", "GET"),
            ("DELETE", "/", "GET"),
            ("POST", "/control/applications/proc_apps/restart", "GET"),
        ]:
            answer = control.request(method, path, b"{}" if method != "DELETE" else None)
            assert answer.status == 405, (method, path)
            assert answer.headers["allow"] == allow, (method, path)
            assert answer.json["error"] == "Method isn't allowed."
        assert server.stop() == 0
    assert "reconfiguring" not in server.stderr  # the log read to its end


def test_invalid_input_changes_nothing():
    with (
        short_dir() as directory,
        Server("proc_apps", f"--control=unix:{directory}/c.sock") as server,
    ):
        control = Control.of(server)
        before = control.get("/config").json
        pids = server.worker_pids()
        spawned = spawn_count(server)
        body = b'{\n  "module": "proc_apps",\n  "workers": x\n}'
        answer = control.put("/config/applications/proc_apps", body)
        assert answer.status == 400
        assert answer.json == {
            "error": "Invalid JSON.",
            "detail": "JSON is malformed: invalid character at line 3, column 14",
            "location": {"offset": 40, "line": 3, "column": 14},
        }
        body = b'{"module": "proc_apps", "workers": 1, "workers": 3}'
        answer = control.put("/config/applications/proc_apps", body)
        assert answer.status == 400
        assert answer.json == {
            "error": "Invalid JSON.",
            "detail": 'duplicate object member "workers"',
        }
        answer = control.put("/config/applications/proc_apps/processes", "two")
        assert answer.status == 400
        assert answer.json == {
            "error": "Invalid configuration.",
            "detail": "$.applications.proc_apps.processes: expected int >= 1 or object "
            '{max, spare, idle_timeout}, got "two"',
            "path": "/config/applications/proc_apps/processes",
        }
        answer = control.put("/config/listeners/127.0.0.1:1", {"pass": "applications/x"})
        assert answer.status == 400
        assert answer.json["path"] == "/config/listeners/127.0.0.1:1/pass"
        answer = control.delete("/config/applications/proc_apps")  # a listener passes to it
        assert answer.status == 400 and "pass" in answer.json["detail"]
        assert control.put("/config", b"").status == 400  # no JSON at all
        with control.connect() as sock:  # a body over 8 MiB is refused before it is read
            sock.sendall(b"PUT /config HTTP/1.1\r\nHost: x\r\nContent-Length: 9437184\r\n\r\n")
            refused = read_all(sock)
            assert refused.startswith(b"HTTP/1.1 413 ")
            assert b"at most 8388608 bytes" in refused
        with control.connect() as sock:
            sock.sendall(b"NOT HTTP\r\n\r\n")
            assert b"HTTP/1.1 400 Bad Request\r\n" in sock.recv(65536)
        assert control.get("/config").json == before
        assert server.worker_pids() == pids
        assert spawn_count(server) == spawned
        assert server.stop() == 0
    assert "reconfiguring" not in server.stderr  # the log read to its end


# -- applying ------------------------------------------------------------------------------


def ready_in(server: Server, generation: int, count: int) -> list[int]:
    """The ``count`` pids ready in ``generation``: the master logged them before it answered,
    but the test's reader of its standard error may be a moment behind."""
    return wait_for(
        lambda: len(pids := generation_pids(server.stderr, generation)) >= count and pids,
        timeout=5,
    )


def test_scaling_answers_once_the_new_workers_serve_and_fails_no_request():
    with (
        short_dir() as directory,
        Server(
            "chaos_app", f"--control=unix:{directory}/c.sock", "--graceful-timeout", "5"
        ) as server,
    ):
        control = Control.of(server)
        (first,) = server.worker_pids()
        with Load(server, 8, "/pid") as load:
            load.wait_requests(100)
            answer = control.put("/config/applications/chaos_app/processes", 3)
            assert (answer.status, answer.json) == (200, DONE)
            # in effect when the answer comes: three new workers ready, none still starting
            processes = control.get("/status/applications/chaos_app/processes").json
            assert (processes["running"], processes["starting"]) == (3, 0)
            new = set(ready_in(server, 2, 3))
            assert len(new) == 3 and first not in new
            assert lines_in_order(
                server.stderr,
                r"reconfiguring \(PUT /config/applications/chaos_app/processes\)$",
                r"reload complete: generation 2 serving with 3 worker\(s\)$",
                r"control API: PUT /config/applications/chaos_app/processes: 200$",
            ), server.stderr
            wait_for(lambda: set(server.worker_pids()) == new, timeout=10)
            settled = time.monotonic()
            load.wait_requests(200)
            assert {r.pid for r in load.ok if r.start > settled} <= new
            # and back to one
            assert control.put("/config/applications/chaos_app/processes", 1).json == DONE
            (last,) = ready_in(server, 3, 1)
            wait_for(lambda: server.worker_pids() == [last], timeout=10)
            load.wait_requests(100)
        assert not load.failures, (load.summary(), load.failures[:5])
        assert control.get("/config/applications/chaos_app/processes").json == 1
        total = control.get("/status/requests/total").json
        assert total > 0
        assert server.stop() == 0


def test_a_listener_on_a_port_in_use_is_refused_and_nothing_changes():
    with socket.socket() as blocker, short_dir() as directory:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with Server("proc_apps", f"--control=unix:{directory}/c.sock", workers=2) as server:
            control = Control.of(server)
            before = control.get("/config").json
            pids = set(server.worker_pids())
            spawned = spawn_count(server)
            listener = before["listeners"]["127.0.0.1:0"]  # the command line's
            answer = control.put(f"/config/listeners/127.0.0.1:{port}", listener)
            assert answer.status == 500
            assert answer.json == {
                "error": "Failed to apply new configuration.",
                "detail": f"cannot listen on 127.0.0.1:{port}: Address already in use",
            }
            assert control.get("/config").json == before
            assert set(server.worker_pids()) == pids
            assert spawn_count(server) == spawned
            assert get(server, "/info")[0] == 200
            # a free port next to it works, and the first listener stays
            answer = control.put("/config/listeners/127.0.0.1:0", listener)
            assert answer.status == 200  # the same document: nothing to do
            assert spawn_count(server) == spawned
            assert server.stop() == 0


@pytest.mark.parametrize(
    ("module", "cause"),
    [
        (
            "proc_import_fail",
            r"RuntimeError: proc_import_fail: boom at import time "
            r'\(File ".*/proc_import_fail\.py", line 3, in <module>\)',
        ),
        (
            "no_such_module",
            r"No module named 'no_such_module' "
            r"\(not in the working directory .* nor on sys\.path\)",
        ),
    ],
)
def test_an_application_that_fails_to_import_is_rolled_back(module, cause):
    with (
        short_dir() as directory,
        Server(
            "chaos_app", f"--control=unix:{directory}/c.sock", "--graceful-timeout", "5", workers=2
        ) as server,
    ):
        control = Control.of(server)
        before = control.get("/config").json
        pids = set(server.worker_pids())
        with Load(server, 6, "/pid") as load:
            load.wait_requests(100)
            answer = control.put("/config/applications/chaos_app/module", module)
            load.wait_requests(100)
        assert answer.status == 500
        assert answer.json["error"] == "Failed to apply new configuration."
        detail = answer.json["detail"]
        assert re.fullmatch(
            rf"worker \d exited \(exit code 3\) before it was ready: {cause}", detail
        ), detail
        assert re.search(  # the master's line says what the API answered
            rf"reload failed: {re.escape(detail)}; generation 1 keeps serving", server.stderr
        )
        assert control.get("/config").json == before
        # the failed generation's other worker may still be exiting when the answer comes
        wait_for(lambda: set(server.worker_pids()) == pids, timeout=5)
        assert not load.failures, (load.summary(), load.failures[:5])
        assert {r.pid for r in load.ok} <= pids
        assert server.stop() == 0


def test_a_preloaded_application_that_fails_to_import_shows_its_frames_then_one_line():
    """The master imports it: its own frames (not corral's) go to the log, above one line that
    is also the API's answer; a ValueError it raises is not taken for a bad configuration."""
    with (
        short_dir() as directory,
        Server("chaos_app", f"--control=unix:{directory}/c.sock", "--preload") as server,
    ):
        control = Control.of(server)
        before = control.get("/config").json
        answer = control.put("/config/applications/chaos_app/module", "proc_import_valueerror")
        assert answer.status == 500, answer.json
        path = APPS / "proc_import_valueerror.py"
        what = "ValueError: invalid literal for int() with base 10: 'eighty'"
        cause = f'{what} (File "{path}", line 6, in read_setting)'
        # named as the document names it, with the module it imports
        named = "application chaos_app (proc_import_valueerror) failed to load"
        assert answer.json["detail"] == f"{named}: {cause}"
        server.wait_log(r".*reconfiguration failed: .*")
        lines = [line for line in server.stderr.splitlines() if line.strip(" ^~")]
        at = lines.index("Traceback (most recent call last):")
        assert lines[at - 1].endswith(f"[ERROR] {named}:")
        assert lines[at + 1 :][:6] == [
            f'  File "{path}", line 9, in <module>',
            '    PORT = read_setting("eighty")',
            f'  File "{path}", line 6, in read_setting',
            "    return int(text)",
            what,
            lines[at + 6],
        ], lines[at:]
        assert lines[at + 6].endswith(
            f"[ERROR] reconfiguration failed: {answer.json['detail']}; "
            "the running workers keep serving"
        ), lines[at:]
        assert "/corral/" not in server.stderr and "importlib" not in server.stderr
        assert control.get("/config").json == before
        assert server.stop() == 0


@pytest.mark.wallclock
def test_a_worker_that_never_gets_ready_rolls_the_change_back_after_startup_timeout():
    """With ``timeout`` 0 the change waited for ever, holding the apply lock."""
    with (
        short_dir() as directory,
        Server(
            "chaos_app", f"--control=unix:{directory}/c.sock", "--timeout", "0",
            "--startup-timeout", "1",
        ) as server,
    ):  # fmt: skip
        control = Control.of(server)
        before = control.get("/config").json
        pids = set(server.worker_pids())
        started = time.monotonic()
        answer = control.put("/config/applications/chaos_app/module", "proc_hang_import")
        assert answer.status == 500
        assert time.monotonic() - started < 10
        assert re.fullmatch(
            r"worker 0 exited \(signal SIG\w+\) before it was ready", answer.json["detail"]
        ), answer.json
        server.wait_log(r"worker 0 \(pid \d+\): not ready after \d+s \(startup_timeout 1s\)")
        assert control.get("/config").json == before
        assert set(server.worker_pids()) == pids
        assert get(server, "/pid")[0] == 200
        # the lock is free: the next change goes through
        assert control.put("/config/applications/chaos_app/processes", 2).status == 200
        assert server.stop() == 0


def test_concurrent_changes_are_serialised():
    with (
        short_dir() as directory,
        Server(
            "chaos_app", f"--control=unix:{directory}/c.sock", "--graceful-timeout", "5"
        ) as server,
    ):
        control = Control.of(server)
        changes = [
            ("/config/settings/http/idle_timeout", 7),
            ("/config/applications/chaos_app/threads", 2),
            ("/config/applications/chaos_app/processes", 2),
            ("/config/applications/chaos_app/processes", "many"),  # invalid: changes nothing
        ]
        barrier = threading.Barrier(len(changes))
        answers: dict[str, int] = {}

        def change(path, value):
            barrier.wait()
            answers[f"{path}={value}"] = control.put(path, value).status

        threads = [threading.Thread(target=change, args=item) for item in changes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(answers.values()) == [200, 200, 200, 400], answers
        config = control.get("/config").json
        # no change lost: each was made on the document the one before it left
        assert config["settings"]["http"]["idle_timeout"] == 7
        assert config["applications"]["chaos_app"]["threads"] == 2
        assert config["applications"]["chaos_app"]["processes"] == 2
        # one at a time: each generation was complete before the next change began (the
        # master logs the last completion before it answers; the pipe's reader may lag)
        server.wait_log(r"reload complete: generation", count=3)
        log = server.stderr
        starts = [m.start() for m in re.finditer(r"reconfiguring \(", log)]
        completes = [m.start() for m in re.finditer(r"reload complete: generation", log)]
        assert len(starts) == len(completes) == 3, log
        assert starts[0] < completes[0] < starts[1] < completes[1] < starts[2] < completes[2]
        assert server.stop() == 0


def test_restart_gives_new_workers_without_a_failed_request():
    with (
        short_dir() as directory,
        Server(
            "chaos_app", f"--control=unix:{directory}/c.sock", "--graceful-timeout", "5", workers=2
        ) as server,
    ):
        control = Control.of(server)
        before = control.get("/config").json
        old = set(server.worker_pids())
        with Load(server, 8, "/pid") as load:
            load.wait_requests(100)
            answer = control.get("/control/applications/chaos_app/restart")
            assert (answer.status, answer.json) == (200, {"success": "Ok"})
            # the master logged both "ready" lines before it answered; the test's reader of
            # its stderr may not have them yet
            wait_for(lambda: len(set(generation_pids(server.stderr, 2))) == 2)
            new = set(generation_pids(server.stderr, 2))
            assert not new & old
            wait_for(lambda: set(server.worker_pids()) == new, timeout=10)
            settled = time.monotonic()
            load.wait_requests(100)
        assert not load.failures, (load.summary(), load.failures[:5])
        assert {r.pid for r in load.ok if r.start > settled} <= new
        exits = {e.pid: e.detail for e in events(server.stderr) if e.kind == "exited"}
        assert {exits[pid] for pid in old} == {"exit code 0"}  # drained
        assert control.get("/config").json == before
        # every request counted: the retired workers' last counts, the new ones' heartbeats
        served = len(load.ok)
        wait_for(lambda: control.get("/status/requests/total").json == served, timeout=5)
        assert control.get("/status/applications/chaos_app/requests/total").json == served
        assert server.stop() == 0


def test_status_counts_connections_and_requests_and_metrics_says_the_same():
    """Unit's /status figures, from the workers' heartbeats (a second old at most)."""
    with (
        contextlib.ExitStack() as stack,
        short_dir() as directory,
        # with threads, a worker's loop (and its heartbeat) runs while a request is in the app
        Server(
            "chaos_app", f"--control=unix:{directory}/c.sock", "--threads", "2", workers=2
        ) as server,
    ):
        control = Control.of(server)
        for _ in range(3):  # three connections, one request each, closed by the client
            assert get(server, "/pid")[0] == 200
        idle, busy = server.connect(), server.connect()
        stack.callback(idle.close)
        stack.callback(busy.close)
        idle.sendall(b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")  # answered, then kept idle
        assert b"200 OK" in idle.recv(65536)
        busy.sendall(b"GET /sleep?s=5 HTTP/1.1\r\nHost: t\r\n\r\n")  # in the app for 5 s

        def settled():
            figures = control.get("/status").json
            counts = figures["connections"]
            app = figures["applications"]["chaos_app"]
            wanted = (
                counts == {"accepted": 5, "active": 1, "idle": 1, "closed": 3}
                and app["requests"] == {"active": 1, "total": 4}
                and figures["requests"] == {"total": 4}
            )
            return figures if wanted else None

        try:
            figures = wait_for(settled, timeout=4)
        except AssertionError:
            raise AssertionError(control.get("/status").json) from None
        processes = figures["applications"]["chaos_app"]["processes"]
        assert processes == {"running": 2, "starting": 0, "idle": 1}

        answer = control.get("/metrics")
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = answer.raw.decode()
        assert "# TYPE corral_connections_accepted_total counter\n" in text
        assert "\ncorral_connections_accepted_total 5\n" in text
        assert 'corral_connections{state="active"} 1\n' in text
        assert 'corral_connections{state="idle"} 1\n' in text
        assert 'corral_requests_total{application="chaos_app"} 4\n' in text
        assert 'corral_requests_active{application="chaos_app"} 1\n' in text
        assert 'corral_processes{application="chaos_app",state="running"} 2\n' in text
        # with the API on, durations are counted (see test_metrics_latency_histogram_...)
        assert 'corral_request_duration_seconds_count{application="chaos_app"} 4\n' in text
        assert control.request("POST", "/metrics", b"").status == 405
        assert server.stop() == 0


def test_metrics_latency_histogram_per_application():
    with (
        short_dir() as directory,
        Server(
            "chaos_app",
            f"--control=unix:{directory}/c.sock",  # with the API, durations are counted
            "--access-logfile",
            "-",
            workers=2,
        ) as server,
    ):
        control = Control.of(server)
        for _ in range(4):
            assert get(server, "/pid")[0] == 200
        assert get(server, "/sleep?s=0.3")[0] == 200

        def histogram():
            text = control.get("/metrics").raw.decode()
            count = re.search(
                r'corral_request_duration_seconds_count\{application="chaos_app"\} (\d+)', text
            )
            return text if count and int(count[1]) == 5 else None

        text = wait_for(histogram, timeout=4)
        assert "# TYPE corral_request_duration_seconds histogram\n" in text
        buckets = [
            (float(le), int(n))
            for le, n in re.findall(r'_bucket\{application="chaos_app",le="([^"]+)"\} (\d+)', text)
        ]
        assert buckets[-1] == (float("inf"), 5)
        counts = [n for _, n in buckets]
        assert counts == sorted(counts)  # cumulative
        below_quarter = max(n for le, n in buckets if le <= 0.25)
        assert below_quarter == 4, buckets  # the fast ones; the 0.3 s sleep is above
        assert min(n for le, n in buckets if le >= 0.4) == 5
        total = float(re.search(r'_sum\{application="chaos_app"\} ([\d.]+)', text)[1])
        assert 0.3 <= total < 1.0
        # turned off: the new workers count nothing, and /metrics has no histogram
        assert control.put("/config/settings/latency_histogram", False).status == 200
        assert "corral_request_duration_seconds" not in control.get("/metrics").raw.decode()
        assert server.stop() == 0


# -- persistence ---------------------------------------------------------------------------


def test_the_state_directory_keeps_the_configuration_across_restarts():
    with short_dir() as directory:
        state_dir = directory / "state"
        socket_path = f"unix:{state_dir}/control.sock"
        with empty_server(state_dir) as server:
            put = ctl(
                "--socket",
                socket_path,
                "put",
                "/config",
                json.dumps(app_document("chaos_app", workers=2)),
            )
            assert put.returncode == 0, put.stderr
            server.port = listening_port(server, "127.0.0.1:0")
            assert get(server, "/pid")[0] == 200
            # its workers' titles name the application made through the API
            for pid in server.worker_pids():
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    assert cmdline.read().rstrip(b"\0") == b"corral: worker [chaos_app]"
            config = Control.of(server).get("/config").json
            assert server.stop() == 0
        saved = state_dir / "conf.json"
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        assert json.loads(saved.read_text()) == config
        assert [p.name for p in state_dir.iterdir()] == ["conf.json"]
        # started again the same way: the same configuration serves
        with Server(f"--state-dir={state_dir}", bind=None, wait_ready=False) as server:
            server.expected_workers = 2  # (workers= would give -w, which needs an APP)
            server.wait_ready()
            control = Control.of(server)
            # the saved document, with the server settings the command line gives over it
            config["settings"]["log_level"] = "debug"  # the harness's --log-level
            assert control.get("/config").json == config
            status, _, body = get(server, "/pid")
            assert status == 200 and int(body.split()[0]) in server.worker_pids()
            # HUP: the saved document is its own source; the same one starts again
            server.send(signal.SIGHUP)
            server.wait_log(r"reload complete: generation 2 serving with 2 worker\(s\)")
            assert control.get("/config").json == config
            # a change is saved; a failed one is not
            assert control.put("/config/applications/chaos_app/processes", 1).json == DONE
            assert json.loads(saved.read_text())["applications"]["chaos_app"]["processes"] == 1
            failed = control.put("/config/applications/chaos_app/module", "proc_import_fail")
            assert failed.status == 500
            assert json.loads(saved.read_text())["applications"]["chaos_app"]["module"] == (
                "chaos_app"
            )
            assert control.delete("/config").json == DONE  # everything: no listener, no worker
            wait_for(lambda: server.worker_pids() == [], timeout=10)
            assert json.loads(saved.read_text())["applications"] == {}
            assert server.stop() == 0


def test_usr2_hands_the_control_socket_to_the_new_master():
    with short_dir() as directory:
        state_dir = directory / "state"
        pidfile = directory / "corral.pid"
        with empty_server(state_dir, "--pid", str(pidfile)) as server:
            control = Control.of(server)
            assert control.put("/config", app_document("chaos_app")).json == DONE
            server.port = listening_port(server, "127.0.0.1:0")
            old = server.proc.pid
            server.send(signal.SIGUSR2)
            assert server.proc.wait(20) == 0  # the old master stepped down
            new = int(pidfile.read_text())
            assert new != old and alive(new)
            try:
                # the same socket file, now the new master's, with the saved configuration
                assert control.get("/config/applications/chaos_app/module").json == "chaos_app"
                assert control.put("/config/settings/http/idle_timeout", 3).json == DONE
                assert get(server, "/pid")[0] == 200
            finally:
                os.kill(new, signal.SIGTERM)
                wait_for(lambda: not alive(new), timeout=15)
            assert not Path(control.address[5:]).exists()


# -- corral ctl ----------------------------------------------------------------------------


def test_ctl_commands_and_exit_codes(tmp_path):
    with short_dir() as directory:
        with empty_server(directory / "state") as server:
            address = Control.of(server).address

            def run(*args: str, **kwargs):
                return ctl("--socket", address, *args, **kwargs)

            empty = run("get", "/config")
            assert empty.returncode == 0 and empty.stderr == ""
            assert json.loads(empty.stdout)["applications"] == {}
            assert empty.stdout.startswith('{\n    "listeners": {},')  # indented
            # put: JSON on the command line, a file, and standard input
            done = run("put", "config/applications/chaos", '{"module": "chaos_app"}')
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout) == DONE
            listener = tmp_path / "listener.json"
            listener.write_text('{"pass": "applications/chaos"}')
            assert run("put", "/config/listeners/127.0.0.1:0", str(listener)).returncode == 0
            server.port = listening_port(server, "127.0.0.1:0")
            assert get(server, "/pid")[0] == 200
            posted = run("post", "/config/settings/touch_reload", "-", stdin='"/tmp/x"')
            assert posted.returncode == 0, posted.stderr
            touched = run("get", "/config/settings/touch_reload")
            assert json.loads(touched.stdout) == ["/tmp/x"]
            assert run("delete", "/config/settings/touch_reload/0").returncode == 0
            assert json.loads(run("get", "/config/settings/touch_reload").stdout) == []
            status = run("status")
            assert status.returncode == 0
            assert json.loads(status.stdout)["applications"]["chaos"]["processes"]["running"] == 1
            assert run("status", "applications/chaos/processes/running").stdout == "1\n"
            before = server.worker_pids()
            restarted = run("restart", "chaos")
            assert (restarted.returncode, json.loads(restarted.stdout)) == (0, {"success": "Ok"})
            wait_for(lambda: server.worker_pids() and server.worker_pids() != before, 10)
            # the default address from the environment
            assert ctl("get", "/config/listeners", env={"CORRAL_CONTROL": address}).returncode == 0
            # API errors: exit code 1, one line on stderr
            for args, line in [
                (("get", "/config/nope"), "error 404: Value doesn't exist. /config/nope does"),
                (
                    ("put", "/config/applications/chaos/processes", '{"a": '),
                    "error 400: Invalid JSON. unexpected end of the JSON text at line 1, column 7",
                ),
                (
                    ("put", "/config/applications/chaos/processes", "0"),
                    "error 400: Invalid "
                    "configuration. $.applications.chaos.processes: expected int >= 1 or object "
                    "{max, spare, idle_timeout}, got 0",
                ),
                (("post", "/config", "{}"), "error 405: Method isn't allowed."),
                (("restart", "nope"), "error 404: Value doesn't exist."),
            ]:
                failed = run(*args)
                assert failed.returncode == 1, (args, failed.stdout)
                assert failed.stdout == ""
                assert failed.stderr.startswith(f"corral ctl: {line}"), failed.stderr
                assert failed.stderr.count("\n") == 1
            assert server.stop() == 0
        gone = ctl("--socket", address, "get", "/config")  # nothing listens any more
        assert gone.returncode == 1
        assert gone.stderr.startswith(
            f"corral ctl: error: cannot reach the control API at {address}"
        )
    # usage errors: exit code 2, one line
    for args in [
        (),
        ("frob",),
        ("get",),
        ("put", "/config"),
        ("--socket", "x:y", "status"),
        ("status", "a", "b"),
        ("--timeout", "soon", "status"),
    ]:
        usage = ctl(*args)
        assert usage.returncode == 2, args
        assert usage.stderr.startswith("corral ctl: error: "), usage.stderr
        assert usage.stderr.count("\n") == 1, usage.stderr
    helped = ctl("--help")
    assert helped.returncode == 0 and "restart" in helped.stdout


def test_ctl_against_a_server_without_the_api_says_it_is_off_and_how_to_turn_it_on():
    """`corral ctl top` (and every command) against a Gunicorn-style server: one line naming
    the server found running (by its process title) and the flags that turn the API on."""
    how = (
        "the API is off unless a server starts with --control ADDRESS or --state-dir DIR (then "
        "at unix:DIR/control.sock); start it so and give ctl that address (--socket ADDRESS or "
        "$CORRAL_CONTROL)"
    )
    with short_dir() as directory, Server("proc_apps") as server:
        address = f"unix:{directory}/c.sock"
        for args, env in [
            (("--socket", address, "top", "--once"), {}),
            (("top",), {"CORRAL_CONTROL": address}),  # the full-screen view: before it starts
            (("--socket", address, "status"), {}),
            (("--socket", address, "stacks"), {}),
        ]:
            failed = ctl(*args, env=env)
            assert failed.returncode == 1, (args, failed.stdout, failed.stderr)
            assert failed.stdout == ""
            (line,) = failed.stderr.splitlines()
            prefix = (
                f"corral ctl: error: cannot reach the control API at {address}: No such file or "
                "directory; "
            )
            assert line.startswith(prefix), line
            running = re.match(  # this machine may run other servers too
                r"(?:a corral server runs|corral servers run) here \(pids? ([\d, ]+)\), but no "
                "control API at that address: ",
                line.removeprefix(prefix),
            )
            assert running, line
            assert server.proc.pid in {int(pid) for pid in running.group(1).split(", ")}, line
            assert line.endswith(how), line
        master = server.proc.pid
        assert server.stop() == 0
    after = ctl("--socket", address, "status").stderr  # the server stopped: not named any more
    running = re.search(r"\(pids? ([\d, ]+)\)", after)  # other servers of this machine's
    assert master not in ({int(p) for p in running.group(1).split(", ")} if running else ())
    assert after.rstrip().endswith(how), after


def test_status_and_metrics_count_asgi_requests_and_websocket_sessions():
    from websockets.sync.client import connect as ws_connect

    with (
        short_dir() as directory,
        Server("websocket_apps:app", f"--control=unix:{directory}/c.sock") as server,
    ):
        control = Control.of(server)
        for _ in range(3):
            assert get(server, "/anything")[0] == 200
        with ws_connect(f"ws://127.0.0.1:{server.port}/echo") as ws:  # one session
            ws.send("counted")
            assert ws.recv() == "counted"

        def counted():
            text = control.get("/metrics").raw.decode()
            wanted = 'corral_requests_total{application="websocket_apps"} 4\n' in text and (
                'corral_request_duration_seconds_count{application="websocket_apps"} 4\n' in text
            )
            return text if wanted else None

        try:
            wait_for(counted, timeout=5)
        except AssertionError:
            raise AssertionError(control.get("/metrics").raw.decode()) from None
        assert control.get("/status/applications/websocket_apps/requests/total").json == 4
        assert server.stop() == 0


def test_a_worker_forked_while_the_api_answers_keeps_no_connection_open():
    """A respawn forked between asyncio's accept of an API connection and its connection_made
    got a copy of the connection: its client then waited for the close until its timeout."""
    app = "chaos_app"
    with (
        short_dir() as directory,
        Server(
            app,
            f"--control=unix:{directory}/c.sock",
            "--threads=2",
            "--min-worker-lifetime=0",
            workers=2,
        ) as server,
    ):
        control = Control.of(server)
        control.timeout = 3  # a held connection fails the read at once, not after a minute
        workers = f"/status/applications/{app}/workers"

        def serving() -> list[dict] | None:
            rows = control.get(workers).json
            return rows if len(rows) == 2 and all(w["state"] == "ready" for w in rows) else None

        for _ in range(12):
            os.kill(wait_for(serving, timeout=10)[1]["pid"], signal.SIGKILL)
            # ask without a pause while the master reaps it and forks its successor
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                assert control.get(workers).status == 200
        assert server.stop() == 0


def test_a_worker_keeps_its_listener_on_the_control_api_s_port_at_another_address():
    """The fork closes the API's connections by their local address, and a listener of the
    application's own on the same port (another loopback address) is not one of them."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with Server(
        "proc_apps",
        "--control",
        f"127.0.0.1:{port}",
        "--control-token",
        "s3cret",
        bind=f"127.0.0.2:{port}",
    ) as server:
        control = Control.of(server)
        assert control.address == f"http://127.0.0.1:{port}"
        assert control.get("/config", token="s3cret").status == 200
        with socket.create_connection(("127.0.0.2", port), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert read_all(sock).startswith(b"HTTP/1.1 200 ")
        assert server.stop() == 0
