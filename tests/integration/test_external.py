"""NGINX Unit's ``"type": "external"`` applications: programs the master supervises.

Real programs (small Python HTTP servers under /usr/bin/python3.11, in tests/integration/
external/) run as a pool: handed their socket the systemd way or binding the port or unix
socket corral picked, asked until they answer, restarted with the crash backoff when they
exit, stopped with SIGTERM then SIGKILL after ``graceful_timeout``, shown in /status,
/status/events, /metrics and ``corral ctl top``, and changed through the control API. The
tests reach each program's own socket directly (its address is in /status).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.integration.control import Control, ctl, short_dir
from tests.integration.server import Server, wait_for

PYTHON = "/usr/bin/python3.11"
PROGRAMS = Path(__file__).parent / "external"
DONE = {"success": "Reconfiguration done."}

pytestmark = pytest.mark.skipif(
    not os.access(PYTHON, os.X_OK), reason=f"{PYTHON} (Debian's python3.11) is not installed"
)


def external(program: str, *arguments: str, **keys: Any) -> dict[str, Any]:
    return {
        "type": "external",
        "executable": PYTHON,
        "arguments": [str(PROGRAMS / program), *arguments],
        **keys,
    }


@contextmanager
def serving(
    applications: dict[str, Any], settings: dict[str, Any] | None = None, **top: Any
) -> Iterator[tuple[Server, Control, Path]]:
    """A corral whose saved document runs ``applications`` (and has ``top``'s other keys:
    listeners, routes), its control API, a directory."""
    with short_dir() as directory:
        state = directory / "state"
        state.mkdir(mode=0o700)
        doc = {"applications": applications, "settings": settings or {}, **top}
        (state / "conf.json").write_text(json.dumps(doc))
        server = Server(f"--state-dir={state}", bind=None, wait_ready=False)
        with server:
            yield server, Control.of(server), directory


def ready(server: Server, name: str, count: int = 1, timeout: float = 20.0) -> list[str]:
    """The pids of the first ``count`` ready processes of ``name``, as the log says them."""
    return server.wait_log(rf"{re.escape(name)} process \d+ ready \(pid (\d+)\)", timeout, count)


def status_of(control: Control, name: str) -> dict[str, Any]:
    answer = control.get(f"/status/applications/{name}")
    assert answer.status == 200, answer.json
    found: dict[str, Any] = answer.json
    return found


def get(address: str, path: str = "/") -> tuple[int, Any]:
    """A request to a program's own socket ("HOST:PORT" or "unix:PATH")."""
    if address.startswith("unix:"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(address.removeprefix("unix:"))
        conn = http.client.HTTPConnection("localhost")
        conn.sock = sock
    else:
        host, _, port = address.rpartition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return stream.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_program_takes_its_socket_the_systemd_way() -> None:
    app = external(
        "listen_fds.py", "first", "second", environment={"APP_COLOR": "blue"}, processes=2
    )
    with short_dir() as workdir:
        app["working_directory"] = str(workdir)
        with serving({"fds": app}) as (server, control, _):
            pids = {int(pid) for pid in ready(server, "fds", 2)}
            found = status_of(control, "fds")
            assert found["processes"] == {"running": 2, "starting": 0, "idle": 0}
            assert found["external"]["listen"] == "fd"
            [address] = found["external"]["addresses"]  # one socket, shared by the two
            answers = [get(address, "/x")[1] for _ in range(6)]
            for answer in answers:
                assert answer["pid"] in pids
                assert answer["path"] == "/x"
                assert answer["argv"] == ["first", "second"]
                assert Path(answer["cwd"]).resolve() == workdir.resolve()
                assert answer["env"] == {
                    "APP_COLOR": "blue",
                    "LISTEN_FDS": "1",
                    "LISTEN_FDNAMES": "fds",
                    "LISTEN_PID": str(answer["pid"]),  # its own pid, set after the fork
                }
                assert answer["fds"][:4] == [0, 1, 2, 3]  # descriptor 3 is the socket
            # nothing else of the master's reached it: 4 and 5 are the accepted connection and
            # the listing of /proc/self/fd (the smallest count: a connection before this one
            # may not be closed yet by its thread, a descriptor leaked is there every time)
            assert min(len(answer["fds"]) for answer in answers) <= 6
            rows = found["workers"]
            assert sorted(row["pid"] for row in rows) == sorted(pids)
            assert {row["state"] for row in rows} == {"ready"}


def test_programs_that_bind_the_port_or_the_socket_corral_picked() -> None:
    apps = {
        "byport": external("binds.py", "port", "{port}", processes=2),
        "byenv": external("binds.py", "env", listen="port"),
        "byunix": external("binds.py", "unix", "{socket}"),
    }
    with serving(apps) as (server, control, _):
        ready(server, "byport", 2)
        ready(server, "byenv")
        ready(server, "byunix")
        byport = status_of(control, "byport")["external"]
        assert byport["listen"] == "port" and len(byport["addresses"]) == 2
        seen = set()
        for address in byport["addresses"]:
            status, answer = get(address)
            port = address.rpartition(":")[2]
            assert (status, answer["argv"]) == (200, ["port", port])  # {port} substituted
            seen.add(answer["pid"])
        assert len(seen) == 2  # a port, and a process, per slot
        [address] = status_of(control, "byenv")["external"]["addresses"]
        assert get(address)[0] == 200  # it bound PORT from its environment
        [address] = status_of(control, "byunix")["external"]["addresses"]
        assert address.startswith("unix:/")
        status, answer = get(address)
        assert (status, answer["argv"]) == (200, ["unix", address.removeprefix("unix:")])


def test_no_request_before_it_answers_and_a_program_too_slow_is_killed() -> None:
    apps = {
        "slow": external("binds.py", "port", "{port}", "--slow-start", "1.5"),
        "never": external("binds.py", "port", "{port}", "--slow-start", "60", startup_timeout=1),
    }
    with serving(apps) as (server, control, _):
        server.wait_log(r"slow process 0 started")
        assert status_of(control, "slow")["processes"]["starting"] == 1
        ready(server, "slow")
        assert status_of(control, "slow")["processes"] == {"running": 1, "starting": 0, "idle": 0}
        server.wait_log(
            r"never process 0 \(pid \d+\) not ready after 1s \(startup_timeout\); killing it"
        )
        server.wait_log(r"never process 0 \(pid \d+\) exited: signal SIGKILL after [\d.]+s \(1 in")
        events = control.get("/status/events").json
        kinds = [(e["kind"], e["application"]) for e in events if e["application"] == "never"]
        assert ("timeout", "never") in kinds


def test_a_program_that_exits_is_restarted_with_the_backoff() -> None:
    apps = {"crashy": external("binds.py", "port", "{port}", "--crash-after", "0.2")}
    with serving(apps) as (server, control, _):
        lines = server.wait_log(
            r"crashy process 0 \(pid \d+\) exited: exit code 3 after [\d.]+s "
            r"\((\d+) in a row\): restarting it in ([\d.]+)s",
            timeout=20,
            count=3,
        )
        delays = [float(delay) for _, delay in lines[:3]]
        assert [int(n) for n, _ in lines[:3]] == [1, 2, 3]
        assert delays == [0.1, 0.2, 0.4]  # doubled each early death in a row
        assert len(ready(server, "crashy", 3)) >= 3  # each restart answered before it died
        events = control.get("/status/events").json
        crashes = [e for e in events if e["kind"] == "crash" and e["application"] == "crashy"]
        assert len(crashes) >= 3 and crashes[0]["detail"].startswith("exited: exit code 3")
        wait_for(lambda: status_of(control, "crashy")["external"]["restarts"] >= 3)


def test_a_program_that_ignores_sigterm_is_killed_after_graceful_timeout() -> None:
    apps = {
        "stubborn": external("binds.py", "port", "{port}", "--ignore-term"),
        "polite": external("binds.py", "port", "{port}"),
    }
    with serving(apps, {"graceful_timeout": 1.5}) as (server, _, _):
        stubborn = int(ready(server, "stubborn")[0])
        polite = int(ready(server, "polite")[0])
        began = time.monotonic()
        server.send(signal.SIGTERM)
        assert server.proc.wait(15) == 0
        took = time.monotonic() - began
        assert 1.4 <= took < 6, took
        log = server.stderr
        assert re.search(rf"polite process 0 \(pid {polite}\) exited: exit code 0", log)
        assert re.search(
            rf"stubborn process 0 \(pid {stubborn}\) did not stop within graceful_timeout "
            r"\(1.5s\); killing it",
            log,
        )
        assert re.search(rf"stubborn process 0 \(pid {stubborn}\) exited: signal SIGKILL", log)
        assert not alive(stubborn) and not alive(polite)


def test_a_terminals_ctrl_c_stops_the_programs_in_order() -> None:
    """SIGINT to the master's whole process group, as a terminal's Ctrl-C sends it: the
    programs are in groups of their own, so the master stops them (SIGTERM) rather than
    finding them dead first and restarting them."""
    apps = {name: external("binds.py", "port", "{port}") for name in ("one", "two")}
    with serving(apps) as (server, _, _):
        one, two = int(ready(server, "one")[0]), int(ready(server, "two")[0])
        assert os.getpgid(one) == one and os.getpgid(two) == two
        os.killpg(server.proc.pid, signal.SIGINT)
        assert server.proc.wait(15) == 0
        log = server.stderr
        assert "SIGINT: graceful shutdown" in log
        assert "restarting" not in log and "crash" not in log, log
        assert not alive(one) and not alive(two)


def test_a_program_that_cannot_run_is_said_in_one_line_and_retried() -> None:
    apps = {"missing": {"type": "external", "executable": "/nonexistent/program"}}
    with serving(apps) as (server, _, _):
        lines = server.wait_log(
            r"missing process 0 cannot run '/nonexistent/program': No such file or directory"
            r".* \((\d+) in a row\): restarting it in",
            count=2,
        )
        assert lines[:2] == ["1", "2"]
        assert "Traceback" not in server.stderr


def test_changes_through_the_control_api_restart_only_what_changed() -> None:
    apps = {
        "kept": external("binds.py", "port", "{port}"),
        "changed": external("binds.py", "unix", "{socket}"),
        "removed": external("binds.py", "port", "{port}"),
    }
    with serving(apps) as (server, control, _):
        kept, changed, removed = (int(ready(server, name)[0]) for name in apps)
        new = dict(apps)
        new["changed"] = external("binds.py", "unix", "{socket}", "v2")
        del new["removed"]
        answer = control.put("/config/applications", new)
        assert (answer.status, answer.json) == (200, DONE)
        server.wait_log(rf"changed process 0 \(pid {changed}\) exited: exit code 0")
        server.wait_log(rf"removed process 0 \(pid {removed}\) exited: exit code 0")
        fresh = int(ready(server, "changed", 2)[1])
        assert fresh != changed
        log = server.stderr  # the old one served until its successor answered
        assert (
            log.index(f"changed process 0 ready (pid {fresh})")
            < log.index("changed replaced: stopping its 1 process(es)")
            < log.index(f"changed process 0 (pid {changed}) exited")
        )
        [address] = status_of(control, "changed")["external"]["addresses"]
        wait_for(lambda: not alive(changed))  # its socket file went with it, not its successor's
        assert get(address)[1]["argv"][-1] == "v2"
        [address] = status_of(control, "kept")["external"]["addresses"]
        assert get(address)[1]["pid"] == kept and alive(kept)  # unchanged: serving on
        assert control.get("/status/applications/removed").status == 404
        answer = control.get("/control/applications/kept/restart")  # unchanged, restarted
        assert answer.status == 200, answer.json
        server.wait_log(rf"kept process 0 \(pid {kept}\) exited: exit code 0")
        second = int(ready(server, "kept", 2)[1])
        assert second != kept
        server.send(signal.SIGHUP)  # a reload restarts every application, programs too
        server.wait_log(rf"kept process 0 \(pid {second}\) exited: exit code 0")
        assert int(ready(server, "kept", 3)[2]) not in (kept, second)
        wait_for(lambda: not alive(removed) and not alive(changed))
        bad = control.put(
            "/config/applications/kept", external("binds.py", "{socket}", listen="fd")
        )
        assert bad.status == 400
        assert bad.json["detail"] == (
            '$.applications.kept.arguments[1]: {socket} is not given with "listen": "fd" '
            "(corral hands the socket over as descriptor 3)"
        )


def test_a_successor_that_never_answers_leaves_the_running_one_serving() -> None:
    with serving({"web": external("binds.py", "port", "{port}")}) as (server, control, _):
        first = int(ready(server, "web")[0])
        [address] = status_of(control, "web")["external"]["addresses"]
        broken = {"type": "external", "executable": "/nonexistent/v2"}
        assert control.put("/config/applications/web", broken).status == 200
        server.wait_log(r"web process 0 cannot run '/nonexistent/v2'.*\(2 in a row\)")
        assert get(address)[1]["pid"] == first  # still the one serving
        rows = status_of(control, "web")["workers"]
        assert [(row["pid"], row["state"]) for row in rows] == [(first, "ready")]
        fixed = external("binds.py", "port", "{port}", "v3")
        assert control.put("/config/applications/web", fixed).status == 200
        server.wait_log(r"web replaced before it answered: stopping its 0 process")
        third = int(ready(server, "web", 2)[1])
        server.wait_log(rf"web process 0 \(pid {first}\) exited: exit code 0")
        [address] = status_of(control, "web")["external"]["addresses"]
        assert get(address)[1] == {"pid": third, "path": "/", "argv": ["port", address[10:], "v3"]}


def test_status_metrics_and_top_show_the_pool() -> None:
    apps = {"shown": external("binds.py", "port", "{port}", processes=2)}
    with serving(apps) as (server, control, _):
        pids = {int(pid) for pid in ready(server, "shown", 2)}
        metrics = control.get("/metrics").raw.decode()
        assert 'corral_processes{application="shown",state="running"} 2' in metrics
        address = control.address
        top = ctl("--socket", address, "top", "--once")
        assert top.returncode == 0, top.stderr
        assert re.search(r"^shown\s+2\s", top.stdout, re.M), top.stdout
        for pid in pids:
            assert str(pid) in top.stdout
        more = control.get("/control/applications/shown/workers/more")
        assert (more.status, more.json["detail"]) == (409, "it has no workers")


@pytest.mark.skipif(os.geteuid() != 0, reason="user and group need a master started as root")
def test_programs_run_as_their_user_and_group_with_their_output_files() -> None:
    import grp
    import pwd

    nobody = pwd.getpwnam("nobody")
    group = grp.getgrgid(nobody.pw_gid).gr_name
    with short_dir() as logs:
        logs.chmod(0o755)
        apps = {
            "byunix": external(
                "binds.py",
                "unix",
                "{socket}",
                user="nobody",
                group=group,
                stdout=str(logs / "out.log"),
                stderr=str(logs / "err.log"),
            ),
            "fds": external("listen_fds.py", user="nobody"),
        }
        with serving(apps) as (server, control, _):
            pids = [int(ready(server, name)[0]) for name in apps]
            for pid in pids:
                with open(f"/proc/{pid}/status") as stream:
                    fields = dict(line.split(":", 1) for line in stream)
                assert fields["Uid"].split()[0] == str(nobody.pw_uid)
                assert fields["Gid"].split()[0] == str(nobody.pw_gid)
            [address] = status_of(control, "byunix")["external"]["addresses"]
            assert get(address)[0] == 200  # it created its socket in its own directory
            wait_for(lambda: "serving ['unix'" in (logs / "out.log").read_text())
            unknown = external("binds.py", "env", listen="port", user="no-such-user-here")
            answer = control.put("/config/applications/other", unknown)
            assert answer.status == 500 and "no such user" in answer.json["detail"]


def test_document_mistakes_are_one_line_each() -> None:
    with serving({}) as (_, control, _):
        cases = {
            json.dumps({"type": "external"}): (
                '$.applications.x: missing required key "executable" (the program to run)'
            ),
            json.dumps({"type": "external", "executable": "a", "module": "m"}): (
                "$.applications.x.module: not for an external application"
            ),
            json.dumps({"module": "m", "executable": "a"}): (
                '$.applications.x.executable: only for "type": "external" applications'
            ),
            json.dumps({"type": "external", "executable": "a", "listen": "tcp"}): (
                '$.applications.x.listen: expected "fd" or "port" or "unix" or null, got "tcp"'
            ),
            json.dumps({"type": "external", "executable": "a", "health_path": "/a\r\nX: y"}): (
                '$.applications.x.health_path: expected a path beginning with "/", without spaces'
            ),
        }
        for body, expected in cases.items():
            answer = control.put("/config/applications/x", json.loads(body))
            assert answer.status == 400, answer.json
            assert answer.json["detail"].startswith(expected), answer.json["detail"]


def test_the_service_is_ready_once_its_programs_answer() -> None:
    from tests.integration.test_systemd import NotifySocket

    with short_dir() as directory:
        log = directory / "error.log"
        notify = NotifySocket(str(directory / "notify"), str(directory / "notify"), log)
        state = directory / "state"
        state.mkdir(mode=0o700)
        slow = external("binds.py", "port", "{port}", "--slow-start", "1")
        (state / "conf.json").write_text(json.dumps({"applications": {"slow": slow}}))
        try:
            args = (f"--state-dir={state}", "--error-logfile", str(log))
            with Server(*args, bind=None, wait_ready=False, env=notify.env, log_file=log):
                (ready_message,) = notify.wait("READY", "1")
                # the error log as it was when READY arrived: the program had answered
                assert re.search(r"slow process 0 ready", ready_message.log), ready_message.log
        finally:
            notify.close()
