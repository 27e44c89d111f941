"""Reload (HUP, --touch-reload, --reload): a new generation from the configuration and code as
they are now, the old workers retired only once every new one is ready, a failed generation
rolled back while the old one serves on. On real processes; see supervision.py for the log
events the order checks read.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from tests.integration.load import Load
from tests.integration.server import Server, wait_for
from tests.integration.supervision import (
    NO_BYTECODE,
    events,
    generation_pids,
    get,
    wait_ready_in,
    write_app,
)


def version_of(server: Server) -> str:
    status, _, body = get(server)
    assert status == 200
    return body.decode().split()[0]


def versions_and_pids(server: Server, count: int = 20) -> set[tuple[str, int]]:
    """``(version, pid)`` of ``count`` answers, each on a new connection."""
    answers = set()
    for _ in range(count):
        version, pid = get(server)[2].decode().split()
        answers.add((version, int(pid)))
    return answers


def assert_generation_overlap(log: str, old: int, new: int) -> None:
    """Every worker of generation ``new`` was ready before any worker of ``old`` exited, and
    every worker of ``old`` exited (drained: exit code 0)."""
    found = events(log)
    new_ready = [e.index for e in found if e.kind == "ready" and e.generation == new]
    old_pids = set(generation_pids(log, old))
    old_exits = [e for e in found if e.kind == "exited" and e.pid in old_pids]
    assert new_ready and old_exits, log
    assert max(new_ready) < min(e.index for e in old_exits), log
    assert {e.pid for e in old_exits} == old_pids, log
    assert all(e.detail == "exit code 0" for e in old_exits), old_exits


def spawn_count(server: Server) -> int:
    return len(re.findall(r"worker \d+ spawned", server.stderr))


# -- HUP re-reads the configuration ---------------------------------------------------------


def test_hup_rereads_the_config_file(tmp_path):
    config = tmp_path / "corral.toml"
    text = (
        'app = "proc_apps"\nbind = ["127.0.0.1:0"]\n'
        'workers = {workers}\nenv = {{ MARK = "{mark}" }}\n'
    )
    config.write_text(text.format(workers=1, mark="one"))
    with Server(f"--config={config}", bind=None) as server:
        info = json.loads(get(server, "/info")[2])
        assert info["environ"]["MARK"] == "one"
        (first_pid,) = server.worker_pids()
        config.write_text(text.format(workers=3, mark="two"))
        server.send(signal.SIGHUP)
        server.wait_log(r"reload complete: generation 2 serving with 3 worker\(s\)")
        wait_for(lambda: len(pids := server.worker_pids()) == 3 and first_pid not in pids, 5)
        answers = [json.loads(get(server, "/info")[2]) for _ in range(10)]
        assert {a["environ"]["MARK"] for a in answers} == {"two"}
        assert first_pid not in {a["pid"] for a in answers}
        assert "reloading (SIGHUP)" in server.stderr
        assert_generation_overlap(server.stderr, 1, 2)
        # and back to one worker: the two extra slots go with the old generation
        config.write_text(text.format(workers=1, mark="three"))
        server.send(signal.SIGHUP)
        server.wait_log(r"reload complete: generation 3 serving with 1 worker\(s\)")
        wait_for(lambda: len(server.worker_pids()) == 1, timeout=5)
        assert json.loads(get(server, "/info")[2])["environ"]["MARK"] == "three"
        assert_generation_overlap(server.stderr, 2, 3)
        assert server.stop() == 0


@pytest.mark.parametrize("threads", [1, 4])
def test_hups_under_load_fail_no_request(threads):
    with (
        Server(
            "chaos_app", "--threads", str(threads), "--graceful-timeout", "5", workers=2
        ) as server,
        Load(server, 8, "/sleep?s=0.01") as load,
    ):
        load.wait_requests(100)
        for generation in (2, 3, 4):
            server.send(signal.SIGHUP)
            server.wait_log(f"reload complete: generation {generation} ")
            load.wait_requests(100)
        # once the old workers are gone, the last generation's answer, and only they
        last = set(generation_pids(server.stderr, 4))
        wait_for(lambda: set(server.worker_pids()) == last, timeout=5)
        settled = time.monotonic()
        load.wait_requests(100)
    assert not load.failures, (load.summary(), load.failures[:5])
    assert {r.pid for r in load.ok if r.start > settled} <= last
    log = server.stderr
    for generation in (2, 3, 4):
        assert_generation_overlap(log, generation - 1, generation)
    assert server.stop() == 0


# -- a generation that cannot start is rolled back ------------------------------------------


@pytest.mark.parametrize("failure", ["syntax error", "crash at import"])
def test_failed_generation_is_rolled_back(tmp_path, failure):
    write_app(tmp_path, "v1")
    with Server(
        "reload_app", "--graceful-timeout", "5", workers=2, cwd=str(tmp_path), env=NO_BYTECODE
    ) as server:
        before = set(server.worker_pids())
        assert {version for version, _ in versions_and_pids(server)} == {"v1"}
        if failure == "syntax error":
            (tmp_path / "reload_app.py").write_text("def application(:\n")
            # the cause the worker sent, in the master's one line
            app_file = re.escape(str(tmp_path / "reload_app.py"))
            expected = rf"exit code 3\) before it was ready: SyntaxError: .* \(File \"{app_file}\""
            expected += r", line 1\)"
        else:
            write_app(tmp_path, "v2")
            (tmp_path / "crash.flag").touch()
            expected = r"exit code 1\) before it was ready"
        spawned = spawn_count(server)
        server.send(signal.SIGHUP)
        line = server.wait_log(r".*reload failed: .*")[0]
        assert re.search(
            rf"reload failed: worker \d exited \({expected}; generation 1 keeps serving$", line
        ), line
        if failure == "syntax error":  # above it, the worker showed the line at fault
            shown = server.stderr.splitlines()
            at = shown.index("    def application(:")
            assert shown[at - 1] == f'  File "{tmp_path / "reload_app.py"}", line 1', shown
            assert shown[at + 2] == "SyntaxError: invalid syntax"
            assert "Traceback" not in server.stderr and "importlib" not in server.stderr
        # the old workers serve on, and nothing retries the new generation by itself
        assert spawn_count(server) == spawned + 2
        assert {answer for answer in versions_and_pids(server)} <= {("v1", pid) for pid in before}
        time.sleep(2.5)  # showing that the master does not try again takes a while
        assert spawn_count(server) == spawned + 2, server.stderr
        assert set(server.worker_pids()) == before
        # fixed, and told again: the next generation serves the new code
        write_app(tmp_path, "v3")
        (tmp_path / "crash.flag").unlink(missing_ok=True)
        server.send(signal.SIGHUP)
        server.wait_log(r"reload complete: generation 3 serving with 2 worker\(s\)")
        new = set(generation_pids(server.stderr, 3))
        assert len(new) == 2 and not new & before
        wait_for(lambda: set(server.worker_pids()) == new, timeout=5)
        assert {version for version, _ in versions_and_pids(server)} == {"v3"}
        assert server.stop() == 0


def test_failed_reload_logs_the_line_at_fault_and_the_cause_to_the_error_log_file(tmp_path):
    write_app(tmp_path, "v1")
    errors = tmp_path / "error.log"
    with Server(
        "reload_app",
        "--error-logfile",
        str(errors),
        cwd=str(tmp_path),
        env=NO_BYTECODE,
        wait_ready=False,
    ) as server:
        wait_ready_in(server, errors)
        (tmp_path / "reload_app.py").write_text("def application(:\n")
        server.send(signal.SIGHUP)
        wait_for(lambda: "reload failed" in errors.read_text(), timeout=10)
        text = errors.read_text()
        assert "\n    def application(:\n" in text, text
        assert text.index("\nSyntaxError: invalid syntax\n") < text.index("reload failed"), text
        (failed,) = [line for line in text.splitlines() if "reload failed" in line]
        assert "before it was ready: SyntaxError: invalid syntax (File " in failed, failed
        assert version_of(server) == "v1"
        assert server.stop() == 0
    assert server.stderr == ""


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        ('app = "proc_apps"\nbind = ["127.0.0.1:0"]\nworkers = "two"\n', r"\$\.workers"),
        ('app = "proc_apps"\nbind = ["127.0.0.1:0"\n', r"corral\.toml"),
    ],
    ids=["invalid value", "not toml"],
)
def test_hup_with_a_broken_config_file_keeps_serving(tmp_path, broken, reason):
    config = tmp_path / "corral.toml"
    config.write_text('app = "proc_apps"\nbind = ["127.0.0.1:0"]\nworkers = 1\n')
    with Server(f"--config={config}", bind=None) as server:
        (pid,) = server.worker_pids()
        config.write_text(broken)
        server.send(signal.SIGHUP)
        server.wait_log(r"reload failed")
        lines = server.stderr.splitlines()
        failed = [i for i, line in enumerate(lines) if "reload failed" in line]
        assert len(failed) == 1, lines
        line = lines[failed[0]]
        assert re.search(reason, line), line
        assert line.endswith("the running workers keep serving"), line
        after = lines[failed[0] + 1 :]
        assert not any(line.startswith(("Traceback", "  ")) for line in after), after
        assert json.loads(get(server, "/info")[2])["pid"] == pid
        assert server.worker_pids() == [pid]
        assert "spawned" not in "\n".join(after)
        assert server.stop() == 0


# -- --touch-reload -------------------------------------------------------------------------


def test_touch_reload_serves_the_new_code_without_a_failed_request(tmp_path):
    write_app(tmp_path, "v1")
    touched = tmp_path / "reload.touch"
    touched.write_text("")
    with (
        Server(
            "reload_app",
            "--touch-reload",
            str(touched),
            "--graceful-timeout",
            "5",
            workers=2,
            cwd=str(tmp_path),
            env=NO_BYTECODE,
        ) as server,
        Load(server, 6, "/") as load,
    ):
        load.wait_requests(100)
        before = set(server.worker_pids())
        write_app(tmp_path, "v2")
        load.wait_requests(100)  # an edit alone reloads nothing
        assert "reloading" not in server.stderr
        os.utime(touched)
        server.wait_log(rf"reloading \({re.escape(str(touched))} was touched\)")
        server.wait_log(r"reload complete: generation 2 ")
        new = set(generation_pids(server.stderr, 2))
        wait_for(lambda: set(server.worker_pids()) == new, timeout=5)
        load.wait_requests(100)
        assert not new & before
        # and again: each touch is one more generation
        os.utime(touched, ns=(time.time_ns(), time.time_ns() + 1))
        server.wait_log(r"reload complete: generation 3 ")
        load.wait_requests(100)
    assert not load.failures, (load.summary(), load.failures[:5])
    requests = load.ok
    assert {r.body.split()[0] for r in requests if r.pid in before} == {b"v1"}
    assert {r.body.split()[0] for r in requests if r.pid in new} == {b"v2"}
    assert requests[-1].body.startswith(b"v2 ")
    assert_generation_overlap(server.stderr, 1, 2)
    assert server.stop() == 0


# -- --reload (watchfiles) ------------------------------------------------------------------


def change_until_reloaded(server: Server, change, generation: int) -> None:
    """Make ``change`` until generation ``generation`` serves. The watcher's thread sets its
    watches up a little after the master logs that it watches, so an early change may go
    unseen: then the test changes the file again."""
    deadline = time.monotonic() + 15
    while True:
        change()
        try:
            server.wait_log(rf"reload complete: generation {generation} ", timeout=3)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def test_reload_flag_follows_sources_and_the_config_file(tmp_path):
    pytest.importorskip("watchfiles", reason="--reload needs watchfiles (the test extra)")
    write_app(tmp_path, "v1")
    config = tmp_path / "corral.toml"
    text = 'app = "reload_app"\nbind = ["127.0.0.1:0"]\nserver_header = "{header}"\n'
    config.write_text(text.format(header="first"))
    with Server(
        f"--config={config}", "--reload", bind=None, cwd=str(tmp_path), env=NO_BYTECODE
    ) as server:
        server.wait_log(r"reload: watching .*corral\.toml")
        assert version_of(server) == "v1"
        version = iter(range(2, 100))
        change_until_reloaded(server, lambda: write_app(tmp_path, f"v{next(version)}"), 2)
        assert "reload_app.py changed" in server.stderr
        wait_for(lambda: version_of(server) != "v1", timeout=5)
        assert re.fullmatch(r"v\d+", version_of(server))
        # a file that is not Python source changes nothing
        (tmp_path / "notes.txt").write_text("not code")
        time.sleep(1.5)  # showing that nothing happens: past the watcher's 300 ms debounce
        assert "reloading" not in server.stderr.split("reload complete: generation 2")[1]
        change_until_reloaded(server, lambda: config.write_text(text.format(header="second")), 3)
        assert "corral.toml changed" in server.stderr
        assert get(server)[1]["server"] == "second"
        assert server.stop() == 0
