"""Gunicorn-compatible server hooks (``--hooks``): where each runs, with what, and failures.

Most tests load ``apps/record_hooks.py``, which appends one JSON line per call (hook, pid,
what its arguments showed) to ``$HOOKS_LOG``; the test then reads the calls back in order.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import textwrap
from pathlib import Path

import pytest

from tests.integration.server import APPS, Server, read_all, read_response, wait_for

RECORDER = str(APPS / "record_hooks.py")
MASTER_HOOKS = {
    "nworkers_changed",
    "on_starting",
    "when_ready",
    "pre_fork",
    "child_exit",
    "on_reload",
    "on_exit",
}
WORKER_HOOKS = {
    "post_fork",
    "post_worker_init",
    "pre_request",
    "post_request",
    "worker_int",
    "worker_abort",
    "worker_exit",
}


def calls(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def named(records: list[dict], hook: str) -> list[dict]:
    return [r for r in records if r["hook"] == hook]


def wait_calls(log: Path, hook: str, count: int = 1, timeout: float = 15.0) -> list[dict]:
    return wait_for(
        lambda: (found := named(calls(log), hook)) and len(found) >= count and found, timeout
    )


def index(records: list[dict], hook: str, **match) -> int:
    """Position of the first call of ``hook`` whose fields include ``match``."""
    for position, record in enumerate(records):
        if record["hook"] == hook and all(record.get(k) == v for k, v in match.items()):
            return position
    raise AssertionError(f"no call of {hook} with {match} in {records}")


def get(sock: socket.socket, target: str) -> tuple[int, bytes]:
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: hooks.test\r\n\r\n".encode())
    status, _headers, body = read_response(sock)
    return status, body


@pytest.fixture
def hooks_log(tmp_path: Path) -> Path:
    return tmp_path / "hooks.jsonl"


def write_hooks(tmp_path: Path, source: str, name: str = "hooks.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


# -- the life of a server -------------------------------------------------------------------


def test_every_hook_runs_in_its_process_in_order(hooks_log):
    """Start with 2 workers, one request, HUP, TTIN, TERM: each hook in the right process,
    in Gunicorn's order, and the worker objects are the ones pre_fork saw."""
    with Server(
        "proc_apps", "--hooks", "record_hooks", workers=2, env={"HOOKS_LOG": str(hooks_log)}
    ) as server:
        master = server.proc.pid
        with server.connect() as sock:
            assert get(sock, "/ctype?x=1") == (200, b"typed")
        wait_calls(hooks_log, "post_request")
        server.send(signal.SIGHUP)
        server.wait_log(r"reload complete: generation 2")
        wait_calls(hooks_log, "child_exit", count=2)  # the first generation, drained
        server.send(signal.SIGTTIN)
        server.wait_log(r"worker 2 ready")  # TERM before its handler is set would kill it
        assert server.stop() == 0
    records = calls(hooks_log)

    for record in records:
        if record["hook"] in MASTER_HOOKS:
            assert record["pid"] == master, record
        else:
            assert record["hook"] in WORKER_HOOKS, record
            assert record["pid"] != master, record
            assert record["worker_pid"] == record["pid"], record  # worker.pid is its own
            assert record["ppid"] == master, record
        if "server_pid" in record:
            assert record["server_pid"] == master, record

    # start-up, as Gunicorn orders it
    assert [r["hook"] for r in records[:4]] == [
        "nworkers_changed",
        "on_starting",
        "when_ready",
        "pre_fork",
    ]
    assert (records[0]["new"], records[0]["old"]) == (2, None)
    assert records[1]["workers"] == 2
    assert records[2]["bind"] == ["127.0.0.1:0"]
    assert records[2]["forked"] == 0
    assert records[-1]["hook"] == "on_exit"

    # every worker, from pre_fork in the master to child_exit in the master
    assert [r["age"] for r in named(records, "pre_fork")] == [1, 2, 3, 4, 5]
    for age in range(1, 6):
        tag = f"w{age}"
        pre_fork = index(records, "pre_fork", age=age)
        assert records[pre_fork]["worker_pid"] == "[booting]"
        post_fork = index(records, "post_fork", age=age, tag=tag)
        pid = records[post_fork]["pid"]
        init = index(records, "post_worker_init", pid=pid)
        assert records[init]["booted"] is False  # Gunicorn sets it after the hook
        assert records[init]["tag"] == tag
        exit_ = index(records, "worker_exit", pid=pid)
        assert records[exit_]["alive"] is False
        assert records[exit_]["booted"] is True
        child_exit = index(records, "child_exit", worker_pid=pid)
        assert records[child_exit]["tag"] == tag  # the same object pre_fork tagged
        assert pid not in records[child_exit]["workers"]
        assert pre_fork < post_fork < init < exit_ < child_exit

    # the request, in a first-generation worker
    (pre,) = named(records, "pre_request")
    (post,) = named(records, "post_request")
    assert pre["pid"] == post["pid"]
    assert pre["age"] in (1, 2)
    assert pre["method"] == "GET"
    assert (pre["uri"], pre["path"], pre["query"]) == ("/ctype?x=1", "/ctype", "x=1")
    assert pre["version"] == [1, 1]
    assert ["HOST", "hooks.test"] in pre["headers"]
    assert pre["remote_addr"][0] == "127.0.0.1"
    assert (post["path"], post["path_info"]) == ("/ctype", "/ctype")
    assert (post["status"], post["status_code"], post["sent"]) == ("200 OK", 200, 5)
    assert ["X-App", "proc"] in post["headers"]
    assert records.index(pre) < records.index(post)

    # HUP: on_reload before the new generation forks; the old one exits once it serves
    reload_at = index(records, "on_reload")
    assert records[reload_at]["workers"] == 2
    assert index(records, "post_worker_init", age=2) < reload_at < index(records, "pre_fork", age=3)
    assert reload_at < index(records, "nworkers_changed", new=2, old=2)  # committed
    for age in (1, 2):
        pid = records[index(records, "post_fork", age=age)]["pid"]
        assert index(records, "post_worker_init", age=4) < index(
            records, "child_exit", worker_pid=pid
        )

    # TTIN: the count first, then the worker it asks for
    ttin = index(records, "nworkers_changed", new=3, old=2)
    assert records[ttin]["num_workers"] == 3
    assert ttin < index(records, "pre_fork", age=5)
    assert [(r["new"], r["old"]) for r in named(records, "nworkers_changed")] == [
        (2, None),
        (2, 2),
        (3, 2),
    ]


@pytest.mark.parametrize("threads", [1, 4])
def test_request_hooks_bracket_every_kind_of_response(hooks_log, threads):
    """pre_request before the app, post_request after the last byte and before the next
    request of the connection: one-chunk, streamed, sendfile, request body, app failure."""
    file_size = (APPS / "hooks_app.py").stat().st_size
    with Server(
        "hooks_app",
        "--hooks",
        RECORDER,
        "--threads",
        str(threads),
        env={"HOOKS_LOG": str(hooks_log), "HOOKS_POST_REQUEST_DELAY": "0.1"},
    ) as server:
        (worker,) = server.worker_pids()
        with server.connect() as sock:
            # pipelined: the second waits for the first one's post_request
            sock.sendall(
                b"GET /hello HTTP/1.1\r\nHost: h\r\n\r\nGET /stream?n=3 HTTP/1.1\r\nHost: h\r\n\r\n"
            )
            both = b""
            while not both.endswith(b"\r\n0\r\n\r\n"):  # the end of the chunked second
                chunk = sock.recv(65536)
                assert chunk, both
                both += chunk
            first, second = both.split(b"HTTP/1.1 ")[1:]
            assert first.startswith(b"200 ") and first.endswith(b"\r\n\r\nHello, world!")
            assert second.startswith(b"200 ") and b"Transfer-Encoding: chunked" in second
            assert get(sock, "/file")[1] == (APPS / "hooks_app.py").read_bytes()
            sock.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nping")
            assert read_response(sock)[2] == b"ping"
        wait_calls(hooks_log, "post_request", count=4)  # the order holds per connection
        with server.connect() as sock:
            sock.sendall(b"GET /fail HTTP/1.1\r\nHost: h\r\n\r\n")
            assert read_all(sock).startswith(b"HTTP/1.1 500 ")
        wait_calls(hooks_log, "post_request", count=5)
        assert server.stop() == 0
    records = [r for r in calls(hooks_log) if r["hook"] in ("pre_request", "post_request")]
    assert {r["pid"] for r in records} == {worker}
    assert [(r["hook"], r["path"]) for r in records] == [
        (hook, path)
        for path in ("/hello", "/stream", "/file", "/echo", "/fail")
        for hook in ("pre_request", "post_request")
    ]
    posts = named(records, "post_request")
    assert [(r["method"], r["status_code"], r["sent"]) for r in posts] == [
        ("GET", 200, 13),
        ("GET", 200, 15 + len(b"5\r\n\r\n") * 3),  # chunked: as counted on the wire
        ("GET", 200, file_size),
        ("POST", 200, 4),
        ("GET", 500, 0),
    ]
    assert posts[-1]["status"] == "500 Internal Server Error"
    assert named(records, "pre_request")[1]["query"] == "n=3"


# -- failures -------------------------------------------------------------------------------

RAISING = """\
def on_starting(server):
    raise RuntimeError("boom in on_starting")

def pre_fork(server, worker):
    raise RuntimeError("boom in pre_fork")

def post_worker_init(worker):
    raise RuntimeError("boom in post_worker_init")

def pre_request(worker, req):
    raise RuntimeError("boom in pre_request")

def post_request(worker, req, environ, resp):
    raise RuntimeError("boom in post_request")
"""


@pytest.mark.parametrize("threads", [1, 4])
def test_a_hook_that_raises_is_logged_and_the_server_serves_on(tmp_path, threads):
    hooks = write_hooks(tmp_path, RAISING)
    with Server("proc_apps", "--hooks", hooks, "--threads", str(threads)) as server:
        (worker,) = server.worker_pids()
        with server.connect() as sock:
            for _ in range(2):
                assert get(sock, "/ctype") == (200, b"typed")
        server.wait_log(r"hook post_request failed", count=2)
        assert server.worker_pids() == [worker]
        assert server.stop() == 0
    log = server.stderr
    master = server.proc.pid
    for hook, pid in (
        ("on_starting", master),
        ("pre_fork", master),
        ("post_worker_init", worker),
        ("pre_request", worker),
        ("post_request", worker),
    ):
        pattern = (
            rf"\[{pid}\] \[ERROR\] hook {hook} failed: RuntimeError: boom in {hook}\n"
            rf"Traceback \(most recent call last\):\n(?:  .*\n)*?"
            rf'  File "{re.escape(hooks)}", line \d+, in {hook}\n'
        )
        assert re.search(pattern, log), (hook, log)
    assert "died" not in log


BAD_HOOKS = {
    "missing": (None, "hooks file '{path}' not found"),
    "name_error": (
        "import os\n\nundefined_name\n",
        "hooks file '{path}' failed to import: {path}:3: NameError: name 'undefined_name'",
    ),
    "syntax": ("def pre_fork(server, worker)\n    pass\n", "failed to import: {path}:1: "),
    "not_callable": ("pre_fork = 3\n", "hooks file '{path}': pre_fork is not callable (int)"),
    "arity": (
        "def pre_fork(server):\n    pass\n",
        "pre_fork must accept 2 argument(s) (server, worker)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_HOOKS))
def test_hooks_that_cannot_load_stop_the_start_with_one_line(tmp_path, case):
    source, expected = BAD_HOOKS[case]
    path = str(tmp_path / "hooks.py")
    if source is not None:
        Path(path).write_text(source)
    server = Server("proc_apps", "--hooks", path, wait_ready=False)
    try:
        assert server.proc.wait(15) == 2
    finally:
        server.stop()
    lines = server.stderr.splitlines()
    assert len(lines) == 1, server.stderr
    assert lines[0].startswith("corral: error: hooks file "), lines
    assert expected.format(path=path) in lines[0], lines


def test_a_hooks_module_that_does_not_exist_stops_the_start(tmp_path):
    server = Server("proc_apps", "--hooks", "no_such_package.hooks", wait_ready=False)
    try:
        assert server.proc.wait(15) == 2
    finally:
        server.stop()
    assert server.stderr.splitlines() == [
        "corral: error: hooks module 'no_such_package.hooks' not found "
        "(No module named 'no_such_package')"
    ]


# -- signals --------------------------------------------------------------------------------


def test_worker_abort_runs_in_the_worker_killed_for_a_timeout(hooks_log):
    with Server(
        "proc_apps", "--hooks", RECORDER, "--timeout", "1", env={"HOOKS_LOG": str(hooks_log)}
    ) as server:
        (worker,) = server.worker_pids()
        with server.connect(timeout=30) as sock:
            sock.sendall(b"GET /sleep?s=30 HTTP/1.1\r\nHost: h\r\n\r\n")
            (abort,) = wait_calls(hooks_log, "worker_abort")
            assert read_all(sock) == b""
        wait_calls(hooks_log, "child_exit")
        assert server.stop() == 0
    records = calls(hooks_log)
    assert (abort["pid"], abort["worker_pid"], abort["alive"]) == (worker, worker, False)
    assert index(records, "worker_abort") < index(records, "worker_exit", pid=worker)
    assert index(records, "worker_exit", pid=worker) < index(
        records, "child_exit", worker_pid=worker
    )


def test_pre_exec_runs_in_the_new_master_before_its_exec(hooks_log):
    with Server(
        "proc_apps", "--hooks", RECORDER, workers=1, env={"HOOKS_LOG": str(hooks_log)}
    ) as server:
        old = server.proc.pid
        server.send(signal.SIGUSR2)
        (pre_exec,) = wait_calls(hooks_log, "pre_exec")
        new = pre_exec["pid"]
        assert new != old and pre_exec["server_pid"] == old
        assert server.proc.wait(20) == 0  # the new master took over
        # the exec'd process is the new master: it loads the hooks afresh
        starting = wait_calls(hooks_log, "on_starting", count=2)[1]
        assert starting["pid"] == new
        wait_calls(hooks_log, "post_worker_init", count=2)
        os.kill(new, signal.SIGTERM)
        wait_calls(hooks_log, "on_exit", count=2)
        wait_for(lambda: not os.path.exists(f"/proc/{new}") or _zombie(new), timeout=15)
    ends = named(calls(hooks_log), "on_exit")
    assert [r["pid"] for r in ends] == [old, new]


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return stream.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# -- unmodified Gunicorn hook code ----------------------------------------------------------

GUNICORN_STYLE = """\
# A gunicorn.conf.py, as people write them: settings and server hooks side by side.
import sys
import threading
import traceback

bind = "0.0.0.0:8000"
workers = 4
loglevel = "debug"


def on_starting(server):
    server.log.info("Starting with %d workers", server.cfg.workers)


def when_ready(server):
    server.log.info("Server is ready. Spawning workers")


def pre_fork(server, worker):
    pass


def post_fork(server, worker):
    server.log.info("Worker spawned (pid: %s)", worker.pid)


def post_worker_init(worker):
    worker.log.info("Worker initialized (pid: %s, age: %s)", worker.pid, worker.age)


def pre_request(worker, req):
    worker.log.debug("%s %s", req.method, req.path)


def post_request(worker, req, environ, resp):
    worker.log.info("%s %s -> %s", req.method, req.path, resp.status)


def worker_int(worker):
    worker.log.info("worker received INT or QUIT signal")
    id2name = {th.ident: th.name for th in threading.enumerate()}
    code = []
    for thread_id, stack in sys._current_frames().items():
        code.append("\\n# Thread: %s(%d)" % (id2name.get(thread_id, ""), thread_id))
        for filename, lineno, name, line in traceback.extract_stack(stack):
            code.append('File: "%s", line %d, in %s' % (filename, lineno, name))
            if line:
                code.append("  %s" % (line.strip()))
    worker.log.debug("\\n".join(code))


def worker_abort(worker):
    worker.log.info("worker received SIGABRT signal")


def child_exit(server, worker):
    server.log.info("Worker exited (pid: %s)", worker.pid)
"""


def test_unmodified_gunicorn_hooks_run(tmp_path):
    hooks = write_hooks(tmp_path, GUNICORN_STYLE, "gunicorn.conf.py")
    with Server("proc_apps", "--hooks", hooks, workers=2) as server:
        master = server.proc.pid
        workers = server.worker_pids()
        assert len(workers) == 2  # the file's own `workers = 4` is not a corral setting
        with server.connect() as sock:
            assert get(sock, "/ctype?q=1") == (200, b"typed")
        server.wait_log(r"GET /ctype -> 200 OK")
        server.send(signal.SIGQUIT)
        assert server.proc.wait(15) == 0
        server.stop()
    log = server.stderr
    assert f"[{master}] [INFO] Starting with 2 workers" in log
    assert f"[{master}] [INFO] Server is ready. Spawning workers" in log
    for pid in workers:
        assert f"[{pid}] [INFO] Worker spawned (pid: {pid})" in log
        assert re.search(rf"\[{pid}\] \[INFO\] Worker initialized \(pid: {pid}, age: [12]\)", log)
        assert f"[{pid}] [INFO] worker received INT or QUIT signal" in log
        assert f"[{master}] [INFO] Worker exited (pid: {pid})" in log
    assert re.search(r"\[\d+\] \[DEBUG\] GET /ctype\n", log)
    assert "# Thread: MainThread" in log
    assert "failed" not in log, log


# -- ASGI ---------------------------------------------------------------------------------------


def test_pre_and_post_request_run_around_an_asgi_application(hooks_log):
    with Server(
        "asgi_apps:app", "--hooks", "record_hooks", env={"HOOKS_LOG": str(hooks_log)}
    ) as server:
        with server.connect() as sock:
            assert get(sock, "/scope/x?y=1")[0] == 200
            assert get(sock, "/error")[0] == 500
        (pre, _), (post, post_error) = (
            wait_calls(hooks_log, "pre_request", count=2),
            wait_calls(hooks_log, "post_request", count=2),
        )
    assert (pre["method"], pre["uri"], pre["path"], pre["query"]) == (
        "GET", "/scope/x?y=1", "/scope/x", "y=1"
    )  # fmt: skip
    assert ["HOST", "hooks.test"] in pre["headers"] and pre["remote_addr"][0] == "127.0.0.1"
    assert (post["path"], post["path_info"]) == ("/scope/x", None)  # a scope, not an environ
    assert (post["status"], post["status_code"]) == ("200 OK", 200)
    assert post["sent"] > 0 and ["content-type", "application/json"] in post["headers"]
    assert (post_error["path"], post_error["status_code"]) == ("/error", 500)  # runs on failure
    assert pre["pid"] == post["pid"] != server.proc.pid


def test_child_exit_gets_each_worker_killed_at_the_end_of_the_graceful_timeout(hooks_log):
    """TERM while both workers are busy past the graceful timeout: the master kills them and
    calls child_exit once for each, with that worker."""
    with Server(
        "proc_apps",
        "--hooks",
        RECORDER,
        "--graceful-timeout",
        "1",
        workers=2,
        env={"HOOKS_LOG": str(hooks_log)},
    ) as server:
        workers = set(server.worker_pids())
        socks = []
        for busy in (1, 2):  # one after the other: a busy one-thread worker accepts no more
            socks.append(server.connect(timeout=30))
            socks[-1].sendall(b"GET /sleep?s=30 HTTP/1.1\r\nHost: h\r\n\r\n")
            wait_calls(hooks_log, "pre_request", count=busy)
        assert {record["pid"] for record in named(calls(hooks_log), "pre_request")} == workers
        server.send(signal.SIGTERM)
        server.wait_log(r"did not stop in time; killing")
        exits = wait_calls(hooks_log, "child_exit", count=2)
        for sock in socks:
            sock.close()
        server.stop()
    assert {record["worker_pid"] for record in exits} == workers
